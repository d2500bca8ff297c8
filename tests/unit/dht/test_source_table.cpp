// The per-node and per-IP table shared by answers and queries: budgets per node (IP and
// port) with a looser ceiling per IP, answers first, one budget per node id on an IP, trust,
// back-off, and bounded tables that never forget a node or IP they still owe tokens.
#include <doctest/doctest.h>

#include "dht/source_table.hpp"
#include "model/events.hpp"
#include "util/clock.hpp"

#include <vector>

using namespace dhtc;
using namespace dhtc::crawl;
using namespace std::chrono_literals;

namespace {
endpoint ep(const char* text) { return *endpoint::parse(text); }
ip_address ip(const char* text) { return *ip_address::parse(text); }
endpoint nth(std::uint32_t i, std::uint16_t port = 6881) { return {ip_address::v4(0x01000000u + i), port}; }
id20 id_of(std::uint8_t b) {
    id20 id;
    id.bytes.fill(b);
    return id;
}
const id20 no_id{};

// Answers to `to` while check and commit allow them; returns how many went out.
int answer_all(source_table& t, const endpoint& to, time_point now, int tries, const id20& id = no_id) {
    int sent = 0;
    for (int i = 0; i < tries; ++i) {
        const auto c = t.check_answer(to, id, now);
        if (c.verdict != send_verdict::ok) break;
        t.commit_answer(c);
        ++sent;
    }
    return sent;
}

int query_all(source_table& t, const endpoint& to, time_point now, const id20& id = no_id) {
    int sent = 0;
    while (t.try_query(to, id, now).verdict == send_verdict::ok) ++sent;
    return sent;
}
} // namespace

TEST_SUITE("source table") {

TEST_CASE("answers: the IP's answer budget, the IP's ceiling and the node's budget all apply") {
    manual_clock c;
    source_table t(source_table_options{.answer_rate = 40, .node_rate = 1000, .node_burst = 1000, .ip_rate = 1000,
                                        .ip_burst = 1000, .hash_seed = 7});
    CHECK(answer_all(t, ep("1.2.3.4:1"), c.now(), 100) == 40);
    CHECK(t.check_answer(ep("[::ffff:1.2.3.4]:2"), no_id, c.now()).verdict ==
          send_verdict::over_answer_budget); // same source IP, any port
    CHECK(answer_all(t, ep("1.2.3.5:1"), c.now(), 1) == 1);
    c.advance(25ms); // one answer token back
    CHECK(answer_all(t, ep("1.2.3.4:1"), c.now(), 100) == 1);
    CHECK(t.stats().refused_answer_source == 3);

    source_table strict(source_table_options{.answer_rate = 40, .hash_seed = 7}); // 2/s, burst 10 per node
    CHECK(answer_all(strict, ep("1.2.3.4:1"), c.now(), 100) == 10);
    c.advance(1s);
    CHECK(answer_all(strict, ep("1.2.3.4:1"), c.now(), 100) == 2);
    CHECK(strict.stats().refused_answer_destination == 2);
}

TEST_CASE("nodes behind one IP each have their own budget, under the IP's ceiling") {
    manual_clock c;
    source_table t(source_table_options{.answer_rate = 1000, .hash_seed = 4}); // node 2/s burst 10, IP 16/s burst 80
    // Eight nodes on one IP (distinct ports): each takes its own 10 - 2 (headroom) queries.
    int total = 0;
    for (std::uint16_t port = 1; port <= 8; ++port) {
        const int n = query_all(t, {ip("9.1.1.1"), port}, c.now());
        CHECK(n == 8);
        total += n;
    }
    CHECK(total == 64); // the IP's 80 less its headroom of 16
    // A ninth node on that IP finds the IP's query share spent, but is answered.
    CHECK(t.try_query({ip("9.1.1.1"), 9}, no_id, c.now()).verdict == send_verdict::over_budget);
    CHECK(t.stats().refused_query_ip == 1);
    CHECK(answer_all(t, {ip("9.1.1.1"), 9}, c.now(), 100) == 10);
    // Answers to the others take the rest of the ceiling; then it refuses them too.
    int answered = 0;
    for (std::uint16_t port = 1; port <= 8; ++port) answered += answer_all(t, {ip("9.1.1.1"), port}, c.now(), 100);
    CHECK(answered == 6);
    CHECK(t.stats().refused_answer_ip >= 1);
    CHECK(t.node_count() == 9);
    CHECK(t.size() == 1);
}

TEST_CASE("answers first: a node that queries us within its budget gets every answer, whatever we query") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 3}); // 2/s, burst 10, headroom 2
    const endpoint n = ep("5.5.5.5:6881");
    // We spend what our queries may of its budget...
    CHECK(query_all(t, n, c.now()) == 8);
    // ...then it queries us with a whole burst: every one is answered.
    CHECK(answer_all(t, n, c.now(), 10) == 10);
    CHECK(answer_all(t, n, c.now(), 1) == 0); // its own budget is spent now
    CHECK(t.try_query(n, no_id, c.now()).verdict == send_verdict::over_budget);
    // It keeps querying at its rate while we would query it all along: it still gets every
    // answer, and our queries wait until its answers leave room.
    int answers = 0, queries = 0, refused_answers = 0;
    c.advance(400ms); // its first query after the burst comes when its budget has the token
    for (int step = 0; step < 600; ++step) {
        c.advance(100ms);
        if (step % 5 == 0) {
            const auto a = t.check_answer(n, no_id, c.now());
            if (a.verdict == send_verdict::ok) {
                t.commit_answer(a);
                ++answers;
            } else {
                ++refused_answers;
            }
        }
        queries += t.try_query(n, no_id, c.now()).verdict == send_verdict::ok;
    }
    CHECK(refused_answers == 0);
    CHECK(answers == 120);
    CHECK(queries == 0); // it uses its whole rate: nothing is left for ours
}

TEST_CASE("everything one node receives stays within rate x t + 2 x burst - headroom") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 3});
    const endpoint n = ep("5.5.5.6:6881");
    int total = 0;
    for (int step = 0; step < 100; ++step) { // 10 s, everything we may send
        total += query_all(t, n, c.now());
        total += answer_all(t, n, c.now(), 100);
        c.advance(100ms);
    }
    CHECK(total <= 2 * 10 + 20 - 2);
    CHECK(total >= 2 * 10 + 20 - 2 - 2);
}

TEST_CASE("query_ready_at says when a node's budget and back-off let a query go, taking nothing") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 3});
    const endpoint n = ep("6.6.6.6:1");
    CHECK(t.query_ready_at(n, no_id, c.now()) == c.now()); // unknown: at once
    for (int i = 0; i < 8; ++i) REQUIRE(t.try_query(n, no_id, c.now()).verdict == send_verdict::ok);
    const auto check = t.try_query(n, no_id, c.now());
    CHECK(check.verdict == send_verdict::over_budget);
    CHECK(check.ready_at > c.now());
    CHECK(check.ready_at <= c.now() + 501ms); // one token at 2/s
    CHECK(t.query_ready_at(n, no_id, c.now()) == check.ready_at);
    c.advance(check.ready_at - c.now());
    CHECK(t.try_query(n, no_id, c.now()).verdict == send_verdict::ok);
    t.on_rate_limited(n, no_id, c.now());
    CHECK(t.query_ready_at(n, no_id, c.now()) >= c.now() + 60s);
}

TEST_CASE("nodes refused for one spent budget are told successive instants, one token apart") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 4}); // IP: 16/s, burst 80, headroom 16
    int sent = 0;
    for (std::uint16_t port = 1; port <= 8; ++port) sent += query_all(t, {ip("9.2.2.2"), port}, c.now());
    REQUIRE(sent == 64);
    // Forty more nodes on that IP wait for its ceiling: each is given its own token's instant,
    // so a parking wakes one per token instead of all forty at each.
    std::vector<time_point> slots;
    for (std::uint16_t port = 100; port < 140; ++port) {
        const auto q = t.try_query({ip("9.2.2.2"), port}, no_id, c.now());
        REQUIRE(q.verdict == send_verdict::over_budget);
        slots.push_back(q.ready_at);
    }
    for (std::size_t i = 1; i < slots.size(); ++i) CHECK(slots[i] - slots[i - 1] == std::chrono::microseconds(62'500));
    // Each, woken at its instant, finds the token there.
    int woke_and_sent = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
        c.advance(slots[i] - c.now());
        woke_and_sent += t.try_query({ip("9.2.2.2"), static_cast<std::uint16_t>(100 + i)}, no_id, c.now()).verdict ==
                         send_verdict::ok;
    }
    CHECK(woke_and_sent == 40);
}

TEST_CASE("endpoints of one IP that carry the same node id are one node") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 8});
    const id20 x = id_of(0x42);
    CHECK(query_all(t, ep("7.1.1.1:1000"), c.now(), x) == 8);
    // NAT rebinding: the same node at a new port has no fresh budget.
    CHECK(t.try_query(ep("7.1.1.1:2000"), x, c.now()).verdict == send_verdict::over_budget);
    CHECK(t.stats().node_rebinds == 1);
    // Nor has the stale endpoint it left (it follows the node, both ways).
    CHECK(t.try_query(ep("7.1.1.1:1000"), x, c.now()).verdict == send_verdict::over_budget);
    CHECK(t.node_count() == 1);
    // Another id on that IP is another node; the same id on another IP is another node.
    CHECK(query_all(t, ep("7.1.1.1:3000"), c.now(), id_of(0x43)) == 8);
    CHECK(query_all(t, ep("7.1.1.2:1000"), c.now(), x) == 8);
    // Back-off follows the node too.
    t.on_rate_limited(ep("7.1.1.1:2000"), x, c.now());
    c.advance(10s);
    CHECK(t.try_query(ep("7.1.1.1:1000"), x, c.now()).verdict == send_verdict::backed_off);
    CHECK(t.try_query(ep("7.1.1.1:3000"), id_of(0x43), c.now()).verdict == send_verdict::ok);
}

TEST_CASE("error 201 and silence back off the node that earned it, doubling; an answer forgives silence") {
    manual_clock c;
    source_table t(source_table_options{.backoff_base = 60s, .backoff_max = 200s, .silence_limit = 3, .hash_seed = 1});
    const auto a = ep("7.7.7.7:1");
    const auto neighbour = ep("7.7.7.7:2"); // another node on the same IP
    t.on_rate_limited(a, no_id, c.now());
    CHECK(t.backing_off(a, c.now()));
    CHECK_FALSE(t.backing_off(neighbour, c.now()));
    CHECK(t.try_query(a, no_id, c.now()).verdict == send_verdict::backed_off);
    CHECK(t.try_query(neighbour, no_id, c.now()).verdict == send_verdict::ok);
    CHECK(t.check_answer(a, no_id, c.now()).verdict == send_verdict::ok); // answers still go out
    c.advance(61s);
    CHECK(t.try_query(a, no_id, c.now()).verdict == send_verdict::ok);
    t.on_rate_limited(a, no_id, c.now());
    c.advance(61s);
    CHECK(t.backing_off(a, c.now())); // the second one lasts 120 s
    c.advance(60s);
    CHECK_FALSE(t.backing_off(a, c.now()));
    t.on_rate_limited(a, no_id, c.now());
    c.advance(199s);
    CHECK(t.backing_off(a, c.now())); // capped at 200 s
    c.advance(2s);
    CHECK_FALSE(t.backing_off(a, c.now()));

    const auto b = ep("8.8.8.8:1");
    t.on_silence(b, no_id, c.now());
    t.on_silence(b, no_id, c.now());
    t.on_answered(b, no_id, c.now()); // the run is broken
    t.on_silence(b, no_id, c.now());
    t.on_silence(b, no_id, c.now());
    CHECK_FALSE(t.backing_off(b, c.now()));
    t.on_silence(b, no_id, c.now());
    CHECK(t.backing_off(b, c.now()));
    CHECK(t.stats().backoffs_silence == 1);
    CHECK(t.stats().backoffs_rate_limited == 3);
}

TEST_CASE("trust is per IP and lasts trust_ttl after an answer of theirs") {
    manual_clock c;
    source_table t(source_table_options{.trust_ttl = 100s, .hash_seed = 2});
    const auto a = ep("9.9.9.9:1");
    CHECK_FALSE(t.trusted(a.address, c.now()));
    t.on_answered(a, no_id, c.now());
    CHECK(t.trusted(a.address, c.now()));
    CHECK(t.check_answer(ep("9.9.9.9:2"), no_id, c.now()).trusted);
    c.advance(101s);
    CHECK_FALSE(t.trusted(a.address, c.now()));
}

TEST_CASE("a full table evicts the least recent settled stranger, never one owed tokens or trusted") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 4, .hash_seed = 5});
    for (std::uint32_t i = 0; i < 4; ++i) REQUIRE(t.try_query(nth(i), no_id, c.now()).verdict == send_verdict::ok);
    CHECK(t.size() == 4);
    // Every entry still owes a token: a fifth IP is refused, and nobody was forgotten.
    CHECK(t.try_query(nth(4), no_id, c.now()).verdict == send_verdict::table_full);
    CHECK(t.check_answer(nth(4), no_id, c.now()).verdict == send_verdict::table_full);
    CHECK(t.stats().refused_table_full == 2);
    CHECK(t.stats().evictions == 0);

    t.on_answered(nth(0), no_id, c.now()); // trusted: kept however old
    c.advance(1s);                         // tokens back: everyone is settled again
    CHECK(t.try_query(nth(4), no_id, c.now()).verdict == send_verdict::ok); // evicts 1, the oldest stranger
    CHECK(t.stats().evictions == 1);
    CHECK(t.trusted(nth(0).address, c.now()));
    // nth(1) came back as a new entry with a full budget (eviction lost nothing it owed).
    c.advance(1s);
    CHECK(query_all(t, nth(1), c.now()) == 8);
    CHECK(t.size() == 4);
    CHECK(t.node_count() == 4);
}

TEST_CASE("a table full of trusted IPs that owe nothing still takes a new one, evicting the least recent") {
    // A crawl at full rate asks more IPs within trust_ttl than the table holds, and every
    // one that answers is trusted: refusing each new IP stopped the 100,000-node crawl.
    manual_clock c;
    source_table t(source_table_options{.capacity = 4, .trust_ttl = 900s, .hash_seed = 6});
    for (std::uint32_t i = 0; i < 4; ++i) {
        REQUIRE(t.try_query(nth(i), no_id, c.now()).verdict == send_verdict::ok);
        t.on_answered(nth(i), no_id, c.now());
    }
    // Trusted and still owed a token each: nothing goes.
    CHECK(t.try_query(nth(4), no_id, c.now()).verdict == send_verdict::table_full);
    c.advance(1s); // settled, still trusted
    CHECK(t.try_query(nth(4), no_id, c.now()).verdict == send_verdict::ok);
    CHECK(t.stats().trusted_evictions == 1);
    CHECK(t.size() == 4);
    CHECK_FALSE(t.trusted(nth(0).address, c.now())); // the least recent went, and only its trust was lost
    for (std::uint32_t i = 1; i < 4; ++i) CHECK(t.trusted(nth(i).address, c.now()));
    // A settled stranger is still taken before any trusted entry.
    c.advance(1s);
    CHECK(t.try_query(nth(5), no_id, c.now()).verdict == send_verdict::ok); // evicts nth(4), the stranger
    CHECK(t.stats().trusted_evictions == 1);
    for (std::uint32_t i = 1; i < 4; ++i) CHECK(t.trusted(nth(i).address, c.now()));
}

TEST_CASE("one IP rotating source ports: bounded, and a new legitimate IP is still admitted") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 256, .hash_seed = 9});
    const auto flooder = ip("66.6.6.6");
    int answered = 0, admitted_strangers = 0;
    for (int step = 0; step < 2000; ++step) { // 20 s at 100 ports a step: 10,000 ports a second
        for (std::uint16_t k = 0; k < 100; ++k) {
            const auto port = static_cast<std::uint16_t>(1024 + (step * 100 + k) % 60000);
            answered += answer_all(t, {flooder, port}, c.now(), 1, id_of(static_cast<std::uint8_t>(k)));
        }
        // A stranger on a new IP now and then: it must find room.
        if (step % 10 == 0) admitted_strangers += answer_all(t, nth(static_cast<std::uint32_t>(step)), c.now(), 1);
        CHECK(t.node_count() <= 256);
        CHECK(t.size() <= 256);
        c.advance(10ms);
    }
    CHECK(answered <= 80 + 16 * 20 + 1); // the flooder's IP ceiling, whatever its ports
    CHECK(admitted_strangers == 200);
    CHECK(t.stats().refused_node_table_full == 0);
    CHECK(t.stats().refused_table_full == 0);
}

TEST_CASE("churn through many IPs and ports keeps the indexes consistent and the memory bounded") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 64, .hash_seed = 3});
    for (std::uint32_t round = 0; round < 200; ++round) {
        for (std::uint32_t i = 0; i < 100; ++i) {
            const std::uint32_t k = (i * 7919u + round * 31u) % 3000u;
            (void)t.check_answer(nth(k % 500, static_cast<std::uint16_t>(1 + k / 500)), id_of(static_cast<std::uint8_t>(k)),
                                 c.now());
        }
        c.advance(6s); // everyone settles between rounds
    }
    CHECK(t.size() == 64);
    CHECK(t.node_count() == 64);
    const auto bytes = t.memory_bytes();
    for (std::uint32_t i = 0; i < 10'000; ++i)
        (void)t.check_answer(nth(i, static_cast<std::uint16_t>(i)), id_of(static_cast<std::uint8_t>(i)),
                             c.now() + std::chrono::seconds(i));
    CHECK(t.memory_bytes() == bytes); // storage stops at the capacity
    CHECK(t.size() == 64);
    // Ids repeat across IPs and ports here, and no node was taken for another: the aliases of
    // evicted nodes went with them.
    CHECK(t.stats().node_rebinds == 0);
}

TEST_CASE("an IP's round trip: smoothed from its timed answers, told while it is trusted, counted") {
    manual_clock c;
    source_table t(source_table_options{.trust_ttl = 900s, .hash_seed = 5});
    const endpoint node = ep("1.2.3.4:6881");
    CHECK_FALSE(t.round_trip(node.address, c.now())); // never answered
    t.on_answered(node, id_of(1), c.now());           // an answer nobody timed
    CHECK_FALSE(t.round_trip(node.address, c.now()));
    CHECK(t.stats().rtt_samples == 0);

    t.on_answered(node, id_of(1), c.now(), 300ms); // the first sample as it is
    CHECK(t.round_trip(node.address, c.now()) == std::optional<duration>(300ms));
    t.on_answered(ep("1.2.3.4:7000"), id_of(2), c.now(), 500ms); // another node of the IP: 1/8 of the new
    CHECK(t.round_trip(ip("::ffff:1.2.3.4"), c.now()) == std::optional<duration>(325ms));
    CHECK(t.stats().rtt_samples == 2);
    CHECK_FALSE(t.round_trip(ip("1.2.3.5"), c.now())); // per IP

    // A sample from outside any query's reach is capped; one of 0 still counts as timed.
    t.on_answered(ep("5.6.7.8:1"), id_of(3), c.now(), 0ms);
    CHECK(t.round_trip(ip("5.6.7.8"), c.now()) == std::optional<duration>(1us));
    t.on_answered(ep("5.6.7.9:1"), id_of(4), c.now(), 10h);
    CHECK(t.round_trip(ip("5.6.7.9"), c.now()) == std::optional<duration>(60s));

    // Told while trusted only: an IP silent for trust_ttl may have moved or changed paths.
    c.advance(899s);
    CHECK(t.round_trip(node.address, c.now()));
    c.advance(1s);
    CHECK_FALSE(t.round_trip(node.address, c.now()));
    CHECK(t.stats().rtt_lookups == 9);
    CHECK(t.stats().rtt_known == 5);
}

TEST_CASE("round trips live in the bounded IP table: the table stays at its capacity") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 8, .hash_seed = 5});
    std::size_t bytes = 0;
    for (std::uint32_t i = 0; i < 1000; ++i) {
        t.on_answered(nth(i), id_of(static_cast<std::uint8_t>(i)), c.now(), 100ms);
        c.advance(10s); // every entry settles: evictable
        if (i == 8) bytes = t.memory_bytes();
    }
    CHECK(t.size() == 8);
    CHECK(t.memory_bytes() == bytes);
    CHECK(t.round_trip(nth(999).address, c.now()) == std::optional<duration>(100ms));
    CHECK_FALSE(t.round_trip(nth(0).address, c.now())); // evicted with its entry
}

TEST_CASE("a peer's round trip crosses to the metadata side in two bytes: whole milliseconds, rounded up") {
    CHECK_FALSE(api::peer_rtt{}.known());
    CHECK(api::peer_rtt::of(std::optional<duration>{}) == api::peer_rtt{});
    CHECK(api::peer_rtt::of(std::optional<duration>(300ms)).millis == 300);
    CHECK(api::peer_rtt::of(duration(300'001us)).millis == 301);
    CHECK(api::peer_rtt::of(duration(1us)).millis == 1);
    CHECK(api::peer_rtt::of(duration::zero()).known()); // measured, however small
    CHECK(api::peer_rtt::of(duration(70s)).millis == 65535);
    CHECK(api::peer_rtt::of(duration(300ms)).value() == 300ms);
}

} // TEST_SUITE
