// Fuzzes the KRPC parser with the DHT node's decoder limits. Whatever parses is answered
// (a query) or re-encoded (a response or error) with the real encoders, and that output
// must decode and parse again to the same fields: encoder and parser agree on every input.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "bencode/decoder.hpp"
#include "krpc/compact.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

using namespace dhtc;
using namespace dhtc::krpc;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

// Re-encoded output carries fields the input may have lacked (ip), so it gets roomier
// limits than a received datagram; it still must be well-formed.
constexpr bencode::limits reparse_limits{16, 4096, 1 << 16};

const id20 our_id = *id20::from_bytes("0123456789abcdefghij");
const endpoint our_peer{ip_address::v4(0x7f000001u), 6881};

struct reparsed {
    bencode::document doc;
    message msg;
    void run(const std::string& bytes) {
        check(static_cast<bool>(bencode::decode(std::string_view(bytes), doc, reparse_limits)));
        check(doc.unsorted_dicts() == 0);
        check(static_cast<bool>(parse(doc.root(), msg)));
    }
};

void answer_query(const message& m, std::string& out, reparsed& back) {
    static const node_entry nodes[] = {{our_id, our_peer}, {our_id, {*ip_address::parse("2001:db8::1"), 1}}};
    std::string n4, n6;
    append_compact_nodes(n4, nodes, ip_family::v4);
    append_compact_nodes(n6, nodes, ip_family::v6);
    const reply_header h{m.transaction, our_id, m.ip, "LT01"};
    const query_args& q = m.query;
    bool ok = false;
    switch (q.kind) {
    case method::ping:
    case method::announce_peer: ok = encode_ping_response(out, h); break;
    case method::find_node: ok = encode_find_node_response(out, h, n4, n6); break;
    case method::get_peers: ok = encode_get_peers_response(out, h, "tk", {&our_peer, 1}, n4, {}); break;
    case method::sample_infohashes: ok = encode_sample_infohashes_response(out, h, 21600, 1, {&our_id, 1}, n4, {}); break;
    case method::unknown:
        ok = q.has_target || q.has_info_hash ? encode_find_node_response(out, h, n4, {})
                                             : encode_error(out, m.transaction, error_method_unknown, "Method Unknown", m.ip);
        break;
    case method::none: std::abort();
    }
    check(ok);
    back.run(out);
    check(back.msg.transaction == m.transaction);
    check(back.msg.ip == m.ip);
}

void reencode_response(const message& m, std::string& out, reparsed& back) {
    const response_args& r = m.response;
    const reply_header h{m.transaction, m.id, m.ip, m.version};

    static std::array<endpoint, 256> values; // > any 1500-byte packet can hold
    std::size_t nvalues = 0;
    for (auto ep : r.values) {
        check(nvalues < values.size());
        values[nvalues++] = ep;
    }
    check(nvalues == r.values.size());
    static std::array<id20, 80> samples;
    check(r.sample_count() <= samples.size());
    for (std::size_t i = 0; i < r.sample_count(); ++i) samples[i] = r.sample(i);

    bool ok;
    if (r.has_samples || r.has_interval || r.has_num) {
        ok = encode_sample_infohashes_response(out, h, r.interval, r.num, {samples.data(), r.sample_count()},
                                               r.nodes.raw(), r.nodes6.raw());
    } else if (r.has_token) {
        ok = encode_get_peers_response(out, h, r.token, {values.data(), nvalues}, r.nodes.raw(), r.nodes6.raw());
    } else {
        ok = encode_find_node_response(out, h, r.nodes.raw(), r.nodes6.raw());
    }
    check(ok);
    back.run(out);
    const message& b = back.msg;
    check(b.type == message_type::response);
    check(b.transaction == m.transaction && b.id == m.id && b.ip == m.ip && b.version == m.version);
    check(b.response.nodes.raw() == r.nodes.raw() && b.response.nodes6.raw() == r.nodes6.raw());
    if (r.has_samples || r.has_interval || r.has_num) {
        check(b.response.samples == r.samples && b.response.interval == r.interval && b.response.num == r.num);
    } else if (r.has_token) {
        check(b.response.token == r.token);
        check(b.response.values.size() == nvalues && b.response.values.skipped() == 0);
        std::size_t i = 0;
        for (auto ep : b.response.values) check(ep == values[i++]);
    }
}

void reencode_error(const message& m, std::string& out, reparsed& back) {
    check(encode_error(out, m.transaction, m.err.code, m.err.message, m.ip, m.version));
    back.run(out);
    check(back.msg.type == message_type::error);
    check(back.msg.transaction == m.transaction && back.msg.ip == m.ip && back.msg.version == m.version);
    check(back.msg.err.code == m.err.code && back.msg.err.message == m.err.message);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static bencode::document doc;
    static message msg;
    static std::string out;
    static reparsed back;

    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (!bencode::decode(in, doc, packet_limits)) return 0;
    const parse_result res = parse(doc.root(), msg);
    check(!to_string(res.code).empty());
    if (!res) {
        check(res.offset < size);
        return 0;
    }
    check(msg.query.kind == res.query_method);

    out.clear();
    switch (msg.type) {
    case message_type::query: answer_query(msg, out, back); break;
    case message_type::response: reencode_response(msg, out, back); break;
    case message_type::error: reencode_error(msg, out, back); break;
    }
    return 0;
}
