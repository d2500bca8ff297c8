#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "dht/rate_limiter.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace dhtc::crawl;
using namespace std::chrono_literals;

namespace {

int drain(token_bucket& b) {
    int n = 0;
    while (b.try_acquire()) ++n;
    return n;
}

} // namespace

TEST_SUITE("rate_limiter") {

TEST_CASE("manual clock: advance and set") {
    manual_clock c;
    const auto t0 = c.now();
    c.advance(1500ms);
    CHECK(c.now() - t0 == 1500ms);
    c.set(t0);
    CHECK(c.now() == t0);
    steady_clock_source real;
    const auto a = real.now();
    CHECK(real.now() >= a);
}

TEST_CASE("token bucket: starts full, refills at the rate, caps at the burst") {
    manual_clock c;
    token_bucket b(c, 10, 5);
    CHECK(b.available() == doctest::Approx(5));
    CHECK(drain(b) == 5);
    CHECK_FALSE(b.try_acquire());
    // 100 ms at 10/s is exactly one token, even though 0.1 is inexact in binary
    for (int i = 0; i < 30; ++i) {
        c.advance(100ms);
        CHECK(b.try_acquire());
        CHECK_FALSE(b.try_acquire());
    }
    c.advance(50ms);
    CHECK_FALSE(b.try_acquire());
    c.advance(50ms);
    CHECK(b.try_acquire());
    // a long pause refills only up to the burst
    c.advance(1h);
    CHECK(b.available() == doctest::Approx(5));
    CHECK(drain(b) == 5);
    CHECK(b.granted() == 5 + 30 + 1 + 5);
    CHECK(b.refused() == 1 + 1 + 30 + 1 + 1); // each drain ends on one refusal
}

TEST_CASE("token bucket: multi-token requests, n larger than the burst, odd inputs") {
    manual_clock c;
    token_bucket b(c, 1000, 1500);
    CHECK(b.try_acquire(1000));
    CHECK_FALSE(b.try_acquire(501));
    CHECK(b.try_acquire(500));
    c.advance(1s);
    CHECK_FALSE(b.try_acquire(1501)); // never possible
    CHECK(b.try_acquire(0));
    CHECK(b.try_acquire(-3));
    CHECK_FALSE(b.try_acquire(std::numeric_limits<double>::quiet_NaN()));
    CHECK(b.available() == doctest::Approx(1000));

    token_bucket zero(c, -5, std::numeric_limits<double>::quiet_NaN());
    CHECK(zero.rate() == 0);
    CHECK(zero.burst() == 0);
    CHECK_FALSE(zero.try_acquire());
    token_bucket huge(c, std::numeric_limits<double>::infinity(), 1e300);
    CHECK(std::isfinite(huge.rate()));
    CHECK(std::isfinite(huge.available()));
}

TEST_CASE("token bucket: a clock stepping back neither adds nor removes tokens") {
    manual_clock c;
    token_bucket b(c, 10, 10);
    CHECK(drain(b) == 10);
    const auto t = c.now();
    c.advance(-5s);
    CHECK(b.available() == doctest::Approx(0));
    c.set(t + 500ms);
    CHECK(b.available() == doctest::Approx(5)); // counted once from t, not from t - 5 s
}

TEST_CASE("per-minute budget") {
    manual_clock c;
    auto b = token_bucket::per_minute(c, 600);
    CHECK(b.burst() == 600);
    CHECK(b.rate() == doctest::Approx(10));
    CHECK(drain(b) == 600);
    c.advance(6s);
    CHECK(drain(b) == 60);
    c.advance(2min);
    CHECK(drain(b) == 600);
}

TEST_CASE("set_rate keeps tokens accrued at the old rate") {
    manual_clock c;
    token_bucket b(c, 100, 100);
    CHECK(drain(b) == 100);
    c.advance(100ms); // +10 at 100/s
    b.set_rate(10);
    CHECK(b.rate() == 10);
    c.advance(100ms); // +1 at 10/s
    CHECK(drain(b) == 11);
    b.set_rate(-1);
    CHECK(b.rate() == 0);
    c.advance(10s);
    CHECK_FALSE(b.try_acquire());
}

TEST_CASE("pressure factor: 0, 80, 87.5, 95, 100 percent and edges") {
    CHECK(pressure_factor(0, 10000, 25) == 1.0);
    CHECK(pressure_factor(7999, 10000, 25) == 1.0);
    CHECK(pressure_factor(8000, 10000, 25) == doctest::Approx(1.0));
    CHECK(pressure_factor(8750, 10000, 25) == doctest::Approx(0.625));
    CHECK(pressure_factor(9500, 10000, 25) == doctest::Approx(0.25));
    CHECK(pressure_factor(10000, 10000, 25) == doctest::Approx(0.25));
    CHECK(pressure_factor(20000, 10000, 25) == doctest::Approx(0.25)); // over-full stays at the floor
    CHECK(pressure_factor(8750, 10000, 0) == doctest::Approx(0.5));
    CHECK(pressure_factor(9500, 10000, 0) == 0.0);
    CHECK(pressure_factor(9500, 10000, 100) == 1.0);
    CHECK(pressure_factor(9500, 10000, 250) == 1.0); // floor clamped to 100 %
    CHECK(pressure_factor(0, 0, 25) == doctest::Approx(0.25)); // no capacity: full pressure
    // monotonic and within [floor, 1] everywhere
    double prev = 1.0;
    for (std::size_t d = 0; d <= 1000; ++d) {
        const double f = pressure_factor(d, 1000, 25);
        CHECK(f <= prev + 1e-12);
        CHECK(f >= 0.25 - 1e-12);
        prev = f;
    }
}

TEST_CASE("scaled query rate follows the pressure") {
    manual_clock c;
    token_bucket q(c, 200, 40);
    q.set_rate(200 * pressure_factor(8750, 10000, 25));
    CHECK(q.rate() == doctest::Approx(125));
    CHECK(drain(q) == 40);
    c.advance(1s);
    CHECK(drain(q) == 40); // burst still caps
    c.advance(200ms);
    CHECK(drain(q) == 25);
}

TEST_CASE("reserved share: normal traffic cannot drain below 10%, priority can, the total holds") {
    manual_clock c;
    reserved_share_bucket b(c, 100, 100);
    CHECK(b.reserve() == doctest::Approx(10));
    int normal = 0;
    while (b.try_acquire(1, traffic_class::normal)) ++normal;
    CHECK(normal == 90);
    CHECK(b.available() == doctest::Approx(10));
    CHECK(b.refused(traffic_class::normal) == 1);
    int priority = 0;
    while (b.try_acquire(1, traffic_class::priority)) ++priority;
    CHECK(priority == 10);
    CHECK(b.available() == doctest::Approx(0));
    CHECK(b.granted(traffic_class::normal) == 90);
    CHECK(b.granted(traffic_class::priority) == 10);

    // refilled by 5: below the reserve, so normal gets nothing and priority gets all 5
    c.advance(50ms);
    CHECK_FALSE(b.try_acquire(1, traffic_class::normal));
    CHECK(b.try_acquire(5, traffic_class::priority));
    CHECK_FALSE(b.try_acquire(1, traffic_class::priority));

    // a byte budget: a 1000-byte reply needs 1000 above the reserve
    reserved_share_bucket bytes(c, 10000, 10000);
    CHECK(bytes.try_acquire(8500, traffic_class::normal));
    CHECK_FALSE(bytes.try_acquire(1000, traffic_class::normal)); // would leave 500 < 1000
    CHECK(bytes.try_acquire(500, traffic_class::normal));        // leaves exactly 1000
    CHECK(bytes.try_acquire(1000, traffic_class::priority));
    CHECK_FALSE(bytes.try_acquire(1, traffic_class::priority));
}

TEST_CASE("reserved share: over a long run the total never exceeds rate x time + burst") {
    manual_clock c;
    reserved_share_bucket b(c, 50, 20);
    double taken = 0;
    for (int step = 0; step < 1000; ++step) {
        c.advance(10ms);
        for (int i = 0; i < 3; ++i) {
            if (b.try_acquire(1, (step + i) % 3 == 0 ? traffic_class::priority : traffic_class::normal)) taken += 1;
        }
    }
    CHECK(taken <= 50 * 10.0 + 20 + 1e-6);
    CHECK(taken >= 50 * 10.0 - 1); // and it does not starve either
}

TEST_CASE("reserved share: percent bounds") {
    manual_clock c;
    reserved_share_bucket none(c, 10, 10, 0);
    CHECK(none.reserve() == 0);
    int n = 0;
    while (none.try_acquire(1, traffic_class::normal)) ++n;
    CHECK(n == 10);
    reserved_share_bucket all(c, 10, 10, 500);
    CHECK(all.reserve() == doctest::Approx(10));
    CHECK_FALSE(all.try_acquire(1, traffic_class::normal));
    CHECK(all.try_acquire(10, traffic_class::priority));
}

} // TEST_SUITE
