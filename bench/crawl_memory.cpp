// Memory of a crawler holding what issue 7 sizes it for: a full default node pool (100,000
// nodes) and a full pending queue (10,000 hashes with peers). Each part runs in its own
// forked child, so freed memory that malloc keeps cannot hide growth, and prints one JSON
// line; figures are RSS deltas (/proc/self/statm) next to the structures' own accounting.
//   pool     the DHT side as the engine builds it (dht_service with default options, an
//            in-memory transport that sends nothing), its pool filled through the real path
//            (queriers -> discovery queue -> actor turn -> admission -> pool), against the
//            same side with a one-node pool: bytes per pool node is the difference / nodes
//   pending  metadata::pending_queue at its default capacity, filled with 10,000 hashes of
//            3 peers each through offer()
//   total    one process holding the DHT side with its full pool, plus the metadata pipeline
//            and delivery thread as the crawler builds them (not started: nothing connects),
//            their hash ingress full (10,000 events); the pending queue and the caches
//            grow as they fill (issue 17), so the caches cost what they hold
// Exits 1 when a target is missed: 48 bytes per pool node, 64 MB total RSS.
//   build/release/bench/dhtc-crawl-memory
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>

#include "api/crawler.hpp"
#include "api/delivery.hpp"
#include "engine/dht_service.hpp"
#include "metadata/pending_queue.hpp"
#include "metadata/pipeline.hpp"
#include "util/clock.hpp"
#include "bench_util.hpp"

using namespace dhtc;

namespace {

using bench::rss_bytes;
using bench::id_of;

constexpr std::size_t pool_nodes = 100'000;
constexpr std::size_t pending_hashes = 10'000;
constexpr std::size_t peers_per_hash = metadata::pending_entry::max_peers;
constexpr double target_bytes_per_node = 48.0;
constexpr double target_total_mb = 64.0;

double mb(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Distinct public IPv4 endpoints from 20.0.0.0 up (the address policy admits them). They are
// only ever handed to the in-memory transport below.
endpoint public_ep(std::uint32_t i) {
    return endpoint{ip_address::v4(0x14000000u + i), static_cast<std::uint16_t>(1024 + i % 50000)};
}

struct no_network final : transport {
    bool send(const endpoint&, std::string_view) override { return true; }
};

// The DHT side with default options, its pool filled the way queriers fill it.
struct dht_side {
    manual_clock clock;
    no_network out;
    address_policy policy;
    crawl::null_sink sink;
    std::unique_ptr<engine::dht_service> service;

    explicit dht_side(std::size_t pool_capacity = crawl::crawl_options{}.pool.capacity) {
        crawl::crawl_options o;
        o.bootstrap.sources.clear();
        o.pool.capacity = pool_capacity;
        service = std::make_unique<engine::dht_service>(o, clock, out, policy, sink, id_of(0), "DC01", 1);
    }

    std::size_t fill_pool() {
        auto& actor = service->actor();
        std::uint32_t next = 0;
        // Bounded: every round admits up to one batch; twice the rounds needed is plenty.
        for (int round = 0; round < 2000 && actor.stats().pool_size.load() < pool_nodes; ++round) {
            while (next < pool_nodes + 1000 && actor.discoveries().try_push({id_of(next + 1), public_ep(next)})) ++next;
            service->turn();
        }
        return actor.stats().pool_size.load();
    }
};

// The pool's share of the DHT side: the same side built twice, with a one-node pool and
// with the default 100,000-node pool filled; the difference is what the nodes cost.
void pool_part() {
    const std::size_t before_small = rss_bytes();
    dht_side small(1);
    small.fill_pool();
    const std::size_t small_side = rss_bytes() - before_small;
    const std::size_t before = rss_bytes();
    dht_side full;
    const std::size_t held = full.fill_pool();
    const std::size_t full_side = rss_bytes() - before;
    const double per_node = static_cast<double>(full_side - small_side) / static_cast<double>(held);
    const bool ok = per_node <= target_bytes_per_node;
    std::printf("{\"bench\":\"crawl_memory\",\"part\":\"pool\",\"nodes\":%zu,\"bytes_per_node_rss\":%.1f,"
                "\"dht_side_mb\":%.1f,\"dht_side_without_pool_mb\":%.1f,\"target\":%.0f,\"ok\":%s}\n",
                held, per_node, mb(full_side), mb(small_side), target_bytes_per_node, ok ? "true" : "false");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
}

void pending_part() {
    const std::size_t before = rss_bytes();
    metadata::pending_queue q;
    const time_point now = manual_clock().now();
    std::size_t refused = 0;
    for (std::uint32_t h = 0; h < pending_hashes; ++h) {
        for (std::uint32_t p = 0; p < peers_per_hash; ++p) {
            const auto r = q.offer(id_of(h), public_ep(h * 4 + p), api::hash_source::announce, now, now);
            refused += r != metadata::offer_result::added && r != metadata::offer_result::merged;
        }
    }
    const std::size_t after = rss_bytes();
    std::printf("{\"bench\":\"crawl_memory\",\"part\":\"pending\",\"hashes\":%zu,\"peers_per_hash\":%zu,"
                "\"refused\":%zu,\"bytes_per_hash_rss\":%.1f,\"bytes_per_hash_accounted\":%.1f}\n",
                q.size(), peers_per_hash, refused, static_cast<double>(after - before) / pending_hashes,
                static_cast<double>(q.memory_bytes()) / pending_hashes);
    std::fflush(stdout);
    std::_Exit(0);
}

void total_part() {
    const std::size_t at_start = rss_bytes();
    api::crawler_options defaults;
    api::event_delivery delivery(
        api::delivery_options{2 * defaults.metadata.max_worker_count + 64, defaults.observation_queue_capacity});
    steady_clock_source clock;
    metadata::pipeline pipeline(defaults.metadata, delivery, clock);
    std::size_t ingress = 0;
    const time_point now = manual_clock().now();
    for (std::uint32_t h = 0; h < defaults.metadata.hash_queue_capacity; ++h) {
        ingress += pipeline.ingress().try_push(
            api::hash_event{id_of(h), public_ep(h), public_ep(h + 1), api::hash_source::announce, now});
    }
    const std::size_t with_metadata = rss_bytes();
    dht_side dht;
    const std::size_t held = dht.fill_pool();
    const std::size_t total = rss_bytes();
    const bool ok = mb(total) <= target_total_mb;
    std::printf("{\"bench\":\"crawl_memory\",\"part\":\"total\",\"pool_nodes\":%zu,\"pending_capacity\":%zu,"
                "\"ingress_events\":%zu,\"rss_start_mb\":%.1f,\"metadata_side_mb\":%.1f,\"dht_side_mb\":%.1f,"
                "\"rss_mb\":%.1f,\"target_mb\":%.0f,\"ok\":%s}\n",
                held, pipeline.pending_capacity(), ingress, mb(at_start), mb(with_metadata - at_start),
                mb(total - with_metadata), mb(total), target_total_mb, ok ? "true" : "false");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
}

bool in_child(void (*part)()) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) part();
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

} // namespace

int main() {
    bool ok = true;
    ok &= in_child(pool_part);
    ok &= in_child(pending_part);
    ok &= in_child(total_part);
    return ok ? 0 : 1;
}
