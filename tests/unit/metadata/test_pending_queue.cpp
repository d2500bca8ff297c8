#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <vector>

#include "metadata/pending_queue.hpp"
#include "util/clock.hpp"

#include "support/allocation_counter.hpp"

using namespace dhtc;
using namespace dhtc::metadata;
using namespace std::chrono_literals;
using api::hash_source;
using R = offer_result;

namespace {

id20 hid(std::uint32_t n) {
    id20 id;
    id.bytes[0] = 0xab;
    id.bytes[16] = static_cast<std::uint8_t>(n >> 24);
    id.bytes[17] = static_cast<std::uint8_t>(n >> 16);
    id.bytes[18] = static_cast<std::uint8_t>(n >> 8);
    id.bytes[19] = static_cast<std::uint8_t>(n);
    return id;
}

endpoint peer(std::uint32_t n, std::uint16_t port = 6881) { return endpoint{ip_address::v4(0x0a000000u + n), port}; }

pending_queue make_queue(std::size_t capacity, std::chrono::seconds ttl = 60s) {
    return pending_queue(pending_queue_options{capacity, ttl, 42});
}

// The order take() hands entries out, draining the queue.
std::vector<id20> drain(pending_queue& q, time_point now) {
    std::vector<id20> out;
    while (auto e = q.take(now)) out.push_back(e->info_hash);
    return out;
}

} // namespace

TEST_SUITE("pending_queue") {

TEST_CASE("deduplicates by info hash; the same peer again only refreshes") {
    manual_clock clk;
    auto q = make_queue(100);
    const auto t = clk.now();
    CHECK(q.offer(hid(1), peer(1), hash_source::sample, t - 5s, t) == R::added);
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t - 1s, t) == R::duplicate_peer);
    // An older sighting of a listed peer arriving late does not make it look staler.
    CHECK(q.offer(hid(1), peer(1), hash_source::sample, t - 30s, t) == R::duplicate_peer);
    CHECK(q.size() == 1);
    auto e = q.take(t);
    REQUIRE(e);
    CHECK(e->info_hash == hid(1));
    REQUIRE(e->peer_count == 1);
    CHECK(e->peers[0].peer == peer(1));
    CHECK(e->peers[0].seen_at == t - 1s);
    CHECK(e->peers[0].source == hash_source::announce);
    CHECK(e->first_seen == t);
    CHECK(q.size() == 0);
    CHECK_FALSE(q.take(t));
}

TEST_CASE("a peer keeps the DHT's round trip of its latest sighting that had one") {
    manual_clock clk;
    auto q = make_queue(100);
    const auto t = clk.now();
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t, t, api::peer_rtt{300}) == R::added);
    CHECK(q.offer(hid(1), peer(1), hash_source::sample, t, t) == R::duplicate_peer); // unknown: kept
    CHECK(q.offer(hid(1), peer(2), hash_source::sample, t, t) == R::merged);
    auto e = q.take(t);
    REQUIRE(e);
    REQUIRE(e->peer_count == 2);
    for (std::uint8_t k = 0; k < 2; ++k)
        CHECK(e->peers[k].rtt == (e->peers[k].peer == peer(1) ? api::peer_rtt{300} : api::peer_rtt{}));
    CHECK(q.offer(hid(2), peer(1), hash_source::announce, t, t, api::peer_rtt{300}) == R::added);
    CHECK(q.offer(hid(2), peer(1), hash_source::announce, t, t, api::peer_rtt{120}) == R::duplicate_peer);
    e = q.take(t);
    REQUIRE(e);
    CHECK(e->peers[0].rtt == api::peer_rtt{120}); // the later measurement wins
}

TEST_CASE("a v4-mapped address is the same peer as its v4 form; another port is another peer") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t = clk.now();
    const endpoint mapped = *endpoint::parse("[::ffff:10.0.0.1]:6881");
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t, t) == R::added);
    CHECK(q.offer(hid(1), mapped, hash_source::announce, t, t) == R::duplicate_peer);
    CHECK(q.offer(hid(1), peer(1, 6882), hash_source::announce, t, t) == R::merged);
    auto e = q.take(t);
    REQUIRE(e);
    CHECK(e->peer_count == 2);
}

TEST_CASE("at most three peers: the three freshest sightings are kept") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t = clk.now();
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t - 10s, t) == R::added);
    CHECK(q.offer(hid(1), peer(2), hash_source::announce, t - 20s, t) == R::merged);
    CHECK(q.offer(hid(1), peer(3), hash_source::sample, t - 5s, t) == R::merged);
    // Older than all three: refused, nothing changes.
    CHECK(q.offer(hid(1), peer(4), hash_source::announce, t - 25s, t) == R::peers_full);
    // Fresher than the stalest (peer 2 at -20 s): replaces it.
    CHECK(q.offer(hid(1), peer(5), hash_source::announce, t - 15s, t) == R::peer_replaced);
    // As fresh as the stalest (peer 5, at -15 s): a tie goes to the newer report.
    CHECK(q.offer(hid(1), peer(6), hash_source::sample, t - 15s, t) == R::peer_replaced);
    // Refreshing a listed peer of a full entry is a duplicate, not a replacement.
    CHECK(q.offer(hid(1), peer(3), hash_source::announce, t - 1s, t) == R::duplicate_peer);
    auto e = q.take(t);
    REQUIRE(e);
    REQUIRE(e->peer_count == 3);
    // Freshest first.
    CHECK(e->peers[0].peer == peer(3));
    CHECK(e->peers[0].seen_at == t - 1s);
    CHECK(e->peers[1].peer == peer(1));
    CHECK(e->peers[2].peer == peer(6));
    CHECK(e->peers[2].source == hash_source::sample);
    CHECK(q.count(R::peers_full) == 1);
    CHECK(q.count(R::peer_replaced) == 2);
}

TEST_CASE("an entry expires ttl after it arrived, whatever merges came later") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t0 = clk.now();
    REQUIRE(q.offer(hid(1), peer(1), hash_source::announce, t0, t0) == R::added);
    CHECK(q.offer(hid(1), peer(2), hash_source::announce, t0 + 59s, t0 + 59s) == R::merged);
    CHECK(q.offer(hid(1), peer(3), hash_source::announce, t0 + 59s, t0 + 59'999ms) == R::merged);
    CHECK(q.contains(hid(1), t0 + 60s - 1ms));
    CHECK_FALSE(q.contains(hid(1), t0 + 60s));
    CHECK_FALSE(q.take(t0 + 60s));
    CHECK(q.expired() == 1);
    CHECK(q.size() == 0);

    SUBCASE("one millisecond earlier it is still handed out") {
        REQUIRE(q.offer(hid(2), peer(1), hash_source::announce, t0 + 60s, t0 + 60s) == R::added);
        auto e = q.take(t0 + 120s - 1ms);
        REQUIRE(e);
        CHECK(e->info_hash == hid(2));
    }
    SUBCASE("a new offer after expiry starts a new entry") {
        CHECK(q.offer(hid(1), peer(1), hash_source::announce, t0 + 61s, t0 + 61s) == R::added);
        CHECK(q.contains(hid(1), t0 + 120s));
    }
}

TEST_CASE("expired events are refused; events from the future count as now") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t = clk.now();
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t - 60s, t) == R::expired_event);
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t - 61s, t) == R::expired_event);
    CHECK(q.size() == 0);
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t - 60s + 1ms, t) == R::added);
    CHECK(q.offer(hid(2), peer(1), hash_source::announce, t + 1h, t) == R::added);
    auto e = q.take(t);
    REQUIRE(e);
    CHECK(e->info_hash == hid(2));
    CHECK(e->peers[0].seen_at == t);
    CHECK(q.count(R::expired_event) == 2);
}

TEST_CASE("a full queue evicts the entry that arrived first, even if merged since") {
    manual_clock clk;
    auto q = make_queue(3);
    const auto t = clk.now();
    CHECK(q.offer(hid(1), peer(1), hash_source::announce, t, t) == R::added);
    CHECK(q.offer(hid(2), peer(1), hash_source::announce, t + 1s, t + 1s) == R::added);
    CHECK(q.offer(hid(3), peer(1), hash_source::announce, t + 2s, t + 2s) == R::added);
    CHECK(q.offer(hid(1), peer(2), hash_source::announce, t + 3s, t + 3s) == R::merged);
    CHECK(q.offer(hid(4), peer(1), hash_source::announce, t + 4s, t + 4s) == R::evicted_oldest);
    CHECK(q.size() == 3);
    CHECK_FALSE(q.contains(hid(1), t + 4s));
    CHECK(q.offer(hid(5), peer(1), hash_source::announce, t + 5s, t + 5s) == R::evicted_oldest);
    CHECK_FALSE(q.contains(hid(2), t + 5s));
    CHECK(drain(q, t + 5s) == std::vector<id20>{hid(5), hid(4), hid(3)});
    CHECK(q.count(R::evicted_oldest) == 2);
}

TEST_CASE("a full queue refuses events older than its oldest entry as stale") {
    manual_clock clk;
    auto q = make_queue(2);
    const auto t = clk.now();
    REQUIRE(q.offer(hid(1), peer(1), hash_source::announce, t - 10s, t) == R::added);
    REQUIRE(q.offer(hid(2), peer(1), hash_source::announce, t, t + 1s) == R::added);
    // The oldest entry arrived at t (its arrival, not its sighting time, is the reference).
    CHECK(q.offer(hid(3), peer(1), hash_source::announce, t - 1ms, t + 2s) == R::stale);
    CHECK(q.size() == 2);
    CHECK(q.contains(hid(1), t + 2s));
    // Merging into a present entry is not subject to staleness.
    CHECK(q.offer(hid(1), peer(2), hash_source::announce, t - 30s, t + 2s) == R::merged);
    // Exactly as old as the oldest arrival: not older, so it evicts.
    CHECK(q.offer(hid(3), peer(1), hash_source::announce, t, t + 2s) == R::evicted_oldest);
    CHECK_FALSE(q.contains(hid(1), t + 2s));
    CHECK(q.count(R::stale) == 1);
}

TEST_CASE("expired entries make room before anything is evicted") {
    manual_clock clk;
    auto q = make_queue(2);
    const auto t = clk.now();
    REQUIRE(q.offer(hid(1), peer(1), hash_source::announce, t, t) == R::added);
    REQUIRE(q.offer(hid(2), peer(1), hash_source::announce, t + 30s, t + 30s) == R::added);
    // hid(1) expired at t + 60 s, so there is room: this event, older than hid(2)'s arrival,
    // is simply added (staleness only applies to a full queue).
    CHECK(q.offer(hid(3), peer(1), hash_source::announce, t + 10s, t + 60s) == R::added);
    CHECK(q.expired() == 1);
    CHECK(q.count(R::evicted_oldest) == 0);
    CHECK(q.size() == 2);
}

TEST_CASE("take hands out the newest entry; a merge promotes, a duplicate does not") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t = clk.now();
    for (std::uint32_t i = 1; i <= 4; ++i) REQUIRE(q.offer(hid(i), peer(1), hash_source::announce, t, t) == R::added);
    CHECK(q.offer(hid(1), peer(2), hash_source::announce, t, t) == R::merged);
    CHECK(q.offer(hid(2), peer(1), hash_source::announce, t, t) == R::duplicate_peer);
    const auto e = q.take(t);
    REQUIRE(e);
    CHECK(e->info_hash == hid(1));
    CHECK(e->peer_count == 2);
    CHECK(drain(q, t) == std::vector<id20>{hid(4), hid(3), hid(2)});
}

TEST_CASE("remove and contains") {
    manual_clock clk;
    auto q = make_queue(10);
    const auto t = clk.now();
    REQUIRE(q.offer(hid(1), peer(1), hash_source::announce, t, t) == R::added);
    REQUIRE(q.offer(hid(2), peer(1), hash_source::announce, t, t) == R::added);
    CHECK(q.contains(hid(1), t));
    CHECK_FALSE(q.contains(hid(3), t));
    CHECK(q.remove(hid(2)));
    CHECK_FALSE(q.remove(hid(2)));
    CHECK(q.removed() == 1);
    CHECK(drain(q, t) == std::vector<id20>{hid(1)});
    CHECK(q.taken() == 1);
}

TEST_CASE("capacity 1 (and 0, which is clamped to 1)") {
    manual_clock clk;
    for (std::size_t cap : {std::size_t{0}, std::size_t{1}}) {
        CAPTURE(cap);
        auto q = make_queue(cap);
        const auto t = clk.now();
        CHECK(q.capacity() == 1);
        CHECK_FALSE(q.take(t));
        CHECK(q.offer(hid(1), peer(1), hash_source::announce, t, t) == R::added);
        CHECK(q.offer(hid(1), peer(2), hash_source::announce, t, t) == R::merged);
        CHECK(q.offer(hid(2), peer(1), hash_source::announce, t - 1s, t + 1s) == R::stale);
        CHECK(q.offer(hid(2), peer(1), hash_source::announce, t + 1s, t + 1s) == R::evicted_oldest);
        CHECK(q.size() == 1);
        CHECK(q.fill_ratio() == doctest::Approx(1.0));
        CHECK(q.remove(hid(2)));
        CHECK(q.size() == 0);
        CHECK(q.offer(hid(3), peer(1), hash_source::announce, t + 2s, t + 2s) == R::added);
        auto e = q.take(t + 2s);
        REQUIRE(e);
        CHECK(e->info_hash == hid(3));
        CHECK(q.offer(hid(4), peer(1), hash_source::announce, t + 3s, t + 3s) == R::added);
        CHECK(q.offer(hid(5), peer(1), hash_source::announce, t + 3s, t + 63s) == R::expired_event);
        CHECK(q.expired() == 1); // hid(4), purged by that offer
        CHECK_FALSE(q.take(t + 63s));
    }
}

TEST_CASE("counters: one per offer result, plus taken, removed and expired") {
    manual_clock clk;
    auto q = make_queue(2);
    const auto t = clk.now();
    q.offer(hid(1), peer(1), hash_source::announce, t, t);            // added
    q.offer(hid(1), peer(1), hash_source::announce, t, t);            // duplicate_peer
    q.offer(hid(1), peer(2), hash_source::announce, t, t);            // merged
    q.offer(hid(1), peer(3), hash_source::announce, t, t);            // merged
    q.offer(hid(1), peer(4), hash_source::announce, t - 1s, t);       // peers_full
    q.offer(hid(1), peer(4), hash_source::announce, t, t);            // peer_replaced
    q.offer(hid(2), peer(1), hash_source::announce, t, t + 1s);       // added
    q.offer(hid(3), peer(1), hash_source::announce, t - 1s, t + 1s);  // stale
    q.offer(hid(3), peer(1), hash_source::announce, t + 1s, t + 1s);  // evicted_oldest
    q.offer(hid(4), peer(1), hash_source::announce, t - 60s, t + 1s); // expired_event
    CHECK(q.count(R::added) == 2);
    CHECK(q.count(R::duplicate_peer) == 1);
    CHECK(q.count(R::merged) == 2);
    CHECK(q.count(R::peers_full) == 1);
    CHECK(q.count(R::peer_replaced) == 1);
    CHECK(q.count(R::stale) == 1);
    CHECK(q.count(R::evicted_oldest) == 1);
    CHECK(q.count(R::expired_event) == 1);
    CHECK(q.take(t + 1s));
    CHECK(q.remove(hid(2)));
    CHECK(q.taken() == 1);
    CHECK(q.removed() == 1);
    CHECK(q.expired() == 0);
    for (std::size_t r = 0; r < offer_result_count; ++r) CHECK(to_string(static_cast<R>(r)) != "unknown");
}

TEST_CASE("memory grows as the queue fills; once it held its capacity, no allocation") {
    manual_clock clk;
    pending_queue q(pending_queue_options{10'000, 60s, 7});
    const std::size_t empty = q.memory_bytes();
    CHECK(empty < 200'000); // a large capacity costs nothing until used
    std::mt19937 rng(5);
    auto t = clk.now();
    for (std::uint32_t i = 0; i < 10'000; ++i) q.offer(hid(1'000'000 + i), peer(1), hash_source::announce, t, t);
    CHECK(q.size() == q.capacity());
    CHECK(q.memory_bytes() > empty);
    const std::size_t before = g_allocations.load();
    for (int i = 0; i < 50'000; ++i) {
        t += 1ms;
        q.offer(hid(rng() % 20'000), peer(rng() % 8), hash_source::announce, t, t);
        if (i % 3 == 0) (void)q.take(t);
    }
    CHECK(q.size() <= q.capacity());
    if (COUNT_ALLOCATIONS) CHECK(g_allocations.load() == before);
}

TEST_CASE("a queue at the largest capacity costs what it holds") {
    manual_clock clk;
    pending_queue q(pending_queue_options{(std::size_t{1} << 24) - 2, 60s, 7});
    CHECK(q.memory_bytes() < 1'000'000);
    auto t = clk.now();
    for (std::uint32_t i = 0; i < 5'000; ++i) REQUIRE(q.offer(hid(i), peer(1), hash_source::announce, t, t) == offer_result::added);
    CHECK(q.memory_bytes() < 3'000'000);
    for (std::uint32_t i = 0; i < 5'000; ++i) CHECK(q.contains(hid(i), t));
}

TEST_CASE("randomized against a reference model") {
    // The model states the rules directly with a std::map and linear scans.
    struct m_entry {
        std::vector<pending_peer> peers;
        time_point first_seen, last_seen;
        std::uint64_t arrival = 0, recency = 0;
    };
    struct model {
        std::size_t cap;
        duration ttl;
        std::map<id20, m_entry> m;
        std::uint64_t seq = 0;
        std::uint64_t expired = 0;

        void purge(time_point now) {
            for (auto it = m.begin(); it != m.end();) {
                if (now - it->second.first_seen >= ttl) {
                    it = m.erase(it);
                    ++expired;
                } else {
                    ++it;
                }
            }
        }
        R offer(const id20& h, const endpoint& p, hash_source s, time_point ev, time_point now) {
            purge(now);
            ev = std::min(ev, now);
            if (now - ev >= ttl) return R::expired_event;
            if (auto it = m.find(h); it != m.end()) {
                auto& e = it->second;
                for (auto& q : e.peers)
                    if (q.peer == p) {
                        if (ev >= q.seen_at) q = pending_peer{p, s, ev};
                        return R::duplicate_peer;
                    }
                R r = R::merged;
                if (e.peers.size() < 3) {
                    e.peers.push_back(pending_peer{p, s, ev});
                } else {
                    std::size_t k = 0;
                    for (std::size_t j = 1; j < 3; ++j)
                        if (e.peers[j].seen_at < e.peers[k].seen_at) k = j;
                    if (ev < e.peers[k].seen_at) return R::peers_full;
                    e.peers[k] = pending_peer{p, s, ev};
                    r = R::peer_replaced;
                }
                e.last_seen = now;
                e.recency = ++seq;
                return r;
            }
            R r = R::added;
            if (m.size() == cap) {
                auto oldest = m.begin();
                for (auto it = m.begin(); it != m.end(); ++it)
                    if (it->second.arrival < oldest->second.arrival) oldest = it;
                if (ev < oldest->second.first_seen) return R::stale;
                m.erase(oldest);
                r = R::evicted_oldest;
            }
            const std::uint64_t s2 = ++seq;
            m[h] = m_entry{{pending_peer{p, s, ev}}, now, now, s2, s2};
            return r;
        }
        std::optional<std::pair<id20, m_entry>> take(time_point now) {
            purge(now);
            if (m.empty()) return std::nullopt;
            auto best = m.begin();
            for (auto it = m.begin(); it != m.end(); ++it)
                if (it->second.recency > best->second.recency) best = it;
            auto out = *best;
            m.erase(best);
            std::stable_sort(out.second.peers.begin(), out.second.peers.end(),
                             [](const pending_peer& a, const pending_peer& b) { return a.seen_at > b.seen_at; });
            return out;
        }
    };

    for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
        CAPTURE(seed);
        std::mt19937 rng(seed);
        const std::size_t cap = seed == 4 ? 1 : 4 + seed * 5;
        pending_queue q(pending_queue_options{cap, 60s, seed});
        model ref{cap, 60s, {}};
        manual_clock clk;
        auto now = clk.now();
        const std::uint32_t hashes = static_cast<std::uint32_t>(cap * 3);
        for (int step = 0; step < 20'000; ++step) {
            CAPTURE(step);
            const unsigned op = rng() % 100;
            if (op < 3) now += std::chrono::seconds(rng() % 90);
            else now += std::chrono::milliseconds(rng() % 1500);
            if (op < 70) {
                const id20 h = hid(rng() % hashes);
                const endpoint p = peer(rng() % 6);
                const auto src = rng() % 2 ? hash_source::announce : hash_source::sample;
                // Mostly recent sightings, some late ones (stale/expired), a few from the future.
                const unsigned kind = rng() % 10;
                const time_point ev = kind < 6   ? now - std::chrono::milliseconds(rng() % 3000)
                                      : kind < 9 ? now - std::chrono::milliseconds(rng() % 70'000)
                                                 : now + 1s;
                const R got = q.offer(h, p, src, ev, now);
                const R want = ref.offer(h, p, src, ev, now);
                REQUIRE(to_string(got) == to_string(want));
            } else if (op < 85) {
                auto got = q.take(now);
                auto want = ref.take(now);
                REQUIRE(got.has_value() == want.has_value());
                if (!got) continue;
                REQUIRE(got->info_hash == want->first);
                REQUIRE(got->peer_count == want->second.peers.size());
                for (std::size_t k = 0; k < got->peer_count; ++k) {
                    CHECK(got->peers[k].peer == want->second.peers[k].peer);
                    CHECK(got->peers[k].seen_at == want->second.peers[k].seen_at);
                    CHECK(got->peers[k].source == want->second.peers[k].source);
                }
                CHECK(got->first_seen == want->second.first_seen);
                CHECK(got->last_seen == want->second.last_seen);
            } else if (op < 90) {
                const id20 h = hid(rng() % hashes);
                const bool want = ref.m.erase(h) == 1;
                REQUIRE(q.remove(h) == want);
            } else {
                const id20 h = hid(rng() % hashes);
                auto it = ref.m.find(h);
                const bool want = it != ref.m.end() && now - it->second.first_seen < 60s;
                REQUIRE(q.contains(h, now) == want);
            }
            // size() may include entries that expired since the last call; purge both first.
            if (step % 97 == 0) {
                q.purge(now);
                ref.purge(now);
                REQUIRE(q.size() == ref.m.size());
                REQUIRE(q.expired() == ref.expired);
            }
            REQUIRE(q.size() <= cap);
        }
    }
}

} // TEST_SUITE
