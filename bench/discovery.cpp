// Discovery benchmark: our crawler against a running dhtcrawler-testnet. Prints JSON lines:
// one per interval (unique hashes captured, torrents delivered, packets sent, rates) and a
// summary with the time to deliver 50% and 90% of the torrents the testnet announced.
// When some of the testnet's nodes share an IP (--shared-ip), the torrents are also split
// by who held their announces when the testnet printed BOOTSTRAP (the truth file's
// `holders` and `holders_shared_ip`): only nodes that share an IP, some, or none.
// Never run by the tests; asserts nothing. bench/discovery.sh starts the testnet and this.
//
//   dhtc-discovery --bootstrap IP:PORT --truth FILE [--minutes 10] [--interval 60] [--stop-at 0.9]
//                  [--lookup-rate R] [--query-rate R]   (crawl.bep51.max_lookup_rate_per_sec,
//                                                        crawl.rate_limit.max_find_node_rate_per_sec)
// Every line names the network it ran over ("network_model", from DHTC_NETWORK_MODEL: see
// bench/network_model.hpp).
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <sys/resource.h>

#include "api/snapshot.hpp"
#include "api/crawler.hpp"
#include "bench_util.hpp"
#include "network_model.hpp"

using namespace dhtc;
using clock_type = std::chrono::steady_clock;

namespace {

using bench::cpu_seconds;

/// Who stored a torrent's announces when every torrent had been announced once.
enum class holders : std::size_t { all_shared_ip, some_shared_ip, no_shared_ip };
constexpr std::size_t holder_classes = 3;
constexpr const char* holder_class_names[holder_classes] = {"all_shared_ip", "some_shared_ip", "no_shared_ip"};

holders classify(const nlohmann::json& entry) {
    const auto all = entry.value("holders", nlohmann::json::array()).size();
    const auto shared = entry.value("holders_shared_ip", nlohmann::json::array()).size();
    if (shared == 0) return holders::no_shared_ip;
    return shared == all ? holders::all_shared_ip : holders::some_shared_ip;
}

/// Per holder class: how many of `torrents` fall in it.
template <class Set>
nlohmann::json count_by_class(const std::vector<holders>& class_of, const Set& torrents) {
    std::array<std::size_t, holder_classes> n{};
    for (const auto i : torrents) ++n[static_cast<std::size_t>(class_of[i])];
    nlohmann::json j;
    for (std::size_t c = 0; c < holder_classes; ++c) j[holder_class_names[c]] = n[c];
    return j;
}

} // namespace

int main(int argc, char** argv) {
    std::string bootstrap, truth_path;
    double minutes = 10, interval = 60, stop_at = 0.9;
    double lookup_rate = 0, query_rate = 0; // 0: the crawler's defaults
    const nlohmann::json network_model = bench::network_model();
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--bootstrap") bootstrap = v;
        else if (a == "--truth") truth_path = v;
        else if (a == "--minutes") minutes = std::stod(v);
        else if (a == "--interval") interval = std::stod(v);
        else if (a == "--stop-at") stop_at = std::stod(v);
        else if (a == "--lookup-rate") lookup_rate = std::stod(v);
        else if (a == "--query-rate") query_rate = std::stod(v);
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (bootstrap.empty() || truth_path.empty()) {
        std::fprintf(stderr, "usage: dhtc-discovery --bootstrap IP:PORT --truth FILE [--minutes M] [--interval S] [--stop-at F] "
                             "[--lookup-rate R] [--query-rate R]\n");
        return 2;
    }
    std::ifstream in(truth_path);
    const auto truth = nlohmann::json::parse(in, nullptr, false);
    if (!truth.is_array() || truth.empty()) {
        std::fprintf(stderr, "cannot read the truth file %s\n", truth_path.c_str());
        return 1;
    }
    std::unordered_map<std::string, std::size_t> torrent_of_key;
    for (std::size_t i = 0; i < truth.size(); ++i)
        for (const auto& k : truth[i].at("announce_keys")) torrent_of_key[k.get<std::string>()] = i;
    const std::size_t announced = truth.size();
    // A torrent only misbehaving seeders hold may never be served in full (tools/testnet/README.md).
    const auto servable = [&](std::size_t i) {
        for (const auto& b : truth[i].value("seeder_behaviours", nlohmann::json::array({"none"})))
            if (b == "none" || b == "slow") return true;
        return false;
    };
    std::size_t announced_servable = 0;
    for (std::size_t i = 0; i < announced; ++i) announced_servable += servable(i) ? 1 : 0;
    std::vector<holders> class_of;
    bool any_shared_holder = false;
    for (const auto& t : truth) {
        class_of.push_back(classify(t));
        any_shared_holder = any_shared_holder || class_of.back() != holders::no_shared_ip;
    }

    std::mutex m;
    std::unordered_set<std::string> hashes_seen;
    std::unordered_set<std::size_t> torrents_delivered;
    std::size_t deliveries = 0, unknown = 0, mismatched = 0;
    api::event_handlers cb;
    cb.gate = [&](const id20& h) {
        std::lock_guard l(m);
        hashes_seen.insert(h.hex());
        return true;
    };
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        const auto key = d.info.info_hash.hex();
        std::lock_guard l(m);
        ++deliveries;
        const auto it = torrent_of_key.find(key);
        if (it == torrent_of_key.end()) {
            ++unknown;
            return true;
        }
        if (d.info.name != truth[it->second].at("name").get<std::string>()) ++mismatched;
        torrents_delivered.insert(it->second);
        return true;
    });

    api::crawler_options o;
    o.dht.port = 0;
    o.dht.bind_v4 = "127.0.0.1";
    o.dht.crawl.allow_private_addresses = true;
    o.dht.crawl.bootstrap.sources = {bootstrap};
    o.metadata.bind_v4 = ip_address::parse("127.0.0.1");
    if (lookup_rate > 0) o.dht.crawl.bep51.max_lookup_rate_per_sec = lookup_rate;
    if (query_rate > 0) o.dht.crawl.rate_limit.max_find_node_rate_per_sec = query_rate;
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    if (!crawler) {
        std::fprintf(stderr, "crawler: %s\n", error.c_str());
        return 1;
    }
    const auto t0 = clock_type::now();
    const double cpu0 = cpu_seconds();
    crawler->start();

    std::optional<double> t50, t90;
    std::size_t last_hashes = 0, last_delivered = 0;
    std::uint64_t last_packets = 0;
    double next_report = interval;
    const auto packets_sent = [&] {
        const auto* c = crawler->dht().udp_counters(false);
        return c ? c->tx_packets.load(std::memory_order_relaxed) : 0;
    };
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double t = std::chrono::duration<double>(clock_type::now() - t0).count();
        std::size_t hashes, delivered;
        {
            std::lock_guard l(m);
            hashes = hashes_seen.size();
            delivered = torrents_delivered.size();
        }
        if (!t50 && delivered * 2 >= announced) t50 = t;
        if (!t90 && delivered * 10 >= announced * 9) t90 = t;
        const bool done = t >= minutes * 60 || static_cast<double>(delivered) >= stop_at * static_cast<double>(announced);
        if (t >= next_report || done) {
            const auto packets = packets_sent();
            const double span = t - (next_report - interval);
            nlohmann::json j{{"bench", "discovery"},
                             {"t_secs", t},
                             {"unique_hashes", hashes},
                             {"delivered", delivered},
                             {"packets_sent", packets},
                             {"hashes_per_min", (hashes - last_hashes) * 60.0 / span},
                             {"delivered_per_min", (delivered - last_delivered) * 60.0 / span},
                             {"delivered_per_1000_packets",
                              packets == last_packets ? 0.0
                                                      : (delivered - last_delivered) * 1000.0 /
                                                            static_cast<double>(packets - last_packets)},
                             {"network_model", network_model}};
            // The crawl side's state, so a stall says where it is (an empty pool, a full
            // schedule, deferrals).
            const auto crawl = stats::observability_snapshot(*crawler)["crawl"];
            if (any_shared_holder) {
                std::lock_guard l(m);
                j["delivered_by_holders"] = count_by_class(class_of, torrents_delivered);
            }
            for (const char* key : {"pool_size", "responsive_size", "in_flight", "queries_find_node", "queries_sample",
                                    "queries_get_peers", "timeouts", "skipped_recent", "skipped_backoff",
                                    "pool_accepted", "pool_duplicate", "refused_new_destination", "refused_subnet",
                                    "deferred_destination", "rate_limited_turns", "sample_schedule_dropped",
                                    "samples_remembered", "sample_skipped_remembered", "lookups_started"})
                if (crawl.contains(key)) j["crawl"][key] = crawl[key];
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
            last_hashes = hashes;
            last_delivered = delivered;
            last_packets = packets;
            next_report += interval;
        }
        if (done) break;
    }
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    // Where the packets went: answers to the network's queries, and our own queries by kind.
    const auto obs = stats::observability_snapshot(*crawler);
    crawler->close(std::nullopt);
    std::lock_guard l(m);
    const auto packets = packets_sent();
    nlohmann::json breakdown{{"replies_sent", obs["dht"]["replies_sent"]}};
    for (const char* kind : {"queries_find_node", "queries_bootstrap", "queries_sample", "queries_get_peers", "queries_ping"})
        breakdown[kind] = obs["crawl"][kind];
    breakdown["lookups_started"] = obs["crawl"]["lookups_started"];
    breakdown["samples_received"] = obs["crawl"]["samples_received"];
    // Why the undelivered were missed: never learned, or learned and failed (by class).
    std::unordered_set<std::size_t> torrents_seen;
    for (const auto& h : hashes_seen)
        if (const auto it = torrent_of_key.find(h); it != torrent_of_key.end()) torrents_seen.insert(it->second);
    std::size_t servable_never_learned = 0, servable_not_delivered = 0;
    auto examples = nlohmann::json::array(); // a few of them, to look up in the crawler's logs
    for (std::size_t i = 0; i < announced; ++i) {
        if (!servable(i) || torrents_delivered.count(i)) continue;
        const bool learned = torrents_seen.count(i) != 0;
        ++(learned ? servable_not_delivered : servable_never_learned);
        if (examples.size() < 10)
            examples.push_back({{"announce_keys", truth[i]["announce_keys"]},
                                {"seeders", truth[i]["seeders"]},
                                {"seeder_behaviours", truth[i]["seeder_behaviours"]},
                                {"seeder_policies", truth[i]["seeder_policies"]},
                                {"learned", learned}});
    }
    const nlohmann::json missed{{"never_learned", announced - torrents_seen.size()},
                                {"learned_not_delivered", torrents_seen.size() - torrents_delivered.size()},
                                {"servable_never_learned", servable_never_learned},
                                {"servable_not_delivered", servable_not_delivered},
                                {"servable_examples", examples},
                                {"metadata_outcomes", obs["metadata"]["outcomes"]},
                                {"attempt_failures", obs["metadata"]["attempt_failures"]}};
    // Split by who held the announces (only when some holder shares an IP).
    nlohmann::json by_holders;
    if (any_shared_holder) {
        std::vector<std::size_t> all(announced), servable_ones;
        for (std::size_t i = 0; i < announced; ++i) {
            all[i] = i;
            if (servable(i)) servable_ones.push_back(i);
        }
        by_holders = {{"announced", count_by_class(class_of, all)},
                      {"announced_servable", count_by_class(class_of, servable_ones)},
                      {"learned", count_by_class(class_of, torrents_seen)},
                      {"delivered", count_by_class(class_of, torrents_delivered)}};
    }
    nlohmann::json summary{{"bench", "discovery"},
                           {"summary", true},
                           {"announced", announced},
                           {"announced_servable", announced_servable},
                           {"unique_hashes", hashes_seen.size()},
                           {"delivered", torrents_delivered.size()},
                           {"deliveries", deliveries},
                           {"unknown_deliveries", unknown},
                           {"name_mismatches", mismatched},
                           {"packets_sent", packets},
                           {"delivered_per_1000_packets",
                            packets ? torrents_delivered.size() * 1000.0 / static_cast<double>(packets) : 0.0},
                           {"delivered_per_min", torrents_delivered.size() * 60.0 / elapsed},
                           {"secs_to_50pct", t50 ? nlohmann::json(*t50) : nlohmann::json(nullptr)},
                           {"secs_to_90pct", t90 ? nlohmann::json(*t90) : nlohmann::json(nullptr)},
                           {"elapsed_secs", elapsed},
                           {"crawler_cpu_secs", cpu},
                           {"lookup_rate", o.dht.crawl.bep51.max_lookup_rate_per_sec},
                           {"query_rate", o.dht.crawl.rate_limit.max_find_node_rate_per_sec},
                           {"packets", breakdown},
                           {"missed", missed},
                           {"network_model", network_model}};
    if (!by_holders.is_null()) summary["by_holders"] = by_holders;
    std::printf("%s\n", summary.dump().c_str());
    return 0;
}
