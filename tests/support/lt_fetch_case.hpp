// One interop case against real libtorrent: a swarm of seeders (tests/lt/lt_swarm.py) with
// a given policy announces through a fresh crawler on loopback; the crawler's deliveries
// and completions are collected until every announced torrent arrived (or time ran out),
// and each torrent must have been delivered exactly once. Header-only: it uses doctest.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/crawler.hpp"
#include "support/lt_swarm_reader.hpp"
#include "support/loopback_crawler.hpp"
#include "support/subprocess.hpp"

namespace dhtc::test {

struct lt_case {
    std::string swarm_script;  ///< DHTC_LT_SWARM
    std::string name;          ///< for the work directory
    std::string base_ip;       ///< the seeders' 127.a.b, distinct per case (unused with ipv6)
    bool ipv6 = false;         ///< seeders and crawler on ::1: announces, peers and fetches over IPv6
    metadata::encryption_policy encryption = metadata::encryption_policy::prefer_plaintext;
    metadata::transport_policy transports = metadata::transport_policy::tcp;
    std::vector<std::string> swarm_args; ///< e.g. --encryption forced_rc4, --set name=value
};

struct lt_case_result {
    std::size_t expected = 0;
    std::map<std::string, int> times_delivered; // by info hash
    std::vector<api::completion> completions;
    std::vector<api::delivery> deliveries;
};

inline lt_case_result run_lt_case(const lt_case& c) {
    using namespace std::chrono_literals;
    std::mutex m;
    lt_case_result out;
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        out.deliveries.push_back(d);
        ++out.times_delivered[d.info.info_hash.hex()];
        return true;
    });
    cb.completion = [&](const api::completion& done) {
        std::lock_guard l(m);
        out.completions.push_back(done);
    };

    auto o = loopback_crawler();
    if (c.ipv6) {
        o.dht.mode = engine::netmode::ipv6;
        o.dht.bind_v6 = "::1";
        // Every seeder shares ::1, where the real network has a host each: the budget per
        // destination IP would otherwise hold the seeders' answers to one host's share.
        o.dht.crawl.rate_limit.max_packets_per_destination_per_sec = 1e6;
        o.dht.crawl.rate_limit.destination_burst = 1e6;
    }
    o.metadata.encryption = c.encryption;
    o.metadata.transports = c.transports;
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    const auto workdir =
        std::filesystem::temp_directory_path() / ("dhtc-lt-" + c.name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    std::vector<std::string> argv{"/usr/bin/python3", c.swarm_script, "--bootstrap",
                                  crawler->dht().local_endpoints().at(0).to_string(), "--sessions", "2",
                                  "--torrents-per-session", "2", "--kinds", "v1,multi", "--piece-count-range", "1:4",
                                  "--duration", "120", "--announce-interval", "10", "--workdir", workdir.string()};
    if (c.ipv6)
        argv.emplace_back("--ipv6");
    else
        argv.insert(argv.end(), {"--base-ip", c.base_ip});
    argv.insert(argv.end(), c.swarm_args.begin(), c.swarm_args.end());
    subprocess swarm(argv);

    std::set<std::string> keys;
    REQUIRE(read_swarm_setup(swarm, 90s, [&](const nlohmann::json& ev) {
        keys.insert(ev.at("announce_hashes").at(0).get<std::string>());
    }));
    out.expected = keys.size();
    REQUIRE(out.expected == 4);
    wait_for_crawler(swarm, 90s, [&] {
        std::lock_guard l(m);
        return out.deliveries.size() >= out.expected;
    });
    swarm.stop();
    crawler->close(std::nullopt);
    std::filesystem::remove_all(workdir);

    std::lock_guard l(m);
    for (const auto& k : keys)
        CHECK_MESSAGE(out.times_delivered[k] == 1, k << " delivered " << out.times_delivered[k] << " times");
    return out;
}

} // namespace dhtc::test
