// What "the fast path gives exactly what the generic path gives" means, written once for the
// differential unit test and the differential fuzzer (codec only: no Asio here).
//   - same_message: two parsed messages agree on every field; views must point at the same
//     bytes of the same packet, not merely hold equal contents.
//   - fast_matches_generic: runs parse_query_fast and bencode::decode + krpc::parse on one
//     packet; when the fast path accepts, the generic path must accept a query and agree.
//   - replies_match: krpc::reply_encoder and the generic encode_*_response give the same
//     result and the same bytes, for valid and invalid arguments alike.
#pragma once

#include <string>
#include <string_view>

#include "bencode/decoder.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "krpc/query_fast_path.hpp"
#include "krpc/reply_encoder.hpp"

namespace dhtc::testing {

inline bool same_view(std::string_view a, std::string_view b) noexcept {
    return a.data() == b.data() && a.size() == b.size();
}

inline bool same_message(const krpc::message& a, const krpc::message& b) noexcept {
    const auto& qa = a.query;
    const auto& qb = b.query;
    const auto& ra = a.response;
    const auto& rb = b.response;
    return a.type == b.type && same_view(a.transaction, b.transaction) && same_view(a.version, b.version) &&
           a.ip == b.ip && a.read_only == b.read_only && a.id == b.id &&
           // query
           qa.kind == qb.kind && same_view(qa.name, qb.name) && qa.target == qb.target &&
           qa.has_target == qb.has_target && qa.info_hash == qb.info_hash && qa.has_info_hash == qb.has_info_hash &&
           qa.port == qb.port && qa.implied_port == qb.implied_port && same_view(qa.token, qb.token) &&
           qa.wants == qb.wants && qa.has_want == qb.has_want && qa.seed == qb.seed && qa.noseed == qb.noseed &&
           qa.scrape == qb.scrape && qa.bootstrap == qb.bootstrap &&
           // response and error: untouched by a query
           same_view(ra.nodes.raw(), rb.nodes.raw()) && ra.has_nodes == rb.has_nodes &&
           same_view(ra.nodes6.raw(), rb.nodes6.raw()) && ra.has_nodes6 == rb.has_nodes6 &&
           ra.values.size() == rb.values.size() && ra.values.skipped() == rb.values.skipped() &&
           ra.has_values == rb.has_values && same_view(ra.token, rb.token) && ra.has_token == rb.has_token &&
           same_view(ra.samples, rb.samples) && ra.has_samples == rb.has_samples && ra.interval == rb.interval &&
           ra.has_interval == rb.has_interval && ra.num == rb.num && ra.has_num == rb.has_num &&
           a.err.code == b.err.code && same_view(a.err.message, b.err.message);
}

/// Outcome of running both paths on one packet.
struct differential {
    bool fast_accepted = false;
    bool agrees = true; ///< false only when the fast path accepted and the generic path disagrees
};

/// The scratch both paths parse into; reuse it across calls.
struct differential_scratch {
    bencode::document doc;
    krpc::message fast;
    krpc::message generic;
};

inline differential fast_matches_generic(std::string_view packet, differential_scratch& s) noexcept {
    differential d;
    d.fast_accepted = krpc::parse_query_fast(packet, s.fast);
    if (!d.fast_accepted) return d;
    if (!bencode::decode(packet, s.doc, krpc::packet_limits)) {
        d.agrees = false;
        return d;
    }
    s.generic = krpc::message{};
    const krpc::parse_result r = krpc::parse(s.doc.root(), s.generic);
    d.agrees = static_cast<bool>(r) && s.generic.type == krpc::message_type::query &&
               r.query_method == s.generic.query.kind && same_message(s.fast, s.generic);
    return d;
}

/// The arguments of one reply, as the responder would pass them.
struct reply_case {
    id20 id;
    std::string_view version;
    std::string_view transaction;
    endpoint requester;
    std::string_view token;
    std::string_view nodes;
    std::string_view nodes6;
};

/// Encodes `c` both ways, appending to buffers that already hold `prefix`; true when the
/// return values agree and so do the bytes (including the untouched prefix on failure).
inline bool replies_match(const reply_case& c, std::string_view prefix) {
    const krpc::reply_encoder fast(c.id, c.version);
    const krpc::reply_header h{c.transaction, c.id, c.requester, c.version};
    const auto both = [&](auto&& fast_encode, auto&& generic_encode) {
        std::string a(prefix), b(prefix);
        const bool fa = fast_encode(a);
        const bool ga = generic_encode(b);
        return fa == ga && a == b;
    };
    return both([&](std::string& o) { return fast.ping(o, c.transaction, c.requester); },
                [&](std::string& o) { return krpc::encode_ping_response(o, h); }) &&
           both([&](std::string& o) { return fast.find_node(o, c.transaction, c.requester, c.nodes, c.nodes6); },
                [&](std::string& o) { return krpc::encode_find_node_response(o, h, c.nodes, c.nodes6); }) &&
           both([&](std::string& o) {
                    return fast.get_peers(o, c.transaction, c.requester, c.token, c.nodes, c.nodes6);
                },
                [&](std::string& o) { return krpc::encode_get_peers_response(o, h, c.token, {}, c.nodes, c.nodes6); });
}

} // namespace dhtc::testing
