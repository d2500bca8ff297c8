// The C ABI as a host sees it: statuses and messages, the lifecycle many times over with
// fetches in flight, callbacks and their rules, polling, and snapshots under concurrency.
// Everything goes through dhtcrawler.h; fake peers and a UDP socket stand in for the DHT.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sqlite3.h>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dhtcrawler.h"
#include "bencode/decoder.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "capi/host.hpp"
#include "support/fake_peer.hpp"

using namespace std::chrono_literals;

using namespace dhtc::capi_test;

TEST_SUITE("capi") {

TEST_CASE("version and ABI agree with the header") {
    CHECK(dhtc_abi_version() == DHTC_ABI_VERSION);
    CHECK(std::string(dhtc_version()) == DHTC_VERSION_STRING);
    CHECK(std::to_string(DHTC_VERSION_MAJOR) + "." + std::to_string(DHTC_VERSION_MINOR) + "." +
              std::to_string(DHTC_VERSION_PATCH) ==
          DHTC_VERSION_STRING);
    CHECK(std::string(dhtc_status_name(DHTC_ERR_BIND)) == "DHTC_ERR_BIND");
    CHECK(std::string(dhtc_status_name(DHTC_ERR_STORE)) == "DHTC_ERR_STORE");
    CHECK(std::string(dhtc_status_name(1)) == "DHTC_ERR_UNKNOWN");
}

TEST_CASE("bad JSON and bad options return the right status and a message naming the key") {
    dhtc_crawler* c = reinterpret_cast<dhtc_crawler*>(1);
    CHECK(dhtc_crawler_create("{not json", &c) == DHTC_ERR_INVALID_JSON);
    CHECK(c == nullptr);
    CHECK(std::string(dhtc_last_error()).size() > 0);
    CHECK(dhtc_crawler_create(R"({"metadata":{"timout_secs":4}})", &c) == DHTC_ERR_INVALID_OPTION);
    CHECK(std::string(dhtc_last_error()).find("metadata.timout_secs") != std::string::npos);
    CHECK(dhtc_crawler_create(R"({"crawl":{"rate_limit":{"burst":"many"}}})", &c) == DHTC_ERR_INVALID_OPTION);
    CHECK(std::string(dhtc_last_error()).find("crawl.rate_limit.burst") != std::string::npos);
    CHECK(dhtc_crawler_create(R"({"netmode":"ipv5"})", &c) == DHTC_ERR_INVALID_OPTION);
    CHECK(dhtc_crawler_create(loopback_options, nullptr) == DHTC_ERR_INVALID_ARGUMENT);
    CHECK(dhtc_crawler_destroy(nullptr) == DHTC_OK);
    CHECK(dhtc_crawler_start(nullptr) == DHTC_ERR_INVALID_ARGUMENT);
    // A port in use is a bind error, reported at create.
    dhtc_crawler* first = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &first) == DHTC_OK);
    const std::string taken = R"({"port":)" + std::to_string(udp_port_of(first)) + R"(,"bind_v4":"127.0.0.1","crawl":{"bootstrap":{"sources":[]}}})";
    CHECK(dhtc_crawler_create(taken.c_str(), &c) == DHTC_ERR_BIND);
    CHECK(std::string(dhtc_last_error()).find("bind") != std::string::npos);
    CHECK(dhtc_crawler_destroy(first) == DHTC_OK);
}

TEST_CASE("retry store: a bad connection string, an unreachable server or an unusable file fail create clearly") {
    CHECK(std::string(dhtc_status_name(DHTC_ERR_STORE)) == "DHTC_ERR_STORE");
    dhtc_crawler* c = nullptr;
    const auto with_retry = [](const std::string& retry) {
        return R"({"port":0,"bind_v4":"127.0.0.1","allow_private_addresses":true,"crawl":{"bootstrap":{"sources":[]}},"retry":)" +
               retry + "}";
    };
    // Syntax: refused by the options parser, naming the key.
    CHECK(dhtc_crawler_create(with_retry(R"({"store":{"kind":"postgresql","conninfo":"host=127.0.0.1 no_such_key=1"}})").c_str(),
                              &c) == DHTC_ERR_INVALID_OPTION);
    CHECK(std::string(dhtc_last_error()).rfind("retry.store.conninfo: invalid PostgreSQL connection string", 0) == 0);
    CHECK(c == nullptr);
    // Nobody listens on port 1: refused at create, the message names the server, not the password.
    CHECK(dhtc_crawler_create(
              with_retry(R"({"store":{"kind":"postgresql","conninfo":"postgresql://u:hunter2@127.0.0.1:1/fleet"}})").c_str(),
              &c) == DHTC_ERR_STORE);
    const std::string why = dhtc_last_error();
    CHECK(why.find("cannot connect to PostgreSQL at 127.0.0.1:1 database fleet") != std::string::npos);
    CHECK(why.find("hunter2") == std::string::npos);
    CHECK(c == nullptr);
    CHECK(dhtc_crawler_create(with_retry(R"({"store":{"kind":"sqlite","path":"/nonexistent-dir/retry.sqlite"}})").c_str(),
                              &c) == DHTC_ERR_STORE);
    CHECK(std::string(dhtc_last_error()).find("/nonexistent-dir/retry.sqlite") != std::string::npos);
    // An in-memory SQLite store works (same code, not durable).
    REQUIRE(dhtc_crawler_create(with_retry(R"({"store":{"kind":"sqlite","path":""}})").c_str(), &c) == DHTC_OK);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    char* snap = nullptr;
    REQUIRE(dhtc_crawler_stats(c, &snap) == DHTC_OK);
    CHECK(std::string(snap).find(R"("retry_store":"sqlite")") != std::string::npos);
    dhtc_string_free(snap);
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
}

namespace {

// The version schema_migrations records for a component of a SQLite file, or -1.
long long recorded_version(const std::string& path, const char* component) {
    sqlite3* db = nullptr;
    long long version = -1;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT version FROM schema_migrations WHERE component = ?", -1, &s, nullptr) ==
            SQLITE_OK) {
            sqlite3_bind_text(s, 1, component, -1, SQLITE_STATIC);
            if (sqlite3_step(s) == SQLITE_ROW) version = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return version;
}

void execute(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
}

} // namespace

TEST_CASE("dhtc_store_migrate creates and migrates the retry tables without a crawler") {
    char dir[] = "/tmp/dhtc-migrate-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string path = std::string(dir) + "/store.sqlite";
    const std::string options = R"({"retry":{"store":{"kind":"sqlite","path":")" + path + R"("}}})";
    // Another component's row beside it is left alone.
    execute(path, "CREATE TABLE schema_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
                  "INSERT INTO schema_migrations VALUES ('torrents', 7);");
    REQUIRE(dhtc_store_migrate(options.c_str()) == DHTC_OK);
    CHECK(std::string(dhtc_last_error()).empty());
    const long long retry_version = recorded_version(path, "retry");
    CHECK(retry_version >= 3);
    CHECK(recorded_version(path, "torrents") == 7);
    CHECK(dhtc_store_migrate(options.c_str()) == DHTC_OK); // again: nothing to do
    CHECK(recorded_version(path, "retry") == retry_version);
    // A crawler opens the migrated store as it is.
    dhtc_crawler* c = nullptr;
    const std::string crawl = R"({"port":0,"bind_v4":"127.0.0.1","crawl":{"bootstrap":{"sources":[]}},)"
                              R"("retry":{"store":{"kind":"sqlite","path":")" + path + R"("}}})";
    REQUIRE(dhtc_crawler_create(crawl.c_str(), &c) == DHTC_OK);
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    // A newer schema than this library knows is refused, naming the file.
    execute(path, "UPDATE schema_migrations SET version = 99 WHERE component = 'retry'");
    CHECK(dhtc_store_migrate(options.c_str()) == DHTC_ERR_STORE);
    CHECK(std::string(dhtc_last_error()).find(path) != std::string::npos);
    // Bad documents, no store, an unusable file, an unreachable server.
    CHECK(dhtc_store_migrate("{not json") == DHTC_ERR_INVALID_JSON);
    CHECK(dhtc_store_migrate(R"({"retry":{"store":{"kind":"sqlit"}}})") == DHTC_ERR_INVALID_OPTION);
    CHECK(dhtc_store_migrate(nullptr) == DHTC_ERR_INVALID_OPTION);
    CHECK(std::string(dhtc_last_error()).find("retry.store.kind") != std::string::npos);
    CHECK(dhtc_store_migrate(R"({"retry":{"store":{"kind":"sqlite","path":"/nonexistent-dir/x.sqlite"}}})") ==
          DHTC_ERR_STORE);
    CHECK(dhtc_store_migrate(R"({"retry":{"store":{"kind":"postgresql","conninfo":"postgresql://u:hunter2@127.0.0.1:1/f"}}})") ==
          DHTC_ERR_STORE);
    CHECK(std::string(dhtc_last_error()).find("hunter2") == std::string::npos);
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
    rmdir(dir);
}

TEST_CASE("the defaults document parses and is accepted back") {
    char* s = nullptr;
    REQUIRE(dhtc_default_options(&s) == DHTC_OK);
    const std::string defaults = take(s);
    const auto j = nlohmann::json::parse(defaults);
    CHECK(j.at("port") == 6881);
    CHECK(j.at("metadata").at("timeout_secs") == 4);
    auto mine = j;
    mine["port"] = 0;
    mine["bind_v4"] = "127.0.0.1";
    mine["crawl"]["bootstrap"]["sources"] = nlohmann::json::array();
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(mine.dump().c_str(), &c) == DHTC_OK);
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
}

TEST_CASE("create, start, shutdown, destroy 200 times with fetches in flight; no thread left behind") {
    dhtc::test::peer_script silent;
    silent.mode = dhtc::test::peer_mode::silent;
    dhtc::test::fake_peer peer(fixture("v1_single"), silent);
    announcer client;
    const std::size_t threads_before = thread_count();
    std::atomic<int> completions{0};
    for (int i = 0; i < 200; ++i) {
        dhtc_crawler* c = nullptr;
        REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
        dhtc_crawler_set_completion_callback(
            c, [](const char*, void* u) { static_cast<std::atomic<int>*>(u)->fetch_add(1); }, &completions);
        REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
        client.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port);
        if (i % 20 == 0) std::this_thread::sleep_for(50ms); // some rounds surely connected
        CHECK(dhtc_crawler_shutdown(c) == DHTC_OK);
        CHECK(dhtc_crawler_shutdown(c) == DHTC_OK); // idempotent
        CHECK(dhtc_crawler_start(c) == DHTC_ERR_STATE);
        CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    }
    CHECK(thread_count() <= threads_before);
    // Rounds that got through the gate before each shutdown completed (as cancelled).
    CHECK(completions.load() > 0);
}

TEST_CASE("run() on one thread and shutdown() racing its start on another: every run returns, no thread left") {
    // Bindings run the crawler on a thread of their own and cancel from another (Go's
    // context, Python's Ctrl-C), so the shutdown may land while run() is starting the engine.
    const std::size_t threads_before = thread_count();
    for (int i = 0; i < 100; ++i) {
        dhtc_crawler* c = nullptr;
        REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
        std::atomic<int> run_status{1};
        std::thread runner([&] { run_status = dhtc_crawler_run(c); });
        if (i % 4 == 1) std::this_thread::yield();
        if (i % 4 == 2) std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 10)));
        CHECK(dhtc_crawler_shutdown(c) == DHTC_OK);
        runner.join();
        // run() either started and was ended, or found the crawler already shut down.
        CHECK((run_status == DHTC_OK || run_status == DHTC_ERR_STATE));
        CHECK(dhtc_crawler_shutdown(c) == DHTC_OK);
        CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    }
    CHECK(thread_count() <= threads_before);
}

TEST_CASE("shutdown from inside a callback ends run(); destroy there is refused") {
    dhtc::test::fake_peer peer(fixture("v1_single"));
    struct ctx {
        dhtc_crawler* c;
        int destroy_status = 0;
        int torrents = 0;
    } x{};
    REQUIRE(dhtc_crawler_create(loopback_options, &x.c) == DHTC_OK);
    dhtc_crawler_set_torrent_callback(
        x.c,
        [](const char* json, const unsigned char* info, size_t len, void* u) {
            auto* s = static_cast<ctx*>(u);
            ++s->torrents;
            CHECK(nlohmann::json::parse(json).at("peer").is_string());
            CHECK(len > 0);
            CHECK(info != nullptr);
            s->destroy_status = dhtc_crawler_destroy(s->c);
            CHECK(dhtc_crawler_shutdown(s->c) == DHTC_OK);
        },
        &x);
    const auto port = udp_port_of(x.c);
    std::thread feeder([&] {
        std::this_thread::sleep_for(100ms);
        announcer a;
        a.announce(port, peer.info_hash(), peer.local_endpoint().port);
    });
    const auto t0 = std::chrono::steady_clock::now();
    std::thread guard([&] { // the test must end even if run() never returns
        while (std::chrono::steady_clock::now() - t0 < 20s && dhtc_crawler_wait(x.c, 100) == DHTC_ERR_TIMEOUT) {
        }
        dhtc_crawler_shutdown(x.c);
    });
    CHECK(dhtc_crawler_run(x.c) == DHTC_OK);
    feeder.join();
    guard.join();
    CHECK(x.torrents == 1);
    CHECK(x.destroy_status == DHTC_ERR_STATE);
    CHECK(dhtc_crawler_destroy(x.c) == DHTC_OK);
}

// Every event of one callback type, as parsed JSON; the wait is bounded.
struct event_log {
    std::mutex m;
    std::vector<nlohmann::json> events;
    static void keep(const char* json, void* u) {
        auto* log = static_cast<event_log*>(u);
        std::lock_guard l(log->m);
        log->events.push_back(nlohmann::json::parse(json));
    }
    template <class Pred>
    std::optional<nlohmann::json> wait_for(Pred match, std::chrono::seconds limit = 20s) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            {
                std::lock_guard l(m);
                for (const auto& e : events)
                    if (match(e)) return e;
            }
            std::this_thread::sleep_for(20ms);
        }
        return std::nullopt;
    }
};

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST_CASE("an announce reaches the observation callback with the announcing node, its port and the time") {
    event_log log;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
    REQUIRE(dhtc_crawler_set_observation_callback(c, &event_log::keep, &log) == DHTC_OK);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    const auto before = unix_now();
    announcer a;
    sockaddr_in local{};
    socklen_t len = sizeof local;
    REQUIRE(getsockname(a.fd, reinterpret_cast<sockaddr*>(&local), &len) == 0);
    dhtc::id20 hash;
    hash.bytes.fill(0x5c);
    a.announce(udp_port_of(c), hash, 51413);
    const auto seen = log.wait_for([](const nlohmann::json& e) { return e.at("kind") == "announce"; });
    const auto after = unix_now();
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    REQUIRE(seen);
    const auto& e = *seen;
    CHECK(e.at("type") == "observation");
    CHECK(e.at("info_hash") == hash.hex());
    CHECK(e.at("source") == "127.0.0.1:" + std::to_string(ntohs(local.sin_port)));
    CHECK(e.at("port") == 51413);
    CHECK(e.at("at").get<std::int64_t>() >= before);
    CHECK(e.at("at").get<std::int64_t>() <= after);
    // The lookup before it is an observation too, without a port.
    const auto lookup = log.wait_for([](const nlohmann::json& o) { return o.at("kind") == "get_peers"; }, 1s);
    REQUIRE(lookup);
    CHECK(lookup->at("port").is_null());
}

TEST_CASE("a scrape the crawler has no node for ends after crawl.scrape.timeout_secs with zero responders") {
    auto options = nlohmann::json::parse(loopback_options);
    options["crawl"]["scrape"]["timeout_secs"] = 1;
    event_log log;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(options.dump().c_str(), &c) == DHTC_OK);
    REQUIRE(dhtc_crawler_set_scrape_callback(c, &event_log::keep, &log) == DHTC_OK);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    unsigned char hash[20];
    std::memset(hash, 0x7a, sizeof hash);
    REQUIRE(dhtc_crawler_request_scrape(c, hash) == DHTC_OK); // no bootstrap source: no node, ever
    const auto ended = log.wait_for([](const nlohmann::json&) { return true; });
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    REQUIRE(ended);
    CHECK(ended->at("info_hash") == "7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a");
    CHECK(ended->at("timed_out") == true);
    CHECK(ended->at("responders") == 0);
    CHECK(ended->at("queried") == 0);
    CHECK(ended->at("seeders") == 0);
    CHECK(ended->at("leechers") == 0);
}

// A torrent callback running at shutdown is waited for, by destroy as before, and now by the
// pipeline too: its answer settles the round. destroy_timeout still gives up on it in time.
TEST_CASE("a torrent callback running at shutdown settles its round; destroy_timeout gives up on it meanwhile") {
    dhtc::test::fake_peer peer(fixture("v1_single"));
    struct host {
        std::atomic<bool> entered{false}, release{false};
        event_log completions;
    } h;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
    dhtc_crawler_set_torrent_ack_callback(
        c,
        [](const char*, const unsigned char*, size_t, void* u) {
            auto* x = static_cast<host*>(u);
            x->entered = true;
            for (int i = 0; i < 1000 && !x->release; ++i) std::this_thread::sleep_for(10ms); // bounded
            return int{DHTC_ANSWER_ACCEPT};
        },
        &h);
    dhtc_crawler_set_completion_callback(c, &event_log::keep, &h.completions);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    announcer a;
    a.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port);
    for (int i = 0; i < 1000 && !h.entered; ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(h.entered);
    CHECK(dhtc_crawler_shutdown(c) == DHTC_OK);
    CHECK(dhtc_crawler_destroy_timeout(c, 200) == DHTC_ERR_TIMEOUT); // the callback still runs
    h.release = true;
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    std::lock_guard l(h.completions.m);
    REQUIRE(h.completions.events.size() == 1);
    CHECK(h.completions.events[0].at("outcome") == "accepted");
}

// A host whose first store fails: the first torrent is answered RETRY, every later one
// ACCEPT. It records outcomes, retry states and error messages.
struct retrying_host {
    std::mutex m;
    std::vector<std::string> outcomes, states, errors;
    int torrents = 0;

    template <class Member>
    static void keep(const char* json, void* u, Member list, const char* field) {
        auto* h = static_cast<retrying_host*>(u);
        std::lock_guard l(h->m);
        (h->*list).push_back(nlohmann::json::parse(json).at(field));
    }
    void attach(dhtc_crawler* c) {
        dhtc_crawler_set_torrent_ack_callback(
            c,
            [](const char*, const unsigned char*, size_t, void* u) {
                auto* h = static_cast<retrying_host*>(u);
                std::lock_guard l(h->m);
                return ++h->torrents == 1 ? int{DHTC_ANSWER_RETRY} : int{DHTC_ANSWER_ACCEPT};
            },
            this);
        dhtc_crawler_set_completion_callback(
            c, [](const char* j, void* u) { keep(j, u, &retrying_host::outcomes, "outcome"); }, this);
        dhtc_crawler_set_retry_callback(c, [](const char* j, void* u) { keep(j, u, &retrying_host::states, "state"); },
                                        this);
        dhtc_crawler_set_error_callback(c, [](const char* j, void* u) { keep(j, u, &retrying_host::errors, "message"); },
                                        this);
    }
    // Waits (bounded) until `done` holds.
    template <class Pred>
    void wait_for(Pred done) {
        for (int i = 0; i < 400; ++i) {
            {
                std::lock_guard l(m);
                if (done()) return;
            }
            std::this_thread::sleep_for(25ms);
        }
    }
};

// Regression: a sink that failed made the round a rejection, and the hash was remembered
// as delivered, so the torrent was lost for good.
TEST_CASE("a torrent answered RETRY (a sink failed) completes sink_failed and is fetched again at its next announce") {
    dhtc::test::fake_peer peer(fixture("v1_single"));
    retrying_host x;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
    x.attach(c);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    announcer a;
    for (std::size_t round = 1; round <= 2; ++round) {
        a.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port);
        x.wait_for([&] { return x.outcomes.size() >= round; });
    }
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    CHECK(x.torrents == 2);
    CHECK(x.outcomes == std::vector<std::string>{"sink_failed", "accepted"});
    REQUIRE(x.errors.size() == 1);
    CHECK(x.errors[0].find("fetched again") != std::string::npos);
}

TEST_CASE("with a SQLite retry store, a torrent answered RETRY comes back on the store's schedule and is taken") {
    dhtc::test::fake_peer peer(fixture("v1_single"));
    const std::string path = "/tmp/dhtc-capi-sink-" + std::to_string(getpid()) + ".sqlite";
    auto options = nlohmann::json::parse(loopback_options);
    // One second after the failure, no jitter: the retry comes while the test waits.
    options["retry"] = {{"store", {{"kind", "sqlite"}, {"path", path}}},
                        {"policy", {{"ladder_secs", {1}}, {"jitter_percent", 0}, {"class_percent", {{"sink_failed", 100}}}}}};
    retrying_host x;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(options.dump().c_str(), &c) == DHTC_OK);
    x.attach(c);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    announcer a;
    a.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port); // once: the retry needs no announce
    x.wait_for([&] { return x.states.size() >= 2; });
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    CHECK(x.torrents == 2);
    CHECK(x.outcomes == std::vector<std::string>{"sink_failed", "accepted"});
    CHECK(x.states == std::vector<std::string>{"dormant", "done"});
    for (const auto& suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

// Regression: retry events came through the completion callback, and every binding read
// them as completions without an outcome.
TEST_CASE("with a SQLite retry store, retry events reach the retry callback and never the completion callback") {
    dhtc::test::peer_script refuse;
    refuse.mode = dhtc::test::peer_mode::refuse;
    dhtc::test::fake_peer peer(fixture("v1_single"), refuse);
    const std::string path = "/tmp/dhtc-capi-retry-" + std::to_string(getpid()) + ".sqlite";
    auto options = nlohmann::json::parse(loopback_options);
    options["retry"] = {{"store", {{"kind", "sqlite"}, {"path", path}}}};
    struct ctx {
        std::mutex m;
        std::vector<nlohmann::json> completions, retries;
    } x;
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(options.dump().c_str(), &c) == DHTC_OK);
    const auto keep = [](std::vector<nlohmann::json> ctx::*list) {
        return [list](const char* json, void* u) {
            auto* s = static_cast<ctx*>(u);
            std::lock_guard l(s->m);
            (s->*list).push_back(nlohmann::json::parse(json));
        };
    };
    static auto keep_completion = keep(&ctx::completions);
    static auto keep_retry = keep(&ctx::retries);
    dhtc_crawler_set_completion_callback(c, [](const char* j, void* u) { keep_completion(j, u); }, &x);
    dhtc_crawler_set_retry_callback(c, [](const char* j, void* u) { keep_retry(j, u); }, &x);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    announcer a;
    a.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port);
    for (int i = 0; i < 400; ++i) {
        {
            std::lock_guard l(x.m);
            if (!x.retries.empty()) break;
        }
        std::this_thread::sleep_for(25ms);
    }
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
    REQUIRE(x.completions.size() == 1);
    CHECK(x.completions[0].at("type") == "completion");
    CHECK(x.completions[0].at("outcome") == "fetch_failed");
    REQUIRE(x.retries.size() == 1);
    CHECK(x.retries[0].at("type") == "retry");
    CHECK(x.retries[0].at("state") == "dormant");
    std::remove(path.c_str());
    std::remove((path + "-wal").c_str());
    std::remove((path + "-shm").c_str());
}

TEST_CASE("polling: gate and torrent events carry ids and are answered; completions follow") {
    dhtc::test::fake_peer peer(fixture("v1_multi"));
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
    REQUIRE(dhtc_crawler_enable_polling(c) == DHTC_OK);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    CHECK(dhtc_crawler_enable_polling(c) == DHTC_ERR_STATE);
    announcer a;
    a.announce(udp_port_of(c), peer.info_hash(), peer.local_endpoint().port);
    std::vector<std::string> types;
    std::string torrent_bytes;
    for (int i = 0; i < 50 && types.size() < 3; ++i) {
        char* json = nullptr;
        unsigned char* info = nullptr;
        size_t len = 0;
        const int rc = dhtc_crawler_poll_event(c, 200, &json, &info, &len);
        if (rc == DHTC_ERR_TIMEOUT) continue;
        REQUIRE(rc == DHTC_OK);
        const auto ev = nlohmann::json::parse(take(json));
        if (ev.at("type") == "observation") { // the announcer's get_peers and its announce
            CHECK((ev.at("kind") == "get_peers" || ev.at("kind") == "announce"));
            continue;
        }
        types.push_back(ev.at("type"));
        CHECK(ev.at("schema") == 1);
        if (ev.at("type") == "gate" || ev.at("type") == "torrent") {
            CHECK(dhtc_crawler_answer(c, ev.at("id"), 1) == DHTC_OK);
            CHECK(dhtc_crawler_answer(c, ev.at("id"), 1) == DHTC_ERR_NOT_FOUND);
        }
        if (ev.at("type") == "torrent") {
            torrent_bytes.assign(reinterpret_cast<const char*>(info), len);
            CHECK(ev.at("torrent").at("info_hash") == peer.info_hash().hex());
        }
        if (ev.at("type") == "completion") CHECK(ev.at("outcome") == "accepted");
        dhtc_string_free(reinterpret_cast<char*>(info));
    }
    CHECK(types == std::vector<std::string>{"gate", "torrent", "completion"});
    CHECK(torrent_bytes == peer.info_dict());
    CHECK(dhtc_crawler_shutdown(c) == DHTC_OK);
    // What is left (observations) comes out, then the end.
    int rc = DHTC_OK;
    for (int i = 0; i < 100 && rc == DHTC_OK; ++i) {
        char* json = nullptr;
        rc = dhtc_crawler_poll_event(c, 100, &json, nullptr, nullptr);
        dhtc_string_free(json);
    }
    CHECK(rc == DHTC_ERR_STATE);
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
}

TEST_CASE("snapshots and metrics read from several threads while traffic flows") {
    dhtc_crawler* c = nullptr;
    REQUIRE(dhtc_crawler_create(loopback_options, &c) == DHTC_OK);
    REQUIRE(dhtc_crawler_start(c) == DHTC_OK);
    const auto port = udp_port_of(c);
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t)
        readers.emplace_back([&] {
            while (!stop) {
                char* s = nullptr;
                CHECK(dhtc_crawler_stats(c, &s) == DHTC_OK);
                dhtc_string_free(s);
                CHECK(dhtc_crawler_observability(c, &s) == DHTC_OK);
                dhtc_string_free(s);
                CHECK(dhtc_crawler_metrics(c, &s) == DHTC_OK);
                dhtc_string_free(s);
            }
        });
    announcer a;
    for (int i = 0; i < 200; ++i) {
        dhtc::id20 h;
        h.bytes.fill(static_cast<std::uint8_t>(i));
        dhtc::id20 me;
        me.bytes.fill(0x42);
        std::string q;
        dhtc::krpc::encode_get_peers(q, {"gp", me, {}}, h);
        a.ask(port, q);
    }
    stop = true;
    for (auto& r : readers) r.join();
    char* s = nullptr;
    REQUIRE(dhtc_crawler_observability(c, &s) == DHTC_OK);
    const auto obs = nlohmann::json::parse(take(s));
    CHECK(obs.at("schema") == 1);
    CHECK(dhtc_crawler_destroy(c) == DHTC_OK);
}

} // TEST_SUITE
