#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bencode/encoder.hpp"
#include "metadata/wire.hpp"

using namespace dhtc;
using namespace dhtc::wire;
using namespace std::string_literals;

namespace {

id20 make_id(std::uint8_t seed) {
    id20 id;
    for (std::size_t i = 0; i < id20::size; ++i) id.bytes[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
    return id;
}

std::string be32(std::uint32_t v) {
    std::string s(4, '\0');
    s[0] = static_cast<char>(v >> 24);
    s[1] = static_cast<char>(v >> 16);
    s[2] = static_cast<char>(v >> 8);
    s[3] = static_cast<char>(v);
    return s;
}

// A peer's handshake written by hand, so every field can be bent.
std::string raw_handshake(const id20& ih, const id20& pid, std::uint8_t r5 = 0x10, std::uint8_t r7 = 0) {
    std::string s;
    s.push_back(19);
    s += "BitTorrent protocol";
    std::string reserved(8, '\0');
    reserved[5] = static_cast<char>(r5);
    reserved[7] = static_cast<char>(r7);
    s += reserved;
    s += ih.view();
    s += pid.view();
    return s;
}

// Frames `buf` and returns the single extended message in it.
extended_view only_extended(const std::string& buf) {
    message_view m;
    REQUIRE(next_message(buf, default_max_message, m) == frame_status::message);
    REQUIRE(m.consumed == buf.size());
    extended_view x;
    REQUIRE(parse_extended(m, x) == wire_error::none);
    return x;
}

wire_error ext_hs(std::string_view payload, ext_handshake& out, std::size_t cap = default_max_metadata_size) {
    bencode::document doc;
    return parse_ext_handshake(payload, doc, out, cap);
}

wire_error ut_msg(std::string_view payload, ut_metadata_message& out, bencode::document& doc) {
    return parse_ut_metadata(payload, doc, out);
}

// Deterministic metadata that is a real bencoded info dict full of "ee" and "e" bytes,
// so any search for the dict end would trip over it.
std::string make_metadata(std::size_t approx) {
    std::string pieces;
    std::uint32_t x = 12345;
    while (pieces.size() < approx) {
        x = x * 1103515245u + 12345u;
        pieces.push_back((x >> 16) % 3 == 0 ? 'e' : static_cast<char>(x >> 24));
    }
    pieces.resize(pieces.size() / 20 * 20);
    bencode::entry info = bencode::entry::dict();
    info["length"] = std::int64_t{123456789};
    info["name"] = "eeee.bin";
    info["piece length"] = std::int64_t{262144};
    info["pieces"] = pieces;
    return info.encode();
}

} // namespace

TEST_SUITE("wire") {

// ---- handshake (item 21) ------------------------------------------------------------------

TEST_CASE("our handshake: layout, reserved bits, round trip") {
    const id20 ih = make_id(1), pid = make_id(2);
    std::string out = "prefix";
    REQUIRE(build_handshake(out, ih, pid));
    REQUIRE(out.size() == 6 + handshake_size);
    const std::string_view h = std::string_view(out).substr(6);
    CHECK(h[0] == 19);
    CHECK(h.substr(1, 19) == "BitTorrent protocol");
    CHECK(static_cast<std::uint8_t>(h[20 + 5]) == 0x10);
    CHECK((static_cast<std::uint8_t>(h[20 + 7]) & 0x10) == 0);
    for (int i : {0, 1, 2, 3, 4, 6, 7}) CHECK(h[20 + i] == 0);
    CHECK(h.substr(28, 20) == ih.view());
    CHECK(h.substr(48, 20) == pid.view());

    handshake p;
    REQUIRE(parse_handshake(h, p) == wire_error::none);
    CHECK(p.supports_extensions);
    CHECK_FALSE(p.supports_v2);
    CHECK(p.info_hash == ih);
    CHECK(p.peer_id == pid);
    CHECK(check_handshake(p, ih, make_id(9)) == wire_error::none);
}

TEST_CASE("handshake followed by messages in the same read: only 68 bytes are parsed") {
    const id20 ih = make_id(1), peer = make_id(3);
    std::string buf = raw_handshake(ih, peer) + be32(0);
    handshake p;
    CHECK(parse_handshake(buf, p) == wire_error::none);
    CHECK(p.peer_id == peer);
    message_view m;
    CHECK(next_message(std::string_view(buf).substr(handshake_size), default_max_message, m) == frame_status::keep_alive);
}

TEST_CASE("hostile handshakes (item 21)") {
    const id20 ih = make_id(1), ours = make_id(2), peer = make_id(3);
    handshake p;
    std::string good = raw_handshake(ih, peer);

    SUBCASE("pstrlen != 19") {
        for (char len : {'\0', '\x12', '\x14', '\xff'}) {
            std::string bad = good;
            bad[0] = len;
            CHECK(parse_handshake(bad, p) == wire_error::bad_pstrlen);
        }
    }
    SUBCASE("wrong protocol string") {
        std::string bad = good;
        bad[19] = 'L';
        CHECK(parse_handshake(bad, p) == wire_error::bad_protocol);
        // Visible from a prefix already.
        CHECK(parse_handshake("\x13" "BitTorrent pX", p) == wire_error::bad_protocol);
        CHECK(parse_handshake("\x13" "GET / HTTP/1.1\r\n\r\n", p) == wire_error::bad_protocol);
    }
    SUBCASE("short handshake then close") {
        CHECK(parse_handshake("", p) == wire_error::short_handshake);
        CHECK(parse_handshake("\x13", p) == wire_error::short_handshake);
        CHECK(parse_handshake(std::string_view(good).substr(0, 20), p) == wire_error::short_handshake);
        CHECK(parse_handshake(std::string_view(good).substr(0, 48), p) == wire_error::short_handshake);
        CHECK(parse_handshake(std::string_view(good).substr(0, 67), p) == wire_error::short_handshake);
        CHECK(parse_handshake(good, p) == wire_error::none);
    }
    SUBCASE("mismatched info hash") {
        REQUIRE(parse_handshake(raw_handshake(make_id(7), peer), p) == wire_error::none);
        CHECK(check_handshake(p, ih, ours) == wire_error::info_hash_mismatch);
    }
    SUBCASE("a v2-truncated hash in the reply (hybrid answered with its other key)") {
        id20 v2_truncated = make_id(8);
        REQUIRE(parse_handshake(raw_handshake(v2_truncated, peer, 0x10, 0x10), p) == wire_error::none);
        CHECK(p.supports_v2);
        CHECK(check_handshake(p, ih, ours) == wire_error::info_hash_mismatch);
    }
    SUBCASE("our own peer id echoed") {
        REQUIRE(parse_handshake(raw_handshake(ih, ours), p) == wire_error::none);
        CHECK(check_handshake(p, ih, ours) == wire_error::own_peer_id);
    }
    SUBCASE("no extension bit") {
        REQUIRE(parse_handshake(raw_handshake(ih, peer, 0x00), p) == wire_error::none);
        CHECK_FALSE(p.supports_extensions);
        CHECK(check_handshake(p, ih, ours) == wire_error::no_extension_bit);
        CHECK(classify(wire_error::no_extension_bit) == failure_class::no_extension_support);
    }
    for (auto e : {wire_error::short_handshake, wire_error::bad_pstrlen, wire_error::bad_protocol,
                   wire_error::info_hash_mismatch, wire_error::own_peer_id})
        CHECK(classify(e) == failure_class::handshake_failed);
}

// ---- framing (item 22) -------------------------------------------------------------------------

TEST_CASE("framing: need_more, keep-alive, message, two in a row") {
    message_view m;
    CHECK(next_message("", default_max_message, m) == frame_status::need_more);
    CHECK(next_message("\0\0\0"s, default_max_message, m) == frame_status::need_more);
    CHECK(next_message(be32(0), default_max_message, m) == frame_status::keep_alive);
    CHECK(m.consumed == 4);

    const std::string two = be32(5) + "\x04" "abcd" + be32(1) + "\x02";
    CHECK(next_message(std::string_view(two).substr(0, 8), default_max_message, m) == frame_status::need_more);
    REQUIRE(next_message(two, default_max_message, m) == frame_status::message);
    CHECK(m.id == 4);
    CHECK(m.payload == "abcd");
    CHECK(m.consumed == 9);
    REQUIRE(next_message(std::string_view(two).substr(m.consumed), default_max_message, m) == frame_status::message);
    CHECK(m.id == 2);
    CHECK(m.payload.empty());
    CHECK(m.consumed == 5);
}

TEST_CASE("framing: lengths over the cap are refused from the length field alone (item 22)") {
    message_view m;
    CHECK(next_message(be32(0xFFFFFFFFu), default_max_message, m) == frame_status::too_large);
    CHECK(m.length == 0xFFFFFFFFu);
    CHECK(next_message(be32((1u << 20) + 1), default_max_message, m) == frame_status::too_large);
    // Exactly the cap is allowed: it waits for the body.
    CHECK(next_message(be32(1u << 20), default_max_message, m) == frame_status::need_more);
    CHECK(next_message(be32(17000), 16 * 1024 + 512, m) == frame_status::too_large);
    CHECK(classify(wire_error::message_too_large) == failure_class::size_limit);
}

TEST_CASE("framing: a keep-alive flood is consumed four bytes at a time") {
    std::string flood;
    for (int i = 0; i < 10000; ++i) flood += be32(0);
    flood += be32(2) + "\x14\x00"s;
    std::string_view rest = flood;
    int keep_alives = 0;
    message_view m;
    frame_status s;
    while ((s = next_message(rest, default_max_message, m)) == frame_status::keep_alive) {
        ++keep_alives;
        rest.remove_prefix(m.consumed);
    }
    CHECK(keep_alives == 10000);
    REQUIRE(s == frame_status::message);
    CHECK(m.id == msg_extended);
}

TEST_CASE("extended messages: length 1 is an error; build_extended round trip (item 22)") {
    message_view m;
    const std::string one = be32(1) + "\x14";
    REQUIRE(next_message(one, default_max_message, m) == frame_status::message);
    extended_view x;
    CHECK(parse_extended(m, x) == wire_error::short_extended_message);
    CHECK(classify(wire_error::short_extended_message) == failure_class::protocol_error);

    const std::string have = be32(5) + "\x04\0\0\0\x01"s;
    REQUIRE(next_message(have, default_max_message, m) == frame_status::message);
    CHECK(parse_extended(m, x) == wire_error::not_extended);

    std::string out;
    REQUIRE(build_extended(out, 9, "payload\0bytes"s));
    CHECK(out == be32(15) + "\x14\x09" + "payload\0bytes"s);
    x = only_extended(out);
    CHECK(x.ext_id == 9);
    CHECK(x.payload == "payload\0bytes"s);

    out.clear();
    REQUIRE(build_extended(out, 3, ""));
    x = only_extended(out);
    CHECK(x.ext_id == 3);
    CHECK(x.payload.empty());
}

// ---- BEP-10 (items 23, 24) -------------------------------------------------------------------

TEST_CASE("our extension handshake: exact bytes and round trip") {
    std::string out;
    REQUIRE(build_ext_handshake(out, {}));
    extended_view x = only_extended(out);
    CHECK(x.ext_id == ext_handshake_id);
    CHECK(x.payload == "d1:md11:ut_metadatai1eee");

    out.clear();
    REQUIRE(build_ext_handshake(out, {1, "dhtc 0.1", 250}));
    x = only_extended(out);
    CHECK(x.payload == "d1:md11:ut_metadatai1ee4:reqqi250e1:v8:dhtc 0.1e");
    CHECK(x.payload.find("upload_only") == std::string_view::npos);
    CHECK(x.payload.find("metadata_size") == std::string_view::npos);

    ext_handshake h;
    // Ours has no metadata_size: the peer learns that we cannot serve metadata.
    CHECK(ext_hs(x.payload, h) == wire_error::no_metadata_size);
    CHECK(h.ut_metadata == 1);
    CHECK(h.client == "dhtc 0.1");
    CHECK(h.reqq == 250);
    CHECK_FALSE(h.upload_only);

    out = "keep";
    CHECK_FALSE(build_ext_handshake(out, {0, {}, 0}));
    CHECK(out == "keep");
    REQUIRE(build_ext_handshake(out, {255, {}, 0}));
    const std::string framed = out.substr(4);
    CHECK(only_extended(framed).payload == "d1:md11:ut_metadatai255eee");
}

TEST_CASE("a libtorrent-like extension handshake parses") {
    const std::string lt = "d12:complete_agoi-1e1:md11:lt_donthavei7e10:share_modei8e11:upload_onlyi3e"
                           "12:ut_holepunchi4e11:ut_metadatai2e6:ut_pexi1ee13:metadata_sizei31235e"
                           "4:reqqi500e11:upload_onlyi1e1:v16:libtorrent 2.0.86:yourip4:\x7f\x00\x00\x01" "e"s;
    ext_handshake h;
    REQUIRE(ext_hs(lt, h) == wire_error::none);
    CHECK(h.ut_metadata == 2);
    CHECK(h.metadata_size == 31235);
    CHECK(h.reqq == 500);
    CHECK(h.upload_only);
    CHECK(h.client == "libtorrent 2.0.8");
}

TEST_CASE("hostile extension handshakes (item 23)") {
    ext_handshake h;
    SUBCASE("not a dict") {
        for (std::string_view p : {"i1e", "le", "4:spam", "", "d1:m", "d1:md"})
            CHECK(ext_hs(p, h) == wire_error::bad_ext_handshake);
        CHECK(ext_hs("d1:md11:ut_metadatai1eee" "X", h) == wire_error::bad_ext_handshake);
        CHECK(h.decode.code == bencode::error::trailing_bytes);
        CHECK(ext_hs("d1:md11:ut_metadatai1ee", h) == wire_error::bad_ext_handshake);
        CHECK(h.decode.code == bencode::error::unexpected_eof);
    }
    SUBCASE("m not a dict") {
        CHECK(ext_hs("d1:mi1e13:metadata_sizei5ee", h) == wire_error::bad_ext_m);
        CHECK(ext_hs("d1:mli1ee13:metadata_sizei5ee", h) == wire_error::bad_ext_m);
        CHECK(ext_hs("d1:m11:ut_metadata13:metadata_sizei5ee", h) == wire_error::bad_ext_m);
    }
    SUBCASE("m or m.ut_metadata missing") {
        CHECK(ext_hs("d13:metadata_sizei5ee", h) == wire_error::no_ut_metadata);
        CHECK(ext_hs("d1:mde13:metadata_sizei5ee", h) == wire_error::no_ut_metadata);
        CHECK(ext_hs("d1:md6:ut_pexi1ee13:metadata_sizei5ee", h) == wire_error::no_ut_metadata);
    }
    SUBCASE("ut_metadata 0, -1, 256, a string, 255") {
        CHECK(ext_hs("d1:md11:ut_metadatai0ee13:metadata_sizei5ee", h) == wire_error::ut_metadata_disabled);
        CHECK(h.ut_metadata == 0);
        CHECK(ext_hs("d1:md11:ut_metadatai-1ee13:metadata_sizei5ee", h) == wire_error::bad_ut_metadata_id);
        CHECK(ext_hs("d1:md11:ut_metadatai256ee13:metadata_sizei5ee", h) == wire_error::bad_ut_metadata_id);
        CHECK(ext_hs("d1:md11:ut_metadata1:2e13:metadata_sizei5ee", h) == wire_error::bad_ut_metadata_id);
        CHECK(ext_hs("d1:md11:ut_metadatali2eee13:metadata_sizei5ee", h) == wire_error::bad_ut_metadata_id);
        CHECK(ext_hs("d1:md11:ut_metadatai255ee13:metadata_sizei5ee", h) == wire_error::none);
        CHECK(h.ut_metadata == 255);
    }
    SUBCASE("repeated handshakes changing ids: each parse reports its own") {
        REQUIRE(ext_hs("d1:md11:ut_metadatai2ee13:metadata_sizei100ee", h) == wire_error::none);
        CHECK(h.ut_metadata == 2);
        // A later handshake may carry only the changed keys.
        CHECK(ext_hs("d1:md11:ut_metadatai3eee", h) == wire_error::no_metadata_size);
        CHECK(h.ut_metadata == 3);
        REQUIRE(ext_hs("d1:md11:ut_metadatai9ee13:metadata_sizei100ee", h) == wire_error::none);
        CHECK(h.ut_metadata == 9);
        CHECK(ext_hs("d1:md11:ut_metadatai0ee13:metadata_sizei100ee", h) == wire_error::ut_metadata_disabled);
        CHECK(h.metadata_size == 100);
    }
    for (auto e : {wire_error::no_ut_metadata, wire_error::ut_metadata_disabled, wire_error::no_metadata_size})
        CHECK(classify(e) == failure_class::no_metadata_support);
    for (auto e : {wire_error::bad_ext_handshake, wire_error::bad_ext_m, wire_error::bad_ut_metadata_id})
        CHECK(classify(e) == failure_class::protocol_error);
}

TEST_CASE("hostile metadata_size (item 24)") {
    ext_handshake h;
    auto with_size = [](std::string_view v) { return "d1:md11:ut_metadatai2ee13:metadata_size" + std::string(v) + "e"; };
    CHECK(ext_hs("d1:md11:ut_metadatai2eee", h) == wire_error::no_metadata_size);
    CHECK(ext_hs(with_size("i0e"), h) == wire_error::bad_metadata_size);
    CHECK(ext_hs(with_size("i-1e"), h) == wire_error::bad_metadata_size);
    CHECK(ext_hs(with_size("i-9223372036854775808e"), h) == wire_error::bad_metadata_size);
    CHECK(ext_hs(with_size("i2147483648e"), h) == wire_error::metadata_too_large);
    CHECK(ext_hs(with_size("i9223372036854775807e"), h) == wire_error::metadata_too_large);
    CHECK(ext_hs(with_size("i9223372036854775808e"), h) == wire_error::bad_ext_handshake);
    CHECK(h.decode.code == bencode::error::integer_overflow);
    CHECK(ext_hs(with_size("5:31235"), h) == wire_error::bad_metadata_size);
    CHECK(ext_hs(with_size("li1ee"), h) == wire_error::bad_metadata_size);
    CHECK(ext_hs(with_size("i10485760e"), h) == wire_error::none);
    CHECK(h.metadata_size == 10485760);
    CHECK(ext_hs(with_size("i10485761e"), h) == wire_error::metadata_too_large);
    CHECK(ext_hs(with_size("i1000e"), h, 999) == wire_error::metadata_too_large);
    CHECK(ext_hs(with_size("i1e"), h) == wire_error::none);
    CHECK(classify(wire_error::metadata_too_large) == failure_class::size_limit);
    CHECK(classify(wire_error::bad_metadata_size) == failure_class::protocol_error);
}

// ---- BEP-9 (items 22, 25) ------------------------------------------------------------------------

TEST_CASE("decode_prefix finds the end of the first value by parsing") {
    bencode::document doc;
    std::size_t end = 0;
    CHECK(decode_prefix("i1eXYZ", doc, end, ut_metadata_dict_limits));
    CHECK(end == 3);
    CHECK(decode_prefix("d1:ai1ee" "eeee", doc, end, ut_metadata_dict_limits));
    CHECK(end == 8);
    CHECK(decode_prefix("d2:ee2:eee" "tail", doc, end, ut_metadata_dict_limits));
    CHECK(end == 10);
    CHECK(doc.root().find_string("ee").as_string() == "ee");
    CHECK(decode_prefix("lelele", doc, end, ut_metadata_dict_limits));
    CHECK(end == 2);

    // Structure found, then decode judges the prefix.
    CHECK(decode_prefix("05:abcdeXX", doc, end, ut_metadata_dict_limits).code == bencode::error::leading_zero);
    CHECK(decode_prefix("i-0eXX", doc, end, ut_metadata_dict_limits).code == bencode::error::negative_zero);
    CHECK(decode_prefix("ie", doc, end, ut_metadata_dict_limits).code == bencode::error::empty_integer);
    CHECK(decode_prefix("di1ei2ee", doc, end, ut_metadata_dict_limits).code == bencode::error::non_string_key);
    CHECK(decode_prefix("", doc, end, ut_metadata_dict_limits).code == bencode::error::empty_input);
    CHECK(decode_prefix("x", doc, end, ut_metadata_dict_limits).code == bencode::error::unexpected_byte);
    CHECK(decode_prefix("i1.5e", doc, end, ut_metadata_dict_limits).code == bencode::error::unexpected_byte);
    CHECK(decode_prefix("99999999999:", doc, end, ut_metadata_dict_limits).code ==
          bencode::error::string_length_overflow);

    // Limits: depth, tokens, size of the value.
    CHECK(decode_prefix(std::string(100000, 'l'), doc, end, ut_metadata_dict_limits).code ==
          bencode::error::depth_exceeded);
    std::string many = "l";
    for (int i = 0; i < 100; ++i) many += "i1e";
    many += "e";
    CHECK(decode_prefix(many, doc, end, ut_metadata_dict_limits).code == bencode::error::token_limit_exceeded);
    const std::string big = "d1:x2000:" + std::string(2000, 'a') + "e";
    CHECK(decode_prefix(big, doc, end, ut_metadata_dict_limits).code == bencode::error::size_limit_exceeded);
    CHECK(decode_prefix(big, doc, end, bencode::limits{4, 64, 4096}));
    CHECK(end == big.size());
}

TEST_CASE("ut_metadata builders round trip through the parser") {
    bencode::document doc;
    ut_metadata_message m;
    std::string out;

    SUBCASE("request, addressed with the peer's id") {
        REQUIRE(build_metadata_request(out, 2, 3));
        const extended_view x = only_extended(out);
        CHECK(x.ext_id == 2);
        CHECK(x.payload == "d8:msg_typei0e5:piecei3ee");
        REQUIRE(ut_msg(x.payload, m, doc) == wire_error::none);
        CHECK(m.kind == ut_kind::request);
        CHECK(m.piece == 3);
        CHECK(m.data.empty());
    }
    SUBCASE("reject") {
        REQUIRE(build_metadata_reject(out, 7, 12));
        const extended_view x = only_extended(out);
        CHECK(x.ext_id == 7);
        CHECK(x.payload == "d8:msg_typei2e5:piecei12ee");
        REQUIRE(ut_msg(x.payload, m, doc) == wire_error::none);
        CHECK(m.kind == ut_kind::reject);
        CHECK(m.piece == 12);
        CHECK(check_data(m, 40000, 12) == wire_error::rejected);
        CHECK(classify(wire_error::rejected) == failure_class::rejected);
    }
    SUBCASE("data whose bytes look like bencode") {
        const std::string data = "eee" "d8:msg_typei2ee" + std::string(100, 'e');
        REQUIRE(build_metadata_data(out, 1, 0, data.size(), data));
        const extended_view x = only_extended(out);
        CHECK(x.ext_id == 1);
        REQUIRE(ut_msg(x.payload, m, doc) == wire_error::none);
        CHECK(m.kind == ut_kind::data);
        CHECK(m.piece == 0);
        CHECK(m.total_size == static_cast<std::int64_t>(data.size()));
        CHECK(m.data == data);
        CHECK(check_data(m, data.size(), 0) == wire_error::none);
    }
    SUBCASE("peer id 0 is refused") {
        out = "x";
        CHECK_FALSE(build_metadata_request(out, 0, 0));
        CHECK_FALSE(build_metadata_reject(out, 0, 0));
        CHECK_FALSE(build_metadata_data(out, 0, 0, 1, "a"));
        CHECK(out == "x");
    }
}

TEST_CASE("hostile ut_metadata messages (item 25)") {
    bencode::document doc;
    ut_metadata_message m;

    SUBCASE("unterminated dict") {
        CHECK(ut_msg("d8:msg_typei1e5:piecei0e", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::unexpected_eof);
    }
    SUBCASE("dict running past the payload") {
        CHECK(ut_msg("d8:msg_typei1e5:piecei0e10:total_sizei5e1:x20:abce", m, doc) ==
              wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::string_past_end);
    }
    SUBCASE("not a dict, empty, garbage") {
        CHECK(ut_msg("i1e", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(ut_msg("li1ee", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(ut_msg("", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::empty_input);
        CHECK(ut_msg("\xff\xfe", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(ut_msg("d8:msg_typei1e8:msg_typei1ee", m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::duplicate_key);
    }
    SUBCASE("unknown msg_type is ignored") {
        CHECK(ut_msg("d8:msg_typei7e5:piecei0ee", m, doc) == wire_error::none);
        CHECK(m.kind == ut_kind::ignore);
        CHECK(m.msg_type == 7);
        CHECK(ut_msg("d8:msg_typei-1ee" "junk", m, doc) == wire_error::none);
        CHECK(m.kind == ut_kind::ignore);
    }
    SUBCASE("msg_type missing or not an integer") {
        CHECK(ut_msg("d5:piecei0ee", m, doc) == wire_error::bad_msg_type);
        CHECK(ut_msg("d8:msg_type1:15:piecei0ee", m, doc) == wire_error::bad_msg_type);
    }
    SUBCASE("piece missing, negative, not an integer") {
        CHECK(ut_msg("d8:msg_typei0ee", m, doc) == wire_error::bad_piece);
        CHECK(ut_msg("d8:msg_typei0e5:piecei-1ee", m, doc) == wire_error::bad_piece);
        CHECK(ut_msg("d8:msg_typei1e5:piecei-1e10:total_sizei5ee" "abcde", m, doc) == wire_error::bad_piece);
        CHECK(ut_msg("d8:msg_typei2e5:piece1:0e", m, doc) == wire_error::bad_piece);
    }
    SUBCASE("reject sent as msg_type 1 (no data)") {
        CHECK(ut_msg("d8:msg_typei1e5:piecei0ee", m, doc) == wire_error::missing_data);
        CHECK(ut_msg("d8:msg_typei1e5:piecei0e10:total_sizei5ee", m, doc) == wire_error::missing_data);
    }
    SUBCASE("total_size missing or not positive") {
        CHECK(ut_msg("d8:msg_typei1e5:piecei0ee" "abc", m, doc) == wire_error::bad_total_size);
        CHECK(ut_msg("d8:msg_typei1e5:piecei0e10:total_sizei0ee" "abc", m, doc) == wire_error::bad_total_size);
        CHECK(ut_msg("d8:msg_typei1e5:piecei0e10:total_size3:abcee" "abc", m, doc) == wire_error::bad_total_size);
    }
    SUBCASE("bytes after a request or reject") {
        CHECK(ut_msg("d8:msg_typei0e5:piecei0ee" "x", m, doc) == wire_error::trailing_bytes);
        CHECK(ut_msg("d8:msg_typei2e5:piecei0eee", m, doc) == wire_error::trailing_bytes);
    }
    SUBCASE("a huge header or a nesting bomb in the dict") {
        const std::string huge = "d1:x5000:" + std::string(5000, 'a') + "8:msg_typei1e5:piecei0ee" "abc";
        CHECK(ut_msg(huge, m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::size_limit_exceeded);
        CHECK(ut_msg("d1:x" + std::string(1000, 'l'), m, doc) == wire_error::bad_ut_metadata_dict);
        CHECK(m.decode.code == bencode::error::depth_exceeded);
    }
    SUBCASE("an unknown key holding \"ee\" does not end the dict early") {
        REQUIRE(ut_msg("d1:a2:ee8:msg_typei1e5:piecei0e10:total_sizei3ee" "xyz", m, doc) == wire_error::none);
        CHECK(m.data == "xyz");
    }
}

TEST_CASE("check_data: range, request, total size, lengths (item 25)") {
    const std::size_t size = 2 * metadata_piece_size + 100; // 3 pieces, the last 100 bytes
    const std::string full(metadata_piece_size, 'a'), last(100, 'b');
    auto data_msg = [](std::int64_t piece, std::int64_t total, std::string_view data) {
        ut_metadata_message m;
        m.kind = ut_kind::data;
        m.msg_type = 1;
        m.piece = piece;
        m.total_size = total;
        m.data = data;
        return m;
    };
    CHECK(check_data(data_msg(0, size, full), size, 0) == wire_error::none);
    CHECK(check_data(data_msg(1, size, full), size, 1) == wire_error::none);
    CHECK(check_data(data_msg(2, size, last), size, 2) == wire_error::none);
    CHECK(check_data(data_msg(2, size, last), size, any_piece) == wire_error::none);

    CHECK(check_data(data_msg(-1, size, full), size, any_piece) == wire_error::bad_piece);
    CHECK(check_data(data_msg(3, size, last), size, 3) == wire_error::piece_out_of_range);
    CHECK(check_data(data_msg(1LL << 40, size, last), size, any_piece) == wire_error::piece_out_of_range);
    CHECK(check_data(data_msg(1, size, full), size, 0) == wire_error::unrequested_piece);
    CHECK(check_data(data_msg(0, size + 1, full), size, 0) == wire_error::bad_total_size);
    CHECK(check_data(data_msg(0, size - 1, full), size, 0) == wire_error::bad_total_size);
    CHECK(check_data(data_msg(0, size, full.substr(1)), size, 0) == wire_error::bad_piece_length);
    CHECK(check_data(data_msg(0, size, full + "x"), size, 0) == wire_error::bad_piece_length);
    CHECK(check_data(data_msg(2, size, last.substr(1)), size, 2) == wire_error::bad_piece_length);
    CHECK(check_data(data_msg(2, size, last + "x"), size, 2) == wire_error::trailing_bytes);

    ut_metadata_message req;
    req.kind = ut_kind::request;
    CHECK(check_data(req, size, any_piece) == wire_error::bad_msg_type);

    // An exact multiple of 16 KiB: the last piece is a full one.
    CHECK(piece_count(2 * metadata_piece_size) == 2);
    CHECK(check_data(data_msg(1, 2 * metadata_piece_size, full), 2 * metadata_piece_size, 1) == wire_error::none);
    CHECK(piece_count(0) == 0);
    CHECK(piece_count(1) == 1);
    CHECK(piece_count(metadata_piece_size + 1) == 2);
    CHECK(piece_length(size, 2) == 100);
    CHECK(piece_length(size, 3) == 0);
    for (auto e : {wire_error::bad_piece, wire_error::piece_out_of_range, wire_error::unrequested_piece,
                   wire_error::bad_total_size, wire_error::bad_piece_length, wire_error::trailing_bytes,
                   wire_error::missing_data, wire_error::bad_msg_type, wire_error::bad_ut_metadata_dict})
        CHECK(classify(e) == failure_class::protocol_error);
}

// ---- assembly ----------------------------------------------------------------------------------

TEST_CASE("metadata_buffer") {
    metadata_buffer b;
    CHECK(b.reset(0) == wire_error::bad_metadata_size);
    CHECK(b.reset(default_max_metadata_size + 1) == wire_error::metadata_too_large);
    CHECK(b.reset(100, 99) == wire_error::metadata_too_large);
    CHECK_FALSE(b.complete());
    CHECK(b.bytes().empty());

    const std::string blob = make_metadata(40000);
    REQUIRE(b.reset(blob.size()) == wire_error::none);
    const std::size_t n = piece_count(blob.size());
    REQUIRE(b.pieces() == n);
    REQUIRE(n == 3);
    auto piece = [&](std::size_t i) { return std::string_view(blob).substr(i * metadata_piece_size, piece_length(blob.size(), i)); };

    CHECK(b.store(n, "x") == wire_error::piece_out_of_range);
    CHECK(b.store(0, piece(0).substr(1)) == wire_error::bad_piece_length);
    CHECK(b.store(n - 1, std::string(piece(n - 1)) + "x") == wire_error::trailing_bytes);
    CHECK(b.received() == 0);

    CHECK(b.store(2, piece(2)) == wire_error::none);
    CHECK(b.next_missing() == 0);
    CHECK(b.store(0, piece(0)) == wire_error::none);
    CHECK(b.next_missing() == 1);
    CHECK_FALSE(b.complete());
    CHECK(b.bytes().empty());
    // A second copy is ignored: the first one wins.
    CHECK(b.store(0, std::string(metadata_piece_size, 'z')) == wire_error::none);
    CHECK(b.received() == 2);
    CHECK(b.store(1, piece(1)) == wire_error::none);
    CHECK(b.complete());
    CHECK(b.next_missing() == n);
    CHECK(b.bytes() == blob);

    // Reuse for a one-byte blob.
    REQUIRE(b.reset(1) == wire_error::none);
    CHECK(b.pieces() == 1);
    CHECK_FALSE(b.has(0));
    CHECK(b.store(0, "") == wire_error::bad_piece_length);
    CHECK(b.store(0, "q") == wire_error::none);
    CHECK(b.has(0));
    CHECK(b.bytes() == "q");
}

// ---- a whole conversation on byte buffers ----------------------------------------------------

TEST_CASE("simulated exchange: handshakes, extension handshakes, requests, data, assembly") {
    const id20 ih = make_id(40), our_id = make_id(41), peer_id = make_id(42);
    const std::string metadata = make_metadata(3 * metadata_piece_size + 5000);
    const std::uint8_t our_ut = 1, peer_ut = 2;
    bencode::document doc;

    // We → peer: handshake and our extension handshake, pipelined.
    std::string to_peer;
    REQUIRE(build_handshake(to_peer, ih, our_id));
    REQUIRE(build_ext_handshake(to_peer, {our_ut, "dhtc/test", 0}));

    // The peer reads our handshake and extension handshake.
    handshake theirs_view;
    REQUIRE(parse_handshake(to_peer, theirs_view) == wire_error::none);
    CHECK(theirs_view.info_hash == ih);
    CHECK(theirs_view.supports_extensions);
    std::string_view peer_in = std::string_view(to_peer).substr(handshake_size);
    message_view m;
    REQUIRE(next_message(peer_in, default_max_message, m) == frame_status::message);
    peer_in.remove_prefix(m.consumed);
    extended_view x;
    REQUIRE(parse_extended(m, x) == wire_error::none);
    REQUIRE(x.ext_id == ext_handshake_id);
    ext_handshake ours_seen;
    CHECK(parse_ext_handshake(x.payload, doc, ours_seen) == wire_error::no_metadata_size);
    REQUIRE(ours_seen.ut_metadata == our_ut);

    // Peer → us: handshake, a bitfield, its extension handshake, a keep-alive.
    std::string to_us = raw_handshake(ih, peer_id);
    to_us += be32(3) + "\x05\xff\xf0"s;
    const std::string peer_ext = "d1:md11:ut_metadatai" + std::to_string(peer_ut) + "e6:ut_pexi1ee13:metadata_sizei" +
                                 std::to_string(metadata.size()) + "e1:v16:libtorrent/2.0.8e";
    REQUIRE(build_extended(to_us, ext_handshake_id, peer_ext));
    to_us += be32(0);

    // We read it in 7-byte chunks, as a socket might deliver it.
    std::string inbox;
    std::size_t fed = 0;
    auto feed = [&](std::string_view wire_bytes) {
        const std::size_t take = std::min<std::size_t>(7, wire_bytes.size() - fed);
        inbox.append(wire_bytes.substr(fed, take));
        fed += take;
        return take != 0;
    };
    while (inbox.size() < handshake_size) REQUIRE(feed(to_us));
    handshake hs;
    REQUIRE(parse_handshake(inbox, hs) == wire_error::none);
    REQUIRE(check_handshake(hs, ih, our_id) == wire_error::none);
    inbox.erase(0, handshake_size);

    ext_handshake peer_hs;
    bool got_ext = false;
    int keep_alives = 0, others = 0;
    for (;;) {
        const frame_status s = next_message(inbox, default_max_message, m);
        if (s == frame_status::need_more) {
            if (!feed(to_us)) break;
            continue;
        }
        REQUIRE(s != frame_status::too_large);
        if (s == frame_status::keep_alive) {
            ++keep_alives;
        } else if (m.id == msg_extended) {
            REQUIRE(parse_extended(m, x) == wire_error::none);
            REQUIRE(x.ext_id == ext_handshake_id);
            REQUIRE(parse_ext_handshake(x.payload, doc, peer_hs) == wire_error::none);
            got_ext = true;
        } else {
            ++others;
        }
        inbox.erase(0, m.consumed);
    }
    REQUIRE(got_ext);
    CHECK(keep_alives == 1);
    CHECK(others == 1);
    CHECK(inbox.empty());
    REQUIRE(peer_hs.ut_metadata == peer_ut);
    REQUIRE(peer_hs.metadata_size == metadata.size());

    metadata_buffer assembly;
    REQUIRE(assembly.reset(peer_hs.metadata_size) == wire_error::none);

    // Request every piece, last first, addressed with the peer's id.
    std::string requests;
    std::vector<std::uint32_t> order;
    for (std::size_t i = assembly.pieces(); i-- > 0;) order.push_back(static_cast<std::uint32_t>(i));
    for (auto i : order) REQUIRE(build_metadata_request(requests, peer_hs.ut_metadata, i));

    // The peer answers each request with data addressed with OUR id, and throws in an
    // unknown msg_type, which we must ignore.
    std::string answers;
    std::string_view rq = requests;
    while (!rq.empty()) {
        REQUIRE(next_message(rq, default_max_message, m) == frame_status::message);
        rq.remove_prefix(m.consumed);
        REQUIRE(parse_extended(m, x) == wire_error::none);
        REQUIRE(x.ext_id == peer_ut);
        ut_metadata_message req;
        REQUIRE(parse_ut_metadata(x.payload, doc, req) == wire_error::none);
        REQUIRE(req.kind == ut_kind::request);
        const auto p = static_cast<std::size_t>(req.piece);
        const std::string_view bytes = std::string_view(metadata).substr(p * metadata_piece_size, piece_length(metadata.size(), p));
        REQUIRE(build_extended(answers, ours_seen.ut_metadata, "d8:msg_typei9ee"));
        REQUIRE(build_metadata_data(answers, ours_seen.ut_metadata, static_cast<std::uint32_t>(p), metadata.size(), bytes));
    }

    std::string_view in = answers;
    std::size_t next = 0, ignored = 0;
    while (!in.empty()) {
        REQUIRE(next_message(in, default_max_message, m) == frame_status::message);
        in.remove_prefix(m.consumed);
        REQUIRE(parse_extended(m, x) == wire_error::none);
        REQUIRE(x.ext_id == our_ut);
        ut_metadata_message msg;
        REQUIRE(parse_ut_metadata(x.payload, doc, msg) == wire_error::none);
        if (msg.kind == ut_kind::ignore) {
            ++ignored;
            continue;
        }
        REQUIRE(next < order.size());
        REQUIRE(check_data(msg, assembly.size(), order[next]) == wire_error::none);
        REQUIRE(assembly.store(static_cast<std::size_t>(msg.piece), msg.data) == wire_error::none);
        ++next;
    }
    CHECK(ignored == order.size());
    REQUIRE(assembly.complete());
    CHECK(assembly.bytes() == metadata);
}

TEST_CASE("to_string names every code") {
    CHECK(to_string(wire_error::trailing_bytes) == "trailing_bytes");
    CHECK(to_string(wire_error::bad_pstrlen) == "bad_pstrlen");
    CHECK(to_string(failure_class::no_metadata_support) == "no_metadata_support");
    CHECK(to_string(frame_status::too_large) == "too_large");
    for (int i = 0; i <= static_cast<int>(wire_error::trailing_bytes); ++i) {
        const auto e = static_cast<wire_error>(i);
        CHECK(to_string(e) != "unknown");
        CHECK((classify(e) == failure_class::none) == (e == wire_error::none));
    }
}

TEST_CASE("metadata_buffer holds what arrived, never the claimed size") {
    metadata_buffer b;
    const std::size_t size = std::size_t{10} << 20; // a 10 MiB claim
    REQUIRE(b.reset(size) == wire_error::none);
    CHECK(b.held_bytes() == 0);
    const std::string piece(metadata_piece_size, 'a');
    // Out of order: the last piece first, then one in the middle.
    const std::size_t n = piece_count(size);
    REQUIRE(b.store(n - 1, std::string(piece_length(size, n - 1), 'z')) == wire_error::none);
    CHECK(b.held_bytes() == piece_length(size, n - 1));
    REQUIRE(b.store(7, piece) == wire_error::none);
    CHECK(b.held_bytes() == piece_length(size, n - 1) + metadata_piece_size);
    CHECK(b.store(7, std::string(metadata_piece_size, 'b')) == wire_error::none); // first copy wins
    CHECK(b.held_bytes() == piece_length(size, n - 1) + metadata_piece_size);
    CHECK(b.bytes().empty());
    REQUIRE(b.reset(size) == wire_error::none);
    CHECK(b.held_bytes() == 0);

    // Every piece, in a scrambled order: the joined bytes are in piece order.
    const std::size_t small = 3 * metadata_piece_size + 100;
    REQUIRE(b.reset(small) == wire_error::none);
    for (std::size_t p : {2u, 0u, 3u, 1u}) {
        REQUIRE(b.store(p, std::string(piece_length(small, p), static_cast<char>('0' + p))) == wire_error::none);
    }
    REQUIRE(b.complete());
    const std::string_view all = b.bytes();
    REQUIRE(all.size() == small);
    CHECK(all[0] == '0');
    CHECK(all[metadata_piece_size] == '1');
    CHECK(all[2 * metadata_piece_size + 5] == '2');
    CHECK(all[small - 1] == '3');
    CHECK(b.held_bytes() == small);
}

} // TEST_SUITE
