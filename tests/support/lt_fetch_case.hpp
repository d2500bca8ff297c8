// One interop case against real libtorrent: a swarm of seeders (tests/lt/lt_swarm.py) with
// a given policy announces through a fresh crawler on loopback, with the crawler's default
// budgets; the crawler's deliveries and completions are collected until every announced
// torrent arrived (or time ran out). Each torrent must have been delivered exactly once, and
// no session's DoS blocker may have fired. Header-only: it uses doctest.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/crawler.hpp"
#include "api/snapshot.hpp"
#include "support/lt_swarm_reader.hpp"
#include "support/loopback_crawler.hpp"
#include "support/subprocess.hpp"

namespace dhtc::test {

struct lt_case {
    std::string swarm_script;  ///< DHTC_LT_SWARM
    std::string name;          ///< for the work directory
    std::string base_ip;       ///< the seeders' 127.a.b, distinct per case (unused with ipv6)
    bool ipv6 = false;         ///< seeders and crawler on ::1: announces, peers and fetches over IPv6
    bool one_ip = false;       ///< every seeder on base_ip's first address, a port each
    int sessions = 2;
    int torrents_per_session = 2;
    std::string kinds = "v1,multi";
    /// The crawler's connection policy; nothing keeps the library's default.
    std::optional<metadata::encryption_policy> encryption = metadata::encryption_policy::prefer_plaintext;
    std::optional<metadata::transport_policy> transports = metadata::transport_policy::tcp;
    std::vector<std::string> swarm_args; ///< e.g. --encryption forced_rc4, --set name=value
};

struct lt_case_result {
    std::size_t expected = 0;
    std::map<std::string, int> times_delivered; // by the torrent's first announce key
    std::map<std::string, std::string> torrent_of; // every announce key -> the first one
    std::map<std::string, std::string> described;  // first key -> "kind, seeder's policy"
    std::vector<api::completion> completions;
    std::vector<api::delivery> deliveries;
    std::vector<std::string> bans; ///< the swarm's dht_banned events
    /// What the crawler saw of each hash (by the hash, not the torrent): observations,
    /// deliveries, completions and retry events, in order. Printed for a torrent that did not
    /// arrive exactly once, so a rare miss says where it stopped.
    std::map<std::string, std::vector<std::string>> history;
};

inline lt_case_result run_lt_case(const lt_case& c) {
    using namespace std::chrono_literals;
    std::mutex m;
    lt_case_result out;
    const auto started = std::chrono::steady_clock::now();
    auto note = [&](const id20& hash, const std::string& what) { // under m
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        out.history[hash.hex()].push_back(std::to_string(ms.count()) + " ms " + what);
    };
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        out.deliveries.push_back(d);
        note(d.info.info_hash, "delivered from " + d.peer.to_string());
        return true;
    });
    cb.completion = [&](const api::completion& done) {
        std::lock_guard l(m);
        out.completions.push_back(done);
        note(done.info_hash, "completion " + std::string(api::to_string(done.result)) + " " +
                                 std::string(api::to_string(done.failure)));
    };
    cb.observation = [&](const api::observation& o) {
        std::lock_guard l(m);
        note(o.info_hash, std::string(api::to_string(o.kind)) + " from " + o.source.to_string() +
                              (o.port ? " port " + std::to_string(o.port) : ""));
    };
    cb.retry = [&](const api::retry_event& r) {
        std::lock_guard l(m);
        note(r.info_hash, "retry " + std::string(api::to_string(r.state)) + " after " + std::to_string(r.attempts) +
                              " " + std::string(api::to_string(r.failure)));
    };

    auto o = loopback_crawler();
    if (c.ipv6) {
        o.dht.mode = engine::netmode::ipv6;
        o.dht.bind_v6 = "::1";
    }
    const api::crawler_options defaults;
    o.metadata.encryption = c.encryption.value_or(defaults.metadata.encryption);
    o.metadata.transports = c.transports.value_or(defaults.metadata.transports);
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    const auto workdir =
        std::filesystem::temp_directory_path() / ("dhtc-lt-" + c.name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    std::vector<std::string> argv{"/usr/bin/python3", c.swarm_script, "--bootstrap",
                                  crawler->dht().local_endpoints().at(0).to_string(), "--sessions",
                                  std::to_string(c.sessions), "--torrents-per-session",
                                  std::to_string(c.torrents_per_session), "--kinds", c.kinds, "--piece-count-range",
                                  "1:4", "--duration", "150", "--announce-interval", "10", "--workdir", workdir.string()};
    if (c.ipv6)
        argv.emplace_back("--ipv6");
    else
        argv.insert(argv.end(), {"--base-ip", c.base_ip});
    if (c.one_ip) argv.emplace_back("--one-ip");
    argv.insert(argv.end(), c.swarm_args.begin(), c.swarm_args.end());
    subprocess swarm(argv);

    std::set<std::string> keys;
    std::map<int, std::string> policy_of_session;
    REQUIRE(read_lt_swarm_setup(swarm, 90s, [&](const nlohmann::json& ev) {
                const auto kind = ev.value("event", "");
                if (kind == "session") policy_of_session[ev.at("index").get<int>()] = ev.value("policy", "");
                if (kind != "torrent") return;
                const auto first = ev.at("announce_hashes").at(0).get<std::string>();
                keys.insert(first);
                // A hybrid is announced under both keys, and may be delivered under either.
                for (const auto& k : ev.at("announce_hashes")) out.torrent_of[k.get<std::string>()] = first;
                out.described[first] = ev.value("kind", "") + " from a " +
                                       policy_of_session[ev.at("session").get<int>()] + " seeder";
            }).ready);
    out.expected = keys.size();
    REQUIRE(out.expected == static_cast<std::size_t>(c.sessions * c.torrents_per_session));
    wait_for_crawler(
        {&swarm}, 120s,
        [&] {
            std::lock_guard l(m);
            return out.deliveries.size() >= out.expected;
        },
        [&](std::size_t, const nlohmann::json& ev) {
            if (ev.value("event", "") == "dht_banned") out.bans.push_back(ev.dump());
        });
    swarm.stop();
    // The peer attempts that failed, by class, and the rounds that skipped a peer the
    // failure cache held: printed beside a miss.
    std::string failures;
    {
        const auto& pc = crawler->pipeline().counters();
        for (std::size_t i = 0; i < pc.attempt_failures.size(); ++i)
            if (const auto n = pc.attempt_failures[i].load())
                failures += " " + std::string(api::to_string(static_cast<api::failure_class>(i))) + "=" + std::to_string(n);
        failures += "; failure cache hits " + std::to_string(pc.failure_cache_hits.load());
        const auto snap = stats::observability_snapshot(*crawler);
        failures += "\n  the crawler's DHT side: " + snap.at("dht").dump();
    }
    crawler->close(std::nullopt);
    std::filesystem::remove_all(workdir);

    std::lock_guard l(m);
    for (const auto& d : out.deliveries) ++out.times_delivered[out.torrent_of[d.info.info_hash.hex()]];
    // One line per case that tests/wan/run_lt_wan.sh counts.
    const auto once = std::count_if(keys.begin(), keys.end(), [&](const std::string& k) { return out.times_delivered[k] == 1; });
    MESSAGE("arrived once: " << once << " of " << keys.size() << " (" << c.name << ")");
    for (const auto& k : keys) {
        std::string seen;
        for (const auto& [hash, first] : out.torrent_of) {
            if (first != k) continue;
            for (const auto& line : out.history[hash]) seen += "\n    " + hash.substr(0, 8) + " " + line;
        }
        CHECK_MESSAGE(out.times_delivered[k] == 1, k << " (" << out.described[k] << ") delivered "
                                                     << out.times_delivered[k] << " times; the crawler saw:"
                                                     << (seen.empty() ? std::string(" nothing") : seen)
                                                     << "\n  failed peer attempts:" << failures);
    }
    for (const auto& b : out.bans) MESSAGE("a session's blocker fired: " << b);
    CHECK(out.bans.empty());
    return out;
}

/// True when the test runs through tests/wan's delay-and-loss link (wan_netns.sh names its
/// network model in DHTC_NETWORK_MODEL).
inline bool through_lossy_link() {
    const char* model = std::getenv("DHTC_NETWORK_MODEL");
    return model != nullptr && *model != '\0';
}

/// A round of the case ended accepted. On loopback every one must. Through the lossy link a
/// lost packet may fail a round (a handshake, a piece past its retries) and a later round
/// deliver the torrent; there a failed round is allowed when its torrent arrived once.
inline void check_round_accepted(const lt_case_result& r, const api::completion& c) {
    const std::string hash = c.info_hash.hex();
    const auto torrent = r.torrent_of.find(hash);
    const bool arrived = torrent != r.torrent_of.end() && r.times_delivered.count(torrent->second) &&
                         r.times_delivered.at(torrent->second) == 1;
    const std::string what = torrent != r.torrent_of.end() && r.described.count(torrent->second)
                                 ? r.described.at(torrent->second) : "?";
    CHECK_MESSAGE((c.result == api::outcome::accepted || (through_lossy_link() && arrived)),
                  "round for " << hash << " (" << what << "): " << api::to_string(c.failure));
}

} // namespace dhtc::test
