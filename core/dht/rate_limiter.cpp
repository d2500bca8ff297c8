#include "dht/rate_limiter.hpp"

#include <algorithm>
#include <cmath>

#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {

constexpr double max_rate = 1e12;
constexpr double max_burst = 1e15;
// Exact decimal time slices (100 ms at 10/s) may sum to 0.9999999999 tokens in binary
// floating point; the tolerance makes them grant the token they add up to.
constexpr double tolerance = 1e-9;

double sanitize(double v, double cap) noexcept {
    if (!(v > 0)) return 0; // negative, zero and NaN
    return v > cap ? cap : v;
}

// Tokens held at `now` by a bucket that held `tokens` at `last`. A clock that went back
// (only a manual clock can) adds nothing rather than removing tokens.
double refilled(double tokens, double rate, double burst, time_point last, time_point now) noexcept {
    if (now <= last) return tokens;
    const double seconds = std::chrono::duration<double>(now - last).count();
    return std::min(burst, tokens + seconds * rate);
}

} // namespace

token_bucket::token_bucket(const clock& c, double rate_per_second, double burst) noexcept
    : clock_(&c), rate_(sanitize(rate_per_second, max_rate)), burst_(sanitize(burst, max_burst)), tokens_(burst_),
      last_(c.now()) {}

void token_bucket::refill(time_point now) noexcept {
    tokens_ = refilled(tokens_, rate_, burst_, last_, now);
    // Keep the later instant, so a clock stepping back then forth is not paid twice.
    if (now > last_) last_ = now;
}

bool token_bucket::try_acquire_above(double n, double floor, time_point now) noexcept {
    if (n <= 0) {
        ++granted_;
        return true;
    }
    refill(now);
    if (!(tokens_ - n + tolerance >= floor)) { // also refuses NaN
        ++refused_;
        return false;
    }
    tokens_ = std::max(0.0, tokens_ - n);
    ++granted_;
    return true;
}

double token_bucket::available() noexcept {
    refill();
    return tokens_;
}

void token_bucket::set_rate(double rate_per_second) noexcept {
    refill();
    rate_ = sanitize(rate_per_second, max_rate);
}

reserved_share_bucket::reserved_share_bucket(const clock& c, double rate_per_second, double burst,
                                             unsigned reserved_percent) noexcept
    : bucket_(c, rate_per_second, burst), reserve_(bucket_.burst() * std::min(reserved_percent, 100u) / 100.0) {}

bool reserved_share_bucket::try_acquire(double n, traffic_class cls) noexcept {
    const double floor = cls == traffic_class::priority ? 0.0 : reserve_;
    const bool ok = bucket_.try_acquire_above(n, floor);
    ++(ok ? granted_ : refused_)[index(cls)];
    return ok;
}

bool reserved_share_bucket::try_acquire(double n, traffic_class cls, time_point now) noexcept {
    const double floor = cls == traffic_class::priority ? 0.0 : reserve_;
    const bool ok = bucket_.try_acquire_above(n, floor, now);
    ++(ok ? granted_ : refused_)[index(cls)];
    return ok;
}

double pressure_factor(std::size_t depth, std::size_t capacity, unsigned floor_percent) noexcept {
    const double floor = std::min(floor_percent, 100u) / 100.0;
    if (capacity == 0) return floor;
    const double fill = static_cast<double>(depth) / static_cast<double>(capacity);
    constexpr double start = 0.80;
    constexpr double full = 0.95;
    if (fill < start) return 1.0;
    if (fill >= full) return floor;
    return 1.0 - (fill - start) / (full - start) * (1.0 - floor);
}

} // namespace dhtc::crawl
