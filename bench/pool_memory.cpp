// Memory per node of the crawl node pool at 100,000 nodes, measured twice: by the pool's
// own accounting (memory_bytes(): object, rings, order bits, index) and by the process RSS
// before construction and after filling. Also times push and pop. Prints one JSON line per
// configuration; exits 1 if a configuration exceeds the 48 bytes-per-node target.
//
// Built as dhtc-pool-memory (bench/CMakeLists.txt): build/release/bench/dhtc-pool-memory
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>

#include "crawl/node_pool.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "bench_util.hpp"

using namespace dhtc;
using namespace dhtc::crawl;

namespace {

using bench::rss_bytes;
using bench::id_of;

constexpr std::size_t nodes = 100'000;
constexpr double target_bytes_per_node = 48.0;

// Distinct public endpoints: IPv4 from 20.0.0.0 up, IPv6 in 2001:4860::/32.
endpoint node_ep(std::uint32_t i, bool v6) {
    if (!v6) return endpoint{ip_address::v4(0x14000000u + i), static_cast<std::uint16_t>(1024 + i % 50000)};
    std::array<std::uint8_t, 16> b{0x20, 0x01, 0x48, 0x60};
    b[8] = static_cast<std::uint8_t>(i >> 24);
    b[9] = static_cast<std::uint8_t>(i >> 16);
    b[10] = static_cast<std::uint8_t>(i >> 8);
    b[11] = static_cast<std::uint8_t>(i);
    return endpoint{ip_address::v6(b), 6881};
}

bool run(const char* name, unsigned v6_share_percent, unsigned v6_every /* 0: none */) {
    steady_clock_source clk;
    address_policy policy;
    node_pool_options o;
    o.capacity = nodes;
    o.v6_share_percent = v6_share_percent;
    o.max_replacements_per_minute = 1e9;

    const std::size_t rss_before = rss_bytes();
    std::optional<node_pool> pool;
    pool.emplace(clk, policy, o);
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t refused = 0;
    for (std::uint32_t i = 0; i < nodes; ++i) {
        const bool v6 = v6_every && i % v6_every == 0;
        const auto r = pool->push(id_of(i), node_ep(i, v6));
        refused += r != push_result::accepted;
    }
    const auto t1 = std::chrono::steady_clock::now();
    const std::size_t rss_after = rss_bytes();
    const std::size_t accounted = pool->memory_bytes();
    const std::size_t held = pool->size();

    // Steady churn: pop one, push one (duplicates and index shifts included).
    const auto t2 = std::chrono::steady_clock::now();
    for (std::uint32_t i = 0; i < nodes; ++i) {
        pool->pop();
        const std::uint32_t k = nodes + i;
        pool->push(id_of(k), node_ep(k, v6_every && k % v6_every == 0));
    }
    const auto t3 = std::chrono::steady_clock::now();

    const double per_node_accounted = static_cast<double>(accounted) / nodes;
    const double per_node_rss = static_cast<double>(rss_after - rss_before) / nodes;
    const double push_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / nodes;
    const double churn_ns = std::chrono::duration<double, std::nano>(t3 - t2).count() / nodes;
    const bool ok = per_node_accounted <= target_bytes_per_node && per_node_rss <= target_bytes_per_node;
    std::printf("{\"bench\":\"pool_memory\",\"config\":\"%s\",\"nodes\":%zu,\"held\":%zu,\"refused\":%zu,"
                "\"capacity_v4\":%zu,\"capacity_v6\":%zu,\"bytes_per_node_accounted\":%.2f,"
                "\"bytes_per_node_rss\":%.2f,\"target\":%.0f,\"ok\":%s,\"push_ns\":%.1f,\"pop_push_ns\":%.1f}\n",
                name, nodes, held, refused, pool->capacity_v4(), pool->capacity_v6(), per_node_accounted,
                per_node_rss, target_bytes_per_node, ok ? "true" : "false", push_ns, churn_ns);
    std::fflush(stdout);
    return ok;
}

// Each configuration runs in its own child process: freed memory that malloc keeps for
// reuse would otherwise hide the next configuration's growth in RSS.
bool in_child(const char* name, unsigned v6_share_percent, unsigned v6_every) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return run(name, v6_share_percent, v6_every);
    if (pid == 0) _exit(run(name, v6_share_percent, v6_every) ? 0 : 1);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

} // namespace

int main() {
    bool ok = true;
    ok &= in_child("default_v4_nodes", 25, 0);      // defaults: IPv6 ring of 25%, all nodes IPv4
    ok &= in_child("default_mixed_1_in_5", 25, 5); // 20% IPv6 nodes
    ok &= in_child("ipv4_only", 0, 0);              // what an IPv4-only crawler configures
    return ok ? 0 : 1;
}
