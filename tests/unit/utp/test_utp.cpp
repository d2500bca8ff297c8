// uTP (BEP-29) on a manual clock: the packet codec and its limits, then two multiplexers
// over a simulated link: handshake, loss, reordering, duplicates, truncation, window
// stalls, RESET, a silent peer, caps, and a 1 MiB transfer over a lossy link.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "util/clock.hpp"
#include "support/utp_link.hpp"
#include "utp/connection.hpp"
#include "utp/multiplexer.hpp"
#include "utp/packet.hpp"

using namespace dhtc;
using namespace dhtc::utp;
using namespace std::chrono_literals;

namespace {

endpoint ep(const char* text) { return *endpoint::parse(text); }

std::string pattern(std::size_t n, std::uint32_t seed = 1) {
    std::string s(n, '\0');
    std::uint32_t x = seed | 1;
    for (auto& c : s) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x);
    }
    return s;
}

// A client and a server multiplexer joined by a simulated link.
struct pair_fixture {
    manual_clock clk;
    test::utp_link link{clk};
    endpoint a = ep("127.0.0.1:1000");
    endpoint b = ep("127.0.0.2:2000");
    test::utp_link::port port_a{link, a};
    test::utp_link::port port_b{link, b};
    multiplexer client;
    multiplexer server;

    explicit pair_fixture(multiplexer_config cfg_a = {}, multiplexer_config cfg_b = server_config())
        : client(port_a, clk, cfg_a), server(port_b, clk, cfg_b) {
        link.attach(a, client);
        link.attach(b, server);
    }

    static multiplexer_config server_config() {
        multiplexer_config c;
        c.accept_incoming = true;
        c.seed = 99;
        return c;
    }

    // Connects and returns both ends once established (nulls when it did not happen).
    std::pair<std::shared_ptr<connection>, std::shared_ptr<connection>> establish() {
        auto c = client.connect(b);
        std::shared_ptr<connection> s;
        link.run(
            [&] {
                if (!s) s = server.take_incoming();
                return s && c->state() == conn_state::connected;
            },
            30s);
        return {c, s};
    }

    // Sends `data` from `from` to `to` (both established), reading at the far end as it
    // arrives; returns what was read once `to` has it all or the time ran out.
    std::string transfer(connection& from, connection& to, const std::string& data, std::chrono::seconds limit = 600s,
                         const std::function<bool()>& may_read = [] { return true; }) {
        std::size_t sent = 0;
        std::string got;
        link.run([&] { return got.size() >= data.size() || from.state() == conn_state::closed ||
                              to.state() == conn_state::closed; },
                 limit, [&] {
                     if (sent < data.size()) sent += from.write(std::string_view(data).substr(sent));
                     if (!may_read()) return;
                     char buf[8192];
                     while (std::size_t n = to.read(buf, sizeof buf)) got.append(buf, n);
                 });
        return got;
    }
};

} // namespace

TEST_SUITE("utp") {

TEST_CASE("utp packet: header and selective ack round-trip") {
    header h;
    h.type = packet_type::state;
    h.connection_id = 0xbeef;
    h.timestamp_us = 0x01020304;
    h.timestamp_diff_us = 0x0a0b0c0d;
    h.wnd_size = 65536;
    h.seq_nr = 0xfffe;
    h.ack_nr = 7;
    std::string out;
    write_packet(out, h, std::string("\x05\x00\x00\x80", 4), {});
    REQUIRE(out.size() == header_size + 2 + 4);
    CHECK(static_cast<unsigned char>(out[0]) == 0x21); // type 2, version 1
    CHECK(out[1] == 1);                                // selective ack follows
    packet_view p;
    REQUIRE(parse_packet(out, p) == parse_error::none);
    CHECK(p.h.type == packet_type::state);
    CHECK(p.h.connection_id == 0xbeef);
    CHECK(p.h.timestamp_us == 0x01020304);
    CHECK(p.h.timestamp_diff_us == 0x0a0b0c0d);
    CHECK(p.h.wnd_size == 65536);
    CHECK(p.h.seq_nr == 0xfffe);
    CHECK(p.h.ack_nr == 7);
    CHECK(p.sack == std::string("\x05\x00\x00\x80", 4));
    CHECK(p.payload.empty());

    h.type = packet_type::data;
    out.clear();
    write_packet(out, h, {}, "hello");
    REQUIRE(parse_packet(out, p) == parse_error::none);
    CHECK(p.sack.empty());
    CHECK(p.payload == "hello");
}

TEST_CASE("utp packet: every length is checked") {
    header h;
    h.type = packet_type::data;
    std::string good;
    write_packet(good, h, std::string(4, '\x01'), "xy");
    packet_view p;
    for (std::size_t n = 0; n < header_size; ++n)
        CHECK(parse_packet(std::string_view(good).substr(0, n), p) == parse_error::too_short);
    // Cut inside the extension header or its body.
    CHECK(parse_packet(std::string_view(good).substr(0, header_size + 1), p) == parse_error::truncated_extension);
    CHECK(parse_packet(std::string_view(good).substr(0, header_size + 5), p) == parse_error::truncated_extension);

    std::string bad = good;
    bad[0] = 0x02; // version 2
    CHECK(parse_packet(bad, p) == parse_error::bad_version);
    bad[0] = 0x51; // type 5
    CHECK(parse_packet(bad, p) == parse_error::bad_type);

    bad = good;
    bad[header_size + 1] = 3; // a selective ack of 3 bytes
    CHECK(parse_packet(bad, p) == parse_error::bad_sack_length);
    bad[header_size + 1] = 0;
    CHECK(parse_packet(bad, p) == parse_error::bad_sack_length);

    // An unknown extension is skipped; a chain longer than the limit is refused.
    std::string chain(header_size, '\0');
    chain[0] = 0x01;
    chain[1] = 9;
    chain += std::string("\x00\x02zz", 4);
    chain += "payload";
    REQUIRE(parse_packet(chain, p) == parse_error::none);
    CHECK(p.payload == "payload");
    std::string longchain(header_size, '\0');
    longchain[0] = 0x01;
    longchain[1] = 9;
    for (std::size_t i = 0; i <= max_extensions; ++i) longchain += std::string("\x09\x00", 2);
    CHECK(parse_packet(longchain, p) == parse_error::too_many_extensions);

    // Control packets carry no payload.
    h.type = packet_type::state;
    std::string state;
    write_packet(state, h, {}, "x");
    CHECK(parse_packet(state, p) == parse_error::payload_not_allowed);
}

TEST_CASE("utp packet: sequence numbers compare across the wrap") {
    CHECK(seq_less(1, 2));
    CHECK(seq_less(0xffff, 0));
    CHECK(seq_less(0xfff0, 5));
    CHECK_FALSE(seq_less(5, 0xfff0));
    CHECK_FALSE(seq_less(3, 3));
}

TEST_CASE("utp: handshake and an echo on a clean link") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    CHECK(c->state() == conn_state::connected);
    CHECK(f.transfer(*c, *s, "ping") == "ping");
    CHECK(f.transfer(*s, *c, "pong") == "pong");
    CHECK(c->srtt() > 0us);
    CHECK(c->stats().retransmits == 0);

    // FIN: the far end sees eof after the last byte, and our close completes.
    c->close();
    f.link.run([&] { return s->eof() && c->state() == conn_state::closed; }, 30s);
    CHECK(s->eof());
    CHECK(c->close_reason() == close_reason::finished);
}

TEST_CASE("utp: 1 MiB each way over a lossy, reordering, duplicating, truncating link arrives intact") {
    pair_fixture f;
    f.link.link.loss = 0.05;
    f.link.link.duplicate = 0.03;
    f.link.link.truncate = 0.02;
    f.link.link.jitter = 8000us;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    const std::string up = pattern(1 << 20, 3);
    const std::string down = pattern(1 << 20, 4);
    const time_point start = f.clk.now();
    CHECK(f.transfer(*c, *s, up) == up);
    MESSAGE("1 MiB up in " << std::chrono::duration_cast<std::chrono::milliseconds>(f.clk.now() - start).count()
                           << " ms simulated, retransmits " << c->stats().retransmits << ", fast "
                           << c->stats().fast_retransmits << ", timeouts " << c->stats().timeouts << ", cwnd "
                           << c->congestion_window() << ", srtt " << c->srtt().count() << " us");
    CHECK(f.transfer(*s, *c, down) == down);
    CHECK(c->state() == conn_state::connected);
    CHECK(s->state() == conn_state::connected);
    CHECK(c->stats().retransmits > 0);
    CHECK(s->stats().duplicates_received > 0);
    CHECK(f.server.stats().malformed > 0); // the truncated ones
}

TEST_CASE("utp: a lost packet is resent after three duplicate acks, before any timeout") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    // Drop the 3rd DATA packet from the client, once.
    int data_seen = 0;
    f.link.filter = [&](const endpoint& from, const endpoint&, const std::string& bytes) {
        if (from != f.a || bytes.size() <= header_size || (static_cast<unsigned char>(bytes[0]) >> 4) != 0) return false;
        return ++data_seen == 3;
    };
    const std::string data = pattern(40 * 1400, 5);
    CHECK(f.transfer(*c, *s, data) == data);
    CHECK(c->stats().fast_retransmits >= 1);
    CHECK(c->stats().timeouts == 0);
}

TEST_CASE("utp: a lost packet with nothing behind it is resent by the tail probe, before the timeout") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    CHECK(f.transfer(*c, *s, "warm-up") == "warm-up"); // a round-trip sample
    bool dropped = false;
    f.link.filter = [&](const endpoint& from, const endpoint&, const std::string& bytes) {
        if (dropped || from != f.a || bytes.size() <= header_size) return false;
        return dropped = true; // the request alone: no later packet can draw duplicate acks
    };
    const time_point start = f.clk.now();
    CHECK(f.transfer(*c, *s, "request") == "request");
    CHECK(dropped);
    CHECK(c->stats().tail_probes == 1);
    CHECK(c->stats().timeouts == 0);
    CHECK(f.clk.now() - start < 200ms); // simulated: two 20 ms round trips, not a 500 ms timeout
}

TEST_CASE("utp: a receiver that stops reading stalls the sender, which resumes when it reads") {
    multiplexer_config small = pair_fixture::server_config();
    small.connection.receive_buffer = 16 * 1024;
    pair_fixture f({}, small);
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    const std::string data = pattern(200 * 1024, 6);
    bool reading = false;
    std::string got;
    // First the receiver reads nothing for 20 simulated seconds.
    got = f.transfer(*c, *s, data, 20s, [&] { return reading; });
    CHECK(got.empty());
    CHECK(s->readable() <= 16 * 1024);
    CHECK(c->bytes_in_flight() <= 16 * 1024 + 1400);
    CHECK(c->state() == conn_state::connected);
    CHECK(s->stats().dropped_window < 50); // the sender respected the window, bar probes
    // Then it reads: everything arrives. What was written stays queued at the sender.
    reading = true;
    std::string rest;
    f.link.run([&] { return rest.size() >= data.size(); }, 600s, [&] {
        char buf[4096];
        while (std::size_t n = s->read(buf, sizeof buf)) rest.append(buf, n);
    });
    CHECK(rest.size() <= data.size());
    CHECK(rest == data.substr(0, rest.size()));
}

TEST_CASE("utp: RESET ends the connection on both sides; a SYN to a closed port is refused") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    s->abort();
    CHECK(s->close_reason() == close_reason::aborted);
    f.link.run([&] { return c->state() == conn_state::closed; }, 10s);
    CHECK(c->close_reason() == close_reason::reset);

    multiplexer_config closed;
    closed.seed = 5; // not accepting
    pair_fixture g({}, closed);
    auto refused = g.client.connect(g.b);
    g.link.run([&] { return refused->state() == conn_state::closed; }, 10s);
    CHECK(refused->close_reason() == close_reason::refused);
    CHECK(g.server.stats().syn_refused == 1);
}

TEST_CASE("utp: a peer that never answers times out after the SYN retries") {
    manual_clock clk;
    test::utp_link link(clk);
    const endpoint a = ep("127.0.0.1:1000");
    test::utp_link::port port(link, a);
    multiplexer m(port, clk);
    link.attach(a, m);
    const time_point start = clk.now();
    auto c = m.connect(ep("127.0.0.9:9")); // nobody there
    REQUIRE(c);
    const bool ended = link.run([&] { return c->state() == conn_state::closed; }, 120s);
    CHECK(ended);
    CHECK(c->close_reason() == close_reason::timed_out);
    CHECK(c->stats().packets_sent == 3); // the SYN and its 2 resends
    CHECK(clk.now() - start <= 10s);     // 1 s, 2 s, 4 s: simulated time
    c.reset();
    m.tick();
    CHECK(m.size() == 0);
}

TEST_CASE("utp: a peer that goes silent mid-transfer times out") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    f.link.filter = [&](const endpoint& from, const endpoint&, const std::string&) { return from == f.b; };
    std::size_t sent = 0;
    const std::string data = pattern(64 * 1024, 8);
    const bool ended = f.link.run([&] { return c->state() == conn_state::closed; }, 600s,
                                  [&] { sent += c->write(std::string_view(data).substr(sent)); });
    CHECK(ended);
    CHECK(c->close_reason() == close_reason::timed_out);
    CHECK(c->stats().timeouts > 1);
}

TEST_CASE("utp multiplexer: caps connections and answers unknown ids with RESET") {
    multiplexer_config cfg;
    cfg.max_connections = 2;
    pair_fixture f(cfg);
    auto one = f.client.connect(f.b);
    auto two = f.client.connect(f.b);
    CHECK(one);
    CHECK(two);
    CHECK_FALSE(f.client.connect(f.b));
    CHECK(f.client.stats().connect_refused == 1);

    // A DATA packet for a connection nobody has: counted and reset.
    header h;
    h.type = packet_type::data;
    h.connection_id = 4242;
    std::string stray;
    write_packet(stray, h, {}, "x");
    f.server.on_datagram(f.a, stray);
    CHECK(f.server.stats().unknown_connection == 1);
    CHECK(f.server.stats().resets_sent == 1);
    f.server.on_datagram(f.a, "garbage");
    CHECK(f.server.stats().malformed == 1);
}

TEST_CASE("utp: a peer ignoring our window cannot grow our buffers") {
    multiplexer_config small = pair_fixture::server_config();
    small.connection.receive_buffer = 8 * 1024;
    small.connection.max_reorder_packets = 4;
    pair_fixture f({}, small);
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    // Forge DATA far ahead and past the window on the client's connection id.
    const std::uint16_t id = static_cast<std::uint16_t>(c->recv_id() + 1);
    for (int i = 0; i < 100; ++i) {
        header h;
        h.type = packet_type::data;
        h.connection_id = id;
        h.seq_nr = static_cast<std::uint16_t>(1000 + i * 3);
        h.ack_nr = 0;
        std::string d;
        write_packet(d, h, {}, std::string(1400, 'x'));
        f.server.on_datagram(f.a, d);
    }
    CHECK(s->readable() == 0);
    // Ahead of the window (or, by the wrap, behind it): dropped either way.
    CHECK(s->stats().dropped_window + s->stats().duplicates_received >= 96);
}

TEST_CASE("utp: 10 MiB on a clean 20 ms link: slow start and LEDBAT open the window") {
    pair_fixture f;
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    const std::string data = pattern(10 << 20, 9);
    const time_point start = f.clk.now();
    CHECK(f.transfer(*s, *c, data) == data);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(f.clk.now() - start);
    MESSAGE("10 MiB in " << took.count() << " ms simulated, cwnd " << s->congestion_window());
    // The receive window (256 KiB) per round trip bounds it at ~12.8 MB/s: under 2 s is
    // the window open most of the time, not stuck near one packet.
    CHECK(took < 2s);
    CHECK(s->stats().retransmits == 0);
}

TEST_CASE("utp at a 300 ms round trip (issue 32): a lost first SYN, RTO above the RTT, LEDBAT not fooled by the path delay") {
    pair_fixture f;
    f.link.link.delay = 150ms; // each way
    bool syn_dropped = false;
    f.link.filter = [&](const endpoint& from, const endpoint&, const std::string&) {
        if (syn_dropped || from != f.a) return false;
        return syn_dropped = true; // the client's first datagram: its SYN
    };
    const time_point start = f.clk.now();
    auto [c, s] = f.establish();
    REQUIRE(c);
    REQUIRE(s);
    CHECK(syn_dropped);
    CHECK(c->stats().retransmits == 1);          // the SYN, resent after 1 s
    CHECK(f.clk.now() - start < 1500ms);         // simulated: 1 s wait, then one round trip
    f.link.filter = nullptr;
    // A clean 300 ms path: no spurious timeout, and the window opens. LEDBAT reacts to the
    // queuing delay over the base delay, not to the 150 ms the path itself adds.
    const std::string data = pattern(2 << 20, 11);
    const time_point t0 = f.clk.now();
    CHECK(f.transfer(*s, *c, data) == data);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(f.clk.now() - t0);
    MESSAGE("2 MiB at 300 ms RTT in " << took.count() << " ms simulated, cwnd " << s->congestion_window() << ", rto "
                                      << s->rto().count() << " us, timeouts " << s->stats().timeouts);
    CHECK(s->stats().timeouts == 0);
    CHECK(s->stats().retransmits == 0);
    CHECK(s->congestion_window() >= 64 * 1024);
    CHECK(s->srtt() >= 290ms);
    CHECK(s->srtt() <= 320ms);
    CHECK(s->rto() >= s->srtt()); // never fires before an answer could come
    CHECK(s->rto() <= 2s);
    CHECK(took < 20s); // simulated; the 256 KiB receive window per round trip allows ~2.6 s

    // And with 2% loss each way the transfer still completes, loss repaired.
    f.link.link.loss = 0.02;
    const std::string more = pattern(512 << 10, 12);
    CHECK(f.transfer(*c, *s, more) == more);
    CHECK(c->state() == conn_state::connected);
    CHECK(c->stats().retransmits > 0);
}

} // TEST_SUITE
