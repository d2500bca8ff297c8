#include "retry/postgres_store.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <thread>

#include "retry/migrations.hpp"

namespace dhtc::retry {

namespace {

constexpr const char* schema_v1 = R"sql(
CREATE TABLE retry_hashes (
  info_hash bytea PRIMARY KEY,
  next_retry_at bigint NOT NULL,
  first_seen bigint NOT NULL,
  last_seen bigint NOT NULL,
  failure_counts bigint NOT NULL,
  observations integer NOT NULL,
  attempts integer NOT NULL,
  priority integer NOT NULL,
  recent_failures integer NOT NULL,
  state smallint NOT NULL,
  lease_owner text,
  peers bytea
);
CREATE INDEX retry_hashes_due ON retry_hashes(state, next_retry_at);
)sql";

// Forward migrations, in order: entry i brings the schema to version i + 1. Never edit a
// released entry; append one.
// v2: the DHT routing state kept across restarts (crawl/saved_nodes.hpp), one row per
// owner; every member of a fleet may start from any row.
constexpr const char* schema_v2 = R"sql(
CREATE TABLE dht_routing (owner text PRIMARY KEY, saved_at bigint NOT NULL, nodes bytea NOT NULL);
)sql";

// v3: the failure classes after cancelled (migrations.hpp, retry_v3_failure_packing).
constexpr const char* schema_v3 = retry_v3_failure_packing;

constexpr const char* migrations[] = {schema_v1, schema_v2, schema_v3};
static_assert(std::size(migrations) == postgres_schema_version);

constexpr const char* columns =
    "info_hash, state, next_retry_at, first_seen, last_seen, observations, attempts, priority, failure_counts, "
    "recent_failures, lease_owner, peers";

struct result {
    PGresult* r = nullptr;
    explicit result(PGresult* p) : r(p) {}
    ~result() { PQclear(r); }
    result(const result&) = delete;
    result& operator=(const result&) = delete;
};

// Parameters as text, except the byte strings (hash, peers) which go binary.
class params {
public:
    void text(std::string v) {
        store_.push_back(std::move(v));
        formats_.push_back(0);
        null_.push_back(false);
    }
    void integer(std::int64_t v) { text(std::to_string(v)); }
    void bytes(std::string_view v) {
        store_.emplace_back(v);
        formats_.push_back(1);
        null_.push_back(false);
    }
    void null() {
        store_.emplace_back();
        formats_.push_back(0);
        null_.push_back(true);
    }
    int count() const { return static_cast<int>(store_.size()); }
    void finish() {
        values_.clear();
        lengths_.clear();
        for (std::size_t i = 0; i < store_.size(); ++i) {
            values_.push_back(null_[i] ? nullptr : store_[i].data());
            lengths_.push_back(static_cast<int>(store_[i].size()));
        }
    }
    const char* const* values() const { return values_.data(); }
    const int* lengths() const { return lengths_.data(); }
    const int* formats() const { return formats_.data(); }

private:
    std::vector<std::string> store_;
    std::vector<int> formats_;
    std::vector<bool> null_;
    std::vector<const char*> values_;
    std::vector<int> lengths_;
};

void row_params(params& p, const retry_row& r) {
    p.bytes(r.info_hash.view());
    p.integer(static_cast<std::int64_t>(r.state));
    p.integer(r.next_retry_at);
    p.integer(r.first_seen);
    p.integer(r.last_seen);
    p.integer(r.observations);
    p.integer(r.attempts);
    p.integer(r.priority);
    p.integer(static_cast<std::int64_t>(r.failure_counts));
    p.integer(r.recent_failures);
    if (r.lease_owner.empty())
        p.null();
    else
        p.text(r.lease_owner);
    if (r.peers.empty())
        p.null();
    else
        p.bytes(pack_peers(r.peers));
}

std::int64_t to_int(PGresult* r, int row, int col) {
    const char* v = PQgetvalue(r, row, col);
    return v ? std::strtoll(v, nullptr, 10) : 0;
}

// Results come back binary for the two byte strings and as text for the rest: we ask for
// text results and decode bytea's escape form with libpq's own decoder.
std::string to_bytes(PGresult* r, int row, int col) {
    if (PQgetisnull(r, row, col)) return {};
    std::size_t n = 0;
    unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col)), &n);
    if (!raw) throw store_error("postgresql: cannot decode bytea");
    std::string out(reinterpret_cast<const char*>(raw), n);
    PQfreemem(raw);
    return out;
}

retry_row read_row(PGresult* r, int i) {
    retry_row row;
    if (const auto id = id20::from_bytes(to_bytes(r, i, 0))) row.info_hash = *id;
    const auto st = to_int(r, i, 1);
    row.state = st >= 0 && st < static_cast<std::int64_t>(hash_state_count) ? static_cast<hash_state>(st)
                                                                           : hash_state::pending;
    row.next_retry_at = to_int(r, i, 2);
    row.first_seen = to_int(r, i, 3);
    row.last_seen = to_int(r, i, 4);
    row.observations = static_cast<std::uint32_t>(to_int(r, i, 5));
    row.attempts = static_cast<std::uint32_t>(to_int(r, i, 6));
    row.priority = static_cast<std::uint32_t>(to_int(r, i, 7));
    row.failure_counts = static_cast<std::uint64_t>(to_int(r, i, 8));
    row.recent_failures = static_cast<std::uint32_t>(to_int(r, i, 9));
    row.lease_owner = PQgetisnull(r, i, 10) ? std::string() : std::string(PQgetvalue(r, i, 10));
    row.peers = unpack_peers(to_bytes(r, i, 11));
    return row;
}

// Where we tried to connect, for messages (never the password).
std::string describe(const std::string& conninfo) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (!opts) {
        PQfreemem(err);
        return "PostgreSQL";
    }
    std::string host, port, db;
    for (auto* o = opts; o->keyword; ++o) {
        if (!o->val) continue;
        const std::string k = o->keyword;
        if (k == "host" || k == "hostaddr") host = o->val;
        if (k == "port") port = o->val;
        if (k == "dbname") db = o->val;
    }
    PQconninfoFree(opts);
    std::string where = "PostgreSQL at " + (host.empty() ? std::string("(default host)") : host);
    if (!port.empty()) where += ":" + port;
    if (!db.empty()) where += " database " + db;
    return where;
}

std::string one_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (auto& c : s)
        if (c == '\n') c = ' ';
    return s;
}

class postgres_backend final : public backend {
public:
    explicit postgres_backend(const std::string& conninfo) {
        if (const std::string why = check_postgres_conninfo(conninfo); !why.empty()) throw store_error(why);
        // A default connect_timeout first, so an unreachable server fails the start in
        // seconds; one given in the connection string overrides it (later values win).
        const char* keys[] = {"connect_timeout", "dbname", nullptr};
        const char* values[] = {"5", conninfo.c_str(), nullptr};
        conn_ = PQconnectdbParams(keys, values, 1);
        if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
            const std::string why = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
            PQfinish(conn_);
            conn_ = nullptr;
            throw store_error("cannot connect to " + describe(conninfo) + ": " + why);
        }
        try {
            exec("SET client_min_messages = warning");
            // The due-work query's best plan depends on `now`: a generic plan (PostgreSQL
            // switches to one after five executions) would assume a third of the table due.
            exec("SET plan_cache_mode = force_custom_plan");
            migrate(conninfo);
            prepare();
        } catch (...) {
            PQfinish(conn_);
            throw;
        }
    }
    ~postgres_backend() override { PQfinish(conn_); }

    void begin() override { exec("BEGIN"); }
    void commit() override { exec("COMMIT"); }
    void rollback() noexcept override {
        if (PQstatus(conn_) == CONNECTION_BAD) {
            // The server went away (restart, network): reconnect for the next batch; the
            // session settings and prepared statements are made again.
            PQreset(conn_);
            if (PQstatus(conn_) != CONNECTION_OK) return;
            try {
                exec("SET client_min_messages = warning");
                exec("SET plan_cache_mode = force_custom_plan");
                prepare();
            } catch (...) {
            }
            return;
        }
        if (PQtransactionStatus(conn_) != PQTRANS_IDLE) PQclear(PQexec(conn_, "ROLLBACK"));
    }

    std::optional<retry_row> load(const id20& h) override {
        params p;
        p.bytes(h.view());
        result r(run("load", p));
        if (PQntuples(r.r) == 0) return std::nullopt;
        return read_row(r.r, 0);
    }
    bool insert(const retry_row& row) override {
        params p;
        row_params(p, row);
        result r(run("insert", p));
        return std::string_view(PQcmdTuples(r.r)) == "1";
    }
    void update(const retry_row& row) override {
        params p;
        row_params(p, row);
        result r(run("update", p));
    }
    std::vector<retry_row> lease_due(std::size_t batch, std::string_view owner, unix_seconds lease_until,
                                     unix_seconds now) override {
        std::vector<retry_row> out;
        for (const int state : {0, 3}) {
            if (out.size() >= batch) break;
            params p;
            p.text(std::string(owner));
            p.integer(lease_until);
            p.integer(now);
            p.integer(static_cast<std::int64_t>(batch - out.size()));
            p.integer(state);
            result r(run("lease", p));
            for (int i = 0; i < PQntuples(r.r); ++i) out.push_back(read_row(r.r, i));
        }
        return out;
    }
    std::size_t expire_leases(unix_seconds now) override {
        params p;
        p.integer(now);
        result r(run("expire", p));
        return static_cast<std::size_t>(std::strtoull(PQcmdTuples(r.r), nullptr, 10));
    }
    store_counts counts() override {
        store_counts c;
        params none;
        {
            result r(run("counts", none));
            for (int i = 0; i < PQntuples(r.r); ++i) {
                const auto st = to_int(r.r, i, 0);
                if (st >= 0 && st < static_cast<std::int64_t>(hash_state_count))
                    c.by_state[static_cast<std::size_t>(st)] = static_cast<std::uint64_t>(to_int(r.r, i, 1));
            }
        }
        result b(run("bytes", none));
        if (PQntuples(b.r) == 1) c.database_bytes = static_cast<std::uint64_t>(to_int(b.r, 0, 0));
        return c;
    }
    std::string_view kind() const noexcept override { return "postgresql"; }

    void save_routing(std::string_view owner, unix_seconds saved_at, std::string_view state,
                      unix_seconds expire_before) override {
        params p;
        p.text(owner.empty() ? std::string("-") : std::string(owner));
        p.integer(saved_at);
        p.bytes(state);
        const result saved(run("save_routing", p));
        params e;
        e.integer(expire_before);
        const result expired(run("expire_routing", e));
    }
    std::vector<std::string> load_routing(unix_seconds since, std::size_t limit) override {
        params p;
        p.integer(since);
        p.integer(static_cast<std::int64_t>(limit));
        result r(run("load_routing", p));
        std::vector<std::string> out;
        for (int i = 0; i < PQntuples(r.r); ++i) out.push_back(to_bytes(r.r, i, 0));
        return out;
    }

private:
    void exec(const char* sql) {
        result r(PQexec(conn_, sql));
        const auto st = PQresultStatus(r.r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            throw store_error("postgresql: " + one_line(PQerrorMessage(conn_)));
    }
    PGresult* run(const char* name, params& p) {
        p.finish();
        PGresult* r = PQexecPrepared(conn_, name, p.count(), p.values(), p.lengths(), p.formats(), 0);
        const auto st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            PQclear(r);
            throw store_error("postgresql (" + std::string(name) + "): " + one_line(PQerrorMessage(conn_)));
        }
        return r;
    }
    void prepare_one(const char* name, const std::string& sql) {
        result r(PQprepare(conn_, name, sql.c_str(), 0, nullptr));
        if (PQresultStatus(r.r) != PGRES_COMMAND_OK)
            throw store_error("postgresql prepare " + std::string(name) + ": " + one_line(PQerrorMessage(conn_)));
    }

    // Forward-only, under an advisory lock: crawlers starting together migrate once.
    void migrate(const std::string& conninfo) {
        migration_dialect d;
        d.begin = "BEGIN";
        // The schema lock, waited for by polling, so no transaction of ours stays open while
        // its holder builds an index online.
        const std::string key = std::to_string(postgres_schema_lock);
        d.acquire = [this, try_lock = "SELECT pg_try_advisory_lock(" + key + ")::int"] {
            auto pause = std::chrono::milliseconds(10);
            while (run_int(try_lock) != 1) {
                std::this_thread::sleep_for(pause);
                pause = std::min(pause * 2, std::chrono::milliseconds(500));
            }
        };
        d.release = [this, unlock = "SELECT pg_advisory_unlock(" + key + ")"]() noexcept {
            result r(PQexec(conn_, unlock.c_str())); // a lost connection let it go already
        };
        d.database = describe(conninfo);
        d.exec = [this](const std::string& sql) { exec(sql.c_str()); };
        d.query_int = [this](const std::string& sql) { return run_int(sql); };
        d.rollback = [this] { rollback(); };
        apply_migrations(d, "retry", migrations);
    }

    // The first column of the first row of a query, or nothing when it returns no row.
    std::optional<std::int64_t> run_int(const std::string& sql) {
        result r(PQexec(conn_, sql.c_str()));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) throw store_error("postgresql: " + one_line(PQerrorMessage(conn_)));
        if (PQntuples(r.r) == 0) return std::nullopt;
        return to_int(r.r, 0, 0);
    }

    void prepare() {
        const std::string cols = columns;
        prepare_one("load", "SELECT " + cols + " FROM retry_hashes WHERE info_hash = $1 FOR UPDATE");
        prepare_one("insert", "INSERT INTO retry_hashes (" + cols +
                                  ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT DO NOTHING");
        prepare_one("update", "UPDATE retry_hashes SET state=$2, next_retry_at=$3, first_seen=$4, last_seen=$5, "
                              "observations=$6, attempts=$7, priority=$8, failure_counts=$9, recent_failures=$10, "
                              "lease_owner=$11, peers=$12 WHERE info_hash=$1");
        prepare_one("lease", "UPDATE retry_hashes SET state=1, lease_owner=$1, next_retry_at=$2 WHERE info_hash IN ("
                             "SELECT info_hash FROM retry_hashes WHERE state = $5::smallint AND next_retry_at <= $3 "
                             "ORDER BY next_retry_at LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING " + cols);
        // Rows another transaction holds are left for the next round: no waiting, no deadlock
        // with a batch that locks rows in hash order.
        prepare_one("expire", "UPDATE retry_hashes SET state=0, lease_owner=NULL WHERE info_hash IN ("
                              "SELECT info_hash FROM retry_hashes WHERE state=1 AND next_retry_at <= $1 "
                              "FOR UPDATE SKIP LOCKED)");
        prepare_one("counts", "SELECT state, COUNT(*) FROM retry_hashes GROUP BY state");
        prepare_one("bytes", "SELECT pg_total_relation_size('retry_hashes')");
        prepare_one("save_routing", "INSERT INTO dht_routing (owner, saved_at, nodes) VALUES ($1, $2, $3) "
                                    "ON CONFLICT (owner) DO UPDATE SET saved_at = excluded.saved_at, nodes = excluded.nodes");
        prepare_one("expire_routing", "DELETE FROM dht_routing WHERE saved_at < $1");
        prepare_one("load_routing", "SELECT nodes FROM dht_routing WHERE saved_at >= $1 ORDER BY saved_at DESC LIMIT $2");
    }

    PGconn* conn_ = nullptr;
};

} // namespace

std::string check_postgres_conninfo(const std::string& conninfo) {
    if (conninfo.empty()) return "retry.store.conninfo is empty (expected postgresql://user@host/dbname)";
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (!opts) {
        std::string why = err ? one_line(err) : "unparsable";
        PQfreemem(err);
        return "invalid PostgreSQL connection string: " + why;
    }
    PQconninfoFree(opts);
    return {};
}

std::unique_ptr<backend> open_postgres(const std::string& conninfo) {
    return std::make_unique<postgres_backend>(conninfo);
}

} // namespace dhtc::retry
