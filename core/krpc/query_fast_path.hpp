// The fast path of the receive path: a query in the form mainstream clients send it (keys
// in canonical order, strings and integers everywhere except the `a` dict and its `want`
// list), parsed straight from the packet bytes in one pass, with no bencode document in
// between.
//
// It either produces exactly what bencode::decode(packet, doc, packet_limits) followed by
// parse(doc.root(), out) produces for a valid query (the same fields, views into the same
// bytes, the same parse_result), or it declines and the caller runs that generic path,
// which stays the reference for everything else: responses, errors, malformed or unusual
// packets. Any doubt declines. tests/unit/krpc/test_krpc_fast_path.cpp and
// tests/fuzz/fuzz_krpc_fast_path.cpp hold the two paths to that.
#pragma once

#include <string_view>

#include "krpc/message.hpp"

namespace dhtc::krpc {

/// True when `packet` is a valid query, now parsed into `out` as parse() would have done
/// it; false when the generic path must decide (`out` then holds nothing useful).
bool parse_query_fast(std::string_view packet, message& out) noexcept;

} // namespace dhtc::krpc
