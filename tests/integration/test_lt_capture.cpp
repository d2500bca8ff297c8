// Real libtorrent sessions, each on its own 127.0.N.1 address, use our engine as their only
// DHT bootstrap and announce their torrents: every announced key must be captured, with the
// seeder's endpoint, and nothing else (no bootstrap-lookup hashes).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/dht_engine.hpp"
#include "support/lt_swarm_reader.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

struct recording_sink final : crawl::crawl_sink {
    std::mutex m;
    std::vector<api::hash_event> hashes;
    std::vector<crawl::observation> observations;
    void on_hash(const api::hash_event& e) override {
        std::lock_guard l(m);
        hashes.push_back(e);
    }
    void on_observation(const crawl::observation& o) override {
        std::lock_guard l(m);
        observations.push_back(o);
    }
    double metadata_pressure() const override { return 0.0; }
};

std::filesystem::path temp_dir(const char* name) {
    auto p = std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("announces from real libtorrent seeders are captured with the seeder endpoint") {
    recording_sink sink;
    engine::dht_engine_options o;
    o.port = 0;
    o.bind_v4 = "127.0.0.1";
    o.crawl.allow_private_addresses = true; // loopback peers
    o.crawl.bootstrap.sources.clear();      // never the real DHT
    std::string error;
    auto engine = engine::dht_engine::create(o, sink, error);
    REQUIRE_MESSAGE(engine, error);
    engine->start();
    const auto ours = engine->local_endpoints().at(0);

    const auto workdir = temp_dir("dhtc-lt-capture");
    test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap", ours.to_string(), "--sessions", "3",
                            "--torrents-per-session", "2", "--kinds", "v1,v2,hybrid,multi,unicode", "--duration",
                            "120", "--announce-interval", "10", "--workdir", workdir.string()});

    // key (40 hex) -> the seeder's endpoint
    std::map<std::string, std::string> expected;
    REQUIRE(test::read_swarm_setup(swarm, 60s, [&](const nlohmann::json& ev) {
        const std::string seeder = ev.at("seeder");
        if (ev.at("info_hash_v1").is_string()) expected[ev.at("info_hash_v1")] = seeder;
        if (ev.at("info_hash_v2").is_string()) expected[ev.at("info_hash_v2").get<std::string>().substr(0, 40)] = seeder;
    }));
    REQUIRE(expected.size() >= 6);

    // Wait for every key to be captured from its seeder (libtorrent announces within
    // seconds and re-announces every 10 s here).
    std::set<std::string> captured;
    std::set<std::string> wrong;
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < deadline) {
        {
            std::lock_guard l(sink.m);
            for (const auto& h : sink.hashes) {
                const auto key = h.info_hash.hex();
                CHECK(h.kind == api::hash_source::announce);
                const auto it = expected.find(key);
                if (it == expected.end()) {
                    wrong.insert(key);
                } else if (h.peer.to_string() == it->second) {
                    captured.insert(key);
                } else {
                    wrong.insert(key + " from " + h.peer.to_string());
                }
            }
        }
        if (captured.size() == expected.size()) break;
        while (swarm.read_line(0ms)) {
        } // keep the pipe drained
        std::this_thread::sleep_for(500ms);
    }
    MESSAGE("captured " << captured.size() << " of " << expected.size() << " keys");
    swarm.stop();
    engine->stop();

    for (const auto& [key, seeder] : expected) CHECK_MESSAGE(captured.contains(key), "not captured: " << key << " from " << seeder);
    CHECK_MESSAGE(wrong.empty(), "unexpected captures: " << wrong.size() << " first: " << (wrong.empty() ? "" : *wrong.begin()));
    // libtorrent's own bootstrap lookups reached us but were filtered.
    CHECK(engine->service().responder_counters().get_peers.load() > 0);
    std::filesystem::remove_all(workdir);
}

} // TEST_SUITE
