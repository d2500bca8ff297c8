#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "bencode/decoder.hpp"
#include "bencode/encoder.hpp"
#include "krpc/compact.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

using namespace dhtc;
using namespace dhtc::krpc;
using bencode::entry;

#include "support/allocation_counter.hpp"

namespace {

const std::string id_a(20, 'A');
const std::string id_b(20, 'B');
const std::string hash_h(20, 'H');

id20 id_of(const std::string& s) { return *id20::from_bytes(s); }

// Encodes, decodes with the DHT packet limits, and parses one message. Not movable: the
// document and the message hold views into `bytes`.
struct packet {
    std::string bytes;
    bencode::document doc;
    bencode::decode_result decoded;
    message msg;
    parse_result result;

    struct raw {
        std::string bytes;
    };
    explicit packet(raw b) : bytes(std::move(b.bytes)) {
        decoded = bencode::decode(std::string_view(bytes), doc, packet_limits);
        if (decoded) result = parse(doc.root(), msg);
    }
    explicit packet(const entry& e) : packet(raw{e.encode()}) {}
    packet(const packet&) = delete;
    packet& operator=(const packet&) = delete;
};

error error_of(const entry& e) {
    packet p(e);
    REQUIRE(p.decoded);
    return p.result.code;
}

entry query(const char* q) {
    entry d = entry::dict();
    d["t"] = "aa";
    d["y"] = "q";
    d["q"] = q;
    d["a"]["id"] = id_a;
    return d;
}

entry find_node_query() {
    entry d = query("find_node");
    d["a"]["target"] = id_b;
    return d;
}

entry get_peers_query() {
    entry d = query("get_peers");
    d["a"]["info_hash"] = hash_h;
    return d;
}

entry announce_query() {
    entry d = query("announce_peer");
    d["a"]["info_hash"] = hash_h;
    d["a"]["port"] = 6881;
    d["a"]["token"] = "tok";
    return d;
}

entry response() {
    entry d = entry::dict();
    d["t"] = "aa";
    d["y"] = "r";
    d["r"]["id"] = id_b;
    return d;
}

entry error_message(entry e) {
    entry d = entry::dict();
    d["t"] = "aa";
    d["y"] = "e";
    d["e"] = std::move(e);
    return d;
}

std::string compact_node_bytes(char id_fill, std::array<std::uint8_t, 4> ip, std::uint16_t port) {
    std::string s;
    append_compact_node(s, id_of(std::string(20, id_fill)), endpoint{ip_address::v4(ip), port});
    return s;
}

endpoint ep(const char* text) {
    auto e = endpoint::parse(text);
    REQUIRE(e);
    return *e;
}

} // namespace

TEST_SUITE("krpc") {

// ---- compact forms ------------------------------------------------------------------------

TEST_CASE("compact endpoints round-trip for v4 and v6") {
    for (const char* text : {"1.2.3.4:6881", "255.255.255.255:65535", "0.0.0.0:0", "[2001:db8::1]:443", "[::]:1"}) {
        CAPTURE(text);
        const endpoint e = ep(text);
        std::string s;
        append_compact_endpoint(s, e);
        CHECK(s.size() == (e.address.is_v6() ? 18u : 6u));
        CHECK(to_compact(e).view() == s);
        auto back = parse_compact_endpoint(s);
        REQUIRE(back);
        CHECK(*back == e);
    }
    CHECK(std::string_view(to_compact(ep("1.2.3.4:258")).view()) == std::string_view("\x01\x02\x03\x04\x01\x02", 6));
    for (std::size_t n : {0u, 5u, 7u, 16u, 17u, 19u}) CHECK_FALSE(parse_compact_endpoint(std::string(n, 'x')));
}

TEST_CASE("compact node views validate the length and yield every entry") {
    std::vector<node_entry> in = {{id_of(id_a), ep("1.2.3.4:1")}, {id_of(id_b), ep("[2001:db8::2]:2")},
                                  {id_of(hash_h), ep("5.6.7.8:65535")}};
    std::string v4, v6;
    CHECK(append_compact_nodes(v4, in, ip_family::v4) == 2);
    CHECK(append_compact_nodes(v6, in, ip_family::v6) == 1);
    CHECK(v4.size() == 52);
    CHECK(v6.size() == 38);

    auto n4 = compact_nodes::from(v4, ip_family::v4);
    REQUIRE(n4);
    REQUIRE(n4->size() == 2);
    std::vector<node_entry> got(n4->begin(), n4->end());
    CHECK(got[0] == in[0]);
    CHECK(got[1] == in[2]);
    auto n6 = compact_nodes::from(v6, ip_family::v6);
    REQUIRE(n6);
    CHECK((*n6)[0] == in[1]);

    CHECK(compact_nodes::from("", ip_family::v4)->empty());
    CHECK_FALSE(compact_nodes::from(v4, ip_family::v6)); // 52 is not a multiple of 38
    CHECK_FALSE(compact_nodes::from(v6, ip_family::v4)); // 38 is not a multiple of 26
}

// ---- part d, item 1: top level ------------------------------------------------------------

TEST_CASE("d1: empty, 1-byte and non-dict datagrams") {
    {
        packet p(packet::raw{""});
        CHECK(p.decoded.code == bencode::error::empty_input);
    }
    {
        packet p(packet::raw{"d"});
        CHECK(p.decoded.code == bencode::error::unexpected_eof);
    }
    for (const char* s : {"i1e", "le", "4:spam", "0:"}) {
        CAPTURE(s);
        packet p(packet::raw{s});
        REQUIRE(p.decoded);
        CHECK(p.result.code == error::not_a_dict);
        CHECK(p.result.offset == 0);
    }
    packet p(packet::raw{"de"});
    CHECK(p.result.code == error::missing_transaction);
}

// ---- part d, item 4: integers inside a KRPC packet are the decoder's job ------------------

TEST_CASE("d4: malformed integers never reach the parser") {
    const std::string head = "d1:ad2:id20:" + id_a + "9:info_hash20:" + hash_h + "4:port";
    const std::string tail = "5:token3:toke1:q13:announce_peer1:t2:aa1:y1:qe";
    struct c {
        const char* integer;
        bencode::error code;
    };
    for (const c& k : {c{"i-0e", bencode::error::negative_zero}, c{"i03e", bencode::error::leading_zero},
                       c{"ie", bencode::error::empty_integer}, c{"i--1e", bencode::error::unexpected_byte},
                       c{"i1.5e", bencode::error::unexpected_byte},
                       c{"i9223372036854775808e", bencode::error::integer_overflow}}) {
        CAPTURE(k.integer);
        packet p(packet::raw{head + k.integer + tail});
        CHECK(p.decoded.code == k.code);
    }
    packet ok(packet::raw{head + "i6881e" + tail});
    REQUIRE(ok.decoded);
    CHECK(ok.result);
    CHECK(ok.msg.query.port == 6881);
}

// ---- part d, item 8: y ----------------------------------------------------------------------

TEST_CASE("d8: y missing, an integer, qq, unknown") {
    entry e = query("ping");
    e.as_dict().erase("y");
    CHECK(error_of(e) == error::missing_type);
    e["y"] = 1;
    CHECK(error_of(e) == error::bad_type);
    e["y"] = "qq";
    CHECK(error_of(e) == error::bad_type);
    e["y"] = "x";
    CHECK(error_of(e) == error::bad_type);
    e["y"] = "";
    CHECK(error_of(e) == error::bad_type);
    e["y"] = "q";
    CHECK(error_of(e) == error::none);
}

// ---- part d, item 9: t ----------------------------------------------------------------------

TEST_CASE("d9: t missing, empty, 1000 bytes, not a string") {
    entry e = query("ping");
    e.as_dict().erase("t");
    CHECK(error_of(e) == error::missing_transaction);
    e["t"] = "";
    CHECK(error_of(e) == error::bad_transaction);
    e["t"] = std::string(1000, 't');
    CHECK(error_of(e) == error::bad_transaction);
    e["t"] = std::string(max_transaction_size + 1, 't');
    CHECK(error_of(e) == error::bad_transaction);
    e["t"] = 12;
    CHECK(error_of(e) == error::bad_transaction);
    e["t"] = entry::list();
    CHECK(error_of(e) == error::bad_transaction);
    e["t"] = std::string(max_transaction_size, 't');
    CHECK(error_of(e) == error::none);
    // Binary transaction ids are echoed byte for byte.
    e["t"] = std::string("\x00\xff", 2);
    packet p(e);
    CHECK(p.result);
    CHECK(p.msg.transaction == std::string_view("\x00\xff", 2));
}

// ---- part d, item 10: a / r and id --------------------------------------------------------

TEST_CASE("d10: a or r not a dict; id of 0, 19, 21 bytes") {
    entry q = query("ping");
    q.as_dict().erase("a");
    CHECK(error_of(q) == error::missing_args);
    q["a"] = "ping";
    CHECK(error_of(q) == error::bad_args);
    q["a"] = entry::list();
    CHECK(error_of(q) == error::bad_args);

    entry r = response();
    r.as_dict().erase("r");
    CHECK(error_of(r) == error::missing_args);
    r["r"] = 5;
    CHECK(error_of(r) == error::bad_args);

    for (std::size_t n : {0u, 19u, 21u}) {
        CAPTURE(n);
        q = query("ping");
        q["a"]["id"] = std::string(n, 'i');
        CHECK(error_of(q) == error::bad_id);
        r = response();
        r["r"]["id"] = std::string(n, 'i');
        CHECK(error_of(r) == error::bad_id);
    }
    q = query("ping");
    q["a"]["id"] = 20;
    CHECK(error_of(q) == error::bad_id);
    q["a"].as_dict().erase("id");
    CHECK(error_of(q) == error::missing_id);
    r = response();
    r["r"].as_dict().erase("id");
    CHECK(error_of(r) == error::missing_id);
}

TEST_CASE("a query with bad arguments still reports its method and transaction") {
    entry q = find_node_query();
    q["t"] = "xy";
    q["a"]["target"] = std::string(19, 't');
    packet p(q);
    CHECK(p.result.code == error::bad_target);
    CHECK(p.result.query_method == method::find_node);
    CHECK(p.msg.transaction == "xy");
    // The offset points at the offending value.
    CHECK(p.bytes.substr(p.result.offset, 3) == "19:");
}

// ---- part d, item 11: info_hash / target sizes --------------------------------------------

TEST_CASE("d11: info_hash and target of 19, 21 or 40 bytes") {
    for (std::size_t n : {0u, 19u, 21u, 40u}) {
        CAPTURE(n);
        entry f = find_node_query();
        f["a"]["target"] = std::string(n, 't');
        CHECK(error_of(f) == error::bad_target);
        entry s = query("sample_infohashes");
        s["a"]["target"] = std::string(n, 't');
        CHECK(error_of(s) == error::bad_target);
        entry g = get_peers_query();
        g["a"]["info_hash"] = std::string(n, 'h');
        CHECK(error_of(g) == error::bad_info_hash);
        entry a = announce_query();
        a["a"]["info_hash"] = std::string(n, 'h');
        CHECK(error_of(a) == error::bad_info_hash);
    }
    entry f = find_node_query();
    f["a"]["target"] = 1;
    CHECK(error_of(f) == error::bad_target);
    CHECK(error_of(query("find_node")) == error::missing_target);
    CHECK(error_of(query("sample_infohashes")) == error::missing_target);
    CHECK(error_of(query("get_peers")) == error::missing_info_hash);
    entry a = announce_query();
    a["a"].as_dict().erase("info_hash");
    CHECK(error_of(a) == error::missing_info_hash);
    // A method that does not use the field ignores it, whatever its size.
    entry p = query("ping");
    p["a"]["target"] = std::string(40, 't');
    CHECK(error_of(p) == error::none);
}

// ---- part d, item 13: port / implied_port -------------------------------------------------

TEST_CASE("d13: port missing, 0, negative, >= 65536; implied_port a string; implied_port=1 with port=0") {
    entry a = announce_query();
    a["a"].as_dict().erase("port");
    CHECK(error_of(a) == error::missing_port);
    for (std::int64_t port : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{65536}, std::int64_t{1} << 40,
                              INT64_MIN}) {
        CAPTURE(port);
        a["a"]["port"] = port;
        CHECK(error_of(a) == error::bad_port);
    }
    a["a"]["port"] = "6881";
    CHECK(error_of(a) == error::bad_port);

    a["a"]["port"] = 6881;
    a["a"]["implied_port"] = "1";
    CHECK(error_of(a) == error::bad_implied_port);

    a["a"]["port"] = 0;
    a["a"]["implied_port"] = 1;
    {
        packet p(a);
        CHECK(p.result);
        CHECK(p.msg.query.implied_port);
        CHECK(p.msg.query.port == 0);
    }
    a["a"]["implied_port"] = 0; // explicitly off: port 0 is invalid again
    CHECK(error_of(a) == error::bad_port);

    a["a"]["port"] = 65535;
    packet p(a);
    REQUIRE(p.result);
    CHECK(p.result.query_method == method::announce_peer);
    CHECK(p.msg.query.port == 65535);
    CHECK_FALSE(p.msg.query.implied_port);
    CHECK(p.msg.query.token == "tok");
    CHECK(p.msg.query.info_hash == id_of(hash_h));
}

TEST_CASE("announce_peer token: missing or not a string") {
    entry a = announce_query();
    a["a"].as_dict().erase("token");
    CHECK(error_of(a) == error::missing_token);
    a["a"]["token"] = 5;
    CHECK(error_of(a) == error::bad_token);
    a["a"]["token"] = std::string(max_token_size + 1, 'k');
    CHECK(error_of(a) == error::bad_token);
    a["a"]["token"] = "";
    CHECK(error_of(a) == error::none); // whether it is valid is the token checker's call
}

// ---- part d, item 14: nodes / nodes6 lengths ----------------------------------------------

TEST_CASE("d14: nodes not a multiple of 26, nodes6 not a multiple of 38") {
    entry r = response();
    for (std::size_t n : {1u, 25u, 27u, 51u, 53u}) {
        CAPTURE(n);
        r["r"]["nodes"] = std::string(n, 'n');
        CHECK(error_of(r) == error::bad_nodes);
    }
    r["r"]["nodes"] = 26;
    CHECK(error_of(r) == error::bad_nodes);
    r["r"]["nodes"] = std::string(52, 'n');
    CHECK(error_of(r) == error::none);
    for (std::size_t n : {26u, 37u, 39u, 75u}) {
        CAPTURE(n);
        r["r"]["nodes6"] = std::string(n, 'n');
        CHECK(error_of(r) == error::bad_nodes6);
    }
    r["r"]["nodes6"] = entry::list();
    CHECK(error_of(r) == error::bad_nodes6);
    r["r"]["nodes6"] = std::string(76, 'n');
    packet p(r);
    REQUIRE(p.result);
    CHECK(p.msg.response.has_nodes);
    CHECK(p.msg.response.nodes.size() == 2);
    CHECK(p.msg.response.has_nodes6);
    CHECK(p.msg.response.nodes6.size() == 2);
    CHECK(p.msg.response.nodes6.family() == ip_family::v6);
}

// ---- part d, item 15: suspicious entries are the node's policy ---------------------------

TEST_CASE("d15: port 0, 0.0.0.0, broadcast, multicast, zero id and duplicates are all yielded") {
    std::string nodes = compact_node_bytes('a', {1, 2, 3, 4}, 0) + compact_node_bytes('b', {0, 0, 0, 0}, 80) +
                        compact_node_bytes('c', {255, 255, 255, 255}, 80) +
                        compact_node_bytes('d', {224, 0, 0, 1}, 80) + compact_node_bytes('\0', {1, 2, 3, 4}, 80) +
                        compact_node_bytes('d', {224, 0, 0, 1}, 80);
    entry r = response();
    r["r"]["nodes"] = nodes;
    packet p(r);
    REQUIRE(p.result);
    const auto& n = p.msg.response.nodes;
    REQUIRE(n.size() == 6);
    CHECK(n[0].ep.port == 0);
    CHECK(n[1].ep.address == ip_address::v4(0u));
    CHECK(n[2].ep.address == ip_address::v4(0xffffffffu));
    CHECK(n[3].ep.address.to_string() == "224.0.0.1");
    CHECK(n[4].id.is_zero());
    CHECK(n[5] == n[3]);
    std::size_t count = 0;
    for (auto e : n) count += e.ep.address.is_v4();
    CHECK(count == 6);
}

// ---- part d, item 16: values ----------------------------------------------------------------

TEST_CASE("d16: values as one string, 5/7-byte entries, mixed 6/18, non-string entries") {
    entry r = response();
    r["r"]["values"] = std::string(6, 'v');
    CHECK(error_of(r) == error::bad_values);
    r["r"]["values"] = 6;
    CHECK(error_of(r) == error::bad_values);
    r["r"]["values"] = entry::dict();
    CHECK(error_of(r) == error::bad_values);

    const endpoint e4 = ep("1.2.3.4:6881");
    const endpoint e6 = ep("[2001:db8::7]:51413");
    entry::list_type vals;
    vals.emplace_back(std::string(5, 'x'));
    vals.emplace_back(std::string(to_compact(e4).view()));
    vals.emplace_back(42);
    vals.emplace_back(std::string(7, 'x'));
    vals.emplace_back(std::string(to_compact(e6).view()));
    vals.emplace_back(entry::list());
    vals.emplace_back(std::string(""));
    vals.emplace_back(std::string(to_compact(e4).view()));
    r["r"]["values"] = entry(vals);
    packet p(r);
    REQUIRE(p.result);
    const auto& v = p.msg.response.values;
    CHECK(p.msg.response.has_values);
    CHECK(v.size() == 3);
    CHECK(v.skipped() == 5);
    std::vector<endpoint> got(v.begin(), v.end());
    REQUIRE(got.size() == 3);
    CHECK(got[0] == e4);
    CHECK(got[1] == e6);
    CHECK(got[2] == e4);

    // Nothing usable: still a valid (empty) list.
    r["r"]["values"] = entry(entry::list_type{entry(1), entry("abcde")});
    packet q(r);
    REQUIRE(q.result);
    CHECK(q.msg.response.values.empty());
    CHECK(q.msg.response.values.skipped() == 2);
    CHECK(q.msg.response.values.begin() == q.msg.response.values.end());
}

// ---- part d, item 17: e ---------------------------------------------------------------------

TEST_CASE("d17: e not a list, [string, int], [201] only, empty") {
    CHECK(error_of(error_message(entry("201 oops"))) == error::bad_error);
    CHECK(error_of(error_message(entry(201))) == error::bad_error);
    CHECK(error_of(error_message(entry::dict())) == error::bad_error);
    CHECK(error_of(error_message(entry(entry::list_type{entry("oops"), entry(201)}))) == error::bad_error);
    CHECK(error_of(error_message(entry(entry::list_type{entry(201)}))) == error::bad_error);
    CHECK(error_of(error_message(entry::list())) == error::bad_error);
    entry missing = error_message(entry::list());
    missing.as_dict().erase("e");
    CHECK(error_of(missing) == error::missing_error);

    packet p(error_message(entry(entry::list_type{entry(203), entry("Protocol Error"), entry("extra")})));
    REQUIRE(p.result);
    CHECK(p.msg.type == message_type::error);
    CHECK(p.msg.err.code == 203);
    CHECK(p.msg.err.message == "Protocol Error");
}

// ---- part d, item 18: ro, want, ip -----------------------------------------------------------

TEST_CASE("d18: ro a string") {
    entry q = query("ping");
    q["ro"] = "1";
    CHECK(error_of(q) == error::bad_ro);
    q["ro"] = 1;
    packet p(q);
    REQUIRE(p.result);
    CHECK(p.msg.read_only);
    q["ro"] = 0;
    packet p0(q);
    CHECK_FALSE(p0.msg.read_only);
}

TEST_CASE("d18: want not a list or holding ints") {
    for (auto make : {&find_node_query, &get_peers_query}) {
        entry q = make();
        q["a"]["want"] = "n4";
        CHECK(error_of(q) == error::bad_want);
        q["a"]["want"] = 4;
        CHECK(error_of(q) == error::bad_want);
        q["a"]["want"] = entry(entry::list_type{entry("n4"), entry(6)});
        CHECK(error_of(q) == error::bad_want);
        q["a"]["want"] = entry(entry::list_type{entry("n6"), entry("n8"), entry("n4")});
        packet p(q);
        REQUIRE(p.result);
        CHECK(p.msg.query.has_want);
        CHECK(p.msg.query.wants == want::both);
        q["a"]["want"] = entry(entry::list_type{entry("x")});
        packet o(q);
        REQUIRE(o.result);
        CHECK(o.msg.query.has_want);
        CHECK(o.msg.query.wants == want::none);
    }
    packet none(find_node_query());
    CHECK_FALSE(none.msg.query.has_want);
}

TEST_CASE("d18: ip of 0, 5, 7, 17 bytes") {
    for (std::size_t n : {0u, 5u, 7u, 17u, 19u}) {
        CAPTURE(n);
        entry r = response();
        r["ip"] = std::string(n, 'i');
        CHECK(error_of(r) == error::bad_ip);
        entry q = query("ping");
        q["ip"] = std::string(n, 'i');
        CHECK(error_of(q) == error::bad_ip);
    }
    entry r = response();
    r["ip"] = 1;
    CHECK(error_of(r) == error::bad_ip);
    r["ip"] = std::string(to_compact(ep("9.8.7.6:5")).view());
    packet p4(r);
    REQUIRE(p4.result);
    CHECK(p4.msg.ip == ep("9.8.7.6:5"));
    r["ip"] = std::string(to_compact(ep("[2001:db8::9]:6")).view());
    packet p6(r);
    REQUIRE(p6.result);
    CHECK(p6.msg.ip == ep("[2001:db8::9]:6"));
}

// ---- part d, item 19: sample_infohashes replies ---------------------------------------------

TEST_CASE("d19: samples not a multiple of 20, interval negative or > 21600, num < count") {
    entry r = response();
    for (std::size_t n : {1u, 19u, 21u, 59u}) {
        CAPTURE(n);
        r["r"]["samples"] = std::string(n, 's');
        CHECK(error_of(r) == error::bad_samples);
    }
    r["r"]["samples"] = 20;
    CHECK(error_of(r) == error::bad_samples);
    r["r"]["samples"] = std::string(60, 's');
    CHECK(error_of(r) == error::none);

    for (std::int64_t i : {std::int64_t{-1}, std::int64_t{21601}, INT64_MAX}) {
        CAPTURE(i);
        r["r"]["interval"] = i;
        CHECK(error_of(r) == error::bad_interval);
    }
    r["r"]["interval"] = "60";
    CHECK(error_of(r) == error::bad_interval);
    r["r"]["interval"] = 21600;
    CHECK(error_of(r) == error::none);
    r["r"]["interval"] = 0;
    CHECK(error_of(r) == error::none);

    r["r"]["num"] = -1;
    CHECK(error_of(r) == error::bad_num);
    r["r"]["num"] = "3";
    CHECK(error_of(r) == error::bad_num);
    // num below the sample count is tolerated and reported as sent (see response_args).
    r["r"]["num"] = 1;
    packet p(r);
    REQUIRE(p.result);
    CHECK(p.msg.response.num == 1);
    CHECK(p.msg.response.sample_count() == 3);
    CHECK(p.msg.response.sample(2) == id_of(std::string(20, 's')));
}

// ---- well-formed messages ---------------------------------------------------------------------

TEST_CASE("BEP-33: BFsd/BFpe of 256 bytes are read; any other shape is ignored, not fatal") {
    entry r = response();
    r["r"]["BFsd"] = std::string(256, '\x01');
    r["r"]["BFpe"] = std::string(256, '\x02');
    r["r"]["nodes"] = compact_node_bytes('N', {10, 0, 0, 1}, 6881);
    {
        packet p(r);
        REQUIRE(p.result);
        CHECK(p.msg.response.seeds_filter == std::string(256, '\x01'));
        CHECK(p.msg.response.peers_filter == std::string(256, '\x02'));
    }
    for (auto bad : {entry(std::string(255, 'x')), entry(std::string(257, 'x')), entry(256), entry::list()}) {
        r["r"]["BFsd"] = bad;
        r["r"]["BFpe"] = bad;
        packet p(r);
        REQUIRE(p.result);
        CHECK(p.msg.response.seeds_filter.empty());
        CHECK(p.msg.response.peers_filter.empty());
        CHECK(p.msg.response.has_nodes);
    }
    std::string out;
    REQUIRE(encode_get_peers(out, {"t3", id_of(id_a), {}}, id_of(hash_h), want::none, true));
    packet q(packet::raw{out});
    REQUIRE(q.result);
    CHECK(q.msg.query.kind == method::get_peers);
    CHECK(q.msg.query.scrape);
}

TEST_CASE("queries of every known method parse into typed fields") {
    {
        entry q = query("ping");
        q["v"] = std::string("LT\x02\x00", 4);
        packet p(q);
        REQUIRE(p.result);
        CHECK(p.msg.type == message_type::query);
        CHECK(p.msg.query.kind == method::ping);
        CHECK(p.msg.id == id_of(id_a));
        CHECK(p.msg.version == std::string_view("LT\x02\x00", 4));
    }
    {
        entry q = get_peers_query();
        q["a"]["noseed"] = 1;
        q["a"]["scrape"] = 1;
        q["a"]["bs"] = 1;
        packet p(q);
        REQUIRE(p.result);
        CHECK(p.msg.query.kind == method::get_peers);
        CHECK(p.msg.query.noseed);
        CHECK(p.msg.query.scrape);
        CHECK(p.msg.query.bootstrap);
    }
    {
        entry q = query("sample_infohashes");
        q["a"]["target"] = id_b;
        packet p(q);
        REQUIRE(p.result);
        CHECK(p.msg.query.kind == method::sample_infohashes);
        CHECK(p.msg.query.target == id_of(id_b));
    }
    {
        entry q = query("ping");
        q["v"] = 7; // a non-string version is ignored, not an error
        packet p(q);
        CHECK(p.result);
        CHECK(p.msg.version.empty());
    }
    entry q = query("ping");
    q.as_dict().erase("q");
    CHECK(error_of(q) == error::missing_method);
    q["q"] = 1;
    CHECK(error_of(q) == error::bad_method);
    q["q"] = "";
    CHECK(error_of(q) == error::bad_method);
}

TEST_CASE("unknown methods keep their name and expose a 20-byte target or info_hash") {
    entry q = query("get"); // BEP-44
    q["a"]["target"] = id_b;
    packet p(q);
    REQUIRE(p.result);
    CHECK(p.msg.query.kind == method::unknown);
    CHECK(p.msg.query.name == "get");
    CHECK(p.msg.query.has_target);
    CHECK(p.msg.query.target == id_of(id_b));
    CHECK_FALSE(p.msg.query.has_info_hash);

    entry v = query("vote");
    v["a"]["info_hash"] = std::string(21, 'x'); // not exposed, but not an error either
    v["a"]["want"] = 3;                         // malformed want is ignored for unknown methods
    packet pv(v);
    REQUIRE(pv.result);
    CHECK_FALSE(pv.msg.query.has_info_hash);
    CHECK_FALSE(pv.msg.query.has_target);
    CHECK_FALSE(pv.msg.query.has_want);

    entry ih = query("future_thing");
    ih["a"]["info_hash"] = hash_h;
    packet pi(ih);
    REQUIRE(pi.result);
    CHECK(pi.msg.query.has_info_hash);
    // Still a query: id is required.
    entry noid = query("get");
    noid["a"].as_dict().erase("id");
    CHECK(error_of(noid) == error::missing_id);
}

TEST_CASE("unsorted keys in a packet parse the same") {
    packet p(packet::raw{"d1:t2:aa1:y1:q1:q4:ping1:ad2:id20:" + id_a + "ee"});
    REQUIRE(p.decoded);
    CHECK(p.doc.unsorted_dicts() == 1);
    CHECK(p.result);
    CHECK(p.msg.query.kind == method::ping);
}

TEST_CASE("error names are distinct") {
    std::vector<std::string_view> names;
    for (int i = 0; i <= static_cast<int>(error::bad_num); ++i) {
        const auto n = to_string(static_cast<error>(i));
        CHECK(n != "unknown");
        for (auto other : names) CHECK(other != n);
        names.push_back(n);
    }
    CHECK(to_string(error::bad_want) == "bad_want");
    CHECK(to_string(method::announce_peer) == "announce_peer");
}

// ---- encoders: canonical output that parses back --------------------------------------------

namespace {
struct reencoded {
    std::string bytes;
    bencode::document doc;
    message msg;
    parse_result result;
    explicit reencoded(std::string b) : bytes(std::move(b)) {
        REQUIRE(bencode::decode(std::string_view(bytes), doc, packet_limits));
        CHECK(doc.unsorted_dicts() == 0); // canonical: keys ascending
        result = parse(doc.root(), msg);
    }
};
} // namespace

TEST_CASE("query encoders round-trip") {
    const query_header h{"t1", id_of(id_a), std::string_view("LT\x02\x00", 4)};
    std::string out;
    REQUIRE(encode_ping(out, h));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.kind == method::ping);
        CHECK(r.msg.transaction == "t1");
        CHECK(r.msg.id == id_of(id_a));
        CHECK(r.msg.version == h.version);
        CHECK_FALSE(r.msg.read_only);
    }
    out.clear();
    REQUIRE(encode_find_node(out, h, id_of(id_b), want::both));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.kind == method::find_node);
        CHECK(r.msg.query.target == id_of(id_b));
        CHECK(r.msg.query.wants == want::both);
    }
    out.clear();
    REQUIRE(encode_get_peers(out, {"t2", id_of(id_a), {}}, id_of(hash_h)));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.kind == method::get_peers);
        CHECK(r.msg.query.info_hash == id_of(hash_h));
        CHECK_FALSE(r.msg.query.has_want);
        CHECK(r.msg.version.empty());
    }
    out.clear();
    REQUIRE(encode_announce_peer(out, h, id_of(hash_h), 51413, "tk", false, true));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.kind == method::announce_peer);
        CHECK(r.msg.query.info_hash == id_of(hash_h));
        CHECK(r.msg.query.port == 51413);
        CHECK(r.msg.query.token == "tk");
        CHECK_FALSE(r.msg.query.implied_port);
        CHECK(r.msg.query.seed);
    }
    out.clear();
    REQUIRE(encode_announce_peer(out, h, id_of(hash_h), 0, "tk", true));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.implied_port);
        CHECK_FALSE(r.msg.query.seed);
    }
    out.clear();
    REQUIRE(encode_sample_infohashes(out, h, id_of(id_b), want::n6));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.query.kind == method::sample_infohashes);
        CHECK(r.msg.query.target == id_of(id_b));
        CHECK(r.msg.query.wants == want::n6);
    }
    // The exact bytes of a ping, as BEP-5 shows them (plus our v).
    out.clear();
    REQUIRE(encode_ping(out, {"aa", id_of(std::string("abcdefghij0123456789")), {}}));
    CHECK(out == "d1:ad2:id20:abcdefghij0123456789e1:q4:ping1:t2:aa1:y1:qe");
}

TEST_CASE("query encoders refuse invalid arguments and leave the buffer alone") {
    std::string out = "keep";
    CHECK_FALSE(encode_ping(out, {"", id_of(id_a), {}}));
    CHECK_FALSE(encode_ping(out, {std::string(max_transaction_size + 1, 't'), id_of(id_a), {}}));
    CHECK_FALSE(encode_announce_peer(out, {"t", id_of(id_a), {}}, id_of(hash_h), 0, "tk", false));
    CHECK_FALSE(encode_announce_peer(out, {"t", id_of(id_a), {}}, id_of(hash_h), 1, std::string(65, 'k'), false));
    CHECK(out == "keep");
}

TEST_CASE("response encoders round-trip") {
    const endpoint requester = ep("203.0.113.9:6881");
    const reply_header h{"rt", id_of(id_b), requester, "LT01"};
    std::vector<node_entry> nodes = {{id_of(id_a), ep("1.2.3.4:1")}, {id_of(hash_h), ep("[2001:db8::3]:3")}};
    std::string n4, n6;
    append_compact_nodes(n4, nodes, ip_family::v4);
    append_compact_nodes(n6, nodes, ip_family::v6);

    std::string out;
    REQUIRE(encode_ping_response(out, h));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.type == message_type::response);
        CHECK(r.msg.transaction == "rt");
        CHECK(r.msg.id == id_of(id_b));
        CHECK(r.msg.ip == requester);
        CHECK(r.msg.version == "LT01");
    }
    out.clear();
    REQUIRE(encode_announce_response(out, {"rt", id_of(id_b), std::nullopt, {}}));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK_FALSE(r.msg.ip);
    }
    out.clear();
    REQUIRE(encode_find_node_response(out, h, n4, n6));
    {
        reencoded r(out);
        REQUIRE(r.result);
        REQUIRE(r.msg.response.nodes.size() == 1);
        CHECK(r.msg.response.nodes[0] == nodes[0]);
        REQUIRE(r.msg.response.nodes6.size() == 1);
        CHECK(r.msg.response.nodes6[0] == nodes[1]);
    }
    out.clear();
    const std::vector<endpoint> peers = {ep("5.6.7.8:80"), ep("[2001:db8::5]:443"), ep("9.9.9.9:9")};
    REQUIRE(encode_get_peers_response(out, h, "token!", peers, n4, {}));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.response.token == "token!");
        CHECK(r.msg.response.has_nodes);
        CHECK_FALSE(r.msg.response.has_nodes6);
        CHECK(r.msg.response.values.skipped() == 0);
        std::vector<endpoint> got(r.msg.response.values.begin(), r.msg.response.values.end());
        CHECK(got == peers);
    }
    out.clear();
    REQUIRE(encode_get_peers_response(out, h, "tk", {}, n4, n6));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK_FALSE(r.msg.response.has_values);
        CHECK(r.msg.response.has_token);
    }
    out.clear();
    const std::vector<id20> samples = {id_of(id_a), id_of(id_b), id_of(hash_h)};
    REQUIRE(encode_sample_infohashes_response(out, h, 21600, 57, samples, n4, {}));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.response.interval == 21600);
        CHECK(r.msg.response.num == 57);
        REQUIRE(r.msg.response.sample_count() == 3);
        for (std::size_t i = 0; i < 3; ++i) CHECK(r.msg.response.sample(i) == samples[i]);
        CHECK(r.msg.response.nodes.size() == 1);
    }
    out.clear();
    REQUIRE(encode_sample_infohashes_response(out, h, 0, 0, {}, {}, {}));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.response.has_samples); // present even when empty (BEP-51)
        CHECK(r.msg.response.sample_count() == 0);
    }
    out.clear();
    REQUIRE(encode_error(out, "et", error_method_unknown, "Method Unknown", requester, "LT01"));
    {
        reencoded r(out);
        REQUIRE(r.result);
        CHECK(r.msg.type == message_type::error);
        CHECK(r.msg.err.code == 204);
        CHECK(r.msg.err.message == "Method Unknown");
        CHECK(r.msg.ip == requester);
        CHECK(r.msg.transaction == "et");
    }
    out.clear();
    REQUIRE(encode_error(out, "et", error_generic, "A Generic Error Ocurred"));
    CHECK(out == "d1:eli201e23:A Generic Error Ocurrede1:t2:et1:y1:ee");
}

TEST_CASE("response encoders refuse invalid arguments and leave the buffer alone") {
    const reply_header h{"rt", id_of(id_b), std::nullopt, {}};
    std::string out = "keep";
    CHECK_FALSE(encode_find_node_response(out, h, std::string(25, 'n'), {}));
    CHECK_FALSE(encode_find_node_response(out, h, {}, std::string(26, 'n')));
    CHECK_FALSE(encode_get_peers_response(out, h, std::string(65, 't'), {}, {}, {}));
    CHECK_FALSE(encode_sample_infohashes_response(out, h, -1, 0, {}, {}, {}));
    CHECK_FALSE(encode_sample_infohashes_response(out, h, 21601, 0, {}, {}, {}));
    CHECK_FALSE(encode_sample_infohashes_response(out, h, 60, -1, {}, {}, {}));
    CHECK_FALSE(encode_error(out, "", 201, "x"));
    CHECK_FALSE(encode_ping_response(out, {"", id_of(id_b), std::nullopt, {}}));
    CHECK(out == "keep");
}

TEST_CASE("parsing and warm encoding do not allocate") {
    std::string nodes = compact_node_bytes('a', {1, 2, 3, 4}, 1) + compact_node_bytes('b', {5, 6, 7, 8}, 2);
    entry r = response();
    r["r"]["nodes"] = nodes;
    r["r"]["token"] = "tok";
    r["r"]["values"] = entry(entry::list_type{entry(std::string(6, 'p')), entry(std::string(18, 'q'))});
    r["ip"] = std::string(6, 'i');
    const std::string reply = r.encode();
    entry a = announce_query();
    a["a"]["want"] = entry(entry::list_type{entry("n4"), entry("n6")});
    const std::string announce = a.encode();

    bencode::document doc;
    message msg;
    std::string out;
    out.reserve(1500);
    const std::vector<endpoint> peers = {ep("5.6.7.8:80"), ep("[2001:db8::5]:443")};
    const reply_header h{"rt", id_of(id_b), ep("1.1.1.1:1"), "LT01"};
    // Warm up: the document's token storage grows once.
    REQUIRE(bencode::decode(std::string_view(reply), doc, packet_limits));
    REQUIRE(bencode::decode(std::string_view(announce), doc, packet_limits));

    const std::size_t before = g_allocations.load();
    bool all_ok = true;
    for (int i = 0; i < 100; ++i) {
        all_ok &= static_cast<bool>(bencode::decode(std::string_view(reply), doc, packet_limits));
        all_ok &= static_cast<bool>(parse(doc.root(), msg));
        std::size_t count = 0;
        for (auto e : msg.response.nodes) count += e.ep.port;
        for (auto e : msg.response.values) count += e.port;
        all_ok &= count > 0;
        all_ok &= static_cast<bool>(bencode::decode(std::string_view(announce), doc, packet_limits));
        all_ok &= static_cast<bool>(parse(doc.root(), msg));
        out.clear();
        all_ok &= encode_get_peers_response(out, h, "tok", peers, nodes, {});
        out.clear();
        all_ok &= encode_find_node(out, {"t", id_of(id_a), {}}, id_of(id_b), want::both);
    }
    const std::size_t after = g_allocations.load();
    CHECK(all_ok);
    CHECK(after == before);
}

} // TEST_SUITE
