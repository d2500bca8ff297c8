// The retry store in the running engine, against real libtorrent seeders on loopback:
//  - SQLite: torrents are delivered once and recorded done; a hash whose peer refuses is
//    recorded dormant, comes due, is leased, goes through the gate again, looks peers up,
//    and completes its second round; after a restart on the same file, the seeders'
//    announces are turned away by the store (done), never fetched again.
//  - Fleet: two crawlers share one PostgreSQL database while the same seeders, four libtorrent
//    sessions behind one IP, announce to both: each torrent is delivered exactly once across
//    the fleet, every hash ends done or dormant, and no session's blocker fires.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "api/crawler.hpp"
#include "retry/postgres_store.hpp"
#include "retry/sqlite_store.hpp"
#include "support/loopback_crawler.hpp"
#include "support/lt_swarm_reader.hpp"
#include "support/pg.hpp"
#include "support/ports.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

struct recorder {
    std::mutex m;
    std::vector<api::delivery> delivered;
    std::vector<api::completion> completions;
    std::vector<api::retry_event> retries;
    std::map<id20, int> gates;

    api::event_handlers callbacks() {
        api::event_handlers cb;
        cb.gate = [this](const id20& h) {
            std::lock_guard l(m);
            ++gates[h];
            return true;
        };
        cb.torrent = api::yes_no([this](const api::delivery& d) {
            std::lock_guard l(m);
            delivered.push_back(d);
            return true;
        });
        cb.completion = [this](const api::completion& c) {
            std::lock_guard l(m);
            completions.push_back(c);
        };
        cb.retry = [this](const api::retry_event& e) {
            std::lock_guard l(m);
            retries.push_back(e);
        };
        return cb;
    }
    template <class F>
    bool wait_for(F&& done, std::chrono::seconds limit, test::subprocess* swarm = nullptr) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            {
                std::lock_guard l(m);
                if (done()) return true;
            }
            if (swarm)
                while (swarm->read_line(0ms)) {
                }
            std::this_thread::sleep_for(200ms);
        }
        std::lock_guard l(m);
        return done();
    }
};

api::crawler_options loopback_options() {
    auto o = test::loopback_crawler();
    o.metadata.timeout_secs = 2;
    o.retry.lease_secs = 30;
    o.retry.policy.ladder_secs = {2};   // due again two seconds after a failure
    o.retry.policy.jitter_percent = 0;
    o.retry.policy.lookup_wait_secs = 2;
    o.retry.counts_interval_secs = 1;
    return o;
}

// Starts a swarm bootstrapped to `crawlers` and returns its torrents' keys (hex) once ready.
std::set<std::string> start_swarm(test::subprocess& swarm) {
    std::set<std::string> keys;
    const bool ready = test::read_swarm_setup(swarm, 90s, [&](const nlohmann::json& ev) {
        keys.insert(ev.at("announce_hashes").at(0).get<std::string>());
    });
    if (!ready) FAIL("swarm not ready");
    return keys;
}

// `sessions` libtorrent sessions, each on its own IP, or with `one_ip` all on one (several
// clients behind a NAT or on a seedbox).
std::vector<std::string> swarm_args(const std::vector<std::string>& bootstraps, const std::string& base_ip,
                                    const std::filesystem::path& workdir, int torrents, int duration,
                                    int sessions = 2, bool one_ip = false) {
    std::vector<std::string> a{"/usr/bin/python3", DHTC_LT_SWARM};
    for (const auto& b : bootstraps) a.insert(a.end(), {"--bootstrap", b});
    a.insert(a.end(), {"--sessions", std::to_string(sessions), "--torrents-per-session", std::to_string(torrents),
                       "--kinds", "v1,v2", "--duration", std::to_string(duration), "--announce-interval", "5",
                       "--base-ip", base_ip, "--workdir", workdir.string()});
    if (one_ip) a.emplace_back("--one-ip");
    return a;
}

api::hash_event refusing_sighting(const id20& h) {
    api::hash_event e;
    e.info_hash = h;
    e.peer = endpoint{*ip_address::parse("127.0.0.1"), 1}; // nothing listens on port 1
    e.source = e.peer;
    e.at = std::chrono::steady_clock::now();
    return e;
}

id20 unknown_hash(std::uint8_t tag) {
    id20 h;
    for (std::size_t i = 0; i < 20; ++i) h.bytes[i] = static_cast<std::uint8_t>(0x5a ^ (i * 7) ^ tag);
    return h;
}


} // namespace

TEST_SUITE("integration") {

TEST_CASE("retry store (SQLite): done once and for good, failures retried through the gate") {
    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-retry-lt-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    std::filesystem::create_directories(workdir);
    const std::string db = (workdir / "state.sqlite").string();

    auto o = loopback_options();
    o.retry.kind = retry::store_kind::sqlite;
    o.retry.path = db;
    const id20 lost = unknown_hash(1);

    std::set<std::string> keys;
    {
        recorder rec;
        std::string error;
        auto crawler = api::crawler::create(o, rec.callbacks(), error);
        REQUIRE_MESSAGE(crawler, error);
        crawler->start();
        test::subprocess swarm(swarm_args({crawler->dht().local_endpoints().at(0).to_string()}, "127.0.60",
                                          workdir / "swarm1", 1, 120));
        keys = start_swarm(swarm);
        REQUIRE(keys.size() == 2);
        CHECK(crawler->inject_hash(refusing_sighting(lost)));
        // Both torrents delivered; the lost hash fails twice (its first round, then a retry
        // that found no peers by lookup either).
        const bool ok = rec.wait_for(
            [&] {
                int lost_rounds = 0;
                for (const auto& c : rec.completions) lost_rounds += c.info_hash == lost;
                return rec.delivered.size() >= 2 && lost_rounds >= 2;
            },
            90s, &swarm);
        std::this_thread::sleep_for(1500ms); // a duplicate or a late event would show up now
        swarm.stop();
        crawler->close(std::nullopt);
        REQUIRE(ok);
        std::lock_guard l(rec.m);
        CHECK(rec.delivered.size() == 2);
        std::vector<api::completion> lost_rounds;
        for (const auto& c : rec.completions)
            if (c.info_hash == lost) lost_rounds.push_back(c);
        REQUIRE(lost_rounds.size() >= 2);
        CHECK(lost_rounds[0].result == api::outcome::fetch_failed);
        CHECK(lost_rounds[0].failure == api::failure_class::connect_refused);
        CHECK(lost_rounds[0].round == 0);
        CHECK(lost_rounds[1].result == api::outcome::fetch_failed);
        CHECK(lost_rounds[1].failure == api::failure_class::no_peers);
        CHECK(lost_rounds[1].round == 1);
        CHECK(rec.gates[lost] >= 2); // every round through the gate
        int dormant_events = 0, done_events = 0;
        for (const auto& e : rec.retries) {
            if (e.info_hash == lost && e.state == api::retry_state::dormant) ++dormant_events;
            if (e.state == api::retry_state::done) ++done_events;
        }
        CHECK(dormant_events >= 2);
        CHECK(done_events == 2);
        const auto& pc = crawler->pipeline().counters();
        CHECK(pc.retry_rounds.load() >= 1);
        CHECK(pc.retry_lookups.load() >= 1);
        CHECK(crawler->dht().service().crawl_stats().retry_lookups.load() >= 1);
    }

    // The state is on disk: every torrent done, the lost hash dormant with its history.
    {
        retry::store s(retry::open_sqlite(db), o.retry.policy, "inspector", 30);
        s.begin();
        for (const auto& k : keys) {
            const auto r = s.db().load(*id20::from_hex(k));
            REQUIRE(r);
            CHECK(r->state == retry::hash_state::done);
        }
        const auto r = s.db().load(lost);
        REQUIRE(r);
        CHECK(r->attempts >= 2);
        CHECK(r->failures(api::failure_class::connect_refused) == 1);
        CHECK(r->failures(api::failure_class::no_peers) >= 1);
        s.commit();
    }

    // A restart on the same file: the seeders announce again, nothing is fetched again.
    {
        o.retry.policy.ladder_secs = {3600}; // the lost hash stays dormant in this run
        recorder rec;
        std::string error;
        auto crawler = api::crawler::create(o, rec.callbacks(), error);
        REQUIRE_MESSAGE(crawler, error);
        crawler->start();
        test::subprocess swarm(swarm_args({crawler->dht().local_endpoints().at(0).to_string()}, "127.0.60",
                                          workdir / "swarm1", 1, 60));
        const auto again = start_swarm(swarm);
        CHECK(again == keys); // the same torrents (deterministic)
        const auto& pc = crawler->pipeline().counters();
        const bool turned_away = rec.wait_for([&] { return pc.store_done.load() >= 2; }, 60s, &swarm);
        std::this_thread::sleep_for(1s);
        swarm.stop();
        crawler->close(std::nullopt);
        CHECK(turned_away);
        std::lock_guard l(rec.m);
        CHECK(rec.delivered.empty());
        for (const auto& k : keys) CHECK(rec.gates.count(*id20::from_hex(k)) == 0); // the store decided first
    }
    std::filesystem::remove_all(workdir);
}

TEST_CASE("fleet: two crawlers on one PostgreSQL, four sessions on one IP, each torrent delivered exactly once") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    const auto conninfo = test::pg_fresh_schema(*base, "retry_fleet_" + std::to_string(::getpid()));
    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-retry-fleet-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    std::filesystem::create_directories(workdir);

    constexpr int fleet = 2;
    std::vector<std::unique_ptr<recorder>> recs;
    std::vector<std::unique_ptr<api::crawler>> crawlers;
    std::vector<std::string> endpoints;
    const id20 lost = unknown_hash(2);
    for (int i = 0; i < fleet; ++i) {
        auto o = loopback_options();
        o.retry.kind = retry::store_kind::postgresql;
        o.retry.conninfo = conninfo;
        o.retry.owner_id = "fleet-" + std::to_string(i);
        o.retry.policy.ladder_secs = {3};
        recs.push_back(std::make_unique<recorder>());
        std::string error;
        auto c = api::crawler::create(o, recs.back()->callbacks(), error);
        REQUIRE_MESSAGE(c, error);
        endpoints.push_back(c->dht().local_endpoints().at(0).to_string());
        crawlers.push_back(std::move(c));
    }
    for (auto& c : crawlers) c->start();
    // Every crawler with default budgets: the four sessions behind one IP each have their own.
    test::subprocess swarm(swarm_args(endpoints, "127.0.70", workdir / "swarm", 2, 120, 4, true));
    const auto keys = start_swarm(swarm);
    REQUIRE(keys.size() == 8);
    // Both crawlers see the same lost hash: one round at a time across the fleet.
    for (auto& c : crawlers) CHECK(c->inject_hash(refusing_sighting(lost)));

    const auto delivered_total = [&] {
        std::size_t n = 0;
        for (auto& r : recs) {
            std::lock_guard l(r->m);
            n += r->delivered.size();
        }
        return n;
    };
    std::vector<std::string> bans;
    const auto drain = [&] {
        while (const auto line = swarm.read_line(0ms)) {
            const auto ev = nlohmann::json::parse(*line, nullptr, false);
            if (!ev.is_discarded() && ev.value("event", "") == "dht_banned") bans.push_back(*line);
        }
    };
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (delivered_total() < keys.size() && std::chrono::steady_clock::now() < deadline) {
        drain();
        std::this_thread::sleep_for(200ms);
    }
    // Several announce rounds more: any second delivery would happen now.
    const auto settle = std::chrono::steady_clock::now() + 12s;
    while (std::chrono::steady_clock::now() < settle) {
        drain();
        std::this_thread::sleep_for(200ms);
    }
    for (const auto& b : bans) MESSAGE("a session's blocker fired: " << b);
    CHECK(bans.empty());
    swarm.stop();
    for (auto& c : crawlers) c->close(std::nullopt);

    std::map<std::string, int> times;
    std::uint64_t turned_away = 0;
    for (int i = 0; i < fleet; ++i) {
        std::lock_guard l(recs[i]->m);
        for (const auto& d : recs[i]->delivered) ++times[d.info.info_hash.hex()];
        const auto& pc = crawlers[i]->pipeline().counters();
        turned_away += pc.store_done.load() + pc.store_busy.load();
        MESSAGE("crawler " << i << ": delivered " << recs[i]->delivered.size() << ", store_done "
                           << pc.store_done.load() << ", store_busy " << pc.store_busy.load());
    }
    CHECK(times.size() == keys.size());
    for (const auto& [k, n] : times) {
        CAPTURE(k);
        CHECK(keys.count(k) == 1);
        CHECK(n == 1); // exactly once across the fleet
    }
    CHECK(turned_away > 0); // the other crawler saw them too, and the store turned it away

    // The lost hash: never two rounds at once. Each round's completion names its round; the
    // rounds across both crawlers are distinct numbers.
    std::multiset<std::uint32_t> lost_rounds;
    for (auto& r : recs) {
        std::lock_guard l(r->m);
        for (const auto& c : r->completions)
            if (c.info_hash == lost && c.result == api::outcome::fetch_failed) lost_rounds.insert(c.round);
    }
    CHECK(lost_rounds.size() >= 1);
    for (const auto n : lost_rounds) CHECK(lost_rounds.count(n) == 1);

    // Every hash ends done or dormant; nothing stays leased after a clean stop.
    const auto not_final = test::pg_query(conninfo, "SELECT count(*) FROM retry_hashes WHERE state NOT IN (2, 3)");
    CHECK(not_final == "0");
    CHECK(test::pg_query(conninfo, "SELECT count(*) FROM retry_hashes WHERE state = 2") == std::to_string(keys.size()));
    CHECK(test::pg_query(conninfo, "SELECT state FROM retry_hashes WHERE info_hash = '\\x" + lost.hex() + "'") == "3");
    std::filesystem::remove_all(workdir);
}

}

#ifdef DHTC_CRAWL_EXAMPLE
TEST_CASE("fleet of three crawler processes (the C host over the C API) on one PostgreSQL") {
    const auto base = test::pg_base_or_skip();
    if (!base) return;
    const auto conninfo = test::pg_fresh_schema(*base, "retry_procs_" + std::to_string(::getpid()));
    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-retry-procs-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    std::filesystem::create_directories(workdir);

    constexpr int fleet = 3;
    std::vector<std::unique_ptr<test::subprocess>> procs;
    std::vector<std::string> endpoints;
    for (int i = 0; i < fleet; ++i) {
        const auto port = test::unused_loopback_port(SOCK_DGRAM); // the process binds it next
        nlohmann::json o = {{"port", port},
                            {"bind_v4", "127.0.0.1"},
                            {"allow_private_addresses", true},
                            {"crawl", {{"bootstrap", {{"sources", nlohmann::json::array()}}}}},
                            {"metadata", {{"timeout_secs", 2}}},
                            {"retry",
                             {{"store", {{"kind", "postgresql"}, {"conninfo", conninfo}}},
                              {"owner_id", "proc-" + std::to_string(i)},
                              {"lease_secs", 30}}}};
        procs.push_back(std::make_unique<test::subprocess>(std::vector<std::string>{
            DHTC_CRAWL_EXAMPLE, "--lib", DHTC_LIBRARY, "--options", o.dump(), "--seconds", "120"}));
        endpoints.push_back("127.0.0.1:" + std::to_string(port));
    }
    std::this_thread::sleep_for(1s); // bound and connected (a failed create exits at once)
    for (auto& p : procs) REQUIRE(p->running());
    test::subprocess swarm(swarm_args(endpoints, "127.0.80", workdir / "swarm", 2, 120));
    const auto keys = start_swarm(swarm);
    REQUIRE(keys.size() == 4);

    std::map<std::string, int> times;
    std::size_t lines = 0;
    const auto collect = [&] {
        for (auto& p : procs)
            while (const auto line = p->read_line(20ms)) { // below 1 ms read_line does not look
                const auto t = nlohmann::json::parse(*line, nullptr, false);
                if (t.is_discarded() || !t.contains("info_hash")) continue;
                ++times[t.at("info_hash").get<std::string>()];
                ++lines;
            }
        while (swarm.read_line(0ms)) {
        }
    };
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (lines < keys.size() && std::chrono::steady_clock::now() < deadline) {
        collect();
        std::this_thread::sleep_for(200ms);
    }
    const auto settle = std::chrono::steady_clock::now() + 12s; // more announce rounds to all three
    while (std::chrono::steady_clock::now() < settle) {
        collect();
        std::this_thread::sleep_for(200ms);
    }
    swarm.stop();
    for (auto& p : procs) {
        ::kill(p->pid(), SIGTERM); // the host shuts down cleanly on SIGTERM
        CHECK(p->stop(10s) == 0);
    }
    collect();
    CHECK(lines == keys.size());
    for (const auto& k : keys) {
        CAPTURE(k);
        CHECK(times[k] == 1); // exactly once across the three processes
    }
    CHECK(test::pg_query(conninfo, "SELECT count(*) FROM retry_hashes WHERE state NOT IN (2, 3)") == "0");
    CHECK(test::pg_query(conninfo, "SELECT count(*) FROM retry_hashes WHERE state = 2") == std::to_string(keys.size()));
    std::filesystem::remove_all(workdir);
}
#endif
