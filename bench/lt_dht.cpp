// A small real DHT (issue 18): 30 libtorrent sessions (tests/lt/lt_swarm.py, one /24 each)
// that form a DHT among themselves, each seeding one torrent. Our crawler bootstraps from
// one of them and is nobody's bootstrap. Runs --runs times, each --seconds long, and prints
// one JSON line per run: torrents delivered out of announced, and for every torrent missed
// what the crawler saw of it (sampled, looked up: observations; fetch outcomes). A last line
// sums the runs. Never run by the tests; see docs/performance.md.
//   dhtc-lt-dht [--runs 10] [--seconds 180] [--sessions 30] [--destination-budget on|off]
// (off: the per-destination budget raised out of the way, as a reference in the same sitting)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/crawler.hpp"
#include "network_model.hpp"
#include "api/snapshot.hpp"
#include "support/loopback_crawler.hpp"
#include "support/lt_swarm_setup.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct seen {
    std::vector<std::string> events; // "12.3s bep51_sample from ...", "40.1s fetch_failed timeout"
    bool delivered = false;
};

nlohmann::json one_run(int run, int seconds, int sessions, bool destination_budget) {
    const auto workdir = std::filesystem::temp_directory_path() /
                         ("dhtc-lt-dht-" + std::to_string(::getpid()) + "-" + std::to_string(run));
    std::filesystem::remove_all(workdir);
    const int port = 20000 + run;
    test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--sessions", std::to_string(sessions),
                            "--torrents-per-session", "1", "--introduce", "--port", std::to_string(port),
                            "--base-ip", "127.0.60", "--duration", std::to_string(seconds + 120), "--seed",
                            std::to_string(run + 1), "--workdir", workdir.string(), "--stats-interval", "1000"});
    // A torrent is known by its first announce key; a hybrid may be delivered under either
    // of its keys (its v1 hash or its truncated v2 hash), and counts once.
    std::set<std::string> keys;
    std::map<std::string, std::string> torrent_of; // every announce key -> the first one
    const auto setup = test::read_lt_swarm_setup(swarm, 120s, [&](const nlohmann::json& ev) {
        if (ev.value("event", "") != "torrent") return;
        const auto& hashes = ev.at("announce_hashes");
        keys.insert(hashes.at(0).get<std::string>());
        for (const auto& h : hashes) torrent_of[h.get<std::string>()] = hashes.at(0).get<std::string>();
    });
    const auto torrent_key = [&](const id20& h) {
        const auto it = torrent_of.find(h.hex());
        return it == torrent_of.end() ? h.hex() : it->second;
    };
    nlohmann::json out{{"bench", "lt_dht"},
                       {"run", run},
                       {"destination_budget", destination_budget},
                       {"network_model", bench::network_model()}};
    if (!setup.ready) {
        out["error"] = "the swarm did not start";
        return out;
    }

    std::mutex m;
    std::map<std::string, seen> by_key;
    const auto t0 = clock_type::now();
    const auto stamp = [&] { return std::to_string(std::chrono::duration<double>(clock_type::now() - t0).count()).substr(0, 5) + "s "; };
    api::event_handlers h;
    h.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        auto& s = by_key[torrent_key(d.info.info_hash)];
        s.delivered = true;
        s.events.push_back(stamp() + "delivered under " + d.info.info_hash.hex());
        return true;
    });
    h.observation = [&](const api::observation& o) {
        std::lock_guard l(m);
        auto& s = by_key[torrent_key(o.info_hash)];
        if (s.events.size() < 20)
            s.events.push_back(stamp() + std::string(api::to_string(o.kind)) + " from " + o.source.to_string());
    };
    h.completion = [&](const api::completion& c) {
        if (c.result == api::outcome::accepted) return;
        std::lock_guard l(m);
        by_key[torrent_key(c.info_hash)].events.push_back(stamp() + "round ended " + std::string(api::to_string(c.failure)) +
                                                   " after " + std::to_string(c.attempts) + " attempts");
    };
    auto o = test::loopback_crawler(endpoint{ip_address::v4(0x7f003c01u), static_cast<std::uint16_t>(port)});
    if (!destination_budget) {
        // The reference: what the per-node and per-IP budgets cost in time to the last torrent.
        o.dht.crawl.rate_limit.max_packets_per_destination_per_sec = 1e12;
        o.dht.crawl.rate_limit.destination_burst = 1e12;
        o.dht.crawl.rate_limit.max_packets_per_ip_per_sec = 1e12;
        o.dht.crawl.rate_limit.ip_burst = 1e12;
    }
    std::string error;
    auto crawler = api::crawler::create(o, h, error);
    if (!crawler) {
        out["error"] = error;
        return out;
    }
    crawler->start();
    std::size_t delivered = 0;
    double all_at = -1;
    while (clock_type::now() - t0 < std::chrono::seconds(seconds)) {
        while (swarm.read_line(0ms)) {
        }
        std::this_thread::sleep_for(500ms);
        std::lock_guard l(m);
        delivered = 0;
        for (const auto& k : keys) delivered += by_key[k].delivered ? 1 : 0;
        if (delivered == keys.size() && all_at < 0) {
            all_at = std::chrono::duration<double>(clock_type::now() - t0).count();
            break;
        }
    }
    const auto& st = crawler->dht().service().crawl_stats();
    out["announced"] = keys.size();
    out["delivered"] = delivered;
    out["all_delivered_after_s"] = all_at < 0 ? nlohmann::json(nullptr) : nlohmann::json(all_at);
    out["queries_sample"] = st.queries_sample.load();
    out["queries_get_peers"] = st.queries_get_peers.load();
    out["deferred_destination"] = st.deferred_destination.load();
    out["responsive"] = st.responsive_size.load();
    nlohmann::json missed = nlohmann::json::object();
    {
        std::lock_guard l(m);
        for (const auto& k : keys)
            if (!by_key[k].delivered) missed[k] = by_key[k].events;
    }
    out["missed"] = missed;
    if (!missed.empty()) out["metadata"] = stats::observability_snapshot(*crawler)["metadata"]; // where the missed hashes went
    crawler->close(std::nullopt);
    swarm.stop();
    std::filesystem::remove_all(workdir);
    return out;
}

} // namespace

int main(int argc, char** argv) {
    int runs = 10, seconds = 180, sessions = 30;
    bool destination_budget = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--runs") runs = std::atoi(argv[i + 1]);
        else if (a == "--seconds") seconds = std::atoi(argv[i + 1]);
        else if (a == "--sessions") sessions = std::atoi(argv[i + 1]);
        else if (a == "--destination-budget" && (std::string(argv[i + 1]) == "on" || std::string(argv[i + 1]) == "off"))
            destination_budget = std::string(argv[i + 1]) == "on";
        else {
            std::fprintf(stderr, "usage: dhtc-lt-dht [--runs 10] [--seconds 180] [--sessions 30] [--destination-budget on|off]\n");
            return 2;
        }
    }
    std::vector<std::size_t> per_run;
    for (int r = 0; r < runs; ++r) {
        const auto j = one_run(r, seconds, sessions, destination_budget);
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
        per_run.push_back(j.value("delivered", std::size_t{0}));
    }
    std::printf("%s\n", nlohmann::json{{"bench", "lt_dht_summary"},
                                       {"sessions", sessions},
                                       {"delivered_per_run", per_run},
                                       {"network_model", bench::network_model()}}
                            .dump()
                            .c_str());
    return 0;
}
