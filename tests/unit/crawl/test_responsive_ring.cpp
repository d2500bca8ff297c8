#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "crawl/responsive_ring.hpp"
#include "util/clock.hpp"

#include "support/allocation_counter.hpp"

using namespace dhtc;
using namespace dhtc::crawl;
using namespace std::chrono_literals;

namespace {

endpoint ep(const char* text) {
    auto e = endpoint::parse(text);
    REQUIRE_MESSAGE(e, text);
    return *e;
}

endpoint v4_ep(std::uint32_t i) { return endpoint{ip_address::v4(0x14000000u + i), 6881}; }

endpoint v6_ep(std::uint32_t i) {
    std::array<std::uint8_t, 16> b{0x20, 0x01, 0x48, 0x60};
    b[12] = static_cast<std::uint8_t>(i >> 24);
    b[13] = static_cast<std::uint8_t>(i >> 16);
    b[14] = static_cast<std::uint8_t>(i >> 8);
    b[15] = static_cast<std::uint8_t>(i);
    return endpoint{ip_address::v6(b), 6881};
}

endpoint family_ep(ip_family f, std::uint32_t i) { return f == ip_family::v4 ? v4_ep(i) : v6_ep(i); }

id20 random_id(std::mt19937_64& rng) {
    id20 id;
    for (auto& b : id.bytes) b = static_cast<std::uint8_t>(rng());
    return id;
}

// An id sharing `prefix_bits` leading bits with `base`, random afterwards: clustered ids
// make deep, lopsided tries (the hard case for a closest-node search).
id20 near_id(const id20& base, int prefix_bits, std::mt19937_64& rng) {
    id20 id = random_id(rng);
    for (int bit = 0; bit < prefix_bits; ++bit) {
        const auto byte = static_cast<std::size_t>(bit / 8);
        const auto mask = static_cast<std::uint8_t>(0x80 >> (bit % 8));
        id.bytes[byte] = static_cast<std::uint8_t>((id.bytes[byte] & ~mask) | (base.bytes[byte] & mask));
    }
    return id;
}

id20 xor_of(const id20& a, const id20& b) {
    id20 d;
    for (std::size_t i = 0; i < id20::size; ++i) d.bytes[i] = static_cast<std::uint8_t>(a.bytes[i] ^ b.bytes[i]);
    return d;
}

responsive_ring_options opts(std::size_t cap, std::chrono::seconds ttl = 900s, std::size_t snap = 4096) {
    return responsive_ring_options{.capacity = cap, .ttl = ttl, .snapshot_size = snap, .hash_seed = 99};
}

// closest() against a brute-force sort by XOR distance: the distances must agree exactly
// (ids may repeat, so compare distances, then check each result is a real entry).
void check_closest(const routing_snapshot& s, const id20& target, std::size_t k, ip_family f) {
    std::vector<id20> brute;
    for (const auto& e : s.entries(f)) brute.push_back(xor_of(e.id, target));
    std::sort(brute.begin(), brute.end());
    std::vector<node_entry> out(k);
    const std::size_t n = s.closest(target, out, f);
    REQUIRE(n == std::min(k, brute.size()));
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(xor_of(out[i].id, target) == brute[i]);
        REQUIRE(out[i].ep.address.is_v6() == (f == ip_family::v6));
    }
    // no entry returned twice
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j) REQUIRE_FALSE(out[i].ep == out[j].ep);
}

} // namespace

TEST_SUITE("responsive_ring") {

TEST_CASE("insert, contains, TTL, read-only refused") {
    manual_clock c;
    responsive_ring r(opts(16, 900s));
    const auto t0 = c.now();
    id20 a;
    a.bytes[0] = 1;
    CHECK(r.insert(a, ep("1.2.3.4:6881"), t0) == ring_insert::inserted);
    CHECK(r.contains(ep("1.2.3.4:6881"), t0 + 899s));
    CHECK(r.contains(ep("[::ffff:1.2.3.4]:6881"), t0));
    CHECK_FALSE(r.contains(ep("1.2.3.4:6881"), t0 + 900s));
    CHECK(r.insert(a, ep("5.6.7.8:6881"), t0, /*read_only*/ true) == ring_insert::read_only);
    CHECK_FALSE(r.contains(ep("5.6.7.8:6881"), t0));
    CHECK(r.refused_read_only() == 1);
    CHECK(r.size() == 1);
    // a listed node that turns read-only is dropped
    CHECK(r.insert(a, ep("9.9.9.9:6881"), t0) == ring_insert::inserted);
    CHECK(r.insert(a, ep("9.9.9.9:6881"), t0 + 1s, true) == ring_insert::read_only);
    CHECK_FALSE(r.contains(ep("9.9.9.9:6881"), t0 + 1s));
    r.publish(t0 + 1s);
    CHECK(r.snapshot()->entries(ip_family::v4).size() == 1);
    CHECK(r.size() == 1);
    CHECK(r.purge(t0 + 900s) == 1);
    CHECK(r.size() == 0);
    CHECK(r.expired() == 1);
}

TEST_CASE("a duplicate endpoint refreshes (new id, young again) instead of duplicating") {
    manual_clock c;
    responsive_ring r(opts(4, 100s));
    const auto t0 = c.now();
    id20 a, b;
    a.bytes[0] = 0xaa;
    b.bytes[0] = 0xbb;
    CHECK(r.insert(a, v4_ep(1), t0) == ring_insert::inserted);
    CHECK(r.insert(a, v4_ep(2), t0) == ring_insert::inserted);
    CHECK(r.insert(b, v4_ep(1), t0 + 50s) == ring_insert::refreshed);
    CHECK(r.size() == 2);
    CHECK(r.refreshed() == 1);
    CHECK(r.contains(v4_ep(1), t0 + 149s)); // lives from the refresh
    CHECK_FALSE(r.contains(v4_ep(2), t0 + 149s));
    r.publish(t0 + 60s);
    const auto s = r.snapshot();
    REQUIRE(s->entries(ip_family::v4).size() == 2);
    std::size_t with_b = 0;
    for (const auto& e : s->entries(ip_family::v4)) with_b += e.ep == v4_ep(1) && e.id == b;
    CHECK(with_b == 1);
}

TEST_CASE("a full ring overwrites the oldest; refreshed nodes survive") {
    manual_clock c;
    responsive_ring r(opts(4, 900s));
    const auto t0 = c.now();
    for (std::uint32_t i = 0; i < 4; ++i) r.insert(id20{}, v4_ep(i), t0 + std::chrono::seconds(i));
    // refresh 0: its old slot (the head) becomes a dead placeholder and is dropped to make
    // room, so nothing live is lost: the ring is now 1 2 3 0
    r.insert(id20{}, v4_ep(0), t0 + 10s);
    CHECK(r.size() == 4);
    CHECK(r.evicted() == 0);
    r.insert(id20{}, v4_ep(7), t0 + 11s); // overwrites the oldest: 1
    CHECK(r.contains(v4_ep(0), t0 + 11s));
    CHECK(r.contains(v4_ep(7), t0 + 11s));
    CHECK_FALSE(r.contains(v4_ep(1), t0 + 11s));
    CHECK(r.evicted() == 1);
    CHECK(r.size() == 4);
    for (std::uint32_t i = 100; i < 110; ++i) r.insert(id20{}, v4_ep(i), t0 + 20s);
    CHECK(r.size() == 4);
    CHECK(r.contains(v4_ep(109), t0 + 20s));
    CHECK_FALSE(r.contains(v4_ep(0), t0 + 20s));
}

TEST_CASE("publish: sorted by id per family, expired left out, youngest kept when over size") {
    manual_clock c;
    responsive_ring r(opts(1000, 100s, /*snapshot per family*/ 50));
    std::mt19937_64 rng(1);
    const auto t0 = c.now();
    CHECK(r.snapshot() != nullptr);
    CHECK(r.snapshot()->size() == 0);
    CHECK(r.snapshot()->generation() == 0);
    for (std::uint32_t i = 0; i < 200; ++i) r.insert(random_id(rng), v4_ep(i), t0 + std::chrono::seconds(i));
    for (std::uint32_t i = 0; i < 30; ++i) r.insert(random_id(rng), v6_ep(i), t0 + std::chrono::seconds(i));
    r.publish(t0 + 210s); // v4 0..110 and v6 0..29 expired (age >= 100 s)
    const auto s = r.snapshot();
    CHECK(s->generation() == 1);
    CHECK(s->published_at() == t0 + 210s);
    const auto v4 = s->entries(ip_family::v4);
    const auto v6 = s->entries(ip_family::v6);
    CHECK(v4.size() == 50);
    CHECK(v6.size() == 0);
    CHECK(std::is_sorted(v4.begin(), v4.end(), [](const node_entry& a, const node_entry& b) { return a.id < b.id; }));
    // the youngest 50 of the 89 unexpired v4 nodes: 150..199
    for (const auto& e : v4) {
        const std::uint32_t i = e.ep.address.to_v4_uint() - 0x14000000u;
        CHECK(i >= 150);
        CHECK(i < 200);
    }
    r.publish(t0 + 20s);
    CHECK(r.snapshot()->entries(ip_family::v6).size() == 30);
    CHECK(r.snapshot()->generation() == 2);
}

TEST_CASE("closest() is exact against a brute-force XOR sort (random ids, v4 and v6)") {
    manual_clock c;
    std::mt19937_64 rng(2024);
    for (const ip_family f : {ip_family::v4, ip_family::v6}) {
        for (const std::size_t n : {0u, 1u, 2u, 7u, 8u, 9u, 33u, 500u, 4096u}) {
            responsive_ring r(opts(8192, 900s, 4096));
            for (std::uint32_t i = 0; i < n; ++i) r.insert(random_id(rng), family_ep(f, i), c.now());
            r.publish(c.now());
            const auto s = r.snapshot();
            REQUIRE(s->entries(f).size() == n);
            const int trials = n > 1000 ? 200 : 60;
            for (int t = 0; t < trials; ++t) {
                // targets: random, equal to an entry, next to an entry
                id20 target = random_id(rng);
                if (n > 0 && t % 3 == 1) target = s->entries(f)[rng() % n].id;
                if (n > 0 && t % 3 == 2) target = near_id(s->entries(f)[rng() % n].id, 150, rng);
                for (const std::size_t k : {1u, 3u, 8u, 20u}) check_closest(*s, target, k, f);
            }
        }
    }
}

TEST_CASE("closest() is exact on clustered and duplicate ids") {
    manual_clock c;
    std::mt19937_64 rng(7);
    for (int round = 0; round < 40; ++round) {
        responsive_ring r(opts(4096, 900s, 4096));
        const id20 base = random_id(rng);
        std::uint32_t i = 0;
        // lopsided clusters: many ids deep under `base`, a few at every prefix length
        for (int depth = 0; depth <= 160; depth += 1 + static_cast<int>(rng() % 9))
            for (int j = 0; j < 1 + static_cast<int>(rng() % 4); ++j) r.insert(near_id(base, depth, rng), v4_ep(i++), c.now());
        const id20 dup = random_id(rng);
        for (int j = 0; j < 12; ++j) r.insert(dup, v4_ep(i++), c.now());
        for (int j = 0; j < 300; ++j) r.insert(near_id(base, 100 + static_cast<int>(rng() % 50), rng), v4_ep(i++), c.now());
        r.publish(c.now());
        const auto s = r.snapshot();
        for (int t = 0; t < 30; ++t) {
            const id20 target = t % 4 == 0 ? dup : near_id(base, static_cast<int>(rng() % 161), rng);
            for (const std::size_t k : {1u, 8u, 16u}) check_closest(*s, target, k, ip_family::v4);
        }
    }
}

TEST_CASE("closest() and steady-state publish do not allocate") {
    manual_clock c;
    std::mt19937_64 rng(3);
    responsive_ring r(opts(2000, 900s, 1000));
    // Filled past its capacity first: the set grows as it fills, and allocates nothing more
    // once it has held that many.
    for (std::uint32_t i = 0; i < 2500; ++i) r.insert(random_id(rng), i % 2 ? v4_ep(i) : v6_ep(i), c.now());
    r.publish(c.now());
    r.publish(c.now());
    auto s = r.snapshot();
    std::array<node_entry, 8> out;
    const id20 target = random_id(rng);

    const auto before = g_allocations.load();
    std::size_t found = 0;
    for (int t = 0; t < 100; ++t) found += s->closest(target, out, ip_family::v4);
    const auto after_closest = g_allocations.load();
    CHECK(after_closest == before);
    CHECK(found == 800);

    // inserts and publishes with no reader holding the spare: no allocation either
    s.reset();
    const auto allocs_before = r.snapshot_allocations();
    const auto before_publish = g_allocations.load();
    for (std::uint32_t i = 0; i < 5000; ++i) r.insert(random_id(rng), v4_ep(10000 + i), c.now());
    r.publish(c.now());
    r.publish(c.now());
    if (responsive_ring::recycles_snapshots) {
        CHECK(g_allocations.load() == before_publish);
        CHECK(r.snapshot_allocations() == allocs_before);
    }
}

TEST_CASE("a reader holding a snapshot keeps it intact; publish then allocates a new one") {
    manual_clock c;
    responsive_ring r(opts(100, 900s, 100));
    for (std::uint32_t i = 0; i < 10; ++i) r.insert(id20{}, v4_ep(i), c.now());
    r.publish(c.now());
    const auto held = r.snapshot(); // generation 1
    for (std::uint32_t i = 10; i < 20; ++i) r.insert(id20{}, v4_ep(i), c.now());
    r.publish(c.now()); // reuses the initial spare
    r.publish(c.now()); // the spare is `held`: must not be overwritten
    if (responsive_ring::recycles_snapshots) CHECK(r.snapshot_allocations() == 1);
    CHECK(held->generation() == 1);
    CHECK(held->entries(ip_family::v4).size() == 10);
    CHECK(r.snapshot()->entries(ip_family::v4).size() == 20);
}

TEST_CASE("concurrent readers see complete, sorted snapshots while the owner publishes") {
    manual_clock c;
    responsive_ring r(opts(3000, 900s, 512));
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> bad{0};
    std::atomic<std::uint64_t> reads{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t) {
        readers.emplace_back([&, t] {
            std::mt19937_64 rng(100 + static_cast<unsigned>(t));
            std::array<node_entry, 8> out;
            std::uint64_t last_gen = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                const auto s = r.snapshot();
                if (s->generation() < last_gen) ++bad;
                last_gen = s->generation();
                const auto v4 = s->entries(ip_family::v4);
                if (!std::is_sorted(v4.begin(), v4.end(), [](const node_entry& a, const node_entry& b) { return a.id < b.id; }))
                    ++bad;
                // every entry of generation g was inserted with byte 19 of its id = g % 256
                for (const auto& e : v4)
                    if (e.id.bytes[19] != static_cast<std::uint8_t>(s->generation())) ++bad;
                s->closest(random_id(rng), out, ip_family::v4);
                reads.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    std::mt19937_64 rng(9);
    for (std::uint32_t gen = 1; gen <= 300; ++gen) {
        // each generation replaces all nodes, tagging ids with the generation number
        for (std::uint32_t i = 0; i < 600; ++i) {
            id20 id = random_id(rng);
            id.bytes[19] = static_cast<std::uint8_t>(gen);
            r.insert(id, v4_ep(gen * 1000 + i), c.now());
        }
        c.advance(1ms);
        r.publish(c.now());
        // publish() numbers snapshots 1, 2, ...: it must match `gen`
        REQUIRE(r.snapshot()->generation() == gen);
    }
    stop = true;
    for (auto& t : readers) t.join();
    CHECK(bad.load() == 0);
    CHECK(reads.load() > 0);
    MESSAGE("reads: " << reads.load() << ", snapshot allocations: " << r.snapshot_allocations());
}

} // TEST_SUITE
