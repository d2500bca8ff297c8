#include "retry/sqlite_store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <iterator>
#include <thread>

#include "retry/migrations.hpp"

namespace dhtc::retry {

namespace {

// Times are stored as they are; the row is WITHOUT ROWID keyed by the 20-byte hash, and the
// (state, next_retry_at) index finds due work (and expired leases, whose expiry is their
// next_retry_at) with one range scan.
constexpr const char* schema_v1 = R"sql(
CREATE TABLE retry_hashes (
  info_hash BLOB PRIMARY KEY NOT NULL,
  state INTEGER NOT NULL,
  next_retry_at INTEGER NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  observations INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  priority INTEGER NOT NULL,
  failure_counts INTEGER NOT NULL,
  recent_failures INTEGER NOT NULL,
  lease_owner TEXT,
  peers BLOB
) WITHOUT ROWID;
CREATE INDEX retry_hashes_due ON retry_hashes(state, next_retry_at);
)sql";

// Forward migrations, in order: entry i brings the schema to version i + 1. Never edit a
// released entry; append one.
// v2: the DHT routing state kept across restarts (crawl/saved_nodes.hpp), one row per owner.
constexpr const char* schema_v2 = R"sql(
CREATE TABLE dht_routing (owner TEXT PRIMARY KEY, saved_at INTEGER NOT NULL, nodes BLOB NOT NULL);
)sql";

// v3: the failure classes after cancelled (migrations.hpp, retry_v3_failure_packing).
constexpr const char* schema_v3 = retry_v3_failure_packing;

constexpr const char* migrations[] = {schema_v1, schema_v2, schema_v3};
static_assert(std::size(migrations) == sqlite_schema_version);

constexpr const char* columns =
    "info_hash, state, next_retry_at, first_seen, last_seen, observations, attempts, priority, failure_counts, "
    "recent_failures, lease_owner, peers";

class statement {
public:
    statement(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) != SQLITE_OK)
            throw store_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
    }
    ~statement() { sqlite3_finalize(s_); }
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    statement& reset() {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
        return *this;
    }
    void bind(int i, std::int64_t v) { check(sqlite3_bind_int64(s_, i, v)); }
    void bind(int i, std::string_view blob) {
        check(sqlite3_bind_blob(s_, i, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT));
    }
    void bind_text(int i, std::string_view t) {
        if (t.empty())
            check(sqlite3_bind_null(s_, i));
        else
            check(sqlite3_bind_text(s_, i, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT));
    }
    /// True while a row is ready.
    bool step() {
        const int rc = sqlite3_step(s_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw store_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
    }
    std::int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }
    std::string_view blob(int col) const {
        const void* p = sqlite3_column_blob(s_, col);
        return p ? std::string_view(static_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s_, col)))
                 : std::string_view();
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) throw store_error(std::string("sqlite bind: ") + sqlite3_errmsg(db_));
    }
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
};

retry_row read_row(const statement& s) {
    retry_row r;
    if (const auto id = id20::from_bytes(s.blob(0))) r.info_hash = *id;
    const auto st = s.integer(1);
    r.state = st >= 0 && st < static_cast<std::int64_t>(hash_state_count) ? static_cast<hash_state>(st)
                                                                          : hash_state::pending;
    r.next_retry_at = s.integer(2);
    r.first_seen = s.integer(3);
    r.last_seen = s.integer(4);
    r.observations = static_cast<std::uint32_t>(s.integer(5));
    r.attempts = static_cast<std::uint32_t>(s.integer(6));
    r.priority = static_cast<std::uint32_t>(s.integer(7));
    r.failure_counts = static_cast<std::uint64_t>(s.integer(8));
    r.recent_failures = static_cast<std::uint32_t>(s.integer(9));
    r.lease_owner = std::string(s.blob(10));
    r.peers = unpack_peers(s.blob(11));
    return r;
}

void bind_row(statement& s, const retry_row& r) {
    s.bind(1, r.info_hash.view());
    s.bind(2, static_cast<std::int64_t>(r.state));
    s.bind(3, r.next_retry_at);
    s.bind(4, r.first_seen);
    s.bind(5, r.last_seen);
    s.bind(6, r.observations);
    s.bind(7, r.attempts);
    s.bind(8, r.priority);
    s.bind(9, static_cast<std::int64_t>(r.failure_counts));
    s.bind(10, r.recent_failures);
    s.bind_text(11, r.lease_owner);
    if (r.peers.empty()) return; // NULL: most rows carry no peers
    s.bind(12, pack_peers(r.peers));
}

class sqlite_backend final : public backend {
public:
    sqlite_backend(const std::string& path, unsigned busy_timeout_millis) {
        const std::string target = path.empty() ? ":memory:" : path;
        const int rc = sqlite3_open_v2(target.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                                 SQLITE_OPEN_NOMUTEX, nullptr);
        if (rc != SQLITE_OK) {
            const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
            sqlite3_close(db_);
            db_ = nullptr;
            throw store_error("cannot open SQLite database " + target + ": " + why);
        }
        sqlite3_busy_timeout(db_, static_cast<int>(busy_timeout_millis));
        try {
            use_wal(busy_timeout_millis);
            // WAL + NORMAL: a crashed process loses nothing committed; only a power cut may
            // lose the last transactions (never corrupts).
            exec("PRAGMA synchronous=NORMAL");
            migrate(target);
            prepare();
        } catch (...) {
            close();
            throw;
        }
    }
    ~sqlite_backend() override { close(); }

    void begin() override { exec("BEGIN IMMEDIATE"); }
    void commit() override { exec("COMMIT"); }
    void rollback() noexcept override { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

    std::optional<retry_row> load(const id20& h) override {
        auto& s = load_->reset();
        s.bind(1, h.view());
        if (!s.step()) return std::nullopt;
        auto r = read_row(s);
        s.reset();
        return r;
    }
    bool insert(const retry_row& r) override {
        auto& s = insert_->reset();
        bind_row(s, r);
        s.step();
        return sqlite3_changes(db_) > 0;
    }
    void update(const retry_row& r) override {
        auto& s = update_->reset();
        bind_row(s, r);
        s.step();
    }
    std::vector<retry_row> lease_due(std::size_t batch, std::string_view owner, unix_seconds lease_until,
                                     unix_seconds now) override {
        // Pending rows first (released or recovered: due already), then dormant ones; each
        // is one range of the (state, next_retry_at) index, read in order.
        std::vector<retry_row> out;
        for (const int state : {0, 3}) {
            if (out.size() >= batch) break;
            auto& s = lease_->reset();
            s.bind_text(1, owner);
            s.bind(2, lease_until);
            s.bind(3, now);
            s.bind(4, static_cast<std::int64_t>(batch - out.size()));
            s.bind(5, state);
            while (s.step()) out.push_back(read_row(s));
        }
        return out;
    }
    std::size_t expire_leases(unix_seconds now) override {
        auto& s = expire_->reset();
        s.bind(1, now);
        s.step();
        return static_cast<std::size_t>(sqlite3_changes(db_));
    }
    store_counts counts() override {
        store_counts c;
        auto& s = counts_->reset();
        while (s.step()) {
            const auto st = s.integer(0);
            if (st >= 0 && st < static_cast<std::int64_t>(hash_state_count))
                c.by_state[static_cast<std::size_t>(st)] = static_cast<std::uint64_t>(s.integer(1));
        }
        auto& b = bytes_->reset();
        if (b.step()) c.database_bytes = static_cast<std::uint64_t>(b.integer(0));
        b.reset();
        return c;
    }
    std::string_view kind() const noexcept override { return "sqlite"; }

    void save_routing(std::string_view owner, unix_seconds saved_at, std::string_view state,
                      unix_seconds expire_before) override {
        auto& s = save_routing_->reset();
        s.bind_text(1, owner.empty() ? std::string_view("-") : owner);
        s.bind(2, saved_at);
        s.bind(3, state);
        s.step();
        auto& e = expire_routing_->reset();
        e.bind(1, expire_before);
        e.step();
    }
    std::vector<std::string> load_routing(unix_seconds since, std::size_t limit) override {
        std::vector<std::string> out;
        auto& s = load_routing_->reset();
        s.bind(1, since);
        s.bind(2, static_cast<std::int64_t>(limit));
        while (s.step()) out.emplace_back(s.blob(0));
        return out;
    }

private:
    // Switching a new file to WAL needs it alone, and SQLite answers "database is locked"
    // at once, without its busy handler, while another crawler opens the same new file:
    // tried again for as long as the busy timeout, then the error stands.
    void use_wal(unsigned busy_timeout_millis) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_millis);
        for (;;) {
            const int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
            if (rc == SQLITE_OK) return;
            if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= give_up) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        exec("PRAGMA journal_mode=WAL"); // once more, throwing what SQLite says
    }

    void exec(const char* sql) {
        char* err = nullptr;
        if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
            std::string msg = err ? err : sqlite3_errmsg(db_);
            sqlite3_free(err);
            // The statement's first words say which step failed ("PRAGMA journal_mode", "BEGIN").
            throw store_error(std::string("sqlite: ") + msg + " (" + std::string(sql).substr(0, 40) + ")");
        }
    }

    // Forward-only: each version's statements run once, in one transaction with the bump.
    void migrate(const std::string& target) {
        migration_dialect d;
        d.begin = "BEGIN IMMEDIATE";
        d.database = "SQLite database " + target;
        d.exec = [this](const std::string& sql) { exec(sql.c_str()); };
        d.query_int = [this](const std::string& sql) -> std::optional<std::int64_t> {
            statement q(db_, sql.c_str());
            if (!q.step()) return std::nullopt;
            return q.integer(0);
        };
        d.rollback = [this] { rollback(); };
        apply_migrations(d, "retry", migrations);
    }

    void prepare() {
        const std::string cols = columns;
        const auto make = [&](const std::string& sql) { return std::make_unique<statement>(db_, sql.c_str()); };
        load_ = make("SELECT " + cols + " FROM retry_hashes WHERE info_hash = ?1");
        insert_ = make("INSERT OR IGNORE INTO retry_hashes (" + cols + ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)");
        update_ = make("UPDATE retry_hashes SET state=?2, next_retry_at=?3, first_seen=?4, last_seen=?5, "
                       "observations=?6, attempts=?7, priority=?8, failure_counts=?9, recent_failures=?10, "
                       "lease_owner=?11, peers=?12 WHERE info_hash=?1");
        lease_ = make("UPDATE retry_hashes SET state=1, lease_owner=?1, next_retry_at=?2 WHERE info_hash IN ("
                      "SELECT info_hash FROM retry_hashes WHERE state = ?5 AND next_retry_at <= ?3 "
                      "ORDER BY next_retry_at LIMIT ?4) RETURNING " + cols);
        expire_ = make("UPDATE retry_hashes SET state=0, lease_owner=NULL WHERE state=1 AND next_retry_at <= ?1");
        counts_ = make("SELECT state, COUNT(*) FROM retry_hashes GROUP BY state");
        bytes_ = make("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()");
        save_routing_ = make("INSERT INTO dht_routing (owner, saved_at, nodes) VALUES (?1, ?2, ?3) "
                             "ON CONFLICT (owner) DO UPDATE SET saved_at = excluded.saved_at, nodes = excluded.nodes");
        expire_routing_ = make("DELETE FROM dht_routing WHERE saved_at < ?1");
        load_routing_ = make("SELECT nodes FROM dht_routing WHERE saved_at >= ?1 ORDER BY saved_at DESC LIMIT ?2");
    }

    // Statements first: a connection with live statements does not close.
    void close() noexcept {
        load_.reset();
        insert_.reset();
        update_.reset();
        lease_.reset();
        expire_.reset();
        counts_.reset();
        bytes_.reset();
        save_routing_.reset();
        expire_routing_.reset();
        load_routing_.reset();
        sqlite3_close(db_);
        db_ = nullptr;
    }

    sqlite3* db_ = nullptr;
    std::unique_ptr<statement> load_, insert_, update_, lease_, expire_, counts_, bytes_;
    std::unique_ptr<statement> save_routing_, expire_routing_, load_routing_;
};

} // namespace

std::unique_ptr<backend> open_sqlite(const std::string& path, unsigned busy_timeout_millis) {
    return std::make_unique<sqlite_backend>(path, busy_timeout_millis);
}

} // namespace dhtc::retry
