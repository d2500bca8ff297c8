// Choosing the connection-policy defaults (issue 16): a mixed swarm of real libtorrent
// seeders (tests/lt/lt_swarm.py), one swarm per seeder policy with equal shares (plaintext
// TCP allowed; PE forced RC4; PE forced with plaintext allowed; uTP only; uTP only with PE
// forced), all bootstrapping into one fresh crawler per run, which captures their announces
// and fetches the metadata under one candidate (metadata.encryption, metadata.transports).
// Fresh crawler and fresh swarm processes for every run of every candidate, so no state
// carries over (the work directories only cache the generated torrents).
//
// Per run, one JSON line:
//   announced            torrents the swarms seed (each announces under its v1 hash)
//   delivered            of those, delivered (verified by the pipeline) at least once
//   duplicates           deliveries beyond the first of a torrent (must be 0)
//   delivered_by_seeder  delivered per seeder policy, out of sessions x torrents each
//   connection_tries     every connection the crawler opened to a peer: the snapshot's
//                        metadata.transport.tcp.tries + metadata.transport.utp.tries (a
//                        fallback opens a new connection and counts again), over the run,
//                        for delivered and undelivered torrents alike
//   tries_per_delivered  connection_tries / delivered
//   peer_attempts        the snapshot's metadata.attempts (a fallback is part of its attempt)
//   p50_ms, p95_ms       from the crawler's first observation event of a torrent to its
//                        delivery, over the delivered torrents. An announce_peer reaches the
//                        application as a hash event, not an observation; the observation is
//                        the get_peers lookup that libtorrent sends the crawler for the token
//                        it announces with, one round trip before the announce
//   timed                delivered torrents with an observation (the p50/p95 sample)
//   announces_acked      announce_peer queries the crawler answered without error (the swarms'
//                        announce_ack events read before the run ended: a floor)
//   attempt_failures     failed peer attempts by class (snapshot metadata.attempt_failures)
//   failed_rounds        completions that ended fetch_failed, by class
// Then one summary line per candidate over its runs, and a last line naming the winner by
// issue 16's rule: most delivered; ties go to the fewest tries per delivered torrent (to two
// decimals), then the lowest p95. Never run by the tests; see docs/performance.md.
//   dhtc-mixed-swarm [--runs 3] [--sessions 2] [--torrents-per-session 4] [--seconds 60]
//                    [--candidates prefer_plaintext+tcp,...] [--tcp-only-share no|yes]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/crawler.hpp"
#include "bench_util.hpp"
#include "network_model.hpp"
#include "api/snapshot.hpp"
#include "support/loopback_crawler.hpp"
#include "support/lt_swarm_setup.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
    int runs = 3;
    int sessions = 2;
    int torrents_per_session = 4;
    int seconds = 60; ///< per run, from the last swarm's "ready" to the end of waiting
    bool tcp_only_share = false; ///< a sixth share: seeders without uTP (not one of issue 16's)
    std::vector<std::string> candidates{"prefer_plaintext+tcp",  "prefer_plaintext+both", "prefer_encrypted+both",
                                        "require+both",          "prefer_plaintext+utp",  "prefer_encrypted+utp",
                                        "require+utp"};
};

struct candidate {
    std::string name; ///< "encryption+transports"
    metadata::encryption_policy encryption;
    metadata::transport_policy transports;
};

std::optional<candidate> parse_candidate(const std::string& name) {
    const auto plus = name.find('+');
    if (plus == std::string::npos) return std::nullopt;
    const auto e = metadata::parse_encryption_policy(name.substr(0, plus));
    const auto t = metadata::parse_transport_policy(name.substr(plus + 1));
    if (!e || !t) return std::nullopt;
    return candidate{name, *e, *t};
}

// What the crawler made of one torrent.
struct torrent_seen {
    std::optional<clock_type::time_point> first_seen;
    std::optional<clock_type::time_point> delivered_at;
    int deliveries = 0;
};

// Issue 16's five seeder policies, and with --tcp-only-share yes a sixth share of seeders
// with uTP off both ways (clients without uTP, or with UDP blocked).
std::vector<test::lt_seeder_policy> seeder_policies(const settings& s) {
    auto policies = test::lt_seeder_policies();
    if (s.tcp_only_share)
        policies.push_back({"tcp_only", {"--set", "enable_incoming_utp=false", "--set", "enable_outgoing_utp=false"}});
    return policies;
}

// One swarm per seeder policy; session i of swarm p sits on 127.0.(100 + 20p + i).1.
constexpr int max_sessions_per_swarm = 20;

struct swarm_set {
    std::vector<std::unique_ptr<test::subprocess>> procs;
    std::map<std::string, std::size_t> policy_of; // announce key -> seeder policy index
    std::string error;
};

// Starts the swarms and reads their setup; `on_event` gets every other event (runtime
// events may come before "ready").
swarm_set start_swarms(const settings& s, const std::string& bootstrap, const std::filesystem::path& workroot,
                       const std::function<void(const swarm_set&, std::size_t, const nlohmann::json&)>& on_event) {
    swarm_set out;
    const auto policies = seeder_policies(s);
    for (std::size_t p = 0; p < policies.size(); ++p) {
        std::vector<std::string> argv{"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap", bootstrap,
                                      "--sessions", std::to_string(s.sessions),
                                      "--torrents-per-session", std::to_string(s.torrents_per_session),
                                      "--kinds", "v1,multi", "--piece-count-range", "1:4",
                                      // distinct torrents per swarm; the same ones in every run
                                      "--seed", std::to_string(101 + p),
                                      "--duration", std::to_string(s.seconds + 120), "--announce-interval", "10",
                                      "--base-ip", "127.0." + std::to_string(100 + max_sessions_per_swarm * p),
                                      "--stats-interval", "1000", "--workdir", (workroot / policies[p].name).string(),
                                      // Read-only DHT nodes (BEP-43): the sessions never get into
                                      // each other's routing tables, so the crawler, their only
                                      // router, gets every lookup and every announce.
                                      "--set", "dht_read_only=true"};
        argv.insert(argv.end(), policies[p].swarm_args.begin(), policies[p].swarm_args.end());
        out.procs.push_back(std::make_unique<test::subprocess>(argv));
    }
    for (std::size_t p = 0; p < out.procs.size(); ++p) {
        const auto setup = test::read_lt_swarm_setup(*out.procs[p], 90s, [&](const nlohmann::json& ev) {
            if (ev.value("event", "") == "torrent") out.policy_of[ev.at("announce_hashes").at(0).get<std::string>()] = p;
            else on_event(out, p, ev);
        });
        if (!setup.ready) {
            out.error = policies[p].name + ": " + (setup.failure.empty() ? "no ready line" : setup.failure);
            return out;
        }
    }
    return out;
}

// Stops every swarm at once (each stop waits for its process).
void stop_all(swarm_set& swarms) {
    std::vector<std::thread> stoppers;
    for (auto& p : swarms.procs) stoppers.emplace_back([&p] { p->stop(); });
    for (auto& t : stoppers) t.join();
}

std::uint64_t at(const nlohmann::json& snapshot, std::initializer_list<const char*> path) {
    const nlohmann::json* j = &snapshot;
    for (const char* k : path) {
        if (!j->contains(k)) return 0;
        j = &(*j)[k];
    }
    return j->is_number() ? j->get<std::uint64_t>() : 0;
}

struct run_result {
    nlohmann::json line;
    std::size_t delivered = 0;
    std::uint64_t tries = 0;
    std::vector<double> ms; // announce to delivery, per delivered torrent
};

run_result one_run(const settings& s, const candidate& c, int run, const std::filesystem::path& workroot) {
    run_result r;
    r.line = {{"bench", "mixed_swarm"}, {"candidate", c.name}, {"run", run}};
    std::mutex m;
    std::map<std::string, torrent_seen> seen;
    std::map<std::string, std::size_t> failed_rounds;
    api::event_handlers h;
    h.observation = [&](const api::observation& o) {
        std::lock_guard l(m);
        auto& t = seen[o.info_hash.hex()];
        if (!t.first_seen) t.first_seen = o.at == time_point{} ? clock_type::now() : o.at;
    };
    h.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        auto& t = seen[d.info.info_hash.hex()];
        if (++t.deliveries == 1) t.delivered_at = clock_type::now();
        return true;
    });
    h.completion = [&](const api::completion& done) {
        if (done.result != api::outcome::fetch_failed) return;
        std::lock_guard l(m);
        ++failed_rounds[std::string(api::to_string(done.failure))];
    };

    auto o = test::loopback_crawler();
    o.metadata.encryption = c.encryption;
    o.metadata.transports = c.transports;
    std::string error;
    auto crawler = api::crawler::create(o, h, error);
    if (!crawler) {
        r.line["error"] = error;
        return r;
    }
    crawler->start();

    const std::string crawler_endpoint = crawler->dht().local_endpoints().at(0).to_string();
    std::size_t acked = 0;
    const auto on_swarm_event = [&](const swarm_set&, std::size_t, const nlohmann::json& ev) {
        if (ev.value("event", "") != "announce_ack" || ev.value("from", "") != crawler_endpoint) return;
        if (ev.contains("error") && ev["error"].is_null()) ++acked;
    };
    const auto setup_start = clock_type::now();
    auto swarms = start_swarms(s, crawler_endpoint, workroot, on_swarm_event);
    const double setup_s = std::chrono::duration<double>(clock_type::now() - setup_start).count();
    if (!swarms.error.empty()) {
        r.line["error"] = "swarm failed: " + swarms.error;
        stop_all(swarms);
        crawler->close(std::nullopt);
        return r;
    }
    std::vector<test::subprocess*> procs;
    for (auto& p : swarms.procs) procs.push_back(p.get());
    const auto all_delivered = [&] {
        std::lock_guard l(m);
        return std::all_of(swarms.policy_of.begin(), swarms.policy_of.end(),
                           [&](const auto& k) { return seen[k.first].deliveries > 0; });
    };
    const auto t0 = clock_type::now();
    test::wait_for_crawler(procs, std::chrono::seconds(s.seconds), all_delivered,
                           [&](std::size_t p, const nlohmann::json& ev) { on_swarm_event(swarms, p, ev); });
    const double waited = std::chrono::duration<double>(clock_type::now() - t0).count();
    const auto snapshot = stats::observability_snapshot(*crawler);
    const auto teardown_start = clock_type::now();
    stop_all(swarms);
    const double swarm_stop_s = std::chrono::duration<double>(clock_type::now() - teardown_start).count();
    crawler->close(std::nullopt);
    const double teardown_s = std::chrono::duration<double>(clock_type::now() - teardown_start).count();

    const auto policies = seeder_policies(s);
    std::vector<std::size_t> by_seeder(policies.size(), 0);
    std::size_t duplicates = 0;
    {
        std::lock_guard l(m);
        for (const auto& [key, p] : swarms.policy_of) {
            const auto& t = seen[key];
            if (t.deliveries == 0) continue;
            ++r.delivered;
            ++by_seeder[p];
            duplicates += static_cast<std::size_t>(t.deliveries - 1);
            if (t.first_seen)
                r.ms.push_back(std::chrono::duration<double, std::milli>(*t.delivered_at - *t.first_seen).count());
        }
    }
    std::sort(r.ms.begin(), r.ms.end());
    nlohmann::json delivered_by_seeder = nlohmann::json::object();
    for (std::size_t p = 0; p < policies.size(); ++p) delivered_by_seeder[policies[p].name] = by_seeder[p];
    r.tries = at(snapshot, {"metadata", "transport", "tcp", "tries"}) + at(snapshot, {"metadata", "transport", "utp", "tries"});
    nlohmann::json attempt_failures = nlohmann::json::object();
    if (snapshot.contains("metadata") && snapshot["metadata"].contains("attempt_failures"))
        for (const auto& [k, v] : snapshot["metadata"]["attempt_failures"].items())
            if (v.is_number() && v.get<std::uint64_t>() > 0) attempt_failures[k] = v;

    r.line["announced"] = swarms.policy_of.size();
    r.line["delivered"] = r.delivered;
    r.line["duplicates"] = duplicates;
    r.line["announces_acked"] = acked;
    r.line["delivered_by_seeder"] = delivered_by_seeder;
    r.line["connection_tries"] = r.tries;
    r.line["tcp_tries"] = at(snapshot, {"metadata", "transport", "tcp", "tries"});
    r.line["utp_tries"] = at(snapshot, {"metadata", "transport", "utp", "tries"});
    r.line["tries_per_delivered"] =
        r.delivered == 0 ? nlohmann::json(nullptr) : nlohmann::json(static_cast<double>(r.tries) / static_cast<double>(r.delivered));
    r.line["peer_attempts"] = at(snapshot, {"metadata", "attempts"});
    r.line["encryption_fallbacks"] = at(snapshot, {"metadata", "encryption", "fallbacks"});
    r.line["transport_fallbacks"] = at(snapshot, {"metadata", "transport", "fallbacks"});
    r.line["p50_ms"] = bench::quantile(r.ms, 0.5);
    r.line["p95_ms"] = bench::quantile(r.ms, 0.95);
    r.line["attempt_failures"] = attempt_failures;
    r.line["failed_rounds"] = failed_rounds;
    r.line["waited_s"] = waited;
    r.line["setup_s"] = setup_s;
    r.line["swarm_stop_s"] = swarm_stop_s;
    r.line["teardown_s"] = teardown_s;
    r.line["timed"] = r.ms.size();
    return r;
}

struct summary {
    std::string name;
    std::size_t delivered = 0;
    std::size_t announced = 0;
    std::uint64_t tries = 0;
    std::vector<double> ms;
    std::vector<std::size_t> delivered_per_run;
    double tries_per_delivered() const {
        return delivered == 0 ? INFINITY : static_cast<double>(tries) / static_cast<double>(delivered);
    }
};

// Issue 16's rule: most delivered, then fewest tries per delivered torrent (to two
// decimals: the counts are exact, the ratio need not be), then the lowest p95.
bool better(const summary& a, const summary& b) {
    if (a.delivered != b.delivered) return a.delivered > b.delivered;
    const double ta = std::round(a.tries_per_delivered() * 100), tb = std::round(b.tries_per_delivered() * 100);
    if (ta != tb) return ta < tb;
    return bench::quantile(a.ms, 0.95) < bench::quantile(b.ms, 0.95);
}

int usage() {
    std::fprintf(stderr, "usage: dhtc-mixed-swarm [--runs 3] [--sessions 2] [--torrents-per-session 4] "
                         "[--seconds 60] [--candidates prefer_plaintext+tcp,prefer_plaintext+both,...] "
                         "[--tcp-only-share no|yes]\n");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    settings s;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const std::string v = argv[i + 1];
        if (a == "--runs") s.runs = std::atoi(v.c_str());
        else if (a == "--sessions") s.sessions = std::atoi(v.c_str());
        else if (a == "--torrents-per-session") s.torrents_per_session = std::atoi(v.c_str());
        else if (a == "--seconds") s.seconds = std::atoi(v.c_str());
        else if (a == "--tcp-only-share") s.tcp_only_share = v == "yes";
        else if (a == "--candidates") {
            s.candidates.clear();
            std::stringstream in(v);
            for (std::string name; std::getline(in, name, ',');) s.candidates.push_back(name);
        } else return usage();
    }
    if (s.runs < 1 || s.sessions < 1 || s.sessions > max_sessions_per_swarm || s.torrents_per_session < 1 ||
        s.seconds < 1)
        return usage();
    std::vector<candidate> candidates;
    for (const auto& name : s.candidates) {
        const auto c = parse_candidate(name);
        if (!c) {
            std::fprintf(stderr, "dhtc-mixed-swarm: bad candidate %s (encryption+transports)\n", name.c_str());
            return 2;
        }
        candidates.push_back(*c);
    }

    const auto workroot = std::filesystem::temp_directory_path() / ("dhtc-mixed-swarm-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workroot);
    std::vector<summary> summaries;
    for (const auto& c : candidates) {
        summary sum;
        sum.name = c.name;
        for (int run = 0; run < s.runs; ++run) {
            auto r = one_run(s, c, run, workroot);
            std::printf("%s\n", r.line.dump().c_str());
            std::fflush(stdout);
            sum.delivered += r.delivered;
            sum.announced += r.line.value("announced", std::size_t{0});
            sum.tries += r.tries;
            sum.delivered_per_run.push_back(r.delivered);
            sum.ms.insert(sum.ms.end(), r.ms.begin(), r.ms.end());
        }
        std::sort(sum.ms.begin(), sum.ms.end());
        std::printf("%s\n", nlohmann::json{{"bench", "mixed_swarm_summary"},
                                           {"candidate", c.name},
                                           {"runs", s.runs},
                                           {"announced", sum.announced},
                                           {"delivered", sum.delivered},
                                           {"delivered_per_run", sum.delivered_per_run},
                                           {"connection_tries", sum.tries},
                                           {"tries_per_delivered", sum.delivered == 0 ? nlohmann::json(nullptr)
                                                                                      : nlohmann::json(sum.tries_per_delivered())},
                                           {"p50_ms", bench::quantile(sum.ms, 0.5)},
                                           {"p95_ms", bench::quantile(sum.ms, 0.95)},
                                           {"network_model", bench::network_model()}}
                                .dump()
                                .c_str());
        std::fflush(stdout);
        summaries.push_back(std::move(sum));
    }
    std::filesystem::remove_all(workroot);
    std::sort(summaries.begin(), summaries.end(), better);
    nlohmann::json ranking = nlohmann::json::array();
    for (const auto& sum : summaries) ranking.push_back(sum.name);
    std::printf("%s\n", nlohmann::json{{"bench", "mixed_swarm_winner"},
                                       {"rule", "most delivered, then fewest tries per delivered, then lowest p95"},
                                       {"winner", summaries.empty() ? "" : summaries.front().name},
                                       {"ranking", ranking}}
                            .dump()
                            .c_str());
    return 0;
}
