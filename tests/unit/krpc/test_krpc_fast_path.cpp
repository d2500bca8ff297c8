// The receive path's fast paths against the generic ones they stand in for:
// krpc::parse_query_fast against bencode::decode + krpc::parse, krpc::reply_encoder against
// the encode_*_response functions, and dht::node answering queries, and handing replies to
// the crawl actor, with no heap allocation.
#include <doctest/doctest.h>

#include <array>
#include <unordered_map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bencode/encoder.hpp"
#include "dht/node.hpp"
#include "dht/responder.hpp"
#include "engine/dht_service.hpp"
#include "krpc/encode.hpp"
#include "util/clock.hpp"
#include "support/allocation_counter.hpp"
#include "support/krpc_equivalence.hpp"

using namespace dhtc;
using bencode::entry;

namespace {

id20 filled_id(char c) { return *id20::from_bytes(std::string(20, c)); }

entry query(std::string_view method, entry args) {
    entry q = entry::dict();
    q["a"] = std::move(args);
    q["q"] = std::string(method);
    q["t"] = "aa";
    q["y"] = "q";
    return q;
}

entry args_with_id() {
    entry a = entry::dict();
    a["id"] = std::string(20, 'i');
    return a;
}

// What clients send, in the shapes the fast path exists for.
std::vector<std::string> typical_queries() {
    std::vector<std::string> out;
    out.push_back(query("ping", args_with_id()).encode());
    {
        entry a = args_with_id();
        a["target"] = std::string(20, 't');
        out.push_back(query("find_node", a).encode());
        a["want"] = entry(entry::list_type{entry("n4"), entry("n6"), entry("n9")});
        entry q = query("find_node", a);
        q["v"] = "LT\x02\x00";
        out.push_back(q.encode());
    }
    {
        entry a = args_with_id();
        a["info_hash"] = std::string(20, 'h');
        a["noseed"] = 1;
        a["scrape"] = 0;
        a["bs"] = 1;
        entry q = query("get_peers", a);
        q["ro"] = 1;
        q["ip"] = std::string("\x7f\x00\x00\x01\x1a\xe1", 6);
        out.push_back(q.encode());
    }
    for (const bool implied : {false, true}) {
        entry a = args_with_id();
        a["info_hash"] = std::string(20, 'h');
        a["port"] = implied ? 0 : 6881;
        if (implied) a["implied_port"] = 1;
        a["seed"] = 1;
        a["token"] = std::string(8, 'k');
        out.push_back(query("announce_peer", a).encode());
    }
    {
        entry a = args_with_id();
        a["target"] = std::string(20, 't');
        a["want"] = entry(entry::list_type{entry("n6")});
        out.push_back(query("sample_infohashes", a).encode());
    }
    {
        // Unknown methods: a target is picked up only when it is 20 bytes; want only when a list.
        entry a = args_with_id();
        a["target"] = std::string(20, 't');
        a["want"] = "n4";
        a["zzz"] = -17;
        out.push_back(query("vote", a).encode());
        a["target"] = "short";
        a["info_hash"] = std::string(20, 'h');
        a["want"] = entry(entry::list_type{});
        out.push_back(query("put", a).encode());
    }
    return out;
}

} // namespace

TEST_SUITE("krpc fast path") {

TEST_CASE("typical queries take the fast path and parse exactly as the generic path does") {
    testing::differential_scratch s;
    for (const auto& packet : typical_queries()) {
        CAPTURE(packet);
        const auto d = testing::fast_matches_generic(packet, s);
        CHECK(d.fast_accepted);
        CHECK(d.agrees);
    }
}

TEST_CASE("anything unusual is left to the generic path") {
    const std::string ping = query("ping", args_with_id()).encode();
    const std::vector<std::string> declined = {
        "",
        "de",
        "d1:t2:aa1:y1:re",                                       // a response
        "d1:eli201e5:Errore1:t2:aa1:y1:ee",                      // an error
        ping + "x",                                              // trailing bytes
        "d1:q4:ping1:a" + args_with_id().encode() + "1:t2:aa1:y1:qe", // keys out of order
        "d1:ad2:id20:iiiiiiiiiiiiiiiiiiii2:id20:iiiiiiiiiiiiiiiiiiiie1:q4:ping1:t2:aa1:y1:qe", // duplicate
        "d1:ad2:id3:abce1:q4:ping1:t2:aa1:y1:qe",                // bad id: answered 203 by the generic path
        "d1:ad2:id20:iiiiiiiiiiiiiiiiiiii1:xli1eee1:q4:ping1:t2:aa1:y1:qe", // a nested unknown value
        "d1:ad2:id20:iiiiiiiiiiiiiiiiiiiie1:q4:ping1:t2:aa1:xi01e1:y1:qe", // leading zero
        "d1:ad2:id20:iiiiiiiiiiiiiiiiiiiie1:q4:ping1:t02:aa1:y1:qe",     // leading zero in a length
        "d1:ad2:id20:iiiiiiiiiiiiiiiiiiiie1:q4:ping1:t0:1:y1:qe",        // empty transaction
    };
    testing::differential_scratch s;
    for (const auto& packet : declined) {
        CAPTURE(packet);
        const auto d = testing::fast_matches_generic(packet, s);
        CHECK_FALSE(d.fast_accepted);
    }
}

TEST_CASE("every one-byte change and truncation of typical queries: the fast path agrees or declines") {
    testing::differential_scratch s;
    std::size_t accepted = 0;
    std::size_t disagreements = 0;
    const std::array<char, 12> replacements = {'0', '1', '9', ':', 'd', 'e', 'i', 'l', '-', 'x', '\0', '\xff'};
    for (const auto& original : typical_queries()) {
        for (std::size_t at = 0; at < original.size(); ++at) {
            std::string mutated = original;
            for (const char c : replacements) {
                mutated[at] = c;
                const auto d = testing::fast_matches_generic(mutated, s);
                accepted += d.fast_accepted;
                disagreements += !d.agrees;
            }
            const auto d = testing::fast_matches_generic(std::string_view(original).substr(0, at), s);
            disagreements += !d.agrees;
        }
    }
    CHECK(disagreements == 0);
    CHECK(accepted > 100); // the mutations that keep a valid query still take the fast path
}

TEST_CASE("reply_encoder writes what the generic encoders write, for valid and invalid arguments") {
    const std::string long_string(65, 'x');
    const std::string node4(26, 'n');
    const std::string node6(38, 'm');
    const std::vector<std::string_view> transactions = {"", "a", "aa", std::string_view(long_string).substr(0, 64),
                                                        long_string};
    const std::vector<std::string_view> versions = {"", std::string_view("DC\x00\x01", 4), "LT0123456789"};
    const std::vector<endpoint> requesters = {*endpoint::parse("1.2.3.4:6881"), *endpoint::parse("[2001:db8::1]:1")};
    const std::vector<std::string_view> tokens = {"", "12345678", std::string_view(long_string).substr(0, 64),
                                                  long_string};
    std::string eight4, eight6;
    for (int i = 0; i < 8; ++i) {
        eight4 += node4;
        eight6 += node6;
    }
    const std::vector<std::string_view> nodes = {"", node4, eight4, std::string_view(node4).substr(0, 25)};
    const std::vector<std::string_view> nodes6 = {"", node6, eight6, std::string_view(node6).substr(0, 37)};
    std::size_t cases = 0;
    for (auto t : transactions)
        for (auto v : versions)
            for (const auto& r : requesters)
                for (auto tok : tokens)
                    for (auto n4 : nodes)
                        for (auto n6 : nodes6)
                            for (std::string_view prefix : {"", "already here"}) {
                                const testing::reply_case c{filled_id('o'), v, t, r, tok, n4, n6};
                                CHECK(testing::replies_match(c, prefix));
                                ++cases;
                            }
    CHECK(cases == 5 * 3 * 2 * 4 * 4 * 4 * 2);
}

TEST_CASE("dht::node answers queries with no heap allocation once warm") {
    struct no_nodes : dht::close_nodes_source {
        std::size_t closest(const id20&, krpc::ip_family, std::span<krpc::node_entry>) const override { return 0; }
    };
    struct ignore_queries : dht::query_observer {
        void on_announce(const id20&, const endpoint&, const endpoint&) override {}
        void on_get_peers(const id20&, const endpoint&) override {}
        void on_querier(const id20&, const endpoint&) override {}
    };
    struct counting_transport : transport {
        std::size_t sent = 0;
        bool send(const endpoint&, std::string_view) override {
            ++sent;
            return true;
        }
    };
    manual_clock clock;
    dht::token_manager tokens{clock, 1};
    dht::sample_store samples{64, 20, std::chrono::seconds(300), 2};
    no_nodes nodes;
    ignore_queries observer;
    dht::responder responder{filled_id('o'), "DC01", tokens, samples, nodes, observer, clock};
    crawl::rate_limit_options limits;
    limits.max_response_rate_per_sec = 1e9;
    limits.max_response_bytes_per_sec = 1e12;
    limits.max_response_rate_per_source = 1e9;
    crawl::source_table sources{crawl::source_table_options{
        .answer_rate = 1e9, .node_rate = 1e9, .node_burst = 1e9, .ip_rate = 1e9, .ip_burst = 1e9}};
    dht::response_budget budget{clock, limits, sources};
    counting_transport out;
    struct no_replies : dht::reply_handler {
        void on_reply(const endpoint&, const krpc::message&, bool) override {}
    } replies;
    dht::node node{responder, budget, out, replies, 2};

    const auto packets = typical_queries();
    const endpoint from = *endpoint::parse("10.0.0.1:6881");
    for (const auto& p : packets) node.handle(from, p); // warm up: buffers reach their size
    const std::size_t sent_before = out.sent;
    const std::size_t before = g_allocations.load();
    for (int round = 0; round < 50; ++round)
        for (const auto& p : packets) node.handle(from, p);
    const std::size_t after = g_allocations.load();
    CHECK(out.sent - sent_before == 50 * packets.size());
    if (COUNT_ALLOCATIONS) CHECK(after == before);
}

// The reply path end to end: the node decodes and parses each reply once and the actor
// handles that parse (transaction, source tables, ring, pool) while the bytes are still in
// the receive buffer; nothing is copied out and nothing allocated per reply once the tables
// have reached their size (they grow in slabs toward their capacities, kept small here).
TEST_CASE("dht::node hands replies, parsed once, to the crawl actor with no heap allocation once warm") {
    struct recording_transport : transport {
        std::vector<std::pair<endpoint, std::string>> sent;
        bool send(const endpoint& to, std::string_view payload) override {
            sent.emplace_back(to, std::string(payload));
            return true;
        }
    };
    // Nodes on public addresses, each in its own /24 (no subnet cap gets in the way).
    std::mt19937_64 rng(11);
    std::vector<krpc::node_entry> universe;
    std::unordered_map<endpoint, id20, endpoint_hash> id_of;
    for (std::uint32_t i = 0; i < 32768; ++i) {
        krpc::node_entry n;
        for (auto& b : n.id.bytes) b = static_cast<std::uint8_t>(rng());
        n.ep = {ip_address::v4({45, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i & 0xff), 1}), 6881};
        universe.push_back(n);
        id_of[n.ep] = n.id;
    }
    const auto compact_nodes = [&](std::size_t first) {
        std::string out;
        for (std::size_t k = 0; k < 8; ++k) {
            const auto& n = universe[(first + k * 977) % universe.size()];
            out.append(reinterpret_cast<const char*>(n.id.bytes.data()), 20);
            out.append(reinterpret_cast<const char*>(n.ep.address.raw().data()), 4);
            out.push_back(static_cast<char>(n.ep.port >> 8));
            out.push_back(static_cast<char>(n.ep.port & 0xff));
        }
        return out;
    };

    manual_clock clock;
    crawl::crawl_options o;
    o.bootstrap.sources.clear();
    o.bep51.enabled = false;        // the sample schedule is a node-based set: it allocates per node scheduled
    o.pool.capacity = 1024;         // the tables reach their capacities during the warm-up
    o.pool.responsive_capacity = 512;
    o.rate_limit.max_find_node_rate_per_sec = 400;
    address_policy policy{address_policy_options{false}};
    crawl::null_sink sink;
    recording_transport out;
    engine::dht_service service{o, clock, out, policy, sink, filled_id('o'), "DC01", 3};
    service.actor().seed_saved_nodes(std::span(universe).first(64));

    std::vector<std::pair<endpoint, std::string>> replies;
    bencode::document doc;
    std::size_t allocations = 0, measured_replies = 0, cursor = 0;
    for (int round = 0; round < 250; ++round) {
        clock.advance(std::chrono::milliseconds(100));
        service.turn();
        // Answer every query sent this turn, as its destination, with 8 nodes.
        replies.clear();
        for (const auto& [to, query] : out.sent) {
            krpc::message m;
            REQUIRE(bencode::decode(query, doc, krpc::packet_limits));
            REQUIRE(krpc::parse(doc.root(), m));
            std::string packet;
            const krpc::reply_header h{m.transaction, id_of.at(to), std::nullopt, "LT\x02\x00"};
            REQUIRE(krpc::encode_find_node_response(packet, h, compact_nodes(cursor++), {}));
            replies.emplace_back(to, std::move(packet));
        }
        out.sent.clear();
        const bool warm = round >= 100;
        const auto replies_before = service.crawl_stats().replies.load();
        const std::size_t before = g_allocations.load();
        for (const auto& [from, packet] : replies) service.handle(from, packet);
        const std::size_t after = g_allocations.load();
        if (warm) {
            allocations += after - before;
            measured_replies += service.crawl_stats().replies.load() - replies_before;
        }
    }
    CHECK(measured_replies >= 5000); // what a reply costs was measured on replies that counted
    CHECK(service.node_counters().rx_replies.load() >= measured_replies);
    if (COUNT_ALLOCATIONS) CHECK(allocations == 0);
}

} // TEST_SUITE
