// Routing state across restarts (issue 18): a crawler that crawled a small DHT is stopped,
// then started again on another port with no bootstrap source at all. It must rejoin from
// the nodes it saved: in the retry store (SQLite) or, without one, in crawl.state_file. A
// state file that is not ours is ignored with one error line, never fatal. The DHT is the
// flood tests' friendly node, which answers for the 127.200/16 nodes it names.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/crawler.hpp"
#include "support/eventually.hpp"
#include "support/flood.hpp"
#include "support/loopback_crawler.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::uint64_t load(const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); }

struct errors_seen {
    std::mutex m;
    std::vector<std::string> lines;
};

api::crawler_options base_options() {
    auto o = test::loopback_crawler(std::nullopt);
    o.dht.crawl.bep51.enabled = false;
    return o;
}

std::unique_ptr<api::crawler> start(const api::crawler_options& o, errors_seen& errors) {
    api::event_handlers h;
    h.error = [&errors](const std::string& line) {
        std::lock_guard l(errors.m);
        errors.lines.push_back(line);
    };
    std::string error;
    auto c = api::crawler::create(o, h, error);
    REQUIRE_MESSAGE(c, error);
    c->start();
    return c;
}

// Crawls the friend's DHT until the ring holds `ring` nodes, then stops (saving the state).
void first_run(api::crawler_options o, const test::friend_node& dht, std::size_t ring) {
    o.dht.crawl.bootstrap.sources = {dht.local().to_string()};
    errors_seen errors;
    auto c = start(o, errors);
    const auto& stats = c->dht().service().crawl_stats();
    REQUIRE(test::eventually([&] { return load(stats.responsive_size) >= ring; }, 30s));
    c->close(std::nullopt);
}

// Starts again on another port with no bootstrap source; returns the nodes that answered
// within `limit` (stops as soon as 15 did).
std::uint64_t second_run(api::crawler_options o, errors_seen& errors, std::chrono::seconds limit = 20s) {
    o.dht.crawl.bootstrap.sources.clear();
    auto c = start(o, errors);
    const auto& stats = c->dht().service().crawl_stats();
    test::eventually([&] { return load(stats.responsive_size) >= 15; }, limit);
    const auto answered = load(stats.responsive_size);
    CHECK(load(stats.queries_bootstrap) == 0);
    c->close(std::nullopt);
    return answered;
}

std::filesystem::path temp_file(const std::string& name) {
    const auto p = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::filesystem::remove(p);
    std::filesystem::remove(p.string() + "-wal");
    std::filesystem::remove(p.string() + "-shm");
    return p;
}

} // namespace

TEST_CASE("restart with no bootstrap source: the saved nodes answer") {
    test::friend_node dht(*ip_address::parse("127.0.0.3"), 5);
    dht.start(endpoint{*ip_address::parse("127.0.0.1"), 1}); // it never pings: no crawler endpoint needed

    SUBCASE("in the retry store (SQLite)") {
        const auto db = temp_file("dhtc-restart.sqlite");
        auto o = base_options();
        o.retry.kind = retry::store_kind::sqlite;
        o.retry.path = db.string();
        first_run(o, dht, 200);
        errors_seen errors;
        const auto answered = second_run(o, errors); // a new owner id: any owner's rows serve
        MESSAGE("restarted from the retry store: " << answered << " saved nodes answered");
        CHECK(answered >= 15);
        CHECK(errors.lines.empty());
        std::filesystem::remove(db);
    }
    SUBCASE("in crawl.state_file") {
        const auto file = temp_file("dhtc-restart.state");
        auto o = base_options();
        o.dht.crawl.state_file = file.string();
        first_run(o, dht, 200);
        REQUIRE(std::filesystem::exists(file));
        errors_seen errors;
        const auto answered = second_run(o, errors);
        MESSAGE("restarted from the state file: " << answered << " saved nodes answered");
        CHECK(answered >= 15);
        CHECK(errors.lines.empty());
        std::filesystem::remove(file);
    }
    SUBCASE("a state file that is not ours is ignored with one line") {
        const auto file = temp_file("dhtc-restart.foreign");
        std::ofstream(file) << "{\"nodes\": \"not ours\"}";
        auto o = base_options();
        o.dht.crawl.state_file = file.string();
        errors_seen errors;
        const auto answered = second_run(o, errors, 2s);
        CHECK(answered == 0);
        std::lock_guard l(errors.m);
        REQUIRE(errors.lines.size() == 1);
        CHECK(errors.lines[0].find("not a dhtcrawler routing state") != std::string::npos);
        std::filesystem::remove(file);
    }
    dht.stop();
}
