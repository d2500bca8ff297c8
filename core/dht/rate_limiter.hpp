// Rate budgets of the crawl actor: query QPS, new destinations and node replacements per
// minute, reply packets and bytes (with a share kept for ping/get_peers answers). Per-IP
// budgets live in source_table. All run on a `clock`, so tests step time by hand.
//
// Thread rules: none of these classes is synchronised; each belongs to one owner (the crawl
// actor, or one receive worker).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/relaxed_counter.hpp"

namespace dhtc::crawl {

/// A token bucket: `rate` tokens per second accrue up to `burst`; it starts full.
/// Tokens are fractional (double); a grant compares with a tolerance of 1e-9 tokens so that
/// time slices that add up to a whole token in exact arithmetic grant that token.
class token_bucket {
public:
    /// Negative or NaN rate/burst count as 0; both are capped (1e12/s, 1e15) to keep the
    /// arithmetic finite.
    token_bucket(const clock& c, double rate_per_second, double burst) noexcept;
    /// A per-minute budget: rate amount/60 per second, burst `amount`.
    static token_bucket per_minute(const clock& c, double amount_per_minute) noexcept {
        return token_bucket(c, amount_per_minute / 60.0, amount_per_minute);
    }

    /// Takes `n` tokens if available. n <= 0 always succeeds; NaN never does.
    bool try_acquire(double n = 1) noexcept { return try_acquire_above(n, 0); }
    /// Takes `n` tokens only if at least `floor` tokens remain afterwards.
    bool try_acquire_above(double n, double floor) noexcept { return try_acquire_above(n, floor, clock_->now()); }
    /// The same at an instant the caller already read from this bucket's clock (one read
    /// serves every budget a packet passes).
    bool try_acquire_above(double n, double floor, time_point now) noexcept;
    /// Tokens available now.
    double available() noexcept;
    /// Changes the rate from now on (tokens accrued so far are kept at the old rate).
    void set_rate(double rate_per_second) noexcept;

    double rate() const noexcept { return rate_; }
    double burst() const noexcept { return burst_; }
    /// Acquisitions granted / refused so far.
    std::uint64_t granted() const noexcept { return granted_; }
    std::uint64_t refused() const noexcept { return refused_; }

private:
    void refill() noexcept { refill(clock_->now()); }
    void refill(time_point now) noexcept;

    const clock* clock_;
    double rate_;
    double burst_;
    double tokens_;
    time_point last_;
    // Read by snapshot threads while the owner counts.
    relaxed_counter granted_;
    relaxed_counter refused_;
};

/// Which side of a reserved_share_bucket a request draws from.
enum class traffic_class : std::uint8_t {
    normal,   ///< everything else (find_node answers, bulk replies)
    priority, ///< ping and get_peers answers: what keeps us in other nodes' tables
};

/// A total budget with a share kept for priority traffic: normal traffic may take tokens
/// only while at least `reserved_percent` of the burst stays in the bucket afterwards;
/// priority traffic may take everything. Both draw from one bucket, so together they
/// never exceed the total rate and burst.
class reserved_share_bucket {
public:
    /// `reserved_percent` is clamped to 0..100.
    reserved_share_bucket(const clock& c, double rate_per_second, double burst, unsigned reserved_percent = 10) noexcept;

    bool try_acquire(double n, traffic_class cls) noexcept;
    /// The same at an instant the caller read from this bucket's clock.
    bool try_acquire(double n, traffic_class cls, time_point now) noexcept;
    double available() noexcept { return bucket_.available(); }
    /// Tokens normal traffic can never touch.
    double reserve() const noexcept { return reserve_; }
    void set_rate(double rate_per_second) noexcept { bucket_.set_rate(rate_per_second); }
    const token_bucket& bucket() const noexcept { return bucket_; }

    std::uint64_t granted(traffic_class cls) const noexcept { return granted_[index(cls)]; }
    std::uint64_t refused(traffic_class cls) const noexcept { return refused_[index(cls)]; }

private:
    static std::size_t index(traffic_class cls) noexcept { return cls == traffic_class::priority ? 1 : 0; }

    token_bucket bucket_;
    double reserve_;
    std::array<relaxed_counter, 2> granted_{};
    std::array<relaxed_counter, 2> refused_{};
};

/// The metadata-pressure feedback on the query rate: 1.0 below 80% queue depth, falling
/// linearly to floor_percent/100 at 95%, and that floor above. floor_percent is clamped to
/// 0..100; capacity 0 counts as full pressure. Pure: multiply the configured rate by it
/// and pass the result to token_bucket::set_rate().
double pressure_factor(std::size_t depth, std::size_t capacity, unsigned floor_percent = 25) noexcept;

} // namespace dhtc::crawl
