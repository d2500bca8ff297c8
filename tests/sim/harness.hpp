// The harness of the crawl simulations: one simulated network plus our dht_service on a
// manual clock, and the checks on what crossed the wire (token-bucket excess, window counts).
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crawl/events.hpp"
#include "crawl/options.hpp"
#include "engine/dht_service.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "sim/sim_network.hpp"

namespace dhtc::sim::harness_util {

using namespace std::chrono_literals;

inline endpoint ep(const char* text) { return *endpoint::parse(text); }
inline ip_address ip(const char* text) { return *ip_address::parse(text); }

const endpoint us4 = ep("45.1.1.1:6881");
const endpoint us6 = ep("[2a05::1]:6881");

struct recording_sink final : crawl::crawl_sink {
    std::vector<crawl::hash_event> hashes;
    std::vector<crawl::observation> observations;
    double pressure = 0.0;
    void on_hash(const crawl::hash_event& e) override { hashes.push_back(e); }
    void on_observation(const crawl::observation& o) override { observations.push_back(o); }
    double metadata_pressure() const override { return pressure; }
};

// One simulated network plus our service. Set `options` (and populate `net`) before start().
struct harness {
    manual_clock clock;
    sim::sim_network net;
    address_policy policy;
    recording_sink sink;
    crawl::crawl_options options;
    id20 own;
    std::unique_ptr<engine::dht_service> service;
    time_point origin;

    explicit harness(sim::network_options no = {}, bool allow_private = false)
        : net(clock, no), policy(address_policy_options{allow_private}) {
        options.allow_private_addresses = allow_private;
        own = net.random_id();
        policy.add_own_endpoint(us4);
        policy.add_own_endpoint(us6);
        origin = clock.now();
    }

    // One bootstrap source per element (the names are placeholders: endpoints are set here).
    void start(const std::vector<std::vector<endpoint>>& sources) {
        options.bootstrap.sources.assign(sources.size(), "sim");
        service = std::make_unique<engine::dht_service>(options, clock, net, policy, sink, own, "DC01", 7);
        for (std::size_t i = 0; i < sources.size(); ++i) {
            service->actor().set_bootstrap_endpoints(i, sources[i]);
            for (const auto& e : sources[i]) net.mark_bootstrap(e);
        }
        net.attach(*service, us4, us6);
    }

    const crawl::crawl_stats& stats() const { return service->crawl_stats(); }
    std::uint64_t stat(const std::atomic<std::uint64_t>& c) const { return c.load(std::memory_order_relaxed); }
    double secs(time_point t) const { return std::chrono::duration<double>(t - origin).count(); }
};

inline std::uint64_t get(const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// Lifts the per-node and per-IP destination budgets: the reference a budgeted crawl is
// compared with, and cases about the other budgets (each says so where it calls this).
inline void unlimited_destinations(crawl::crawl_options& o) {
    o.rate_limit.max_packets_per_destination_per_sec = 1e6;
    o.rate_limit.destination_burst = 1e6;
    o.rate_limit.max_packets_per_ip_per_sec = 1e6;
    o.rate_limit.ip_burst = 1e6;
}

// Largest excess of weighted events (sorted by time) over a token bucket: the max over all
// intervals [t_i, t_j] of (sum of weights) - rate x (t_j - t_i) - burst. A bucket that
// starts full and refills at `rate` never lets this go above 0.
inline double bucket_excess(const std::vector<std::pair<time_point, double>>& events, double rate, double burst) {
    if (events.empty()) return -burst;
    const time_point t0 = events.front().first;
    double prefix = 0;
    double best_start = -std::numeric_limits<double>::infinity();
    double worst = -std::numeric_limits<double>::infinity();
    for (const auto& [t, w] : events) {
        const double s = std::chrono::duration<double>(t - t0).count();
        best_start = std::max(best_start, rate * s - prefix);
        prefix += w;
        worst = std::max(worst, prefix - rate * s + best_start - burst);
    }
    return worst;
}

// Most events in any window of `width`.
inline std::size_t max_in_window(const std::vector<time_point>& times, duration width) {
    std::size_t best = 0, lo = 0;
    for (std::size_t hi = 0; hi < times.size(); ++hi) {
        while (times[hi] - times[lo] >= width) ++lo;
        best = std::max(best, hi - lo + 1);
    }
    return best;
}

template <class Pred>
std::vector<std::pair<time_point, double>> query_events(const sim::sim_network& net, Pred pred) {
    std::vector<std::pair<time_point, double>> out;
    for (const auto& q : net.queries())
        if (pred(q)) out.emplace_back(q.at, 1.0);
    return out;
}


} // namespace dhtc::sim::harness_util
