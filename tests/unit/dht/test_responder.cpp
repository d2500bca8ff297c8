#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bencode/decoder.hpp"
#include "dht/responder.hpp"
#include "krpc/encode.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

id20 make_id(std::uint8_t fill) {
    id20 id;
    id.bytes.fill(fill);
    return id;
}

endpoint ep(const char* text) { return *endpoint::parse(text); }

// A fixed set of known nodes; closest() returns them in order, filtered by family.
struct fixed_nodes : dht::close_nodes_source {
    std::vector<krpc::node_entry> nodes;
    std::size_t closest(const id20&, krpc::ip_family family, std::span<krpc::node_entry> out) const override {
        std::size_t n = 0;
        for (const auto& e : nodes) {
            if (n == out.size()) break;
            if (e.ep.address.is_v6() == (family == krpc::ip_family::v6)) out[n++] = e;
        }
        return n;
    }
};

struct recorder : dht::query_observer {
    struct announce_event {
        id20 info_hash;
        endpoint peer, source;
    };
    std::vector<announce_event> announces;
    std::vector<id20> lookups;
    std::vector<endpoint> queriers;
    void on_announce(const id20& ih, const endpoint& peer, const endpoint& source) override {
        announces.push_back({ih, peer, source});
    }
    void on_get_peers(const id20& ih, const endpoint&) override { lookups.push_back(ih); }
    void on_querier(const id20&, const endpoint& source) override { queriers.push_back(source); }
};

struct node_fixture {
    manual_clock clock;
    dht::token_manager tokens{clock, 42};
    dht::sample_store samples{64, 20, 300s, 7};
    fixed_nodes nodes;
    recorder seen;
    id20 own = make_id(0xAA);
    dht::responder responder{own, "DC01", tokens, samples, nodes, seen, clock};

    std::string query_bytes; // the packet, kept alive while `parsed` points into it
    bencode::document query_doc;
    krpc::message parsed;
    bencode::document reply_doc;
    krpc::message reply;
    std::string reply_bytes;

    node_fixture() {
        nodes.nodes.push_back({make_id(0x10), ep("1.2.3.4:1000")});
        nodes.nodes.push_back({make_id(0x11), ep("[2001:db8::1]:2000")});
        nodes.nodes.push_back({make_id(0x12), ep("5.6.7.8:3000")});
    }

    // Sends `packet` from `from`; returns whether a reply was produced and parses it.
    bool send(std::string packet, const endpoint& from) {
        query_bytes = std::move(packet);
        REQUIRE(bencode::decode(std::string_view(query_bytes), query_doc, krpc::packet_limits));
        parsed = krpc::message{};
        const auto r = krpc::parse(query_doc.root(), parsed);
        const bool replied = r ? responder.answer(parsed, from, reply_bytes)
                               : responder.answer_malformed(parsed, r, from, reply_bytes);
        if (!replied) return false;
        REQUIRE(bencode::decode(std::string_view(reply_bytes), reply_doc, krpc::packet_limits));
        reply = krpc::message{};
        REQUIRE(krpc::parse(reply_doc.root(), reply));
        CHECK(reply.transaction == "tx");
        REQUIRE(reply.ip);
        CHECK(*reply.ip == from); // BEP-42: every reply tells the requester its address
        return true;
    }
};

krpc::query_header qh(const id20& id) { return {"tx", id, {}}; }

std::string get_peers(const id20& sender, const id20& ih) {
    std::string s;
    krpc::encode_get_peers(s, qh(sender), ih);
    return s;
}

std::string announce(const id20& sender, const id20& ih, std::uint16_t port, std::string_view token,
                     bool implied = false) {
    std::string s;
    krpc::encode_announce_peer(s, qh(sender), ih, port, token, implied);
    return s;
}

} // namespace

TEST_SUITE("responder") {

TEST_CASE("ping and find_node are answered with our id and close nodes") {
    node_fixture f;
    const endpoint from = ep("9.9.9.9:6881");
    std::string ping;
    krpc::encode_ping(ping, qh(make_id(1)));
    REQUIRE(f.send(ping, from));
    CHECK(f.reply.type == krpc::message_type::response);
    CHECK(f.reply.id == f.own);
    CHECK(f.reply.version == "DC01");

    std::string find;
    krpc::encode_find_node(find, qh(make_id(1)), make_id(0x12));
    REQUIRE(f.send(find, from));
    REQUIRE(f.reply.response.has_nodes);
    CHECK(f.reply.response.nodes.size() == 2); // the two IPv4 nodes
    CHECK_FALSE(f.reply.response.has_nodes6);
    CHECK(f.reply.response.nodes[0].ep == ep("1.2.3.4:1000"));
    CHECK(f.seen.queriers.size() == 2);
}

TEST_CASE("BEP-32: want selects families; a v6 querier gets nodes6 by default") {
    node_fixture f;
    std::string find;
    krpc::encode_find_node(find, qh(make_id(1)), make_id(0x12), krpc::want::n4 | krpc::want::n6);
    REQUIRE(f.send(find, ep("9.9.9.9:1")));
    CHECK(f.reply.response.nodes.size() == 2);
    CHECK(f.reply.response.nodes6.size() == 1);

    std::string plain;
    krpc::encode_find_node(plain, qh(make_id(1)), make_id(0x12));
    REQUIRE(f.send(plain, ep("[2001:db8::9]:1")));
    CHECK(f.reply.response.has_nodes); // BEP-5 requires it: present, empty
    CHECK(f.reply.response.nodes.empty());
    CHECK(f.reply.response.nodes6.size() == 1);
}

TEST_CASE("get_peers hands out a token and reports the hash as an observation") {
    node_fixture f;
    const endpoint from = ep("9.9.9.9:6881");
    REQUIRE(f.send(get_peers(make_id(1), make_id(0x33)), from));
    CHECK(f.reply.response.has_token);
    CHECK(f.reply.response.has_nodes);
    REQUIRE(f.seen.lookups.size() == 1);
    CHECK(f.seen.lookups[0] == make_id(0x33));
    CHECK(f.seen.announces.empty()); // an observation is not a capture
}

TEST_CASE("announce_peer with a valid token is captured with the announced endpoint") {
    node_fixture f;
    const endpoint from = ep("9.9.9.9:7000");
    REQUIRE(f.send(get_peers(make_id(1), make_id(0x33)), from));
    const std::string token(f.reply.response.token);

    REQUIRE(f.send(announce(make_id(1), make_id(0x33), 51413, token), from));
    CHECK(f.reply.type == krpc::message_type::response);
    REQUIRE(f.seen.announces.size() == 1);
    CHECK(f.seen.announces[0].info_hash == make_id(0x33));
    CHECK(f.seen.announces[0].peer == ep("9.9.9.9:51413"));
    CHECK(f.seen.announces[0].source == from);

    // implied_port: the UDP source port is the peer's port.
    REQUIRE(f.send(announce(make_id(1), make_id(0x34), 0, token, true), from));
    REQUIRE(f.seen.announces.size() == 2);
    CHECK(f.seen.announces[1].peer == ep("9.9.9.9:7000"));
}

// protocol.md part d, item 12
TEST_CASE("announce_peer tokens: missing, foreign, expired and malformed are refused") {
    node_fixture f;
    const endpoint from = ep("9.9.9.9:7000");
    REQUIRE(f.send(get_peers(make_id(1), make_id(0x33)), from));
    const std::string token(f.reply.response.token);

    SUBCASE("from another IP") {
        REQUIRE(f.send(announce(make_id(1), make_id(0x33), 80, token), ep("9.9.9.10:7000")));
        CHECK(f.reply.type == krpc::message_type::error);
        CHECK(f.reply.err.code == 203);
    }
    SUBCASE("the same IP from another port is fine: tokens bind the IP only") {
        REQUIRE(f.send(announce(make_id(1), make_id(0x33), 80, token), ep("9.9.9.9:9999")));
        CHECK(f.reply.type == krpc::message_type::response);
        CHECK(f.seen.announces.size() == 1);
    }
    SUBCASE("still valid after one rotation, expired after two") {
        f.clock.advance(6min);
        REQUIRE(f.send(announce(make_id(1), make_id(0x33), 80, token), from));
        CHECK(f.reply.type == krpc::message_type::response);
        f.clock.advance(6min);
        REQUIRE(f.send(announce(make_id(1), make_id(0x33), 80, token), from));
        CHECK(f.reply.type == krpc::message_type::error);
        CHECK(f.seen.announces.size() == 1);
    }
    SUBCASE("a token of the wrong length") {
        REQUIRE(f.send(announce(make_id(1), make_id(0x33), 80, "abc"), from));
        CHECK(f.reply.type == krpc::message_type::error);
    }
    SUBCASE("token missing or not a string: a malformed query, answered 203") {
        const std::string missing = "d1:ad2:id20:" + std::string(20, '\x01') + "9:info_hash20:" +
                                    std::string(20, '\x33') + "4:porti80ee1:q13:announce_peer1:t2:tx1:y1:qe";
        REQUIRE(f.send(missing, from));
        CHECK(f.reply.type == krpc::message_type::error);
        CHECK(f.reply.err.code == 203);
        CHECK(f.reply.err.message == "missing_token");
        const std::string integer = "d1:ad2:id20:" + std::string(20, '\x01') + "9:info_hash20:" +
                                    std::string(20, '\x33') + "4:porti80e5:tokeni5ee1:q13:announce_peer1:t2:tx1:y1:qe";
        REQUIRE(f.send(integer, from));
        CHECK(f.reply.err.code == 203);
    }
}

TEST_CASE("libtorrent bootstrap lookups are answered but never passed on") {
    node_fixture f;
    id20 sender = make_id(0x44);
    id20 lookup = sender;
    for (int i = 12; i < 20; ++i) lookup.bytes[i] = 0x99; // libtorrent's secret tail
    REQUIRE(f.send(get_peers(sender, lookup), ep("9.9.9.9:1")));
    CHECK(f.reply.response.has_token);
    CHECK(f.seen.lookups.empty());
    CHECK(f.responder.counters().bootstrap_lookups.load() == 1);
}

// protocol.md part d, item 10 (node level)
TEST_CASE("a query carrying our own id gets no answer") {
    node_fixture f;
    std::string ping;
    krpc::encode_ping(ping, qh(f.own));
    CHECK_FALSE(f.send(ping, ep("9.9.9.9:1")));
    CHECK(f.responder.counters().own_id.load() == 1);
    CHECK(f.seen.queriers.empty());
}

TEST_CASE("unknown methods: with a target they are answered like find_node, otherwise 204") {
    node_fixture f;
    const std::string with_target = "d1:ad2:id20:" + std::string(20, '\x01') + "6:target20:" + std::string(20, '\x12') +
                                    "e1:q3:get1:t2:tx1:y1:qe";
    REQUIRE(f.send(with_target, ep("9.9.9.9:1")));
    CHECK(f.reply.type == krpc::message_type::response);
    CHECK(f.reply.response.has_nodes);

    const std::string without = "d1:ad2:id20:" + std::string(20, '\x01') + "e1:q5:dance1:t2:tx1:y1:qe";
    REQUIRE(f.send(without, ep("9.9.9.9:1")));
    CHECK(f.reply.type == krpc::message_type::error);
    CHECK(f.reply.err.code == 204);
}

TEST_CASE("sample_infohashes returns what was announced, never get_peers noise") {
    node_fixture f;
    const endpoint from = ep("9.9.9.9:7000");
    REQUIRE(f.send(get_peers(make_id(1), make_id(0x50)), from));
    const std::string token(f.reply.response.token);
    REQUIRE(f.send(announce(make_id(1), make_id(0x51), 80, token), from));

    std::string sample;
    krpc::encode_sample_infohashes(sample, qh(make_id(2)), make_id(0x10));
    REQUIRE(f.send(sample, ep("8.8.8.8:1")));
    REQUIRE(f.reply.response.has_samples);
    REQUIRE(f.reply.response.sample_count() == 1);
    CHECK(f.reply.response.sample(0) == make_id(0x51));
    CHECK(f.reply.response.num == 1);
    CHECK(f.reply.response.interval == 300);
    CHECK(f.reply.response.has_nodes);
}

TEST_CASE("read-only queriers are answered but never become crawl candidates") {
    node_fixture f;
    const std::string ro_ping = "d1:ad2:id20:" + std::string(20, '\x01') + "e1:q4:ping2:roi1e1:t2:tx1:y1:qe";
    REQUIRE(f.send(ro_ping, ep("9.9.9.9:1")));
    CHECK(f.seen.queriers.empty());
}

TEST_CASE("malformed responses and queries without a transaction get no reply") {
    node_fixture f;
    const std::string bad_response = "d1:rd2:id3:abce1:t2:tx1:y1:re";
    CHECK_FALSE(f.send(bad_response, ep("9.9.9.9:1")));
    const std::string no_t = "d1:ad2:id20:" + std::string(20, '\x01') + "e1:q4:ping1:y1:qe";
    CHECK_FALSE(f.send(no_t, ep("9.9.9.9:1")));
}

TEST_CASE("a v6 querier is told its v6 address") {
    node_fixture f;
    std::string ping;
    krpc::encode_ping(ping, qh(make_id(1)));
    REQUIRE(f.send(ping, ep("[2001:db8::5]:6881")));
    CHECK(f.reply.ip->address.is_v6());
}

} // TEST_SUITE
