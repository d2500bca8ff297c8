#include <doctest/doctest.h>

#include <string>

#include "bencode/decoder.hpp"
#include "bencode/encoder.hpp"

using namespace dhtc::bencode;

namespace {

// Takes a view: the document points into the input, so callers keep it alive (literals do).
decode_result decode_str(std::string_view s, document& d, const limits& lim = {}) { return decode(s, d, lim); }

error error_of(const std::string& s, const limits& lim = {}) {
    document d;
    return decode_str(s, d, lim).code;
}

std::size_t offset_of(const std::string& s) {
    document d;
    return decode_str(s, d).offset;
}

} // namespace

TEST_SUITE("bencode") {

TEST_CASE("scalars decode into views of the input") {
    document d;
    REQUIRE(decode_str("i42e", d));
    CHECK(d.root().as_integer() == 42);
    REQUIRE(decode_str("i-7e", d));
    CHECK(d.root().as_integer() == -7);
    REQUIRE(decode_str("i0e", d));
    CHECK(d.root().as_integer() == 0);
    REQUIRE(decode_str("i9223372036854775807e", d));
    CHECK(d.root().as_integer() == INT64_MAX);
    REQUIRE(decode_str("i-9223372036854775808e", d));
    CHECK(d.root().as_integer() == INT64_MIN);

    const std::string in = "4:spam";
    REQUIRE(decode_str(in, d));
    CHECK(d.root().as_string() == "spam");
    CHECK(d.root().as_string().data() == in.data() + 2); // a view, not a copy
    REQUIRE(decode_str("0:", d));
    CHECK(d.root().is_string());
    CHECK(d.root().as_string().empty());
}

TEST_CASE("lists and dicts: lookup, iteration, sizes and raw spans") {
    document d;
    const std::string in = "d1:ai1e1:bl3:onei2ed1:x1:yee1:c0:e";
    REQUIRE(decode_str(in, d));
    auto root = d.root();
    CHECK(root.is_dict());
    CHECK(root.size() == 3);
    CHECK(root.find("a").as_integer() == 1);
    CHECK(root.find_integer("a").as_integer() == 1);
    CHECK_FALSE(root.find_string("a"));
    auto b = root.find_list("b");
    REQUIRE(b);
    CHECK(b.size() == 3);
    CHECK(b.at(0).as_string() == "one");
    CHECK(b.at(1).as_integer() == 2);
    CHECK(b.at(2).find("x").as_string() == "y");
    CHECK_FALSE(b.at(3));
    CHECK(b.raw() == "l3:onei2ed1:x1:yee");
    CHECK(b.offset() == in.find('l'));
    CHECK(root.find("c").as_string().empty());
    CHECK_FALSE(root.find("missing"));
    CHECK(root.raw() == in);

    std::string keys;
    for (auto e : root) keys += std::string(e.key);
    CHECK(keys == "abc");
    int elements = 0;
    for (auto e : b) {
        CHECK(e.key.empty());
        ++elements;
    }
    CHECK(elements == 3);

    REQUIRE(decode_str("le", d));
    CHECK(d.root().size() == 0);
    CHECK(d.root().begin() == d.root().end());
    REQUIRE(decode_str("de", d));
    CHECK(d.root().is_dict());
}

TEST_CASE("wrong-type accessors return empty results") {
    document d;
    REQUIRE(decode_str("4:spam", d));
    CHECK(d.root().as_integer() == 0);
    CHECK(d.root().size() == 0);
    CHECK_FALSE(d.root().find("x"));
    CHECK_FALSE(d.root().at(0));
    CHECK(d.root().begin() == d.root().end());
    value none;
    CHECK(none.kind() == type::none);
    CHECK(none.as_string().empty());
    CHECK(none.raw().empty());
}

// protocol.md part d, item 1
TEST_CASE("empty and tiny inputs; top-level non-dicts still decode") {
    CHECK(error_of("") == error::empty_input);
    CHECK(error_of("d") == error::unexpected_eof);
    CHECK(error_of("e") == error::unexpected_byte);
    CHECK(error_of("x") == error::unexpected_byte);
    document d;
    CHECK(decode_str("i1e", d));
    CHECK(decode_str("le", d));
    CHECK(decode_str("4:spam", d));
}

// item 2
TEST_CASE("truncated input") {
    CHECK(error_of("4:spa") == error::string_past_end);
    CHECK(error_of("i12") == error::unexpected_eof);
    CHECK(error_of("d1:a") == error::unexpected_eof);
    CHECK(error_of("d1:ai1e") == error::unexpected_eof);
    CHECK(error_of("l") == error::unexpected_eof);
    CHECK(error_of("12") == error::unexpected_eof);
    CHECK(error_of("d1:ae") == error::unexpected_byte); // key without a value
}

// item 3
TEST_CASE("string length prefixes: huge, negative, overflowing, leading zeros") {
    CHECK(error_of("99999999999:x") == error::string_length_overflow);
    CHECK(error_of("99999999999999999999999999:x") == error::string_length_overflow);
    CHECK(error_of("-5:hello") == error::unexpected_byte);
    CHECK(error_of("05:hello") == error::leading_zero);
    CHECK(error_of("00:") == error::leading_zero);
    CHECK(error_of("5:abc") == error::string_past_end);
    CHECK(error_of("3x:abc") == error::unexpected_byte);
    CHECK(offset_of("d1:a05:helloe") == 4);
}

// item 4
TEST_CASE("malformed integers") {
    CHECK(error_of("i-0e") == error::negative_zero);
    CHECK(error_of("i03e") == error::leading_zero);
    CHECK(error_of("i-03e") == error::leading_zero);
    CHECK(error_of("ie") == error::empty_integer);
    CHECK(error_of("i-e") == error::empty_integer);
    CHECK(error_of("i--1e") == error::unexpected_byte);
    CHECK(error_of("i1.5e") == error::unexpected_byte);
    CHECK(error_of("i9223372036854775808e") == error::integer_overflow);
    CHECK(error_of("i-9223372036854775809e") == error::integer_overflow);
    CHECK(error_of("i99999999999999999999999e") == error::integer_overflow);
    CHECK(error_of("i+1e") == error::unexpected_byte);
}

// item 5
TEST_CASE("nesting bombs hit the depth limit, wide input the token limit") {
    std::string lists(100000, 'l');
    CHECK(error_of(lists) == error::depth_exceeded);
    std::string dicts;
    for (int i = 0; i < 1000; ++i) dicts += "d1:a";
    CHECK(error_of(dicts) == error::depth_exceeded);

    limits lim;
    lim.max_depth = 3;
    CHECK(error_of("llleee", lim) == error::none);
    CHECK(error_of("lllleeee", lim) == error::depth_exceeded);
    CHECK(offset_of(lists) == 32); // the 33rd list is the one too deep

    limits wide;
    wide.max_depth = 200;
    std::string deep = std::string(150, 'l') + std::string(150, 'e');
    CHECK(error_of(deep, wide) == error::none);
}

// item 6
TEST_CASE("token floods are bounded") {
    std::string flood = "l";
    while (flood.size() < 1500) flood += "le";
    flood += "e";
    limits lim;
    lim.max_tokens = 100;
    CHECK(error_of(flood, lim) == error::token_limit_exceeded);
    CHECK(error_of(flood) == error::none); // default limits allow it
    lim.max_tokens = 1;
    CHECK(error_of("i1e", lim) == error::none);
    CHECK(error_of("li1ee", lim) == error::token_limit_exceeded);
}

TEST_CASE("size limit") {
    limits lim;
    lim.max_size = 8;
    CHECK(error_of("8:abcdefgh", lim) == error::size_limit_exceeded);
    CHECK(error_of("5:abcde", lim) == error::none);
}

// item 7
TEST_CASE("unsorted keys are accepted and counted; duplicates and non-string keys are not") {
    document d;
    REQUIRE(decode_str("d1:bi1e1:ai2ee", d));
    CHECK(d.unsorted_dicts() == 1);
    CHECK(d.root().find("a").as_integer() == 2);
    REQUIRE(decode_str("d1:ai1e1:bd1:zi1e1:yi2eee", d));
    CHECK(d.unsorted_dicts() == 1);
    REQUIRE(decode_str("d1:ai1e1:bi2ee", d));
    CHECK(d.unsorted_dicts() == 0);

    CHECK(error_of("d1:ai1e1:ai2ee") == error::duplicate_key);
    // A duplicate that is not adjacent, hidden by unsorted order.
    CHECK(error_of("d1:ai1e1:ci2e1:bi3e1:ai4ee") == error::duplicate_key);
    CHECK(offset_of("d1:ai1e1:ai2ee") == 7);
    CHECK(error_of("di1ei2ee") == error::non_string_key);
    CHECK(error_of("dlei2ee") == error::non_string_key);
    CHECK(error_of("d1:ai1eee") == error::trailing_bytes);
    CHECK(error_of("i1ei2e") == error::trailing_bytes);
    CHECK(error_of("4:spamx") == error::trailing_bytes);
    CHECK(offset_of("d1:ai1eexyz") == 8);
}

TEST_CASE("byte-wise key order: prefixes sort first, bytes compare unsigned") {
    document d;
    REQUIRE(decode_str("d1:ai1e2:aai2ee", d));
    CHECK(d.unsorted_dicts() == 0);
    const std::string high = "d1:ai1e1:\xffi2ee";
    REQUIRE(decode_str(high, d));
    CHECK(d.unsorted_dicts() == 0);
}

TEST_CASE("a failed decode leaves an empty document; a document is reusable") {
    document d;
    REQUIRE(decode_str("li1ei2ee", d));
    CHECK(d.token_count() == 3);
    CHECK_FALSE(decode_str("li1e", d));
    CHECK_FALSE(d.root());
    REQUIRE(decode_str("i5e", d));
    CHECK(d.root().as_integer() == 5);
    CHECK(d.token_count() == 1);
}

TEST_CASE("error names are stable") {
    CHECK(to_string(error::leading_zero) == "leading_zero");
    CHECK(to_string(error::trailing_bytes) == "trailing_bytes");
    CHECK(to_string(error::none) == "none");
}

TEST_CASE("writer produces canonical bencode and refuses out-of-order keys") {
    std::string out;
    writer w(out);
    w.begin_dict().entry("a", std::int64_t{-3}).key("b").begin_list().string("x").integer(0).end().entry("c", "").end();
    CHECK(w.complete());
    CHECK(out == "d1:ai-3e1:bl1:xi0ee1:c0:e");

    std::string bad;
    writer w2(bad);
    w2.begin_dict().entry("b", std::int64_t{1}).entry("a", std::int64_t{2}).end();
    CHECK_FALSE(w2.ok());

    std::string dup;
    writer w3(dup);
    w3.begin_dict().entry("a", std::int64_t{1}).entry("a", std::int64_t{2}).end();
    CHECK_FALSE(w3.ok());

    std::string unbalanced;
    writer w4(unbalanced);
    w4.begin_list();
    CHECK(w4.ok());
    CHECK_FALSE(w4.complete());
    w4.end().end();
    CHECK_FALSE(w4.ok());

    std::string missing_value;
    writer w5(missing_value);
    w5.begin_dict().key("a").end();
    CHECK_FALSE(w5.ok());

    std::string value_without_key;
    writer w6(value_without_key);
    w6.begin_dict().integer(1);
    CHECK_FALSE(w6.ok());

    std::string deep;
    writer w7(deep);
    for (std::size_t i = 0; i <= writer::max_depth; ++i) w7.begin_list();
    CHECK_FALSE(w7.ok());
}

TEST_CASE("writer keeps working on a reused buffer") {
    std::string out;
    out.reserve(256);
    const auto* data = out.data();
    for (int i = 0; i < 10; ++i) {
        out.clear();
        writer w(out);
        w.begin_dict().entry("id", "01234567890123456789").entry("n", std::int64_t{i}).end();
        REQUIRE(w.complete());
    }
    CHECK(out.data() == data); // no reallocation
}

TEST_CASE("entry encodes canonically and round-trips through the decoder") {
    entry e;
    e["z"] = entry(std::int64_t{1});
    e["a"] = entry::list();
    e["a"].as_list().push_back(entry("x"));
    e["a"].as_list().push_back(entry(std::int64_t{-5}));
    e["m"]["inner"] = entry(std::string("\0\1", 2));
    const auto encoded = e.encode();
    CHECK(encoded == "d1:al1:xi-5ee1:md5:inner2:" + std::string("\0\1", 2) + "e1:zi1ee");

    document d;
    REQUIRE(decode_str(encoded, d));
    CHECK(d.unsorted_dicts() == 0);
    CHECK(entry::from(d.root()) == e);
    CHECK(entry::from(d.root()).encode() == encoded);
}

TEST_CASE("decode then re-encode sorts unsorted input") {
    document d;
    REQUIRE(decode_str("d1:bi1e1:ai2ee", d));
    CHECK(entry::from(d.root()).encode() == "d1:ai2e1:bi1ee");
}

TEST_CASE("raw spans of nested dicts are exact (info dicts are hashed from them)") {
    const std::string info = "d6:lengthi5e4:name3:abc12:piece lengthi16384e6:pieces20:01234567890123456789e";
    const std::string torrent = "d8:announce3:url4:info" + info + "e";
    document d;
    REQUIRE(decode_str(torrent, d));
    CHECK(d.root().find_dict("info").raw() == info);
}

} // TEST_SUITE
