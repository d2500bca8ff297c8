// The test network's WAN model (tools/testnet/wan_model), on chosen instants and by counts:
// RTTs stable per pair, symmetric and within their bounds; loss close to its target over many
// packets, i.i.d. and in bursts; jitter within its bound; a link that keeps its order; TCP's
// handshake and retransmission costs; the options' parsing and the JSON the benchmarks copy.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "testnet/wan_model.hpp"

using namespace dhtc::testnet;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t crawler = 0x7f000001; // 127.0.0.1
std::uint32_t host(std::uint32_t i) { return 0x7f400000 + i; } // 127.64.x.y

double ms(wan::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

wan::options lossless(double jitter_ms = 0) {
    auto o = wan::options::libtorrent_like(7);
    o.loss = 0;
    o.jitter_ms = jitter_ms;
    return o;
}

} // namespace

TEST_SUITE("testnet") {

TEST_CASE("wan: each pair's RTT is stable, symmetric, within the bounds and spread over them") {
    for (const auto dist : {wan::rtt_distribution::uniform, wan::rtt_distribution::lognormal}) {
        auto o = lossless();
        o.distribution = dist;
        const wan::model m(o), again(o);
        double lo = 1e9, hi = 0;
        std::size_t below_median = 0;
        const std::size_t pairs = 20000;
        for (std::uint32_t i = 0; i < pairs; ++i) {
            const auto r = m.rtt(crawler, host(i));
            CHECK(r == m.rtt(host(i), crawler));
            CHECK(r == again.rtt(crawler, host(i))); // the same run after run
            lo = std::min(lo, ms(r));
            hi = std::max(hi, ms(r));
            below_median += ms(r) < std::sqrt(50.0 * 350.0) ? 1 : 0;
        }
        CHECK(lo >= 50);
        CHECK(hi <= 350);
        CHECK(lo < 60); // the whole range is used
        CHECK(hi > 340);
        const double share_below = static_cast<double>(below_median) / pairs;
        if (dist == wan::rtt_distribution::lognormal) CHECK(std::abs(share_below - 0.5) < 0.02);
        else CHECK(std::abs(share_below - (std::sqrt(50.0 * 350.0) - 50) / 300) < 0.02);
    }
    // Another seed, other RTTs; equal bounds, one RTT.
    auto o = lossless();
    o.seed = 8;
    const wan::model a(lossless()), b(o);
    std::size_t differ = 0;
    for (std::uint32_t i = 0; i < 100; ++i) differ += a.rtt(crawler, host(i)) != b.rtt(crawler, host(i)) ? 1 : 0;
    CHECK(differ > 95);
    o.rtt_min_ms = o.rtt_max_ms = 120;
    CHECK(ms(wan::model(o).rtt(crawler, host(1))) == doctest::Approx(120));
}

TEST_CASE("wan: a datagram takes half the pair's RTT plus at most the jitter, and a link keeps its order") {
    wan::model m(lossless(20));
    const auto t0 = wan::clock::time_point{} + 1h;
    double min_extra = 1e9, max_extra = -1;
    for (std::uint32_t i = 0; i < 5000; ++i) {
        // A second apart: the order clamp never applies.
        const auto v = m.datagram(crawler, host(i % 50), t0 + i * 1s);
        REQUIRE_FALSE(v.lost);
        const double extra = ms(v.delay) - ms(m.rtt(crawler, host(i % 50))) / 2;
        min_extra = std::min(min_extra, extra);
        max_extra = std::max(max_extra, extra);
    }
    CHECK(min_extra >= 0);
    CHECK(max_extra <= 20.0 + 1e-6);
    CHECK(max_extra - min_extra > 15); // the jitter is used
    // A burst sent at one instant arrives in the order it was sent.
    auto last = wan::clock::time_point{};
    const auto t1 = t0 + 2h;
    for (int i = 0; i < 200; ++i) {
        const auto v = m.datagram(host(1), crawler, t1);
        CHECK(t1 + v.delay >= last);
        last = t1 + v.delay;
    }
}

TEST_CASE("wan: i.i.d. loss is close to its target in each direction, over many packets") {
    auto o = wan::options::libtorrent_like(3); // 2% each way
    wan::model m(o);
    const auto t = wan::clock::time_point{} + 1h;
    const std::size_t n = 200000;
    std::size_t lost_out = 0, lost_in = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const auto peer = host(static_cast<std::uint32_t>(i % 1000));
        lost_out += m.datagram(crawler, peer, t).lost ? 1 : 0;
        lost_in += m.datagram(peer, crawler, t).lost ? 1 : 0;
    }
    // 2% of 200,000 is 4,000 with a standard deviation of ~63.
    CHECK(lost_out > 3700);
    CHECK(lost_out < 4300);
    CHECK(lost_in > 3700);
    CHECK(lost_in < 4300);
    CHECK(m.counters().packets == 2 * n);
    CHECK(m.counters().lost == lost_out + lost_in);
    o.loss = 0;
    wan::model none(o);
    for (std::size_t i = 0; i < 10000; ++i) CHECK_FALSE(none.datagram(crawler, host(1), t).lost);
}

TEST_CASE("wan: burst loss keeps the mean loss and loses in runs of the mean burst length") {
    auto o = wan::options::libtorrent_like(5);
    o.bursts = wan::gilbert_elliott::bursts(0.02, 4);
    CHECK(o.mean_loss() == doctest::Approx(0.02));
    wan::model m(o);
    const auto t = wan::clock::time_point{} + 1h;
    const std::size_t n = 400000;
    std::size_t lost = 0, runs = 0;
    bool previous = false;
    for (std::size_t i = 0; i < n; ++i) {
        const bool l = m.datagram(crawler, host(9), t).lost; // one link: one chain
        lost += l ? 1 : 0;
        runs += l && !previous ? 1 : 0;
        previous = l;
    }
    CHECK(std::abs(static_cast<double>(lost) / n - 0.02) < 0.003);
    const double mean_run = static_cast<double>(lost) / static_cast<double>(runs);
    CHECK(mean_run > 3.5);
    CHECK(mean_run < 4.5);
    // A general Gilbert–Elliott chain: its stationary loss.
    const wan::gilbert_elliott g{0.01, 0.2, 0.005, 0.5};
    CHECK(g.mean_loss() == doctest::Approx(0.01 / 0.21 * 0.5 + 0.2 / 0.21 * 0.005));
}

TEST_CASE("wan: TCP's handshake is one RTT plus a SYN timeout per loss; a lost segment costs an RTO") {
    wan::model m(lossless());
    for (std::uint32_t i = 0; i < 100; ++i) {
        CHECK(m.tcp_handshake(crawler, host(i)) == m.rtt(crawler, host(i)));
        CHECK(m.tcp_retransmit(crawler, host(i)) == std::max<wan::duration>(200ms, 3 * m.rtt(crawler, host(i))));
    }
    auto o = wan::options::libtorrent_like(1);
    o.loss = 0.5;
    wan::model lossy(o);
    std::set<std::int64_t> extra_seconds;
    for (std::uint32_t i = 0; i < 200; ++i) {
        const auto d = lossy.tcp_handshake(crawler, host(i)) - lossy.rtt(crawler, host(i));
        CHECK(d % 1s == 0ns); // whole SYN timeouts: 1, 1+2, 1+2+4, ...
        extra_seconds.insert(d / 1s);
    }
    CHECK(extra_seconds.count(0) == 1);
    CHECK(extra_seconds.count(1) == 1);
    CHECK(extra_seconds.count(3) == 1);
    CHECK(*extra_seconds.rbegin() <= 63); // at most six retransmissions
}

TEST_CASE("wan: options parse, are checked, and name themselves in JSON") {
    double lo = 0, hi = 0;
    CHECK(wan::parse_range("50-350", lo, hi));
    CHECK(lo == 50);
    CHECK(hi == 350);
    CHECK_FALSE(wan::parse_range("350-50", lo, hi));
    CHECK_FALSE(wan::parse_range("50", lo, hi));
    CHECK(wan::parse_distribution("lognormal") == wan::rtt_distribution::lognormal);
    CHECK_FALSE(wan::parse_distribution("normal"));
    const auto g = wan::parse_gilbert_elliott("0.01,0.2,0,1");
    REQUIRE(g);
    CHECK(g->bad_to_good == doctest::Approx(0.2));
    CHECK_FALSE(wan::parse_gilbert_elliott("0.01,0.2,0"));
    CHECK_FALSE(wan::parse_gilbert_elliott("0,0,0,1"));
    CHECK_FALSE(wan::parse_gilbert_elliott("0.1,0.2,0,1.5"));

    auto o = wan::options::libtorrent_like(4);
    CHECK(o.check().empty());
    CHECK(o.to_json() ==
          R"({"wan":true,"rtt_ms":[50,350],"rtt_distribution":"uniform","jitter_ms":20,"loss_each_way":0.02,"burst_loss":null,"seed":4})");
    o.loss = 1.5;
    CHECK_FALSE(o.check().empty());
    o.loss = 0.02;
    o.distribution = wan::rtt_distribution::lognormal;
    o.rtt_min_ms = 0;
    CHECK_FALSE(o.check().empty());
    CHECK(wan::options{}.to_json() == R"({"wan":false})");

    // The options both tools take (without their prefix), and what finishing them does.
    wan::options cli = wan::options::libtorrent_like(2);
    CHECK(wan::parse_option("rtt", "100-200", cli) == wan::parse_result::ok);
    CHECK(wan::parse_option("rtt-dist", "lognormal", cli) == wan::parse_result::ok);
    CHECK(wan::parse_option("loss", "0.05", cli) == wan::parse_result::ok);
    CHECK(wan::parse_option("burst", "3", cli) == wan::parse_result::ok);
    CHECK(wan::parse_option("burst", "0.5", cli) == wan::parse_result::bad_value);
    CHECK(wan::parse_option("jitter", "x", cli) == wan::parse_result::bad_value);
    CHECK(wan::parse_option("dev", "x", cli) == wan::parse_result::not_an_option);
    CHECK(wan::finish_options(cli).empty());
    REQUIRE(cli.bursts);
    CHECK(cli.bursts->bad_to_good == doctest::Approx(1.0 / 3));
    CHECK(cli.mean_loss() == doctest::Approx(0.05));
    CHECK(cli.rtt_min_ms == 100);
    CHECK(cli.distribution == wan::rtt_distribution::lognormal);
    CHECK(wan::parse_option("loss", "2", cli) == wan::parse_result::ok);
    CHECK_FALSE(wan::finish_options(cli).empty()); // checked at the end
    CHECK(wan::options_help("--wan-").find("--wan-rtt MIN-MAX") != std::string::npos);
}

} // TEST_SUITE
