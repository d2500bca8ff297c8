// Hostile datagrams through uTP. The first byte picks the mode:
//   0: parse_packet() alone, with its invariants checked;
//   1: a multiplexer with one connected connection (we initiated) and one accepted, fed a
//      sequence of datagrams (each: 1 byte length, then that many bytes, with the
//      connection id patched to hit a live connection when the length byte is odd), the
//      manual clock moving between them and the timers run; the buffers stay in bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "util/clock.hpp"
#include "net/transport.hpp"
#include "utp/multiplexer.hpp"
#include "utp/packet.hpp"

using namespace dhtc;
using namespace dhtc::utp;

namespace {

void require(bool ok) {
    if (!ok) std::abort();
}

class sink final : public transport {
public:
    std::string last;
    bool send(const endpoint&, std::string_view payload) override {
        last.assign(payload);
        return true;
    }
};

void parse_only(std::string_view in) {
    packet_view p;
    const parse_error e = parse_packet(in, p);
    require(!to_string(e).empty());
    if (e != parse_error::none) return;
    require(in.size() >= header_size);
    require(p.sack.size() % 4 == 0 && p.sack.size() <= max_sack_bytes);
    require(p.payload.data() + p.payload.size() == in.data() + in.size());
    // What we write back parses to the same header.
    std::string out;
    write_packet(out, p.h, p.sack, p.payload);
    packet_view q;
    require(parse_packet(out, q) == parse_error::none);
    require(q.h.seq_nr == p.h.seq_nr && q.h.ack_nr == p.h.ack_nr && q.h.connection_id == p.h.connection_id);
    require(q.payload == p.payload && q.sack == p.sack);
}

void feed_connections(std::string_view in) {
    manual_clock clk;
    sink out;
    multiplexer_config cfg;
    cfg.accept_incoming = true;
    cfg.max_connections = 8;
    cfg.connection.receive_buffer = 16 * 1024;
    cfg.connection.send_buffer = 16 * 1024;
    multiplexer m(out, clk, cfg);
    const endpoint peer = *endpoint::parse("127.0.0.2:6881");

    // Ours: connect, then answer the SYN with a STATE so it is connected.
    auto ours = m.connect(peer);
    require(ours != nullptr);
    packet_view syn;
    require(parse_packet(out.last, syn) == parse_error::none);
    header h;
    h.type = packet_type::state;
    h.connection_id = ours->recv_id();
    h.seq_nr = 100;
    h.ack_nr = syn.h.seq_nr;
    h.wnd_size = 1 << 20;
    std::string state;
    write_packet(state, h, {}, {});
    m.on_datagram(peer, state);
    require(ours->state() == conn_state::connected);
    ours->write(std::string(5000, 'q'));

    // Theirs: a SYN we accept.
    header s;
    s.type = packet_type::syn;
    s.connection_id = 777;
    s.seq_nr = 50;
    std::string their_syn;
    write_packet(their_syn, s, {}, {});
    m.on_datagram(peer, their_syn);
    auto theirs = m.take_incoming();

    while (!in.empty()) {
        const std::size_t len = static_cast<unsigned char>(in[0]);
        in.remove_prefix(1);
        std::string d(in.substr(0, len));
        in.remove_prefix(d.size());
        if ((len & 1) && d.size() >= 4) {
            const std::uint16_t id = (len & 2) ? ours->recv_id() : static_cast<std::uint16_t>(778);
            d[0] = static_cast<char>((static_cast<unsigned char>(d[0]) & 0xf0) | protocol_version);
            d[2] = static_cast<char>(id >> 8);
            d[3] = static_cast<char>(id);
        }
        m.on_datagram(peer, d);
        m.flush();
        clk.advance(std::chrono::milliseconds(len * 7));
        m.tick();
        char buf[2048];
        ours->read(buf, sizeof buf);
        for (const auto* c : {ours.get(), theirs.get()}) {
            if (!c) continue;
            require(c->readable() <= cfg.connection.receive_buffer);
            require(c->bytes_in_flight() <= cfg.connection.send_buffer);
            require(!to_string(c->close_reason()).empty());
        }
    }
    require(m.size() <= cfg.max_connections);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] & 1)
        feed_connections(in);
    else
        parse_only(in);
    return 0;
}
