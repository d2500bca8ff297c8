// The per-IP table shared by answers and queries: answer and destination budgets, trust,
// back-off, and a bounded table that never forgets an IP it still owes tokens.
#include <doctest/doctest.h>

#include "crawl/source_table.hpp"
#include "net/clock.hpp"

using namespace dhtc;
using namespace dhtc::crawl;
using namespace std::chrono_literals;

namespace {
ip_address ip(const char* text) { return *ip_address::parse(text); }
ip_address nth(std::uint32_t i) { return ip_address::v4(0x01000000u + i); }

// Answers to `a` while check and commit allow them; returns how many went out.
int answer_all(source_table& t, const ip_address& a, time_point now, int tries) {
    int sent = 0;
    for (int i = 0; i < tries; ++i) {
        const auto c = t.check_answer(a, now);
        if (c.verdict != send_verdict::ok) break;
        t.commit_answer(c);
        ++sent;
    }
    return sent;
}
} // namespace

TEST_SUITE("source table") {

TEST_CASE("answers: the per-source and the per-destination budgets both apply") {
    manual_clock c;
    source_table t(source_table_options{.answer_rate = 40, .destination_rate = 1000, .destination_burst = 1000,
                                        .hash_seed = 7});
    CHECK(answer_all(t, ip("1.2.3.4"), c.now(), 100) == 40);
    CHECK(t.check_answer(ip("::ffff:1.2.3.4"), c.now()).verdict == send_verdict::over_answer_budget); // same source
    CHECK(answer_all(t, ip("1.2.3.5"), c.now(), 1) == 1);
    c.advance(25ms); // one answer token back
    CHECK(answer_all(t, ip("1.2.3.4"), c.now(), 100) == 1);
    CHECK(t.stats().refused_answer_source == 3);

    source_table strict(source_table_options{.answer_rate = 40, .hash_seed = 7}); // 2/s, burst 10
    CHECK(answer_all(strict, ip("1.2.3.4"), c.now(), 100) == 10);
    c.advance(1s);
    CHECK(answer_all(strict, ip("1.2.3.4"), c.now(), 100) == 2);
    CHECK(strict.stats().refused_answer_destination == 2);
}

TEST_CASE("queries share the destination budget and leave headroom for answers") {
    manual_clock c;
    source_table t(source_table_options{.hash_seed = 3}); // 2/s, burst 10, headroom 2
    int queries = 0;
    while (t.try_query(ip("5.5.5.5"), c.now()) == send_verdict::ok) ++queries;
    CHECK(queries == 8);
    CHECK(answer_all(t, ip("5.5.5.5"), c.now(), 10) == 2); // what the queries left
    CHECK(t.try_query(ip("5.5.5.5"), c.now()) == send_verdict::over_budget);
    CHECK(t.stats().refused_query_destination == 2);
    // Over any 10 s: at most rate x 10 + burst = 30 datagrams.
    int total = queries + 2;
    for (int step = 0; step < 100; ++step) {
        c.advance(100ms);
        total += t.try_query(ip("5.5.5.5"), c.now()) == send_verdict::ok;
        total += answer_all(t, ip("5.5.5.5"), c.now(), 1);
    }
    CHECK(total <= 30);
    CHECK(total >= 28);
}

TEST_CASE("error 201 and silence back off queries, doubling; an answer forgives silence") {
    manual_clock c;
    source_table t(source_table_options{.backoff_base = 60s, .backoff_max = 200s, .silence_limit = 3, .hash_seed = 1});
    const auto a = ip("7.7.7.7");
    t.on_rate_limited(a, c.now());
    CHECK(t.backing_off(a, c.now()));
    CHECK(t.try_query(a, c.now()) == send_verdict::backed_off);
    CHECK(t.check_answer(a, c.now()).verdict == send_verdict::ok); // answers still go out
    c.advance(61s);
    CHECK(t.try_query(a, c.now()) == send_verdict::ok);
    t.on_rate_limited(a, c.now());
    c.advance(61s);
    CHECK(t.backing_off(a, c.now())); // the second one lasts 120 s
    c.advance(60s);
    CHECK_FALSE(t.backing_off(a, c.now()));
    t.on_rate_limited(a, c.now());
    c.advance(199s);
    CHECK(t.backing_off(a, c.now())); // capped at 200 s
    c.advance(2s);
    CHECK_FALSE(t.backing_off(a, c.now()));

    const auto b = ip("8.8.8.8");
    t.on_silence(b, c.now());
    t.on_silence(b, c.now());
    t.on_answered(b, c.now()); // the run is broken
    t.on_silence(b, c.now());
    t.on_silence(b, c.now());
    CHECK_FALSE(t.backing_off(b, c.now()));
    t.on_silence(b, c.now());
    CHECK(t.backing_off(b, c.now()));
    CHECK(t.stats().backoffs_silence == 1);
    CHECK(t.stats().backoffs_rate_limited == 3);
}

TEST_CASE("trust lasts trust_ttl after an answer of theirs") {
    manual_clock c;
    source_table t(source_table_options{.trust_ttl = 100s, .hash_seed = 2});
    const auto a = ip("9.9.9.9");
    CHECK_FALSE(t.trusted(a, c.now()));
    t.on_answered(a, c.now());
    CHECK(t.trusted(a, c.now()));
    CHECK(t.check_answer(a, c.now()).trusted);
    c.advance(101s);
    CHECK_FALSE(t.trusted(a, c.now()));
}

TEST_CASE("a full table evicts the least recent settled stranger, never one owed tokens or trusted") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 4, .hash_seed = 5});
    for (std::uint32_t i = 0; i < 4; ++i) REQUIRE(t.try_query(nth(i), c.now()) == send_verdict::ok); // all owe
    CHECK(t.size() == 4);
    // Every entry still owes a token: a fifth IP is refused, and nobody was forgotten.
    CHECK(t.try_query(nth(4), c.now()) == send_verdict::table_full);
    CHECK(t.check_answer(nth(4), c.now()).verdict == send_verdict::table_full);
    CHECK(t.stats().refused_table_full == 2);
    CHECK(t.stats().evictions == 0);

    t.on_answered(nth(0), c.now()); // trusted: kept however old
    c.advance(1s);                  // 2 tokens back: everyone is settled again
    CHECK(t.try_query(nth(4), c.now()) == send_verdict::ok); // evicts 1, the oldest stranger
    CHECK(t.stats().evictions == 1);
    CHECK(t.trusted(nth(0), c.now()));
    // nth(1) came back as a new entry with a full budget (eviction lost nothing it owed).
    int n = 0;
    c.advance(1s);
    while (t.try_query(nth(1), c.now()) == send_verdict::ok) ++n;
    CHECK(n == 8);
    CHECK(t.size() == 4);
}

TEST_CASE("a table full of trusted IPs that owe nothing still takes a new one, evicting the least recent") {
    // A crawl at full rate asks more IPs within trust_ttl than the table holds, and every
    // one that answers is trusted: refusing each new IP stopped the 100,000-node crawl.
    manual_clock c;
    source_table t(source_table_options{.capacity = 4, .trust_ttl = 900s, .hash_seed = 6});
    for (std::uint32_t i = 0; i < 4; ++i) {
        REQUIRE(t.try_query(nth(i), c.now()) == send_verdict::ok);
        t.on_answered(nth(i), c.now());
    }
    // Trusted and still owed a token each: nothing goes.
    CHECK(t.try_query(nth(4), c.now()) == send_verdict::table_full);
    c.advance(1s); // settled, still trusted
    CHECK(t.try_query(nth(4), c.now()) == send_verdict::ok);
    CHECK(t.stats().trusted_evictions == 1);
    CHECK(t.size() == 4);
    CHECK_FALSE(t.trusted(nth(0), c.now())); // the least recent went, and only its trust was lost
    for (std::uint32_t i = 1; i < 4; ++i) CHECK(t.trusted(nth(i), c.now()));
    // A settled stranger is still taken before any trusted entry.
    c.advance(1s);
    CHECK(t.try_query(nth(5), c.now()) == send_verdict::ok); // evicts nth(4), the stranger
    CHECK(t.stats().trusted_evictions == 1);
    for (std::uint32_t i = 1; i < 4; ++i) CHECK(t.trusted(nth(i), c.now()));
}

TEST_CASE("churn through many IPs keeps the index consistent and the memory bounded") {
    manual_clock c;
    source_table t(source_table_options{.capacity = 64, .hash_seed = 3});
    for (std::uint32_t round = 0; round < 200; ++round) {
        for (std::uint32_t i = 0; i < 100; ++i) (void)t.check_answer(nth((i * 7919u + round * 31u) % 3000u), c.now());
        c.advance(6s); // everyone settles between rounds
    }
    CHECK(t.size() == 64);
    const auto bytes = t.memory_bytes();
    for (std::uint32_t i = 0; i < 10'000; ++i) (void)t.check_answer(nth(i), c.now() + std::chrono::seconds(i));
    CHECK(t.memory_bytes() == bytes); // storage stops at the capacity
    CHECK(t.size() == 64);
}

} // TEST_SUITE
