#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <new>
#include <random>

#include "metadata/peer_failure_cache.hpp"
#include "util/clock.hpp"

#include "support/allocation_counter.hpp"

using namespace dhtc;
using namespace dhtc::metadata;
using namespace std::chrono_literals;

namespace {

endpoint v4(std::uint32_t n, std::uint16_t port = 6881) { return endpoint{ip_address::v4(0x0a000000u + n), port}; }

endpoint v6(std::uint32_t n, std::uint16_t port = 6881) {
    std::array<std::uint8_t, 16> b{0x20, 0x01, 0x0d, 0xb8};
    b[12] = static_cast<std::uint8_t>(n >> 24);
    b[13] = static_cast<std::uint8_t>(n >> 16);
    b[14] = static_cast<std::uint8_t>(n >> 8);
    b[15] = static_cast<std::uint8_t>(n);
    return endpoint{ip_address::v6(b), port};
}

endpoint text(const char* s) {
    auto e = endpoint::parse(s);
    REQUIRE_MESSAGE(e, s);
    return *e;
}

peer_failure_cache make_cache(std::size_t capacity, std::chrono::seconds ttl = 60s) {
    return peer_failure_cache(peer_failure_cache_options{capacity, ttl, 99});
}

} // namespace

TEST_SUITE("peer_failure_cache") {

TEST_CASE("an entry lives exactly ttl, counted from the first failure") {
    manual_clock clk;
    auto c = make_cache(100);
    const auto t = clk.now();
    for (const endpoint& e : {v4(1), v6(1)}) {
        CAPTURE(e.to_string());
        CHECK_FALSE(c.contains(e, t));
        CHECK(c.insert(e, t));
        CHECK(c.contains(e, t));
        CHECK(c.contains(e, t + 60s - 1ms));
        CHECK_FALSE(c.contains(e, t + 60s));
    }
    // A second failure while cached changes nothing: the TTL still runs from the first.
    CHECK_FALSE(c.insert(v4(1), t + 30s));
    CHECK_FALSE(c.contains(v4(1), t + 60s));
    CHECK(c.size() == 2);
    // After expiry a failure starts a new entry (this insert purged both expired ones).
    CHECK(c.insert(v4(1), t + 61s));
    CHECK(c.expired() == 2);
    CHECK(c.contains(v4(1), t + 121s - 1ms));
    CHECK_FALSE(c.contains(v4(1), t + 121s));
    CHECK(c.purge(t + 200s) == 1);
    CHECK(c.expired() == 3);
    CHECK(c.size() == 0);
    CHECK(c.evicted() == 0);
}

TEST_CASE("the key is the full endpoint: same IP with another port is another peer") {
    manual_clock clk;
    auto c = make_cache(100);
    const auto t = clk.now();
    CHECK(c.insert(v4(7, 6881), t));
    CHECK(c.contains(v4(7, 6881), t));
    CHECK_FALSE(c.contains(v4(7, 6882), t));
    CHECK_FALSE(c.contains(v4(8, 6881), t));
    CHECK(c.insert(v4(7, 6882), t));
    CHECK(c.size() == 2);
    CHECK(c.insert(v6(7, 6881), t));
    CHECK_FALSE(c.contains(v6(7, 6882), t));

    SUBCASE("a v4-mapped v6 address is its v4 form") {
        CHECK(c.insert(text("1.2.3.4:80"), t));
        CHECK(c.contains(text("[::ffff:1.2.3.4]:80"), t));
        CHECK_FALSE(c.insert(text("[::ffff:1.2.3.4]:80"), t));
    }
    SUBCASE("a v6 address with the same leading bytes as a v4 one is not it") {
        CHECK(c.insert(text("1.2.3.4:80"), t));
        CHECK_FALSE(c.contains(text("[102:304::]:80"), t));
        CHECK(c.insert(text("[102:304::]:80"), t));
        CHECK(c.contains(text("[102:304::]:80"), t));
    }
}

TEST_CASE("a full cache evicts the oldest entry and counts it") {
    manual_clock clk;
    auto c = make_cache(3);
    const auto t = clk.now();
    CHECK(c.insert(v4(1), t));
    CHECK(c.insert(v4(2), t + 1s));
    CHECK(c.insert(v4(3), t + 2s));
    CHECK(c.insert(v4(4), t + 3s));
    CHECK(c.evicted() == 1);
    CHECK(c.size() == 3);
    CHECK_FALSE(c.contains(v4(1), t + 3s));
    for (std::uint32_t i = 2; i <= 4; ++i) CHECK(c.contains(v4(i), t + 3s));
    // Expired entries leave without counting as evictions.
    CHECK(c.insert(v4(5), t + 62s));
    CHECK(c.evicted() == 1);
    CHECK(c.expired() == 2);
    CHECK(c.contains(v4(4), t + 62s));

    SUBCASE("capacity 1") {
        auto one = make_cache(1);
        CHECK(one.insert(v4(1), t));
        CHECK(one.insert(v4(2), t));
        CHECK_FALSE(one.contains(v4(1), t));
        CHECK(one.contains(v4(2), t));
        CHECK(one.evicted() == 1);
        CHECK(one.insert(v4(2), t + 60s)); // expired, re-added in place of itself
        CHECK(one.evicted() == 1);
        CHECK(one.contains(v4(2), t + 61s));
    }
}

TEST_CASE("capacity 0 or ttl 0 disables the cache") {
    manual_clock clk;
    const auto t = clk.now();
    for (const auto& opt : {peer_failure_cache_options{0, 60s, 1}, peer_failure_cache_options{200'000, 0s, 1},
                            peer_failure_cache_options{0, 0s, 1}}) {
        peer_failure_cache c(opt);
        CHECK_FALSE(c.enabled());
        CHECK(c.capacity() == 0);
        CHECK_FALSE(c.insert(v4(1), t));
        CHECK_FALSE(c.contains(v4(1), t));
        CHECK(c.size() == 0);
        CHECK(c.purge(t + 1h) == 0);
        CHECK(c.memory_bytes() < 1024);
    }
    // A negative TTL cannot come from the options parser, but it disables too.
    CHECK_FALSE(make_cache(10, -5s).enabled());
    // TTLs above a day are clamped (the compact slot time relies on it).
    CHECK(make_cache(10, 48h).ttl() == 24h);
}

TEST_CASE("expired entries are purged a few per insert, not all at once") {
    manual_clock clk;
    auto c = make_cache(1000);
    const auto t = clk.now();
    for (std::uint32_t i = 0; i < 100; ++i) c.insert(v4(i), t);
    CHECK(c.insert(v4(1000), t + 60s));
    CHECK(c.size() == 100 - 8 + 1);
    for (std::uint32_t i = 0; i < 100; ++i) CHECK_FALSE(c.contains(v4(i), t + 60s));
    CHECK(c.purge(t + 60s) == 92);
    CHECK(c.size() == 1);
    CHECK(c.expired() == 100);
}

TEST_CASE("times stay exact across the 32-bit time base moving (weeks of uptime)") {
    manual_clock clk;
    SUBCASE("a short TTL, failures every 7 s for 26 days") {
        auto c = make_cache(1000, 60s);
        const auto t0 = clk.now();
        const std::uint32_t steps = 26u * 24 * 3600 / 7;
        for (std::uint32_t i = 0; i < steps; ++i) {
            const auto now = t0 + std::chrono::seconds(7) * i;
            REQUIRE(c.insert(v4(i % 50'000), now));
            if (i >= 9) {
                REQUIRE(c.contains(v4((i - 8) % 50'000), now));        // 56 s ago
                REQUIRE_FALSE(c.contains(v4((i - 9) % 50'000), now));  // 63 s ago
                REQUIRE(c.contains(v4((i - 8) % 50'000), now + 4s - 1ms));
                REQUIRE_FALSE(c.contains(v4((i - 8) % 50'000), now + 4s));
            }
        }
        CHECK(c.evicted() == 0);
    }
    SUBCASE("a one-day TTL spanning the move") {
        // Hourly failures from day 0 to day 26 keep the cache non-empty, so the base has
        // to move (near day 24.9) under live entries.
        auto c = make_cache(1000, 24h);
        const auto t0 = clk.now();
        const int last = 26 * 24;
        const int x = 24 * 24 + 12; // inserted at day 24.5, before the move
        const auto x_at = t0 + std::chrono::hours(x);
        for (int h = 0; h <= last; ++h) {
            const auto now = t0 + std::chrono::hours(h);
            REQUIRE(c.insert(v4(static_cast<std::uint32_t>(h)), now));
            if (h >= 24) {
                REQUIRE(c.contains(v4(static_cast<std::uint32_t>(h - 23)), now));
                REQUIRE_FALSE(c.contains(v4(static_cast<std::uint32_t>(h - 24)), now));
            }
            if (h == x + 23) { // after the move
                CHECK(c.contains(v4(x), x_at + 24h - 1ms));
                CHECK_FALSE(c.contains(v4(x), x_at + 24h));
            }
        }
        CHECK(c.evicted() == 0);
    }
}

TEST_CASE("matches a map model over random inserts and lookups") {
    manual_clock clk;
    std::mt19937 rng(11);
    auto c = make_cache(4096, 60s);
    std::map<endpoint, time_point> model;
    auto now = clk.now();
    for (int step = 0; step < 50'000; ++step) {
        CAPTURE(step);
        now += std::chrono::milliseconds(rng() % 4000);
        const endpoint e = rng() % 2 ? v4(rng() % 40, static_cast<std::uint16_t>(1 + rng() % 3))
                                     : v6(rng() % 40, static_cast<std::uint16_t>(1 + rng() % 3));
        auto it = model.find(e);
        const bool live = it != model.end() && now - it->second < 60s;
        if (rng() % 3 == 0) {
            REQUIRE(c.insert(e, now) == !live);
            if (!live) model[e] = now;
        } else {
            REQUIRE(c.contains(e, now) == live);
        }
    }
    CHECK(c.evicted() == 0);
}

TEST_CASE("memory and allocation at the default capacity") {
    manual_clock clk;
    peer_failure_cache c;
    CHECK(c.capacity() == 200'000);
    CHECK(c.ttl() == 60s);
    // Nothing much before the first failure: the ring and the index grow as entries arrive.
    CHECK(c.memory_bytes() < 200'000);
    auto t = clk.now();
    for (std::uint32_t i = 0; i < 300'000; ++i) {
        t += 100us;
        c.insert(i % 2 ? v4(i) : v6(i), t);
        (void)c.contains(v4(i / 2), t);
    }
    CHECK(c.size() == 200'000);
    CHECK(c.evicted() == 100'000);
    // 24 bytes a slot plus the index: under 6 MB for 200k entries.
    CHECK(c.memory_bytes() < 6'000'000);
    // Once it held its capacity, it allocates nothing more.
    const std::size_t before = g_allocations.load();
    for (std::uint32_t i = 300'000; i < 600'000; ++i) {
        t += 100us;
        c.insert(i % 2 ? v4(i) : v6(i), t);
        (void)c.contains(v4(i / 2), t);
    }
    CHECK(c.size() == 200'000);
    if (COUNT_ALLOCATIONS) CHECK(g_allocations.load() == before);
}

TEST_CASE("peer_failures: unreachable peers for the failure TTL, refusals for theirs, other classes not at all") {
    using fc = api::failure_class;
    manual_clock clk;
    peer_failures f(peer_failures_options{100, 60s, 600s, 5});
    const auto t = clk.now();
    f.record(v4(1), fc::connect_refused, t);
    f.record(v4(2), fc::handshake_failed, t); // a first refusal: its second chance, below
    f.record(v4(2), fc::handshake_failed, t); // a second one: the refusal TTL
    for (const auto c : {fc::rejected, fc::hash_mismatch, fc::disconnected, fc::encryption_failed, fc::protocol_error,
                         fc::no_metadata_support, fc::cancelled, fc::sink_failed})
        f.record(v4(3), c, t);
    CHECK(f.contains(v4(1), t + 59s));
    CHECK_FALSE(f.contains(v4(1), t + 60s));
    CHECK(f.contains(v4(2), t + 599s));
    CHECK_FALSE(f.contains(v4(2), t + 600s));
    CHECK_FALSE(f.contains(v4(3), t));
    CHECK(f.unreachable().size() == 1);
    CHECK(f.refused().size() == 1);
    for (const auto c : {fc::connect_refused, fc::connect_timeout, fc::utp_timeout, fc::timeout})
        CHECK(peer_failures::remembered_as(c) == peer_failures::kind::unreachable);
    CHECK(peer_failures::remembered_as(fc::handshake_failed) == peer_failures::kind::refused);

    // A refusal TTL of 0 keeps refusals out; the unreachable part works as before.
    peer_failures off(peer_failures_options{100, 60s, 0s, 5});
    off.record(v4(2), fc::handshake_failed, t);
    off.record(v4(1), fc::timeout, t);
    CHECK_FALSE(off.contains(v4(2), t));
    CHECK(off.contains(v4(1), t));
    CHECK_FALSE(off.refused().enabled());
}

TEST_CASE("peer_failures: a first timeout is skipped briefly, a second one within the TTL for the TTL (issue 32)") {
    using fc = api::failure_class;
    manual_clock clk;
    peer_failures f(peer_failures_options{100, 60s, 600s, 5, 10s});
    const auto t = clk.now();
    for (const auto c : {fc::connect_timeout, fc::utp_timeout, fc::timeout}) {
        CAPTURE(c);
        const auto peer = v4(10 + static_cast<int>(c));
        f.record(peer, c, t);
        CHECK(f.contains(peer, t + 9s));
        CHECK_FALSE(f.contains(peer, t + 10s)); // its second chance
        CHECK(f.timed_out_once(peer, t + 10s));
        f.record(peer, c, t + 20s); // timed out again: unreachable for the whole TTL
        CHECK(f.contains(peer, t + 79s));
        CHECK_FALSE(f.contains(peer, t + 80s));
        CHECK_FALSE(f.timed_out_once(peer, t + 60s));
    }
    // A timeout after the first one was forgotten is a first timeout again.
    f.record(v4(50), fc::timeout, t);
    f.record(v4(50), fc::timeout, t + 60s);
    CHECK_FALSE(f.contains(v4(50), t + 70s));
    // connect_refused is no lost datagram: the whole TTL at once.
    f.record(v4(51), fc::connect_refused, t);
    CHECK(f.contains(v4(51), t + 59s));

    // 0 (or a first TTL as long as the TTL): every timeout for the whole TTL, as before.
    peer_failures off(peer_failures_options{100, 60s, 600s, 5, 0s});
    off.record(v4(1), fc::timeout, t);
    CHECK(off.contains(v4(1), t + 59s));
    CHECK_FALSE(off.timed_out_once(v4(1), t));
}

TEST_CASE("peer_failures: a first refusal is skipped briefly, a second one within the refusal TTL for it (issue 32)") {
    using fc = api::failure_class;
    manual_clock clk;
    peer_failures f(peer_failures_options{100, 60s, 600s, 5, 10s});
    const auto t = clk.now();
    f.record(v4(60), fc::handshake_failed, t);
    CHECK(f.contains(v4(60), t + 9s));
    CHECK_FALSE(f.contains(v4(60), t + 10s)); // its second chance
    f.record(v4(60), fc::handshake_failed, t + 300s); // refused again within the refusal TTL
    CHECK(f.contains(v4(60), t + 899s));
    CHECK_FALSE(f.contains(v4(60), t + 900s));
    CHECK(f.refused().size() == 1);
    // A refusal after the first was forgotten is a first refusal again.
    f.record(v4(61), fc::handshake_failed, t);
    f.record(v4(61), fc::handshake_failed, t + 600s);
    CHECK_FALSE(f.contains(v4(61), t + 610s));
    // A first TTL of 0: every refusal for the refusal TTL, as before.
    peer_failures off(peer_failures_options{100, 60s, 600s, 5, 0s});
    off.record(v4(62), fc::handshake_failed, t);
    CHECK(off.contains(v4(62), t + 599s));
}

} // TEST_SUITE
