// MSE/PE interop with real libtorrent: seeders that force PE with RC4 only, and seeders that
// force PE but allow a plaintext payload, announce through our crawler. Every torrent must be
// delivered exactly once, verified (the pipeline checks the hash), and the completion must
// name the stream that served it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "api/crawler.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

struct case_result {
    std::size_t expected = 0;
    std::map<std::string, int> times_delivered; // by info hash
    std::vector<api::completion> completions;
    std::vector<api::delivery> deliveries;
};

// Runs one swarm of `sessions` libtorrent seeders with `--encryption swarm_policy` against a
// crawler whose metadata.encryption is `policy`.
case_result run_case(metadata::encryption_policy policy, const std::string& swarm_policy, const std::string& base_ip) {
    std::mutex m;
    case_result out;
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        out.deliveries.push_back(d);
        ++out.times_delivered[d.info.info_hash.hex()];
        return true;
    });
    cb.completion = [&](const api::completion& c) {
        std::lock_guard l(m);
        out.completions.push_back(c);
    };

    api::crawler_options o;
    o.dht.port = 0;
    o.dht.bind_v4 = "127.0.0.1";
    o.dht.crawl.allow_private_addresses = true;
    o.dht.crawl.bootstrap.sources.clear(); // never the real DHT
    o.metadata.bind_v4 = ip_address::parse("127.0.0.1");
    o.metadata.encryption = policy;
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    const auto workdir = std::filesystem::temp_directory_path() /
                         ("dhtc-lt-enc-" + swarm_policy + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap",
                            crawler->dht().local_endpoints().at(0).to_string(), "--sessions", "2",
                            "--torrents-per-session", "2", "--kinds", "v1,multi", "--piece-count-range", "1:4",
                            "--duration", "120", "--announce-interval", "10", "--encryption", swarm_policy,
                            "--base-ip", base_ip, "--workdir", workdir.string()});

    std::set<std::string> keys;
    bool ready = false;
    const auto setup_deadline = std::chrono::steady_clock::now() + 90s;
    while (!ready && std::chrono::steady_clock::now() < setup_deadline) {
        const auto line = swarm.read_line(5s);
        if (!line) continue;
        const auto ev = nlohmann::json::parse(*line, nullptr, false);
        if (ev.is_discarded()) continue;
        const auto kind = ev.value("event", "");
        if (kind == "torrent") {
            keys.insert(ev.at("announce_hashes").at(0).get<std::string>());
        } else if (kind == "ready") {
            ready = true;
        } else if (kind == "error" || kind == "exit") {
            FAIL("swarm failed: " << *line);
        }
    }
    REQUIRE(ready);
    out.expected = keys.size();
    REQUIRE(out.expected == 4);

    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < deadline) {
        {
            std::lock_guard l(m);
            if (out.deliveries.size() >= out.expected) break;
        }
        while (swarm.read_line(0ms)) {
        }
        std::this_thread::sleep_for(500ms);
    }
    std::this_thread::sleep_for(2s); // a duplicate delivery would show up now
    swarm.stop();
    crawler->close(std::nullopt);
    std::filesystem::remove_all(workdir);

    std::lock_guard l(m);
    for (const auto& k : keys) CHECK_MESSAGE(out.times_delivered[k] == 1, k << " delivered " << out.times_delivered[k] << " times");
    return out;
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("libtorrent with PE forced, RC4 only: the default policy falls back to MSE and gets RC4") {
    const case_result r = run_case(metadata::encryption_policy::prefer_plaintext, "forced_rc4", "127.0.44");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::rc4);
    for (const auto& c : r.completions) {
        CHECK_MESSAGE(c.result == api::outcome::accepted, "round for " << c.info_hash.hex() << ": " << api::to_string(c.failure));
        if (c.result == api::outcome::accepted) CHECK(c.encryption == api::stream_encryption::rc4);
    }
}

TEST_CASE("libtorrent with PE forced, plaintext allowed: MSE with a plaintext select") {
    const case_result r = run_case(metadata::encryption_policy::prefer_encrypted, "forced_both", "127.0.46");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    // We offer RC4 and plaintext; libtorrent without prefer_rc4 selects plaintext.
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::plaintext);
    for (const auto& c : r.completions)
        CHECK_MESSAGE(c.result == api::outcome::accepted, "round for " << c.info_hash.hex() << ": " << api::to_string(c.failure));
}

TEST_CASE("libtorrent with PE forced, plaintext allowed, and require: RC4") {
    const case_result r = run_case(metadata::encryption_policy::require, "forced_both", "127.0.48");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::rc4);
}

} // TEST_SUITE
