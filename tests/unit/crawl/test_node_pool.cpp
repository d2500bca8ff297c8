// The crawl frontier and its companions: node_pool, recent_probes (TTL set of probed
// endpoints), subnet_counter (in-flight caps per /24 or /64) and the slot_index they share.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>

#include "crawl/node_pool.hpp"
#include "crawl/recent_probes.hpp"
#include "crawl/sampled_nodes.hpp"
#include "model/address_hash.hpp"
#include "util/slot_index.hpp"
#include "crawl/subnet_counter.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace dhtc::crawl;
using namespace std::chrono_literals;

namespace {

endpoint ep(const char* text) {
    auto e = endpoint::parse(text);
    REQUIRE_MESSAGE(e, text);
    return *e;
}

id20 id_of(std::uint32_t n) {
    id20 id;
    for (std::size_t i = 0; i < id20::size; ++i) id.bytes[i] = static_cast<std::uint8_t>(n * 31 + i * 7 + (n >> 8));
    return id;
}

// Public IPv4 endpoints 20.0.0.0 + i (all admissible).
endpoint v4_ep(std::uint32_t i, std::uint16_t port = 6881) { return endpoint{ip_address::v4(0x14000000u + i), port}; }

// Public IPv6 endpoints 2001:4860::<i>.
endpoint v6_ep(std::uint32_t i, std::uint16_t port = 6881) {
    std::array<std::uint8_t, 16> b{0x20, 0x01, 0x48, 0x60};
    b[12] = static_cast<std::uint8_t>(i >> 24);
    b[13] = static_cast<std::uint8_t>(i >> 16);
    b[14] = static_cast<std::uint8_t>(i >> 8);
    b[15] = static_cast<std::uint8_t>(i);
    return endpoint{ip_address::v6(b), port};
}

node_pool_options pool_opts(std::size_t cap, double replacements = 1e9, unsigned v6_share = 100) {
    node_pool_options o;
    o.capacity = cap;
    o.v6_share_percent = v6_share;
    o.max_replacements_per_minute = replacements;
    o.hash_seed = 42;
    return o;
}

} // namespace

TEST_SUITE("node_pool") {

TEST_CASE("strict FIFO: nodes come out in push order with their ids (v4)") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(1000));
    for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(pool.push(id_of(i), v4_ep(i)) == push_result::accepted);
    CHECK(pool.size() == 1000);
    for (std::uint32_t i = 0; i < 1000; ++i) {
        auto n = pool.pop();
        REQUIRE(n);
        CHECK(n->id == id_of(i));
        CHECK(n->ep == v4_ep(i));
    }
    CHECK_FALSE(pool.pop());
    CHECK(pool.empty());
    CHECK(pool.popped() == 1000);
    CHECK(pool.count(push_result::accepted) == 1000);
}

TEST_CASE("strict FIFO across families: the order bits interleave both rings") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(300));
    std::vector<pool_node> expected;
    std::mt19937 rng(5);
    for (std::uint32_t i = 0; i < 300; ++i) {
        const bool v6 = rng() % 3 == 0;
        const pool_node n{id_of(i), v6 ? v6_ep(i) : v4_ep(i)};
        REQUIRE(pool.push(n) == push_result::accepted);
        expected.push_back(n);
    }
    CHECK(pool.size_v4() + pool.size_v6() == 300);
    for (const auto& want : expected) {
        auto got = pool.pop();
        REQUIRE(got);
        CHECK(*got == want);
    }
}

TEST_CASE("sample: at most max waiting nodes, spread over the queue, both families, the pool unchanged") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(1000));
    // Popped nodes must not appear: the rings' heads moved past them.
    for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(pool.push(id_of(i), i % 4 == 0 ? v6_ep(i) : v4_ep(i)) == push_result::accepted);
    for (int i = 0; i < 200; ++i) REQUIRE(pool.pop());
    std::vector<pool_node> waiting;
    for (std::uint32_t i = 200; i < 1000; ++i) waiting.push_back({id_of(i), i % 4 == 0 ? v6_ep(i) : v4_ep(i)});

    std::vector<pool_node> out{pool_node{}}; // appended to, not replaced
    pool.sample(100, out);
    REQUIRE(out.size() == 101);
    std::size_t v6 = 0, lowest = 1000, highest = 0;
    for (std::size_t k = 1; k < out.size(); ++k) {
        const auto it = std::find(waiting.begin(), waiting.end(), out[k]);
        REQUIRE(it != waiting.end()); // a waiting node, with its own id
        const std::size_t i = 200 + static_cast<std::size_t>(it - waiting.begin());
        lowest = std::min(lowest, i);
        highest = std::max(highest, i);
        v6 += out[k].ep.address.is_v6() ? 1 : 0;
    }
    CHECK(v6 > 0);
    CHECK(lowest < 300);  // from the front of the queue ...
    CHECK(highest > 700); // ... to its back
    CHECK(pool.size() == 800);

    out.clear();
    pool.sample(5000, out); // more than it holds: every waiting node once
    CHECK(out.size() == 800);
    out.clear();
    pool.sample(0, out);
    CHECK(out.empty());
}

TEST_CASE("duplicates are refused by endpoint, whatever the id") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(100));
    CHECK(pool.push(id_of(1), ep("1.2.3.4:6881")) == push_result::accepted);
    CHECK(pool.push(id_of(2), ep("1.2.3.4:6881")) == push_result::duplicate);
    CHECK(pool.push(id_of(1), ep("[::ffff:1.2.3.4]:6881")) == push_result::duplicate);
    CHECK(pool.push(id_of(1), ep("1.2.3.4:6882")) == push_result::accepted);
    CHECK(pool.push(id_of(1), ep("[2001:4860::1]:6881")) == push_result::accepted);
    CHECK(pool.push(id_of(3), ep("[2001:4860::1]:6881")) == push_result::duplicate);
    CHECK(pool.contains(ep("1.2.3.4:6881")));
    CHECK(pool.contains(ep("[::ffff:1.2.3.4]:6881")));
    CHECK_FALSE(pool.contains(ep("1.2.3.4:6883")));
    CHECK(pool.count(push_result::duplicate) == 3);
    // once popped, the endpoint may come back
    auto n = pool.pop();
    REQUIRE(n);
    CHECK(n->id == id_of(1));
    CHECK_FALSE(pool.contains(ep("1.2.3.4:6881")));
    CHECK(pool.push(id_of(9), ep("1.2.3.4:6881")) == push_result::accepted);
}

TEST_CASE("bogons are refused and counted per verdict (part d #15)") {
    manual_clock c;
    address_policy policy;
    REQUIRE(policy.add_own_endpoint(ep("8.8.4.4:6881")));
    node_pool pool(c, policy, pool_opts(100));
    CHECK(pool.push(id_of(0), ep("1.2.3.4:0")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("0.0.0.0:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("255.255.255.255:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("239.1.1.1:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("192.168.0.1:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("127.0.0.1:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("[fe80::1]:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("[2001:db8::1]:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("8.8.4.4:6881")) == push_result::bogon);
    CHECK(pool.push(id_of(0), ep("8.8.4.4:6882")) == push_result::accepted);
    CHECK(pool.count(push_result::bogon) == 9);
    CHECK(pool.bogon_count(admission_verdict::port_zero) == 1);
    CHECK(pool.bogon_count(admission_verdict::unspecified) == 1);
    CHECK(pool.bogon_count(admission_verdict::broadcast) == 1);
    CHECK(pool.bogon_count(admission_verdict::multicast) == 1);
    CHECK(pool.bogon_count(admission_verdict::private_use) == 1);
    CHECK(pool.bogon_count(admission_verdict::loopback) == 1);
    CHECK(pool.bogon_count(admission_verdict::link_local) == 1);
    CHECK(pool.bogon_count(admission_verdict::reserved) == 1);
    CHECK(pool.bogon_count(admission_verdict::own) == 1);
    CHECK(pool.bogon_count(admission_verdict::ok) == 0);
    CHECK(pool.size() == 1);
}

TEST_CASE("allow_private: a lab on loopback fills the pool") {
    manual_clock c;
    address_policy policy(address_policy_options{.allow_private_addresses = true});
    node_pool pool(c, policy, pool_opts(10));
    CHECK(pool.push(id_of(0), ep("127.0.0.2:6881")) == push_result::accepted);
    CHECK(pool.push(id_of(0), ep("10.0.0.2:6881")) == push_result::accepted);
    CHECK(pool.push(id_of(0), ep("[::1]:6881")) == push_result::accepted);
    CHECK(pool.push(id_of(0), ep("169.254.0.2:6881")) == push_result::bogon);
}

TEST_CASE("full pool: the oldest is replaced within the replacement budget, then refused") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(4, /*replacements per minute*/ 3));
    for (std::uint32_t i = 0; i < 4; ++i) REQUIRE(pool.push(id_of(i), v4_ep(i)) == push_result::accepted);
    CHECK(pool.push(id_of(4), v4_ep(4)) == push_result::replaced_oldest);
    CHECK_FALSE(pool.contains(v4_ep(0)));
    CHECK(pool.push(id_of(5), v4_ep(5)) == push_result::replaced_oldest);
    CHECK(pool.push(id_of(6), v4_ep(6)) == push_result::replaced_oldest);
    CHECK(pool.push(id_of(7), v4_ep(7)) == push_result::over_budget);
    CHECK(pool.push(id_of(3), v4_ep(3)) == push_result::duplicate); // duplicates win over budget
    CHECK(pool.size() == 4);
    CHECK(pool.count(push_result::replaced_oldest) == 3);
    CHECK(pool.count(push_result::over_budget) == 1);
    // 3 per minute: one more after 20 s
    c.advance(19s);
    CHECK(pool.push(id_of(7), v4_ep(7)) == push_result::over_budget);
    c.advance(1s);
    CHECK(pool.push(id_of(7), v4_ep(7)) == push_result::replaced_oldest);
    // the survivors are the newest four, still in order
    for (std::uint32_t i : {4u, 5u, 6u, 7u}) {
        auto n = pool.pop();
        REQUIRE(n);
        CHECK(n->ep == v4_ep(i));
    }
    // below capacity the budget is not consulted
    for (std::uint32_t i = 100; i < 104; ++i) CHECK(pool.push(id_of(i), v4_ep(i)) == push_result::accepted);
}

TEST_CASE("a full family ring refuses without evicting the other family") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(8, 1e9, /*v6 share*/ 25));
    CHECK(pool.capacity_v6() == 2);
    CHECK(pool.capacity_v4() == 8);
    CHECK(pool.push(id_of(0), v4_ep(0)) == push_result::accepted);
    CHECK(pool.push(id_of(0), v6_ep(0)) == push_result::accepted);
    CHECK(pool.push(id_of(1), v6_ep(1)) == push_result::accepted);
    CHECK(pool.push(id_of(2), v6_ep(2)) == push_result::family_full); // pool not full
    for (std::uint32_t i = 1; i < 6; ++i) REQUIRE(pool.push(id_of(i), v4_ep(i)) == push_result::accepted);
    CHECK(pool.size() == 8);
    // pool full, v6 ring full, oldest is IPv4: evicting it would not help, so nothing is
    CHECK(pool.push(id_of(3), v6_ep(3)) == push_result::family_full);
    CHECK(pool.size() == 8);
    CHECK(pool.contains(v4_ep(0)));
    CHECK(pool.count(push_result::family_full) == 2);
    // a v4 push evicts the oldest (v4 #0); then the oldest is v6 #0, and a v6 push may
    // replace it
    CHECK(pool.push(id_of(6), v4_ep(6)) == push_result::replaced_oldest);
    CHECK_FALSE(pool.contains(v4_ep(0)));
    CHECK(pool.push(id_of(3), v6_ep(3)) == push_result::replaced_oldest);
    CHECK_FALSE(pool.contains(v6_ep(0)));
    CHECK(pool.size_v6() == 2);
    const endpoint order[] = {v6_ep(1), v4_ep(1), v4_ep(2), v4_ep(3), v4_ep(4), v4_ep(5), v4_ep(6), v6_ep(3)};
    for (const auto& want : order) {
        auto got = pool.pop();
        REQUIRE(got);
        CHECK(got->ep == want);
    }
    CHECK(pool.empty());

    node_pool v4_only(c, policy, pool_opts(8, 1e9, 0));
    CHECK(v4_only.capacity_v6() == 0);
    CHECK(v4_only.push(id_of(0), v6_ep(0)) == push_result::family_full);
    CHECK(v4_only.push(id_of(0), v4_ep(0)) == push_result::accepted);
}

TEST_CASE("capacity bounds and clear") {
    manual_clock c;
    address_policy policy;
    node_pool tiny(c, policy, pool_opts(0));
    CHECK(tiny.capacity() == 1);
    CHECK(tiny.push(id_of(0), v4_ep(0)) == push_result::accepted);
    CHECK(tiny.push(id_of(1), v4_ep(1)) == push_result::replaced_oldest);
    tiny.clear();
    CHECK(tiny.empty());
    CHECK_FALSE(tiny.contains(v4_ep(1)));
    CHECK(tiny.push(id_of(1), v4_ep(1)) == push_result::accepted);
    CHECK(tiny.pop()->ep == v4_ep(1));
}

TEST_CASE("long random churn matches a reference model (index stays exact)") {
    manual_clock c;
    address_policy policy;
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
        // a small capacity and a small key space: long probe clusters, many duplicates,
        // many backward shifts on pop
        node_pool pool(c, policy, pool_opts(97, 1e12, seed == 3 ? 100 : 40));
        std::deque<pool_node> model;
        std::set<endpoint> present;
        std::mt19937_64 rng(seed);
        std::size_t v6_count = 0;
        for (int step = 0; step < 200000; ++step) {
            const auto r = rng() % 10;
            if (r < 6) {
                const auto k = static_cast<std::uint32_t>(rng() % 400);
                const bool v6 = k % 4 == 0;
                const pool_node n{id_of(k + static_cast<std::uint32_t>(step)), v6 ? v6_ep(k) : v4_ep(k, static_cast<std::uint16_t>(1000 + k % 3))};
                const bool family_full =
                    v6 ? v6_count == pool.capacity_v6() : model.size() - v6_count == pool.capacity_v4();
                push_result want;
                if (present.count(n.ep)) want = push_result::duplicate;
                else if (model.size() == pool.capacity())
                    want = family_full && model.front().ep.address.is_v6() != v6 ? push_result::family_full
                                                                                 : push_result::replaced_oldest;
                else if (family_full) want = push_result::family_full;
                else want = push_result::accepted;
                const auto got = pool.push(n);
                REQUIRE(got == want);
                if (want == push_result::replaced_oldest) {
                    present.erase(model.front().ep);
                    if (model.front().ep.address.is_v6()) --v6_count;
                    model.pop_front();
                }
                if (want == push_result::accepted || want == push_result::replaced_oldest) {
                    model.push_back(n);
                    present.insert(n.ep);
                    if (v6) ++v6_count;
                }
            } else if (r < 9) {
                auto got = pool.pop();
                if (model.empty()) {
                    REQUIRE_FALSE(got);
                } else {
                    REQUIRE(got);
                    REQUIRE(*got == model.front());
                    present.erase(model.front().ep);
                    if (model.front().ep.address.is_v6()) --v6_count;
                    model.pop_front();
                }
            } else {
                const auto k = static_cast<std::uint32_t>(rng() % 400);
                const endpoint e = k % 4 == 0 ? v6_ep(k) : v4_ep(k, static_cast<std::uint16_t>(1000 + k % 3));
                REQUIRE(pool.contains(e) == (present.count(e) == 1));
            }
            REQUIRE(pool.size() == model.size());
            REQUIRE(pool.size_v6() == v6_count);
        }
    }
}

TEST_CASE("memory: at most 48 bytes per node at 100,000 nodes, index included") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy); // defaults: 100,000 nodes, v6 ring of 25%
    CHECK(pool.capacity() == 100'000);
    for (std::uint32_t i = 0; i < 100'000; ++i) REQUIRE(pool.push(id_of(i), v4_ep(i)) == push_result::accepted);
    const double per_node = static_cast<double>(pool.memory_bytes()) / 100'000.0;
    MESSAGE("bytes per node (default, v4 + 25% v6 ring): " << per_node);
    CHECK(per_node <= 48.0);

    node_pool v4_only(c, policy, pool_opts(100'000, 25'000, 0));
    for (std::uint32_t i = 0; i < 100'000; ++i) REQUIRE(v4_only.push(id_of(i), v4_ep(i)) == push_result::accepted);
    const double v4_per_node = static_cast<double>(v4_only.memory_bytes()) / 100'000.0;
    MESSAGE("bytes per node (IPv4 only): " << v4_per_node);
    CHECK(v4_per_node <= 32.0);
}

TEST_CASE("a pool at the largest capacity costs what it holds, and keeps FIFO order while it grows") {
    manual_clock c;
    address_policy policy;
    node_pool pool(c, policy, pool_opts(node_pool::max_capacity));
    CHECK(pool.memory_bytes() < 1'000'000);
    // Pops interleaved with pushes, so the rings are wrapped when they grow.
    std::uint32_t next_pop = 0;
    for (std::uint32_t i = 0; i < 50'000; ++i) {
        REQUIRE(pool.push(id_of(i), i % 5 == 0 ? v6_ep(i) : v4_ep(i)) == push_result::accepted);
        if (i % 3 == 0) {
            const auto n = pool.pop();
            REQUIRE(n);
            CHECK(n->id == id_of(next_pop++));
        }
    }
    CHECK(pool.memory_bytes() < 8'000'000);
    for (std::uint32_t i = next_pop; i < 50'000; i += 97) CHECK(pool.contains(i % 5 == 0 ? v6_ep(i) : v4_ep(i)));
    while (auto n = pool.pop()) CHECK(n->id == id_of(next_pop++));
    CHECK(next_pop == 50'000);
}

} // TEST_SUITE node_pool

TEST_SUITE("recent_probes") {

TEST_CASE("contains until the TTL, not at it") {
    manual_clock c;
    recent_probes rp(recent_probes_options{.ttl = 600s, .capacity = 100, .hash_seed = 9});
    const auto t0 = c.now();
    CHECK(rp.insert(ep("1.2.3.4:6881"), t0));
    CHECK(rp.contains(ep("1.2.3.4:6881"), t0));
    CHECK(rp.contains(ep("[::ffff:1.2.3.4]:6881"), t0));
    CHECK_FALSE(rp.contains(ep("1.2.3.4:6882"), t0));
    CHECK(rp.contains(ep("1.2.3.4:6881"), t0 + 599s));
    CHECK_FALSE(rp.contains(ep("1.2.3.4:6881"), t0 + 600s));
    CHECK(rp.size() == 1); // expired but not purged yet
    CHECK(rp.purge(t0 + 600s) == 1);
    CHECK(rp.size() == 0);
    CHECK(rp.expired() == 1);
}

TEST_CASE("expired entries are purged incrementally by insert") {
    manual_clock c;
    recent_probes rp(recent_probes_options{.ttl = 10s, .capacity = 1000, .hash_seed = 9});
    const auto t0 = c.now();
    for (std::uint32_t i = 0; i < 100; ++i) rp.insert(v4_ep(i), t0);
    CHECK(rp.size() == 100);
    const auto later = t0 + 11s;
    rp.insert(v4_ep(1000), later);
    CHECK(rp.size() < 100); // a few purged, not all at once
    CHECK(rp.size() > 50);
    for (std::uint32_t i = 0; i < 20; ++i) rp.insert(v4_ep(2000 + i), later);
    CHECK(rp.size() == 21); // the backlog drained
    CHECK(rp.expired() == 100);
    CHECK_FALSE(rp.contains(v4_ep(5), later));
}

TEST_CASE("re-insert refreshes; an expired entry counts as new") {
    manual_clock c;
    recent_probes rp(recent_probes_options{.ttl = 10s, .capacity = 3, .hash_seed = 9});
    const auto t0 = c.now();
    CHECK(rp.insert(v4_ep(1), t0));
    CHECK(rp.insert(v4_ep(2), t0 + 1s));
    CHECK_FALSE(rp.insert(v4_ep(1), t0 + 5s)); // refresh: 1 is now youngest
    CHECK(rp.contains(v4_ep(1), t0 + 14s));
    CHECK_FALSE(rp.contains(v4_ep(2), t0 + 14s));
    CHECK(rp.insert(v4_ep(1), t0 + 15s)); // expired: counts as new
    CHECK(rp.size() == 1);
}

TEST_CASE("full: the oldest is evicted and counted (v4 and v6)") {
    manual_clock c;
    recent_probes rp(recent_probes_options{.ttl = 600s, .capacity = 4, .hash_seed = 9});
    const auto t0 = c.now();
    for (std::uint32_t i = 0; i < 4; ++i) rp.insert(i % 2 ? v6_ep(i) : v4_ep(i), t0 + std::chrono::seconds(i));
    CHECK(rp.evicted() == 0);
    rp.insert(v6_ep(10), t0 + 10s);
    CHECK(rp.evicted() == 1);
    CHECK(rp.size() == 4);
    CHECK_FALSE(rp.contains(v4_ep(0), t0 + 10s));
    CHECK(rp.contains(v6_ep(1), t0 + 10s));
    CHECK(rp.contains(v6_ep(10), t0 + 10s));
    rp.clear();
    CHECK(rp.size() == 0);
    CHECK_FALSE(rp.contains(v6_ep(10), t0 + 10s));
}

TEST_CASE("churn with refreshes, expiry and eviction matches a model") {
    // Exact model: the set holds each endpoint whose latest insert is among the last
    // `capacity` inserts (refreshes included) and younger than the TTL.
    constexpr std::size_t cap = 64;
    manual_clock c;
    recent_probes rp(recent_probes_options{.ttl = 50s, .capacity = cap, .hash_seed = 11});
    std::map<endpoint, std::pair<std::size_t, time_point>> last; // endpoint -> (insert number, time)
    std::size_t inserts = 0;
    const auto present = [&](const endpoint& e, time_point now) {
        const auto it = last.find(e);
        return it != last.end() && it->second.first + cap > inserts && now - it->second.second < 50s;
    };
    std::mt19937 rng(17);
    auto now = c.now();
    for (int step = 0; step < 200000; ++step) {
        // mostly quick inserts (the ring turns over within the TTL: evictions), now and
        // then a long pause (expiry)
        now += std::chrono::milliseconds(rng() % 600) + (rng() % 300 == 0 ? 60s : 0s);
        const auto k = static_cast<std::uint32_t>(rng() % 150);
        const endpoint e = k % 3 ? v4_ep(k) : v6_ep(k);
        if (rng() % 2) {
            const bool want_fresh = !present(e, now);
            REQUIRE(rp.insert(e, now) == want_fresh);
            last[e] = {++inserts, now};
        } else {
            REQUIRE(rp.contains(e, now) == present(e, now));
        }
        REQUIRE(rp.size() <= cap);
    }
    CHECK(rp.evicted() > 0);
    CHECK(rp.expired() > 0);
}

} // TEST_SUITE recent_probes

TEST_SUITE("sampled_nodes") {

TEST_CASE("a node is remembered at least one period and less than two, whenever it was inserted") {
    for (const auto offset : {0s, 1s, 3'000s, 3'599s}) {
        CAPTURE(offset.count());
        manual_clock c;
        sampled_nodes s(sampled_nodes_options{.period = 3'600s, .bits = 1 << 16, .hash_seed = 3});
        const auto t0 = c.now();
        s.insert(ep("9.9.9.9:1"), t0); // opens the first generation
        const auto at = t0 + offset;
        s.insert(ep("1.2.3.4:6881"), at);
        CHECK(s.contains(ep("[::ffff:1.2.3.4]:6881"), at));
        CHECK_FALSE(s.contains(ep("1.2.3.4:6882"), at));
        // Other inserts keep rotating the generations; the node outlives its period.
        for (auto t = at; t < at + 3'600s; t += 60s) {
            s.insert(ep("5.5.5.5:1"), t);
            CHECK(s.contains(ep("1.2.3.4:6881"), t));
        }
        CHECK(s.contains(ep("1.2.3.4:6881"), at + 3'599s));
        CHECK_FALSE(s.contains(ep("1.2.3.4:6881"), at + 7'200s)); // two periods: gone in any case
        s.insert(ep("5.5.5.5:1"), at + 7'200s);
        CHECK_FALSE(s.contains(ep("1.2.3.4:6881"), at + 7'200s));
    }
}

TEST_CASE("false positives stay near the design rate at eight bits per node") {
    manual_clock c;
    sampled_nodes s(sampled_nodes_options{.period = 21'600s, .bits = 1 << 20, .hash_seed = 4});
    const auto t0 = c.now();
    const std::uint32_t n = (1 << 20) / 8;
    for (std::uint32_t i = 0; i < n; ++i) s.insert(v4_ep(i), t0);
    std::size_t all_in = 0, false_positive = 0;
    for (std::uint32_t i = 0; i < n; ++i) all_in += s.contains(v4_ep(i), t0 + 1s) ? 1 : 0;
    for (std::uint32_t i = 0; i < 100'000; ++i) false_positive += s.contains(v6_ep(i), t0 + 1s) ? 1 : 0;
    MESSAGE("sampled_nodes: " << false_positive << " false positives in 100,000 at 8 bits per node");
    CHECK(all_in == n);
    CHECK(false_positive < 4'000); // about 2.4% expected
    CHECK(s.inserted() == n);
    CHECK(s.memory_bytes() == 2 * (1 << 20) / 8);
}

} // TEST_SUITE sampled_nodes

TEST_SUITE("subnet_counter") {

TEST_CASE("per-subnet cap: /24 for IPv4") {
    subnet_counter sc(subnet_counter_options{.per_subnet_max = 8, .total_max = 512, .hash_seed = 5});
    for (int i = 0; i < 8; ++i) CHECK(sc.try_acquire(ep("1.2.3.4:6881")) == subnet_acquire::ok);
    CHECK(sc.try_acquire(ep("1.2.3.200:1")) == subnet_acquire::subnet_full);
    CHECK(sc.try_acquire(ep("[::ffff:1.2.3.1]:1")) == subnet_acquire::subnet_full);
    CHECK(sc.try_acquire(ep("1.2.4.4:6881")) == subnet_acquire::ok);
    CHECK(sc.in_flight(ip_address::v4(0x01020309u)) == 8);
    CHECK(sc.in_flight() == 9);
    CHECK(sc.subnets() == 2);
    CHECK(sc.refused_subnet() == 2);
    CHECK(sc.release(ep("1.2.3.77:9")));
    CHECK(sc.try_acquire(ep("1.2.3.5:6881")) == subnet_acquire::ok);
}

TEST_CASE("per-subnet cap: /64 for IPv6") {
    subnet_counter sc(subnet_counter_options{.per_subnet_max = 2, .total_max = 10, .hash_seed = 5});
    CHECK(sc.try_acquire(ep("[2001:4860:0:1::1]:1")) == subnet_acquire::ok);
    CHECK(sc.try_acquire(ep("[2001:4860:0:1:ffff::2]:1")) == subnet_acquire::ok);
    CHECK(sc.try_acquire(ep("[2001:4860:0:1::3]:1")) == subnet_acquire::subnet_full);
    CHECK(sc.try_acquire(ep("[2001:4860:0:2::1]:1")) == subnet_acquire::ok);
}

TEST_CASE("total cap, release and unmatched release") {
    subnet_counter sc(subnet_counter_options{.per_subnet_max = 8, .total_max = 4, .hash_seed = 5});
    for (std::uint32_t i = 0; i < 4; ++i) CHECK(sc.try_acquire(v4_ep(i << 8)) == subnet_acquire::ok);
    CHECK(sc.try_acquire(v4_ep(99 << 8)) == subnet_acquire::total_full);
    CHECK(sc.refused_total() == 1);
    CHECK(sc.subnets() == 4);
    CHECK(sc.release(v4_ep(2 << 8)));
    CHECK(sc.subnets() == 3);
    CHECK_FALSE(sc.release(v4_ep(2 << 8)));
    CHECK_FALSE(sc.release(ep("9.9.9.9:1")));
    CHECK(sc.unmatched_releases() == 2);
    CHECK(sc.in_flight() == 3);
    CHECK(sc.try_acquire(v4_ep(99 << 8)) == subnet_acquire::ok);
}

TEST_CASE("random acquire/release never exceeds either cap and matches a model") {
    subnet_counter sc(subnet_counter_options{.per_subnet_max = 3, .total_max = 40, .hash_seed = 77});
    std::map<std::uint32_t, std::size_t> model; // subnet number -> in flight
    std::size_t total = 0;
    std::mt19937 rng(23);
    const auto addr = [](std::uint32_t s, std::uint32_t host) {
        if (s % 2) return v4_ep(s << 8 | host).address;
        std::array<std::uint8_t, 16> b{0x20, 0x01, 0x48, 0x60};
        b[7] = static_cast<std::uint8_t>(s);     // the /64
        b[15] = static_cast<std::uint8_t>(host); // the host part
        b[9] = static_cast<std::uint8_t>(host * 13);
        return ip_address::v6(b);
    };
    for (int step = 0; step < 200000; ++step) {
        const auto s = static_cast<std::uint32_t>(rng() % 60);
        const auto a = addr(s, rng() % 200);
        if (rng() % 2) {
            const auto got = sc.try_acquire(a);
            subnet_acquire want = subnet_acquire::ok;
            if (total >= 40) want = subnet_acquire::total_full;
            else if (model[s] >= 3) want = subnet_acquire::subnet_full;
            REQUIRE(got == want);
            if (want == subnet_acquire::ok) {
                ++model[s];
                ++total;
            }
        } else {
            const bool want = model[s] > 0;
            REQUIRE(sc.release(a) == want);
            if (want) {
                --model[s];
                --total;
            }
        }
        REQUIRE(sc.in_flight() == total);
        REQUIRE(sc.in_flight() <= 40);
        REQUIRE(sc.in_flight(a) == model[s]);
        REQUIRE(sc.in_flight(a) <= 3);
    }
}

} // TEST_SUITE subnet_counter

TEST_SUITE("slot_index") {

// Hashes chosen by the test: `home` buckets collide on purpose, so clusters grow past the
// saturating distance and deletions must recompute homes through hash_of.
TEST_CASE("colliding hashes, saturated distances, random erase order: matches a model") {
    for (const unsigned value_bits : {25u, 24u, 30u}) {
        detail::slot_index idx(400, value_bits);
        REQUIRE(idx.bucket_count() == 512);
        std::vector<std::uint64_t> hash_of_value(400);
        std::mt19937 rng(value_bits);
        for (std::uint32_t v = 0; v < 400; ++v) hash_of_value[v] = v < 300 ? 7 : (rng() % 5) * 100 + 510; // wraps
        std::set<std::uint32_t> present;
        const auto hash_of = [&](std::uint32_t v) { return hash_of_value[v]; };
        const auto check_all = [&] {
            for (std::uint32_t v = 0; v < 400; ++v) {
                const auto got = idx.find(hash_of_value[v], [v](std::uint32_t x) { return x == v; });
                REQUIRE((got == v) == (present.count(v) == 1));
                if (!present.count(v)) REQUIRE(got == detail::slot_index::npos);
            }
        };
        for (std::uint32_t v = 0; v < 400; ++v) {
            idx.insert(hash_of_value[v], v);
            present.insert(v);
        }
        CHECK(idx.size() == 400);
        check_all();
        for (int round = 0; round < 3000; ++round) {
            const auto v = static_cast<std::uint32_t>(rng() % 400);
            if (present.count(v)) {
                REQUIRE(idx.erase(hash_of_value[v], v, hash_of));
                present.erase(v);
            } else {
                REQUIRE_FALSE(idx.erase(hash_of_value[v], v, hash_of));
                idx.insert(hash_of_value[v], v);
                present.insert(v);
            }
            REQUIRE(idx.size() == present.size());
            if (round % 100 == 0) check_all();
        }
        check_all();
        idx.clear();
        CHECK(idx.size() == 0);
        CHECK(idx.find(7, [](std::uint32_t) { return true; }) == detail::slot_index::npos);
    }
}

TEST_CASE("sizes and limits") {
    detail::slot_index small(0, 24);
    CHECK(small.bucket_count() == 8);
    detail::slot_index pool(100'000, 25);
    CHECK(pool.bucket_count() == 131'072); // load at most 80%
    CHECK(pool.memory_bytes() == 131'072 * 4);
    CHECK(pool.max_value() == (1u << 25) - 2);
    CHECK(pool.saturated_distance() == 127);
    detail::slot_index narrow(10, 2); // clamped to 16 value bits
    CHECK(narrow.max_value() == (1u << 16) - 2);
}

TEST_CASE("keyed hashes: equal inputs agree, keys and families separate") {
    const auto k1 = detail::hash_key_from_seed(1);
    const auto k2 = detail::hash_key_from_seed(2);
    const auto a = ip_address::v4(0x01020304u);
    CHECK(detail::hash_endpoint(k1, a, 80) == detail::hash_endpoint(k1, a, 80));
    CHECK(detail::hash_endpoint(k1, a, 80) != detail::hash_endpoint(k2, a, 80));
    CHECK(detail::hash_endpoint(k1, a, 80) != detail::hash_endpoint(k1, a, 81));
    CHECK(detail::hash_address(k1, a) != detail::hash_address(k2, a));
    const auto r1 = detail::hash_key_from_seed(0);
    const auto r2 = detail::hash_key_from_seed(0);
    CHECK(r1 != r2); // 0 draws a random key
}

} // TEST_SUITE slot_index
