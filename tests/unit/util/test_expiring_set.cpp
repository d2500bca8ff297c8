#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "util/clock.hpp"
#include "util/expiring_set.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

// A deliberately weak hash (many collisions) so index probing and deletion shifts get
// exercised through the template too.
struct weak_hash {
    std::uint64_t operator()(const siphash_key&, std::uint32_t k) const noexcept { return k % 7; }
};
struct good_hash {
    std::uint64_t operator()(const siphash_key& key, std::uint32_t k) const noexcept {
        return siphash24(key, std::string_view(reinterpret_cast<const char*>(&k), sizeof k));
    }
};

template <class Hash = good_hash, class Value = expiring_no_value, class Stamps = wide_stamps>
using set_of = expiring_set<std::uint32_t, Hash, Value, Stamps>;

expiring_set_options opts(std::size_t cap, std::chrono::seconds ttl, expiring_repeat r = expiring_repeat::keep) {
    return {.capacity = cap, .ttl = ttl, .repeat = r, .hash_seed = 7};
}

} // namespace

TEST_SUITE("expiring_set") {

TEST_CASE_TEMPLATE("insert, contains, expiry at exactly ttl", S, set_of<>, set_of<weak_hash>,
                   set_of<good_hash, expiring_no_value, narrow_stamps>) {
    manual_clock clk;
    S s(opts(8, 10s));
    const auto t = clk.now();
    CHECK(s.enabled());
    CHECK(s.insert(1, t) == expiring_insert::added);
    CHECK(s.insert(1, t + 1s) == expiring_insert::present);
    CHECK(s.contains(1, t + 9s));
    CHECK_FALSE(s.contains(1, t + 10s)); // the ttl runs from the first insert (keep)
    CHECK(s.size() == 1);
    CHECK(s.purge(t + 10s) == 1);
    CHECK(s.size() == 0);
    CHECK(s.expired() == 1);
    // expired but not purged: a re-insert is an add, and the old entry counts as expired
    CHECK(s.insert(2, t + 20s) == expiring_insert::added);
    CHECK(s.insert(2, t + 30s) == expiring_insert::added);
    CHECK(s.expired() == 2);
    CHECK(s.contains(2, t + 39s));
}

TEST_CASE("refresh moves a key to the young end and updates its value") {
    manual_clock clk;
    set_of<good_hash, int> s(opts(4, 100s, expiring_repeat::refresh));
    const auto t = clk.now();
    s.insert(1, t, 10);
    s.insert(2, t + 1s, 20);
    s.insert(3, t + 2s, 30);
    CHECK(s.insert(1, t + 3s, 11) == expiring_insert::refreshed);
    CHECK(s.size() == 3);
    CHECK(s.find(1, t + 3s)->value == 11);
    // full after 4: the dead slot of the first 1 leaves first without counting, then 2 is evicted
    CHECK(s.insert(4, t + 4s, 40) == expiring_insert::added);
    CHECK(s.evicted() == 0);
    CHECK(s.insert(5, t + 5s, 50) == expiring_insert::added);
    CHECK(s.evicted() == 1);
    CHECK_FALSE(s.contains(2, t + 5s));
    std::vector<std::uint32_t> order;
    s.for_each_youngest(t + 5s, [&](std::uint32_t k, int v) {
        CHECK(v == static_cast<int>(k) * 10 + (k == 1 ? 1 : 0));
        order.push_back(k);
        return true;
    });
    CHECK(order == std::vector<std::uint32_t>{5, 4, 1, 3});
    order.clear();
    s.for_each_youngest(t + 5s, [&](std::uint32_t k, int) {
        order.push_back(k);
        return order.size() < 2;
    });
    CHECK(order == std::vector<std::uint32_t>{5, 4});
    // the refreshed 1 lives 100 s from its refresh
    CHECK(s.contains(1, t + 102s));
    CHECK_FALSE(s.contains(3, t + 102s));
}

TEST_CASE("erase removes one key and leaves a dead slot") {
    manual_clock clk;
    set_of<weak_hash> s(opts(4, 100s));
    const auto t = clk.now();
    for (std::uint32_t k = 0; k < 4; ++k) s.insert(k, t);
    CHECK(s.erase(0));
    CHECK_FALSE(s.erase(0));
    CHECK_FALSE(s.erase(99));
    CHECK(s.size() == 3);
    for (std::uint32_t k = 1; k < 4; ++k) CHECK(s.contains(k, t));
    CHECK(s.insert(7, t) == expiring_insert::added); // reuses the dead head slot
    CHECK(s.evicted() == 0);
    CHECK(s.size() == 4);
    CHECK(s.insert(0, t) == expiring_insert::added);
    CHECK(s.evicted() == 1);
    CHECK_FALSE(s.contains(1, t));
}

TEST_CASE("disabled: capacity 0 stores nothing and allocates nothing") {
    manual_clock clk;
    set_of<> s(opts(0, 10s));
    CHECK_FALSE(s.enabled());
    CHECK(s.insert(1, clk.now()) == expiring_insert::disabled);
    CHECK_FALSE(s.contains(1, clk.now()));
    CHECK_FALSE(s.erase(1));
    CHECK(s.memory_bytes() == sizeof(s));
}

TEST_CASE("a full set evicts the oldest; an expired head counts as expired, not evicted") {
    manual_clock clk;
    set_of<> s(opts(2, 10s));
    const auto t = clk.now();
    s.insert(1, t);
    s.insert(2, t + 1s);
    s.insert(3, t + 2s);
    CHECK(s.evicted() == 1);
    CHECK_FALSE(s.contains(1, t + 2s));
    s.clear();
    CHECK(s.size() == 0);
    CHECK_FALSE(s.contains(2, t + 2s));
    CHECK(s.insert(2, t + 2s) == expiring_insert::added);
}

TEST_CASE("slot layout: no padding between stamp, key and flag") {
    struct key19 {
        std::uint8_t b[19];
        bool operator==(const key19&) const = default;
    };
    struct h19 {
        std::uint64_t operator()(const siphash_key&, const key19&) const noexcept { return 0; }
    };
    CHECK(sizeof(expiring_set<key19, h19, expiring_no_value, narrow_stamps>::slot) == 24);
    CHECK(sizeof(set_of<>::slot) == 16);
}

TEST_CASE("narrow stamps survive a rebase past 24 days") {
    manual_clock clk;
    set_of<good_hash, expiring_no_value, narrow_stamps> s(opts(16, 60s));
    auto t = clk.now();
    s.insert(1, t);
    for (int day = 1; day <= 60; ++day) {
        t += 24h;
        s.insert(static_cast<std::uint32_t>(100 + day), t);
        CHECK(s.contains(static_cast<std::uint32_t>(100 + day), t + 59s));
        CHECK_FALSE(s.contains(static_cast<std::uint32_t>(100 + day), t + 60s));
        CHECK_FALSE(s.contains(1, t));
    }
}

TEST_CASE("randomised against a model (keep and refresh)") {
    for (const auto mode : {expiring_repeat::keep, expiring_repeat::refresh}) {
        manual_clock clk;
        set_of<weak_hash> s(opts(4'000, 50s, mode)); // above inserts per ttl: nothing is evicted
        std::map<std::uint32_t, time_point> model;
        std::mt19937 rng(3);
        auto now = clk.now();
        for (int i = 0; i < 20'000; ++i) {
            now += std::chrono::milliseconds(rng() % 20);
            const std::uint32_t k = rng() % 300;
            const auto it = model.find(k);
            const bool live = it != model.end() && now - it->second < 50s;
            switch (rng() % 4) {
            case 0: {
                const auto r = s.insert(k, now);
                if (!live) {
                    REQUIRE(r == expiring_insert::added);
                    model[k] = now;
                } else if (mode == expiring_repeat::refresh) {
                    REQUIRE(r == expiring_insert::refreshed);
                    model[k] = now;
                } else {
                    REQUIRE(r == expiring_insert::present);
                }
                break;
            }
            case 1:
                s.erase(k);
                model.erase(k);
                break;
            default: REQUIRE(s.contains(k, now) == live);
            }
        }
        CHECK(s.evicted() == 0);
    }
}

} // TEST_SUITE
