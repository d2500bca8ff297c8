#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <random>

#include "metadata/delivered_filter.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace dhtc::metadata;
using namespace std::chrono_literals;

namespace {

id20 key(std::uint32_t n, std::uint8_t tag = 0x11) {
    id20 id;
    for (auto& b : id.bytes) b = tag;
    id.bytes[16] = static_cast<std::uint8_t>(n >> 24);
    id.bytes[17] = static_cast<std::uint8_t>(n >> 16);
    id.bytes[18] = static_cast<std::uint8_t>(n >> 8);
    id.bytes[19] = static_cast<std::uint8_t>(n);
    return id;
}

delivered_filter make_filter(std::size_t capacity, std::chrono::seconds period = 24h) {
    return delivered_filter(delivered_filter_options{capacity, period, 5});
}

} // namespace

TEST_SUITE("delivered_filter") {

TEST_CASE("a delivery suppresses refetching for exactly one period") {
    manual_clock clk;
    auto f = make_filter(100);
    const auto t = clk.now();
    CHECK_FALSE(f.contains(key(1), t));
    CHECK(f.insert(key(1), t));
    CHECK(f.contains(key(1), t));
    CHECK(f.contains(key(1), t + 24h - 1ms));
    CHECK_FALSE(f.contains(key(1), t + 24h));
    CHECK_FALSE(f.contains(key(2), t));
    // Delivering again inside the period does not extend it.
    CHECK_FALSE(f.insert(key(1), t + 12h));
    CHECK_FALSE(f.contains(key(1), t + 24h));
    CHECK(f.size() == 1);
    // After the period a delivery starts a new one.
    CHECK(f.insert(key(1), t + 25h));
    CHECK(f.contains(key(1), t + 49h - 1ms));
    CHECK_FALSE(f.contains(key(1), t + 49h));
    CHECK(f.expired() == 1);
    CHECK(f.evicted() == 0);
}

TEST_CASE("both keys of a hybrid torrent are recognised") {
    manual_clock clk;
    auto f = make_filter(100);
    const auto t = clk.now();
    const id20 v1 = key(7, 0x11);
    const id20 v2_truncated = key(7, 0x22); // the first 20 bytes of the SHA-256 info hash
    CHECK(f.insert(v1, t));
    CHECK(f.insert(v2_truncated, t));
    CHECK(f.size() == 2);
    CHECK(f.contains(v1, t + 1h));
    CHECK(f.contains(v2_truncated, t + 1h));
    CHECK_FALSE(f.contains(key(7, 0x33), t + 1h));
    CHECK_FALSE(f.contains(v1, t + 24h));
    CHECK_FALSE(f.contains(v2_truncated, t + 24h));
}

TEST_CASE("a full filter evicts the oldest delivery and counts it") {
    manual_clock clk;
    auto f = make_filter(3);
    const auto t = clk.now();
    for (std::uint32_t i = 1; i <= 3; ++i) CHECK(f.insert(key(i), t + std::chrono::seconds(i)));
    CHECK(f.insert(key(4), t + 4s));
    CHECK(f.evicted() == 1);
    CHECK(f.size() == 3);
    CHECK_FALSE(f.contains(key(1), t + 4s));
    for (std::uint32_t i = 2; i <= 4; ++i) CHECK(f.contains(key(i), t + 4s));
    // Each key of a hybrid is an entry of its own: two evictions.
    CHECK(f.insert(key(5, 0x11), t + 5s));
    CHECK(f.insert(key(5, 0x22), t + 5s));
    CHECK(f.evicted() == 3);
    CHECK_FALSE(f.contains(key(3), t + 5s));
    CHECK(f.contains(key(4), t + 5s));

    SUBCASE("expired entries leave without counting as evictions") {
        CHECK(f.insert(key(9), t + 48h));
        CHECK(f.evicted() == 3);
        CHECK(f.expired() == 3);
        CHECK(f.size() == 1);
    }
}

TEST_CASE("capacity 0 or period 0 disables the filter") {
    manual_clock clk;
    const auto t = clk.now();
    for (const auto& opt : {delivered_filter_options{0, 24h, 1}, delivered_filter_options{100, 0s, 1}}) {
        delivered_filter f(opt);
        CHECK_FALSE(f.enabled());
        CHECK_FALSE(f.insert(key(1), t));
        CHECK_FALSE(f.contains(key(1), t));
        CHECK(f.size() == 0);
        CHECK(f.capacity() == 0);
    }
}

TEST_CASE("matches a map model over random deliveries and lookups") {
    manual_clock clk;
    std::mt19937 rng(3);
    auto f = make_filter(4096, 600s);
    std::map<id20, time_point> model;
    auto now = clk.now();
    for (int step = 0; step < 50'000; ++step) {
        CAPTURE(step);
        now += std::chrono::milliseconds(rng() % 40'000);
        const id20 k = key(rng() % 60, rng() % 2 ? 0x11 : 0x22);
        auto it = model.find(k);
        const bool live = it != model.end() && now - it->second < 600s;
        if (rng() % 3 == 0) {
            REQUIRE(f.insert(k, now) == !live);
            if (!live) model[k] = now;
        } else {
            REQUIRE(f.contains(k, now) == live);
        }
    }
    CHECK(f.evicted() == 0);
}

TEST_CASE("erase takes a hash back out, so the next announce fetches it again") {
    manual_clock clk;
    auto f = make_filter(4);
    const auto t = clk.now();
    CHECK_FALSE(f.erase(key(1)));
    CHECK(f.insert(key(1), t));
    CHECK(f.insert(key(2), t));
    CHECK(f.erase(key(1)));
    CHECK_FALSE(f.contains(key(1), t));
    CHECK(f.contains(key(2), t));
    CHECK(f.size() == 1);
    CHECK_FALSE(f.erase(key(1)));
    CHECK(f.insert(key(1), t + 1s)); // a new delivery, not a repeat
    CHECK(f.contains(key(1), t + 1s));
    // The erased slot is a dead placeholder: filling the ring evicts only live entries.
    for (std::uint32_t i = 10; i < 13; ++i) CHECK(f.insert(key(i), t + 2s));
    CHECK(f.size() == 4);
    CHECK(f.evicted() == 1); // key(2), the oldest live one
    CHECK_FALSE(f.contains(key(2), t + 2s));
    CHECK(f.contains(key(1), t + 2s));
    delivered_filter off = make_filter(0);
    CHECK_FALSE(off.erase(key(1)));
}

TEST_CASE("defaults") {
    delivered_filter f;
    CHECK(f.enabled());
    CHECK(f.capacity() == 100'000);
    CHECK(f.period() == 24h);
    CHECK(f.memory_bytes() < 4'000'000);
}

} // TEST_SUITE
