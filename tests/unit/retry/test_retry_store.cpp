// One test suite for both retry store backends: SQLite (in memory and in a file) and a real
// PostgreSQL server (DHTC_TEST_PG; tests/run.sh starts it). Times are explicit (`now`), so
// the store is driven like a manual clock.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include "retry/migrations.hpp"
#include "retry/postgres_store.hpp"
#include "retry/sqlite_store.hpp"
#include "retry/store.hpp"
#include "support/pg.hpp"

using namespace dhtc;
using namespace dhtc::retry;
using fc = api::failure_class;

namespace {

constexpr unix_seconds t0 = 1'700'000'000;
using backend_factory = std::function<std::unique_ptr<backend>()>;

id20 hash_of(unsigned n) {
    id20 h;
    for (std::size_t i = 0; i < 4; ++i) h.bytes[i] = static_cast<std::uint8_t>(n >> (8 * i));
    h.bytes[19] = 0xab;
    return h;
}

endpoint peer(unsigned n) { return endpoint{ip_address::v4(0x7f000001u + n), static_cast<std::uint16_t>(6000 + n)}; }

policy_options no_jitter() {
    policy_options p;
    p.jitter_percent = 0;
    return p;
}

std::unique_ptr<store> make_store(const backend_factory& make, const std::string& owner, std::uint32_t lease = 60) {
    return std::make_unique<store>(make(), no_jitter(), owner, lease, 1);
}

// Each call in its own transaction, as the store thread would batch it.
template <class F>
auto tx(store& s, F&& f) {
    s.begin();
    if constexpr (std::is_void_v<decltype(f())>) {
        f();
        s.commit();
    } else {
        auto r = f();
        s.commit();
        return r;
    }
}

std::optional<retry_row> row_of(store& s, const id20& h) {
    return tx(s, [&] { return s.db().load(h); });
}

// The semantics, for any backend. `shared` says whether two stores made by `make` see the
// same database (false for an in-memory SQLite database).
void run_suite(const backend_factory& make, bool shared) {
    auto a = make_store(make, "crawler-a");
    const std::vector<endpoint> p1{peer(1)};

    SUBCASE("a new hash is leased to whoever sees it first; others and repeats are busy") {
        const auto first = tx(*a, [&] { return a->claim(hash_of(1), p1, t0); });
        CHECK(first.result == claim_result::fetch);
        CHECK(first.attempts == 0);
        CHECK(tx(*a, [&] { return a->claim(hash_of(1), p1, t0 + 1); }).result == claim_result::busy);
        const auto r = row_of(*a, hash_of(1));
        REQUIRE(r);
        CHECK(r->state == hash_state::leased);
        CHECK(r->lease_owner == "crawler-a");
        CHECK(r->next_retry_at == t0 + 60); // the lease's expiry
        CHECK(r->observations == 2);
        CHECK(r->peers == p1);
        if (shared) {
            auto b = make_store(make, "crawler-b");
            CHECK(tx(*b, [&] { return b->claim(hash_of(1), p1, t0 + 2); }).result == claim_result::busy);
            // After the lease expired, the other crawler takes the hash over.
            CHECK(tx(*b, [&] { return b->claim(hash_of(1), p1, t0 + 61); }).result == claim_result::fetch);
            CHECK(row_of(*b, hash_of(1))->lease_owner == "crawler-b");
            // The first owner's late outcome does not touch the new lease.
            CHECK_FALSE(tx(*a, [&] { return a->record_failure(hash_of(1), fc::timeout, t0 + 62); }));
            tx(*a, [&] { a->release(hash_of(1), t0 + 62); });
            CHECK(row_of(*b, hash_of(1))->lease_owner == "crawler-b");
        }
    }

    SUBCASE("a failure makes the hash dormant on the ladder; due again it is leased with its history") {
        tx(*a, [&] { a->claim(hash_of(2), p1, t0); });
        const auto r = tx(*a, [&] { return a->record_failure(hash_of(2), fc::no_peers, t0 + 5); });
        REQUIRE(r);
        CHECK(r->state == hash_state::dormant);
        CHECK(r->attempts == 1);
        CHECK(r->next_retry_at == t0 + 5 + 900); // 30 min at 50% (no_peers)
        CHECK(r->failures(fc::no_peers) == 1);
        CHECK(r->peers.empty());
        CHECK(r->lease_owner.empty());
        const auto stored = row_of(*a, hash_of(2));
        REQUIRE(stored);
        CHECK(stored->state == hash_state::dormant);
        CHECK(stored->recent() == std::vector<fc>{fc::no_peers});
        // Not due: nothing to lease.
        CHECK(tx(*a, [&] { return a->lease_due(10, t0 + 100); }).empty());
        // Due: leased, with the attempts so far.
        const auto due = tx(*a, [&] { return a->lease_due(10, t0 + 905); });
        REQUIRE(due.size() == 1);
        CHECK(due[0].info_hash == hash_of(2));
        CHECK(due[0].attempts == 1);
        CHECK(due[0].state == hash_state::leased);
        CHECK(tx(*a, [&] { return a->lease_due(10, t0 + 905); }).empty()); // leased once
        // The second failure climbs the ladder (2 h), shaped by its own class.
        const auto second = tx(*a, [&] { return a->record_failure(hash_of(2), fc::hash_mismatch, t0 + 1000); });
        REQUIRE(second);
        CHECK(second->attempts == 2);
        CHECK(second->next_retry_at == t0 + 1000 + 7200);
        CHECK(second->recent() == std::vector<fc>{fc::hash_mismatch, fc::no_peers});
        // A claim when due starts the next round itself.
        const auto again = tx(*a, [&] { return a->claim(hash_of(2), p1, t0 + 1000 + 7200); });
        CHECK(again.result == claim_result::fetch);
        CHECK(again.attempts == 2);
        // A third mismatch: repeated, so 4x the ladder (8 h): 32 h.
        const auto third = tx(*a, [&] { return a->record_failure(hash_of(2), fc::hash_mismatch, t0 + 9000); });
        CHECK(third->next_retry_at == t0 + 9000 + 4 * 28800);
    }

    SUBCASE("timeouts alone: due again within minutes, twice, then the ladder from its first step") {
        tx(*a, [&] { a->claim(hash_of(5), p1, t0); });
        const auto first = tx(*a, [&] { return a->record_failure(hash_of(5), fc::utp_timeout, t0); });
        REQUIRE(first);
        CHECK(first->next_retry_at == t0 + 120);
        tx(*a, [&] { a->lease_due(10, t0 + 120); });
        const auto second = tx(*a, [&] { return a->record_failure(hash_of(5), fc::timeout, t0 + 200); });
        CHECK(second->next_retry_at == t0 + 200 + 480);
        tx(*a, [&] { a->lease_due(10, t0 + 680); });
        const auto third = tx(*a, [&] { return a->record_failure(hash_of(5), fc::connect_timeout, t0 + 700); });
        CHECK(third->next_retry_at == t0 + 700 + 900); // 30 min at 50%
    }

    SUBCASE("the classes after cancelled are counted and kept recent, beside the older ones") {
        tx(*a, [&] { a->claim(hash_of(3), p1, t0); });
        unix_seconds now = t0;
        for (const fc c : {fc::sink_failed, fc::encryption_failed, fc::utp_timeout, fc::utp_timeout, fc::timeout}) {
            now += 100'000'000; // always due again
            tx(*a, [&] { a->lease_due(10, now); });
            REQUIRE(tx(*a, [&] { return a->record_failure(hash_of(3), c, now); }));
        }
        const auto r = row_of(*a, hash_of(3));
        REQUIRE(r);
        CHECK(r->attempts == 5);
        CHECK(r->failures(fc::sink_failed) == 1);
        CHECK(r->failures(fc::encryption_failed) == 1);
        CHECK(r->failures(fc::utp_timeout) == 2);
        CHECK(r->failures(fc::timeout) == 1);
        CHECK(r->recent() == std::vector<fc>{fc::timeout, fc::utp_timeout, fc::utp_timeout, fc::encryption_failed});
        // A cancelled round is no attempt: the lease goes back, nothing is counted.
        now += 100'000'000;
        tx(*a, [&] { a->lease_due(10, now); });
        CHECK_FALSE(tx(*a, [&] { return a->record_failure(hash_of(3), fc::cancelled, now); }));
        const auto after = row_of(*a, hash_of(3));
        REQUIRE(after);
        CHECK(after->attempts == 5);
        CHECK(after->state == hash_state::dormant);
        CHECK(after->lease_owner.empty());
        CHECK(after->failure_counts == r->failure_counts);
        CHECK(after->recent_failures == r->recent_failures);
    }

    SUBCASE("fresh sightings reactivate a dormant hash: closer, higher priority, peers kept") {
        tx(*a, [&] { a->claim(hash_of(3), {}, t0); });
        tx(*a, [&] { a->record_failure(hash_of(3), fc::rejected, t0); }); // due at t0 + 1800
        const std::vector<endpoint> fresh{peer(7), peer(8)};
        const auto c = tx(*a, [&] { return a->claim(hash_of(3), fresh, t0 + 800); });
        CHECK(c.result == claim_result::deferred);
        auto r = row_of(*a, hash_of(3));
        CHECK(r->state == hash_state::dormant);
        CHECK(r->next_retry_at == t0 + 800 + 100); // 10% of the 1000 s left
        CHECK(r->priority == 1);
        CHECK(r->peers == fresh);
        // A get_peers observation (no peer) pulls it to the floor.
        CHECK(tx(*a, [&] { return a->observe(hash_of(3), {}, t0 + 820); }));
        r = row_of(*a, hash_of(3));
        CHECK(r->next_retry_at == t0 + 820 + 60);
        CHECK(r->priority == 2);
        CHECK(r->peers == fresh); // kept for the retry
        // Unknown hashes are not stored by observations.
        CHECK_FALSE(tx(*a, [&] { return a->observe(hash_of(999), {}, t0); }));
        CHECK_FALSE(row_of(*a, hash_of(999)));
        // The retry gets the fresh peers.
        const auto due = tx(*a, [&] { return a->lease_due(5, t0 + 880); });
        REQUIRE(due.size() == 1);
        CHECK(due[0].peers == fresh);
    }

    SUBCASE("done is for good, and idempotent") {
        tx(*a, [&] { a->claim(hash_of(4), p1, t0); });
        tx(*a, [&] { a->record_done(hash_of(4), t0 + 3); });
        tx(*a, [&] { a->record_done(hash_of(4), t0 + 4); });
        CHECK(tx(*a, [&] { return a->claim(hash_of(4), p1, t0 + 5); }).result == claim_result::done);
        CHECK_FALSE(tx(*a, [&] { return a->record_failure(hash_of(4), fc::timeout, t0 + 6); }));
        tx(*a, [&] { a->release(hash_of(4), t0); });
        CHECK(row_of(*a, hash_of(4))->state == hash_state::done);
        CHECK(tx(*a, [&] { return a->lease_due(10, t0 + 100'000'000); }).empty());
        // Done without a claim first (a hybrid's other key): stored as done.
        tx(*a, [&] { a->record_done(hash_of(5), t0); });
        CHECK(row_of(*a, hash_of(5))->state == hash_state::done);
        const auto counts = tx(*a, [&] { return a->counts(); });
        CHECK(counts.by_state[static_cast<std::size_t>(hash_state::done)] == 2);
        CHECK(counts.database_bytes > 0);
    }

    SUBCASE("lease_due: earliest first, batch-bounded, each hash to one owner") {
        for (unsigned i = 10; i < 20; ++i) {
            tx(*a, [&] { a->claim(hash_of(i), {}, t0); });
            tx(*a, [&] { a->record_failure(hash_of(i), fc::rejected, t0 + (20 - i)); }); // earlier for larger i
        }
        const auto first = tx(*a, [&] { return a->lease_due(3, t0 + 2000); });
        REQUIRE(first.size() == 3);
        CHECK(first[0].next_retry_at <= t0 + 2000 + 60);
        std::set<id20> got;
        for (const auto& r : first) got.insert(r.info_hash);
        CHECK(got == std::set<id20>{hash_of(19), hash_of(18), hash_of(17)});
        std::unique_ptr<store> b;
        store* other = a.get();
        if (shared) {
            b = make_store(make, "crawler-b");
            other = b.get();
        }
        const auto rest = tx(*other, [&] { return other->lease_due(100, t0 + 2000); });
        CHECK(rest.size() == 7);
        for (const auto& r : rest) CHECK(got.insert(r.info_hash).second); // never twice
        CHECK(got.size() == 10);
    }

    SUBCASE("expired leases come back; release gives a lease back without an attempt") {
        tx(*a, [&] { a->claim(hash_of(30), p1, t0); });
        tx(*a, [&] { a->claim(hash_of(31), p1, t0); });
        CHECK(tx(*a, [&] { return a->expire_leases(t0 + 59); }) == 0);
        CHECK(tx(*a, [&] { return a->expire_leases(t0 + 60); }) == 2);
        auto r = row_of(*a, hash_of(30));
        CHECK(r->state == hash_state::pending);
        CHECK(r->lease_owner.empty());
        const auto due = tx(*a, [&] { return a->lease_due(10, t0 + 61); });
        CHECK(due.size() == 2);
        CHECK(due[0].attempts == 0);
        tx(*a, [&] { a->release(hash_of(30), t0 + 500); });
        r = row_of(*a, hash_of(30));
        CHECK(r->state == hash_state::pending);
        CHECK(r->attempts == 0);
        CHECK(r->next_retry_at == t0 + 500);
        CHECK(tx(*a, [&] { return a->lease_due(10, t0 + 499); }).empty());
        CHECK(tx(*a, [&] { return a->lease_due(10, t0 + 500); }).size() == 1);
        // Releasing twice (or a lease that is not ours) changes nothing.
        tx(*a, [&] { a->release(hash_of(30), t0 + 9999); });
        tx(*a, [&] { a->release(hash_of(30), t0 + 9999); });
        CHECK(row_of(*a, hash_of(30))->next_retry_at == t0 + 9999);
        tx(*a, [&] { a->release(hash_of(30), t0 + 1); });
        CHECK(row_of(*a, hash_of(30))->next_retry_at == t0 + 9999);
    }

    SUBCASE("rollback keeps nothing") {
        a->begin();
        a->claim(hash_of(40), p1, t0);
        a->rollback();
        CHECK_FALSE(row_of(*a, hash_of(40)));
    }

    SUBCASE("routing states: one row per owner, newest first, any owner's rows served, old ones expire") {
        tx(*a, [&] { a->db().save_routing("crawler-a", t0, "state a1", t0 - 100); });
        tx(*a, [&] { a->db().save_routing("crawler-a", t0 + 5, "state a2", t0 - 100); }); // replaces a1
        tx(*a, [&] { a->db().save_routing("crawler-b", t0 + 3, std::string("b\0bytes", 7), t0 - 100); });
        auto states = tx(*a, [&] { return a->db().load_routing(t0 - 10, 8); });
        REQUIRE(states.size() == 2);
        CHECK(states[0] == "state a2");
        CHECK(states[1] == std::string("b\0bytes", 7)); // binary-safe
        CHECK(tx(*a, [&] { return a->db().load_routing(t0 + 4, 8); }).size() == 1);
        CHECK(tx(*a, [&] { return a->db().load_routing(t0 - 10, 1); }).size() == 1);
        // A save expires the rows saved before its expire_before.
        tx(*a, [&] { a->db().save_routing("crawler-c", t0 + 10, "c", t0 + 4); });
        states = tx(*a, [&] { return a->db().load_routing(0, 8); });
        REQUIRE(states.size() == 2);
        CHECK(states[0] == "c");
        CHECK(states[1] == "state a2");
        if (shared) {
            auto other = make_store(make, "crawler-d");
            CHECK(tx(*other, [&] { return other->db().load_routing(0, 8); }).size() == 2);
        }
    }
}

// Three crawlers, each on its own connection and thread, race for the same hashes: claims
// of fresh sightings, then leases of due work. Every hash goes to exactly one of them.
void race(const backend_factory& make) {
    constexpr unsigned hashes = 300;
    constexpr int crawlers = 3;
    std::mutex m;
    std::map<id20, int> granted, leased;
    std::vector<std::thread> threads;
    for (int c = 0; c < crawlers; ++c)
        threads.emplace_back([&, c] {
            auto s = make_store(make, "racer-" + std::to_string(c), 3600);
            // Each sees every hash, in its own order, a few per transaction.
            std::vector<unsigned> order(hashes);
            for (unsigned i = 0; i < hashes; ++i) order[i] = (i * (7 + 2 * c) + c) % hashes;
            for (unsigned i = 0; i < hashes; i += 5) {
                // Sorted within the transaction, as the store thread sorts its batches: rows
                // are locked in one global order, so two crawlers never wait on each other
                // in a cycle.
                std::vector<id20> batch, won;
                for (unsigned k = i; k < i + 5 && k < hashes; ++k) batch.push_back(hash_of(1000 + order[k]));
                std::sort(batch.begin(), batch.end());
                s->begin();
                for (const auto& h : batch)
                    if (s->claim(h, {}, t0).result == claim_result::fetch) won.push_back(h);
                s->commit();
                std::lock_guard l(m);
                for (const auto& h : won) ++granted[h];
            }
            // Every round fails; the hashes come due at once for whoever leases them.
            std::vector<id20> all;
            for (unsigned i = 0; i < hashes; ++i) all.push_back(hash_of(1000 + i));
            std::sort(all.begin(), all.end());
            s->begin();
            for (const auto& h : all) s->record_failure(h, fc::no_peers, t0);
            s->commit();
        });
    for (auto& t : threads) t.join();
    CHECK(granted.size() == hashes);
    for (const auto& [h, n] : granted) CHECK(n == 1);
    threads.clear();
    for (int c = 0; c < crawlers; ++c)
        threads.emplace_back([&, c] {
            auto s = make_store(make, "leaser-" + std::to_string(c), 3600);
            for (;;) {
                s->begin();
                const auto rows = s->lease_due(7, t0 + 1'000'000);
                s->commit();
                if (rows.empty()) break;
                std::lock_guard l(m);
                for (const auto& r : rows) ++leased[r.info_hash];
            }
        });
    for (auto& t : threads) t.join();
    CHECK(leased.size() == hashes);
    for (const auto& [h, n] : leased) CHECK(n == 1);
}

std::string temp_path(const char* name) {
    return (std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()) + ".sqlite"))
        .string();
}

void remove_db(const std::string& p) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
}

} // namespace

TEST_SUITE("retry_store") {

TEST_CASE("row packing: failure counts saturate, recent classes, compact peers") {
    retry_row r;
    for (int i = 0; i < 20; ++i) r.add_failure(fc::timeout);
    CHECK(r.failures(fc::timeout) == 15);
    CHECK(r.failures(fc::no_peers) == 0);
    r.add_failure(fc::no_peers);
    r.add_failure(fc::hash_mismatch);
    CHECK(r.failures(fc::timeout) == 15); // no carry into the neighbour
    CHECK(r.recent() == std::vector<fc>{fc::hash_mismatch, fc::no_peers, fc::timeout, fc::timeout});
    r.add_failure(fc::disconnected);
    CHECK(r.failures(fc::disconnected) == 1);
    // The classes after cancelled take slots 14 and 15 (bits 56..63), saturating alone.
    for (int i = 0; i < 20; ++i) r.add_failure(fc::utp_timeout);
    r.add_failure(fc::encryption_failed);
    r.add_failure(fc::sink_failed);
    CHECK(r.failures(fc::utp_timeout) == 15);
    CHECK(r.failures(fc::encryption_failed) == 1);
    CHECK(r.failures(fc::sink_failed) == 1);
    CHECK(r.failures(fc::disconnected) == 1);
    CHECK((r.failure_counts >> 56) == 0xF1);
    CHECK(r.recent() == std::vector<fc>{fc::sink_failed, fc::encryption_failed, fc::utp_timeout, fc::utp_timeout});
    CHECK(r.recent_failures < (1u << 20));
    // cancelled and none have no slot: not failures, nothing changes.
    const retry_row before = r;
    r.add_failure(fc::cancelled);
    r.add_failure(fc::none);
    CHECK(r.failure_counts == before.failure_counts);
    CHECK(r.recent_failures == before.recent_failures);
    CHECK(r.failures(fc::cancelled) == 0);

    const std::vector<endpoint> peers{peer(1), endpoint{*ip_address::parse("2001:db8::1"), 51413}, peer(2)};
    const auto packed = pack_peers(peers);
    CHECK(packed.size() == 7 + 19 + 7);
    CHECK(unpack_peers(packed) == peers);
    // Hostile bytes from a shared database: bad lengths and truncation stop the list.
    CHECK(unpack_peers(std::string("\x05\x01\x02", 3)).empty());
    CHECK(unpack_peers(packed.substr(0, 10)).size() == 1);
    CHECK(unpack_peers("").empty());
    r.merge_peers(peers);
    r.merge_peers(std::vector<endpoint>{peer(9), peer(1)});
    CHECK(r.peers == std::vector<endpoint>{peer(9), peer(1), peers[1]});
}

TEST_CASE("sqlite in memory") {
    run_suite([] { return open_sqlite(""); }, false);
}

TEST_CASE("sqlite file, two connections") {
    const auto path = temp_path("dhtc-retry-suite");
    remove_db(path);
    run_suite([&] { return open_sqlite(path); }, true);
    remove_db(path);
}

TEST_CASE("three crawlers race for the same hashes: each granted and leased once") {
    SUBCASE("sqlite file") {
        const auto path = temp_path("dhtc-retry-race");
        remove_db(path);
        race([&] { return open_sqlite(path, 30'000); });
        remove_db(path);
    }
    SUBCASE("postgresql") {
        const auto base = test::pg_base_or_skip();
        if (!base) return;
        const auto conninfo = test::pg_fresh_schema(*base, "retry_race_" + std::to_string(getpid()));
        open_postgres(conninfo); // migrate once, before the race
        race([&] { return open_postgres(conninfo); });
    }
}

TEST_CASE("postgresql") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    static int n = 0;
    const auto conninfo = test::pg_fresh_schema(*base, "retry_suite_" + std::to_string(getpid()) + "_" +
                                                           std::to_string(n++));
    run_suite([&] { return open_postgres(conninfo); }, true);
}

TEST_CASE("sqlite schema: versioned under schema_migrations, reopened intact, newer refused") {
    const auto path = temp_path("dhtc-retry-schema");
    remove_db(path);
    {
        store s(open_sqlite(path), no_jitter(), "a", 60, 1);
        tx(s, [&] { s.claim(hash_of(1), {}, t0); });
    }
    {
        store s(open_sqlite(path), no_jitter(), "a", 60, 1); // migrations run once
        CHECK(row_of(s, hash_of(1)));
    }
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT version FROM schema_migrations WHERE component='retry'", -1, &st, nullptr) ==
            SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(sqlite3_column_int(st, 0) == sqlite_schema_version);
    sqlite3_finalize(st);
    // Another component's tables live beside ours.
    CHECK(sqlite3_exec(db, "CREATE TABLE torrents(x); INSERT INTO schema_migrations VALUES ('torrents', 3);"
                           "UPDATE schema_migrations SET version = 99 WHERE component = 'retry'",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    try {
        open_sqlite(path);
        FAIL("a newer schema was accepted");
    } catch (const store_error& e) {
        CHECK(std::string(e.what()).find("newer") != std::string::npos);
    }
    remove_db(path);
}

// A retry store as schema v2 left it, written by hand: recent_failures packed 4 bits a class.
// Row 1: timeout 3, no_peers 2, sink_failed 1, hash_mismatch 1; recent (newest first)
// hash_mismatch, no_peers, timeout, sink_failed. Row 2: one no_peers, and stale bits where
// cancelled's counter was (never written by the crawler) that must not pass for a count.
constexpr std::uint64_t v2_counts = (std::uint64_t{3} << (6 * 4)) | (std::uint64_t{2} << (10 * 4)) |
                                    (std::uint64_t{1} << (13 * 4)) | (std::uint64_t{1} << (8 * 4));
constexpr std::uint32_t v2_recent = 9 | (11u << 4) | (7u << 8) | (14u << 12);
constexpr std::uint64_t v2_stale = (std::uint64_t{1} << (10 * 4)) | (std::uint64_t{5} << 56);

// The tables of schema v2 as each backend created them, and the rows, with the hash as a
// blob literal of the backend's (`blob_open` hex `blob_close`).
constexpr const char* sqlite_v2_tables =
    "CREATE TABLE schema_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
    "CREATE TABLE retry_hashes (info_hash BLOB PRIMARY KEY NOT NULL, state INTEGER NOT NULL, next_retry_at INTEGER "
    "NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, observations INTEGER NOT NULL, attempts "
    "INTEGER NOT NULL, priority INTEGER NOT NULL, failure_counts INTEGER NOT NULL, recent_failures INTEGER NOT NULL, "
    "lease_owner TEXT, peers BLOB) WITHOUT ROWID;"
    "CREATE INDEX retry_hashes_due ON retry_hashes(state, next_retry_at);"
    "CREATE TABLE dht_routing (owner TEXT PRIMARY KEY, saved_at INTEGER NOT NULL, nodes BLOB NOT NULL);";
constexpr const char* postgres_v2_tables =
    "CREATE TABLE schema_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
    "CREATE TABLE retry_hashes (info_hash bytea PRIMARY KEY, next_retry_at bigint NOT NULL, first_seen bigint NOT "
    "NULL, last_seen bigint NOT NULL, failure_counts bigint NOT NULL, observations integer NOT NULL, attempts integer "
    "NOT NULL, priority integer NOT NULL, recent_failures integer NOT NULL, state smallint NOT NULL, lease_owner text, "
    "peers bytea);"
    "CREATE INDEX retry_hashes_due ON retry_hashes(state, next_retry_at);"
    "CREATE TABLE dht_routing (owner text PRIMARY KEY, saved_at bigint NOT NULL, nodes bytea NOT NULL);";

std::string v2_rows(const std::string& blob_open, const std::string& blob_close) {
    const auto row = [&](unsigned n, std::uint64_t counts, std::uint32_t recent) {
        return "INSERT INTO retry_hashes (info_hash, state, next_retry_at, first_seen, last_seen, observations, "
               "attempts, priority, failure_counts, recent_failures) VALUES (" +
               blob_open + hash_of(n).hex() + blob_close + ", 3, " + std::to_string(t0 + 500) + ", " +
               std::to_string(t0) + ", " + std::to_string(t0) + ", 1, 4, 0, " +
               std::to_string(static_cast<std::int64_t>(counts)) + ", " + std::to_string(recent) + ");";
    };
    return "INSERT INTO schema_migrations VALUES ('retry', 2);" + row(1, v2_counts, v2_recent) + row(2, v2_stale, 11);
}

// The rows above, read back through the current layout.
void check_migrated_v2_rows(store& s) {
    const auto r = row_of(s, hash_of(1));
    REQUIRE(r);
    CHECK(r->state == hash_state::dormant);
    CHECK(r->attempts == 4);
    CHECK(r->failures(fc::timeout) == 3);
    CHECK(r->failures(fc::no_peers) == 2);
    CHECK(r->failures(fc::sink_failed) == 1);
    CHECK(r->failures(fc::hash_mismatch) == 1);
    CHECK(r->failures(fc::encryption_failed) == 0);
    CHECK(r->failures(fc::utp_timeout) == 0);
    CHECK(r->failure_counts == v2_counts);
    CHECK(r->recent() == std::vector<fc>{fc::hash_mismatch, fc::no_peers, fc::timeout, fc::sink_failed});
    const auto stale = row_of(s, hash_of(2));
    REQUIRE(stale);
    CHECK(stale->failures(fc::no_peers) == 1);
    CHECK(stale->failures(fc::encryption_failed) == 0);
    CHECK(stale->failures(fc::utp_timeout) == 0);
    CHECK(stale->recent() == std::vector<fc>{fc::no_peers});
    // And the migrated row takes the new classes.
    const auto due = tx(s, [&] { return s.lease_due(10, t0 + 1000); });
    CHECK(due.size() == 2);
    const auto next = tx(s, [&] { return s.record_failure(hash_of(1), fc::utp_timeout, t0 + 1000); });
    REQUIRE(next);
    CHECK(next->recent() == std::vector<fc>{fc::utp_timeout, fc::hash_mismatch, fc::no_peers, fc::timeout});
    CHECK(next->failures(fc::timeout) == 3);
    CHECK(next->failures(fc::utp_timeout) == 1);
}

TEST_CASE("schema v3: a v2 database migrates its packed failures (SQLite)") {
    const auto path = temp_path("dhtc-retry-v2");
    remove_db(path);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char* err = nullptr;
    const std::string sql = std::string(sqlite_v2_tables) + v2_rows("x'", "'");
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    CHECK_MESSAGE(rc == SQLITE_OK, (err ? err : ""));
    sqlite3_free(err);
    sqlite3_close(db);
    {
        store s(open_sqlite(path), no_jitter(), "a", 60, 1);
        check_migrated_v2_rows(s);
    }
    {
        store s(open_sqlite(path), no_jitter(), "a", 60, 1); // v3 already: nothing rewritten again
        const auto r = row_of(s, hash_of(1));
        REQUIRE(r);
        CHECK(r->recent() == std::vector<fc>{fc::utp_timeout, fc::hash_mismatch, fc::no_peers, fc::timeout});
    }
    remove_db(path);
}

TEST_CASE("schema v3: a v2 database migrates its packed failures (PostgreSQL)") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    const auto conninfo = test::pg_fresh_schema(*base, "retry_v2_" + std::to_string(getpid()));
    test::pg_query(conninfo, std::string(postgres_v2_tables) + v2_rows("'\\x", "'::bytea"));
    CHECK(test::pg_query(conninfo, "SELECT recent_failures FROM retry_hashes ORDER BY recent_failures DESC LIMIT 1") ==
          std::to_string(v2_recent));
    store s(open_postgres(conninfo), no_jitter(), "a", 60, 1);
    check_migrated_v2_rows(s);
    CHECK(test::pg_query(conninfo, "SELECT version FROM schema_migrations WHERE component = 'retry'") ==
          std::to_string(postgres_schema_version));
}

// Another crawler's torrent sink holds the schema lock and builds an index online, as its
// migrations do (CREATE INDEX CONCURRENTLY waits for every open transaction). The retry
// store opening meanwhile must wait outside any transaction: waiting inside one was a
// deadlock PostgreSQL broke by failing one side (seen in CI as a fleet crawler refusing to
// start).
TEST_CASE("postgresql: opening waits for the schema lock outside a transaction while its holder builds online") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    const auto conninfo = test::pg_fresh_schema(*base, "retry_schema_lock_" + std::to_string(getpid()));
    test::pg_session holder(conninfo);
    holder.query("CREATE TABLE sink_rows (x INTEGER)");
    const std::string lock_key = std::to_string(postgres_schema_lock);
    holder.query("SELECT pg_advisory_lock(" + lock_key + ")");

    const std::string opener_name = "retry_schema_lock_" + std::to_string(getpid());
    std::string opened;
    std::thread opener([&] {
        try {
            open_postgres(conninfo + "&application_name=" + opener_name);
            opened = "ok";
        } catch (const std::exception& e) {
            opened = e.what();
        }
    });
    // Until the opener has asked for the lock (its last statement names it), bounded.
    bool asked = false;
    for (int i = 0; i < 400 && !asked; ++i) {
        asked = holder.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + opener_name +
                             "' AND query LIKE '%advisory%" + lock_key + "%'") != "0";
        if (!asked) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string built = "ok";
    try {
        holder.query("CREATE INDEX CONCURRENTLY sink_rows_x ON sink_rows (x)");
    } catch (const std::exception& e) {
        built = e.what();
    }
    holder.query("SELECT pg_advisory_unlock(" + lock_key + ")");
    opener.join();
    CHECK(asked);
    CHECK(built == "ok");
    CHECK(opened == "ok");
    CHECK(test::pg_query(conninfo, "SELECT version FROM schema_migrations WHERE component = 'retry'") ==
          std::to_string(postgres_schema_version));
}

TEST_CASE("apply_migrations: forward from the recorded version, one row per component, failures roll back") {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
    std::vector<std::string> log;
    migration_dialect d;
    d.begin = "BEGIN IMMEDIATE";
    d.database = "test database";
    d.exec = [&](const std::string& sql) {
        log.push_back(sql);
        char* err = nullptr;
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
            const std::string why = err ? err : "?";
            sqlite3_free(err);
            throw store_error(why);
        }
    };
    d.query_int = [&](const std::string& sql) -> std::optional<std::int64_t> {
        sqlite3_stmt* st = nullptr;
        REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
        std::optional<std::int64_t> v;
        if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
    };
    d.rollback = [&] { sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr); };
    const auto version_of = [&](const char* component) {
        return d.query_int(std::string("SELECT version FROM schema_migrations WHERE component = '") + component + "'");
    };

    const char* v1[] = {"CREATE TABLE a(x)"};
    const char* other_v1[] = {"CREATE TABLE o(x)"};
    const char* v3[] = {"CREATE TABLE a(x)", "ALTER TABLE a ADD COLUMN y; CREATE TABLE b(z)", "CREATE INDEX a_y ON a(y)"};
    CHECK(apply_migrations(d, "demo", v1) == 0);
    CHECK(version_of("demo") == 1);
    CHECK(apply_migrations(d, "other", other_v1) == 0); // another component, its own row
    CHECK(version_of("other") == 1);
    log.clear();
    CHECK(apply_migrations(d, "demo", v3) == 1); // only versions 2 and 3 run
    CHECK(std::count(log.begin(), log.end(), std::string(v3[0])) == 0);
    CHECK(std::count(log.begin(), log.end(), std::string(v3[1])) == 1);
    CHECK(version_of("demo") == 3);
    CHECK(apply_migrations(d, "demo", v3) == 3); // nothing left to run
    CHECK(d.query_int("SELECT COUNT(*) FROM schema_migrations") == 2);

    // A newer database is refused, naming it; a failing migration leaves the version alone.
    try {
        apply_migrations(d, "demo", v1);
        FAIL("a newer schema was accepted");
    } catch (const store_error& e) {
        CHECK(std::string(e.what()) == "test database has demo schema version 3, newer than this build's 1");
    }
    const char* broken[] = {"CREATE TABLE o(x)", "CREATE TABLE c(x); NOT SQL"};
    CHECK_THROWS_AS(apply_migrations(d, "other", broken), store_error);
    CHECK(version_of("other") == 1);
    CHECK(d.query_int("SELECT COUNT(*) FROM sqlite_master WHERE name = 'c'") == 0);
    CHECK_THROWS_AS(apply_migrations(d, "no'quotes", v1), store_error);
    sqlite3_close(db);
}

TEST_CASE("unusable stores fail with a clear message") {
    try {
        open_sqlite("/nonexistent-dir/x/retry.sqlite");
        FAIL("opened");
    } catch (const store_error& e) {
        CHECK(std::string(e.what()).find("/nonexistent-dir/x/retry.sqlite") != std::string::npos);
    }
    CHECK(check_postgres_conninfo("host=127.0.0.1 nonsense").find("invalid PostgreSQL connection string") == 0);
    CHECK(check_postgres_conninfo("").find("empty") != std::string::npos);
    CHECK(check_postgres_conninfo("postgresql://u:secret@127.0.0.1:5/db").empty());
    try {
        // Nothing listens on port 1: refused at once.
        open_postgres("postgresql://u:secret@127.0.0.1:1/db");
        FAIL("connected");
    } catch (const store_error& e) {
        const std::string m = e.what();
        CHECK(m.find("cannot connect to PostgreSQL at 127.0.0.1:1 database db") == 0);
        CHECK(m.find("secret") == std::string::npos);
    }
}

}
