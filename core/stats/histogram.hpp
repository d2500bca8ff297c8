// A fixed-bucket histogram with relaxed atomic counts: recorded from one thread, read from
// any. counts[i] holds values <= bounds[i] and > bounds[i-1] (non-cumulative); overflow
// holds values above the last bound. Percentiles return bucket upper bounds: a bounded
// approximation, never an exact quantile.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace dhtc::stats {

template <std::size_t N>
class histogram {
public:
    constexpr explicit histogram(const std::array<std::uint64_t, N>& bounds) noexcept : bounds_(bounds) {}

    void record(std::uint64_t v) noexcept {
        std::size_t i = 0;
        while (i < N && v > bounds_[i]) ++i;
        if (i == N) {
            overflow_.fetch_add(1, std::memory_order_relaxed);
        } else {
            counts_[i].fetch_add(1, std::memory_order_relaxed);
        }
        sum_.fetch_add(v, std::memory_order_relaxed);
    }

    const std::array<std::uint64_t, N>& bounds() const noexcept { return bounds_; }
    std::uint64_t count(std::size_t i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }
    std::uint64_t overflow() const noexcept { return overflow_.load(std::memory_order_relaxed); }
    std::uint64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
    std::uint64_t total() const noexcept {
        std::uint64_t t = overflow();
        for (std::size_t i = 0; i < N; ++i) t += count(i);
        return t;
    }
    /// The upper bound of the bucket holding quantile q (0..1); the last bound when the
    /// quantile falls into the overflow; 0 when empty.
    std::uint64_t percentile(double q) const noexcept {
        const std::uint64_t t = total();
        if (t == 0) return 0;
        const double want = q <= 0 ? 1.0 : q >= 1 ? static_cast<double>(t) : q * static_cast<double>(t);
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < N; ++i) {
            seen += count(i);
            if (static_cast<double>(seen) >= want) return bounds_[i];
        }
        return bounds_[N - 1];
    }

private:
    std::array<std::uint64_t, N> bounds_;
    std::array<std::atomic<std::uint64_t>, N> counts_{};
    std::atomic<std::uint64_t> overflow_{0};
    std::atomic<std::uint64_t> sum_{0};
};

/// The seed's three histograms.
using queue_wait_histogram = histogram<8>;   ///< milliseconds
using fetch_duration_histogram = histogram<7>; ///< milliseconds
using payload_size_histogram = histogram<8>; ///< bytes

inline constexpr std::array<std::uint64_t, 8> queue_wait_bounds_ms{10, 50, 100, 250, 500, 1000, 2000, 5000};
inline constexpr std::array<std::uint64_t, 7> fetch_duration_bounds_ms{250, 500, 1000, 2000, 4000, 6000, 10000};
inline constexpr std::array<std::uint64_t, 8> payload_size_bounds_bytes{16 << 10, 32 << 10, 64 << 10, 128 << 10,
                                                                        256 << 10, 512 << 10, 1024 << 10, 10 << 20};

} // namespace dhtc::stats
