// The flood of issue 17: 1,000,000 datagrams from 60,000 loopback sources in about 15 s (a
// mix of valid queries, garbage, absurd lengths, deep nesting and 64 KiB datagrams) against
// a crawler whose responsive ring holds a friendly node that pings it once a second.
// With --one-ip-ports N (issue 28) the flood comes from one IP instead, its source port
// rotating over N ports, as through a NAT: the source table must stay within its capacity,
// and a newcomer (a second friendly node on a new IP, pinging from halfway through) must
// still be admitted and answered.
// Reports one JSON line: RSS before, at its peak and after; the crawler's CPU (the process
// minus the flooder's own thread); the friends' answered shares; the source table's largest
// sizes and refusals; bytes in and out.
// Never run by the tests; see docs/performance.md.
//   dhtc-flood [--datagrams N] [--rate PER_SEC] [--sources N] [--one-ip-ports N] [--tracked N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/crawler.hpp"
#include "bench_util.hpp"
#include "support/flood.hpp"
#include "support/loopback_crawler.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::uint64_t load(const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// Peak RSS of the process (VmHWM), in bytes.
std::size_t peak_rss_bytes() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t tracked = 0; // 0: the default tracked_sources
    test::flood_options fo;
    fo.datagrams = 1'000'000;
    fo.rate_per_sec = 66'667;
    fo.sources = 60'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--datagrams") fo.datagrams = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--rate") fo.rate_per_sec = std::strtod(argv[i + 1], nullptr);
        else if (a == "--sources") fo.sources = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--one-ip-ports") fo.source_ports = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--tracked") tracked = std::strtoull(argv[i + 1], nullptr, 10);
        else {
            std::fprintf(stderr, "usage: dhtc-flood [--datagrams N] [--rate PER_SEC] [--sources N] "
                                 "[--one-ip-ports N] [--tracked N]\n");
            return 2;
        }
    }

    test::friend_node friend_node(*ip_address::parse("127.0.0.2"));
    test::friend_node newcomer(*ip_address::parse("127.0.0.3"), 3);
    auto o = test::loopback_crawler(friend_node.local());
    if (tracked) o.dht.crawl.rate_limit.tracked_sources = tracked;
    std::string error;
    auto crawler = api::crawler::create(o, api::event_handlers{}, error);
    if (!crawler) {
        std::fprintf(stderr, "dhtc-flood: %s\n", error.c_str());
        return 1;
    }
    fo.target = crawler->dht().local_endpoints().front();
    friend_node.start(endpoint{*ip_address::parse("127.0.0.1"), fo.target.port});
    crawler->start();
    const auto& stats = crawler->dht().service().crawl_stats();
    for (int i = 0; i < 200 && load(stats.responsive_size) < 100; ++i) std::this_thread::sleep_for(50ms);
    std::this_thread::sleep_for(2s);

    const std::size_t rss_before = bench::rss_bytes();
    const double cpu_before = bench::cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    test::udp_flooder flooder(fo);
    friend_node.set_pinging(true);
    newcomer.start(endpoint{*ip_address::parse("127.0.0.1"), fo.target.port});
    flooder.start();
    // The source table's largest sizes while the flood runs; the newcomer joins halfway.
    const auto& sources = crawler->dht().service().sources();
    std::size_t max_ips = 0, max_nodes = 0;
    const double flood_seconds = static_cast<double>(fo.datagrams) / fo.rate_per_sec;
    while (load(flooder.counters().sent) + load(flooder.counters().send_errors) < fo.datagrams) {
        max_ips = std::max(max_ips, sources.size());
        max_nodes = std::max(max_nodes, sources.node_count());
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (elapsed >= flood_seconds / 2) newcomer.set_pinging(true);
        if (elapsed > flood_seconds * 4 + 60) break; // the flooder fell far behind: report what there is
        std::this_thread::sleep_for(100ms);
    }
    flooder.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    friend_node.set_pinging(false);
    newcomer.set_pinging(false);
    std::this_thread::sleep_for(1500ms);
    const double cpu = bench::cpu_seconds() - cpu_before - flooder.cpu_seconds();
    const std::size_t rss_peak = peak_rss_bytes();
    std::this_thread::sleep_for(3s); // what stays once the flood is over
    const std::size_t rss_after = bench::rss_bytes();

    const auto& fc = flooder.counters();
    const auto& nc = crawler->dht().service().node_counters();
    const auto* udp = crawler->dht().udp_counters(false);
    nlohmann::json j;
    j["bench"] = "flood";
    j["datagrams"] = load(fc.sent);
    j["sources"] = fo.sources;
    j["seconds"] = seconds;
    j["rate_per_sec"] = static_cast<double>(load(fc.sent)) / seconds;
    j["bytes_in"] = load(fc.sent_bytes);
    j["bytes_out"] = load(fc.received_bytes);
    j["udp_rx_bytes"] = udp ? load(udp->rx_bytes) : 0;
    j["udp_rx_truncated"] = udp ? load(udp->rx_truncated) : 0;
    j["replies_sent"] = load(nc.replies_sent);
    j["crawler_cpu_seconds"] = cpu;
    j["rss_before_mb"] = static_cast<double>(rss_before) / 1e6;
    j["rss_peak_mb"] = static_cast<double>(rss_peak) / 1e6;
    j["rss_after_mb"] = static_cast<double>(rss_after) / 1e6;
    j["friend_pings"] = friend_node.pings_sent();
    j["friend_answered"] = friend_node.pings_answered();
    j["friend_answered_share"] =
        friend_node.pings_sent() ? static_cast<double>(friend_node.pings_answered()) / friend_node.pings_sent() : 0.0;
    j["newcomer_pings"] = newcomer.pings_sent();
    j["newcomer_answered"] = newcomer.pings_answered();
    j["one_ip_ports"] = fo.source_ports;
    j["sources_capacity"] = sources.capacity();
    j["sources_max_ips"] = max_ips;
    j["sources_max_nodes"] = max_nodes;
    j["sources_table_full"] = sources.stats().refused_table_full.load();
    j["sources_node_table_full"] = sources.stats().refused_node_table_full.load();
    j["pool_size"] = load(stats.pool_size);
    j["pool_from_queries"] = load(stats.pool_querier_size);
    j["queries_to_pool_total"] = load(stats.queries_find_node);
    std::printf("%s\n", j.dump().c_str());
    crawler->close(std::nullopt);
    friend_node.stop();
    newcomer.stop();
    return 0;
}
