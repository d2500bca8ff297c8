// The store thread: requests from several threads, answers after the commit, bounded
// queues that count what they refuse, due hashes leased within the room the pipeline gives,
// events for every state change, and store errors reported without taking anything down.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

#include "support/eventually.hpp"
#include "retry/scheduler.hpp"
#include "retry/sqlite_store.hpp"
#include "support/pg.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

id20 numbered(unsigned n) {
    id20 h;
    for (std::size_t i = 0; i < 4; ++i) h.bytes[i] = static_cast<std::uint8_t>(n >> (8 * i));
    h.bytes[10] = 0x42;
    return h;
}

using test::eventually;

retry::retry_options sqlite_memory() {
    retry::retry_options o;
    o.kind = retry::store_kind::sqlite;
    o.path = "";
    o.owner_id = "sched-test";
    o.tick_millis = 2;
    o.policy.ladder_secs = {1};
    o.policy.jitter_percent = 0;
    return o;
}

} // namespace

TEST_SUITE("retry_scheduler") {

TEST_CASE("claims from several threads: each hash granted once, answers after the commit") {
    std::string error;
    auto s = retry::scheduler::open(sqlite_memory(), error);
    REQUIRE_MESSAGE(s, error);
    std::mutex m;
    std::map<id20, std::vector<retry::claim_result>> answers;
    std::atomic<int> answered{0};
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t)
        posters.emplace_back([&] {
            for (unsigned i = 0; i < 200; ++i) {
                const bool posted = s->post_claim(numbered(i), {}, [&, i](retry::claim_answer a) {
                    std::lock_guard l(m);
                    answers[numbered(i)].push_back(a.result);
                    ++answered;
                });
                CHECK(posted);
            }
        });
    for (auto& p : posters) p.join();
    REQUIRE(eventually([&] { return answered.load() == 800; }));
    std::lock_guard l(m);
    CHECK(answers.size() == 200);
    for (const auto& [h, list] : answers) {
        CHECK(list.size() == 4);
        CHECK(std::count(list.begin(), list.end(), retry::claim_result::fetch) == 1); // one round
        CHECK(std::count(list.begin(), list.end(), retry::claim_result::busy) == 3);
    }
    CHECK(s->counters().claims.load() == 800);
    CHECK(s->counters().claim_results[0].load() == 200);
}

TEST_CASE("failures go dormant, come due, and are leased within the room given") {
    std::string error;
    auto s = retry::scheduler::open(sqlite_memory(), error);
    REQUIRE_MESSAGE(s, error);
    std::mutex m;
    std::vector<api::retry_event> events;
    s->on_event([&](const api::retry_event& e) {
        std::lock_guard l(m);
        events.push_back(e);
    });
    std::atomic<int> granted{0};
    for (unsigned i = 0; i < 10; ++i)
        s->post_claim(numbered(i), {}, [&](retry::claim_answer a) { granted += a.result == retry::claim_result::fetch; });
    REQUIRE(eventually([&] { return granted.load() == 10; }));
    for (unsigned i = 0; i < 10; ++i) s->post_failure(numbered(i), api::failure_class::no_peers);
    s->post_done(numbered(99));
    REQUIRE(eventually([&] {
        std::lock_guard l(m);
        return events.size() == 11;
    }));
    {
        std::lock_guard l(m);
        for (const auto& e : events) {
            if (e.info_hash == numbered(99)) {
                CHECK(e.state == api::retry_state::done);
                continue;
            }
            CHECK(e.state == api::retry_state::dormant);
            CHECK(e.attempts == 1);
            CHECK(e.failure == api::failure_class::no_peers);
            CHECK(e.next_retry_at > 0);
        }
    }
    // No room: nothing is leased however due.
    std::this_thread::sleep_for(1500ms);
    CHECK(s->due().depth() == 0);
    // Room for 4: four leased, no more.
    s->set_retry_room(4);
    REQUIRE(eventually([&] { return s->due().depth() == 4; }));
    std::this_thread::sleep_for(500ms);
    CHECK(s->due().depth() == 4);
    s->set_retry_room(100);
    REQUIRE(eventually([&] { return s->due().depth() == 10; }));
    std::set<id20> leased;
    while (auto d = s->due().try_pop()) {
        CHECK(d->attempts == 1);
        CHECK(leased.insert(d->info_hash).second);
    }
    CHECK(leased.size() == 10);
    CHECK(s->counters().leased.load() == 10);
    REQUIRE(eventually([&] { return s->counters().by_state[static_cast<std::size_t>(retry::hash_state::leased)] == 10; }));
}

TEST_CASE("full queues refuse and count; a refused claim is the caller's to treat as busy") {
    auto o = sqlite_memory();
    o.queue_capacity = 4;
    o.tick_millis = 1000; // the store thread sleeps while we fill its queue
    std::string error;
    auto s = retry::scheduler::open(o, error);
    REQUIRE_MESSAGE(s, error);
    int refused = 0;
    for (unsigned i = 0; i < 10; ++i) refused += !s->post_claim(numbered(i), {}, [](retry::claim_answer) {});
    for (unsigned i = 0; i < 10; ++i) s->post_observation(numbered(i), std::nullopt);
    CHECK(refused >= 5);
    CHECK(s->counters().requests_dropped.load() == static_cast<std::uint64_t>(refused));
    CHECK(s->counters().observations_dropped.load() >= 5);
    s->stop(); // applies what was queued
    CHECK(s->counters().claims.load() == static_cast<std::uint64_t>(10 - refused));
}

TEST_CASE("a failing store reports, answers busy, and keeps running") {
    struct broken final : retry::backend {
        void begin() override {}
        void commit() override { throw retry::store_error("disk full"); }
        void rollback() noexcept override {}
        std::optional<retry::retry_row> load(const id20&) override { return std::nullopt; }
        bool insert(const retry::retry_row&) override { return true; }
        void update(const retry::retry_row&) override {}
        std::vector<retry::retry_row> lease_due(std::size_t, std::string_view, retry::unix_seconds,
                                                retry::unix_seconds) override {
            return {};
        }
        std::size_t expire_leases(retry::unix_seconds) override { return 0; }
        retry::store_counts counts() override { return {}; }
        std::string_view kind() const noexcept override { return "broken"; }
    };
    std::string error;
    auto s = retry::scheduler::open(sqlite_memory(), [] { return std::make_unique<broken>(); }, error);
    REQUIRE(s);
    std::mutex m;
    std::vector<std::string> errors;
    s->on_error([&](const std::string& e) {
        std::lock_guard l(m);
        errors.push_back(e);
    });
    std::atomic<int> busy{0};
    s->post_claim(numbered(1), {}, [&](retry::claim_answer a) { busy += a.result == retry::claim_result::busy; });
    REQUIRE(eventually([&] { return busy.load() == 1; }));
    CHECK(s->counters().store_errors.load() >= 1);
    std::lock_guard l(m);
    REQUIRE_FALSE(errors.empty());
    CHECK(errors.front().find("disk full") != std::string::npos);
}

TEST_CASE("postgresql: a connection the server cuts is made again and the work in flight applied") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    // Its own schema and application name, so the cut below reaches this test's connection only.
    const std::string name = "retry_reconnect_" + std::to_string(getpid());
    auto o = sqlite_memory();
    o.kind = retry::store_kind::postgresql;
    o.conninfo = test::pg_fresh_schema(*base, name) + "&application_name=" + name;
    std::string error;
    auto s = retry::scheduler::open(o, error);
    REQUIRE_MESSAGE(s, error);
    std::atomic<int> granted{0};
    const auto claim = [&](unsigned n) {
        REQUIRE(s->post_claim(numbered(n), {}, [&](retry::claim_answer a) {
            granted += a.result == retry::claim_result::fetch;
        }));
    };
    claim(1);
    REQUIRE(eventually([&] { return granted.load() == 1; }));

    // What a server restart or a dropped network does to the store's connection.
    CHECK(test::pg_query(*base, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE application_name = '" + name + "'") == "1");
    s->post_done(numbered(1));
    claim(2);
    REQUIRE(eventually([&] { return granted.load() == 2; }));
    CHECK(s->counters().store_errors.load() >= 1); // the cut was seen, and survived
    s->stop();
    const auto state_of = [&](unsigned n) {
        return test::pg_query(o.conninfo, "SELECT state FROM retry_hashes WHERE info_hash = '\\x" +
                                              numbered(n).hex() + "'::bytea");
    };
    CHECK(state_of(1) == "2"); // done, recorded after the reconnect
    CHECK(state_of(2) == "1"); // leased
}

TEST_CASE("an unusable store fails open with its reason") {
    auto o = sqlite_memory();
    o.path = "/nonexistent-dir/deeper/retry.sqlite";
    std::string error;
    CHECK_FALSE(retry::scheduler::open(o, error));
    CHECK(error.find("/nonexistent-dir/deeper/retry.sqlite") != std::string::npos);
}

}
