// What the crawler is doing, read from its relaxed-atomic counters: a cheap runtime view, a
// full observability document (both JSON, for the C ABI) and the same metrics as Prometheus
// text. docs/metrics.md lists every field and metric; the two forms are produced by one walk
// over the counters (snapshot.cpp), so they cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "stats/histogram.hpp"

namespace dhtc::api {
class crawler;
}

namespace dhtc::stats {

/// Revision of both snapshot documents. They only ever gain fields.
inline constexpr int snapshot_schema = 1;

/// The cheap "how is it doing now" view: node_id, endpoints, node pool and responsive ring
/// sizes, crawl queries in flight, metadata pending queue depth and capacity, hash ingress
/// depth and capacity, metadata jobs in flight, pressure and the current query rate.
///
/// Thread rules: any thread, any time between create and destroy; takes no lock. Each field
/// is one relaxed load: the document is not a transaction across fields.
nlohmann::json runtime_snapshot(const api::crawler& c);

/// Every counter of every layer (udp, dht, crawl, metadata, delivery), the drop counters
/// gathered under `drops`, and the three histograms. Every key is present even when zero.
/// Same thread rules as runtime_snapshot().
nlohmann::json observability_snapshot(const api::crawler& c);

/// The metrics of observability_snapshot() in Prometheus text exposition format 0.0.4
/// (serve it as `text/plain; version=0.0.4`). Same thread rules as runtime_snapshot().
std::string prometheus_text(const api::crawler& c);

/// One histogram as JSON: {bounds, counts (non-cumulative), overflow, count, sum, p50, p95,
/// p99}. `count` and the percentiles come from the counts read here, so they agree with
/// each other even while the histogram is being recorded into.
nlohmann::json histogram_json(std::span<const std::uint64_t> bounds, std::span<const std::uint64_t> counts,
                              std::uint64_t overflow, std::uint64_t sum);

/// Same as histogram::percentile(q), over counts already read: the upper bound of the
/// bucket holding quantile q, the last bound when it falls into the overflow, 0 when empty.
std::uint64_t bucket_percentile(std::span<const std::uint64_t> bounds, std::span<const std::uint64_t> counts,
                                std::uint64_t overflow, double q) noexcept;

/// histogram_json() of a live histogram (one relaxed load per bucket).
template <std::size_t N>
nlohmann::json histogram_json(const stats::histogram<N>& h) {
    std::array<std::uint64_t, N> counts{};
    for (std::size_t i = 0; i < N; ++i) counts[i] = h.count(i);
    return histogram_json(h.bounds(), counts, h.overflow(), h.sum());
}

} // namespace dhtc::stats
