// The crawler as a DHT citizen nobody bans, and as a node a flood cannot take over (issues
// 17, 18 and 28), driven through the simulated network on a manual clock:
//   - no node (IP and port) and no IP ever receives more than its budget from us, queries
//     and answers together, over a 10-minute crawl of 5,000 nodes that hand out samples, a
//     tenth of them in groups of 2 to 16 behind one IP; nodes that query us get every answer
//     their own budget allows, and discovery is what it is without the budgets;
//   - error 201 and silence back off the node that earned it, not its neighbours on the IP;
//   - a trusted node keeps its answers under a flood of 50,000 strangers at 10x the answer
//     budget, and the strangers hold at most their share of the pool;
//   - find_node / get_peers answers always carry `nodes` (and `nodes6` when wanted), and
//     unknown methods with a target or info_hash are answered like find_node, with an empty
//     table and with a full one;
//   - a thin table fills from queriers, which are pinged at once rather than after the pool.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/harness.hpp"
#include "sim/sim_network.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using namespace dhtc::sim::harness_util;
using sim::kind;

namespace {

// What we sent one destination (a node, or an IP): every datagram, and the answers alone.
struct sent_to {
    std::vector<time_point> all;
    std::vector<time_point> answers;
};

template <class Key>
std::map<Key, sent_to> sent_by(const sim::sim_network& net, Key (*key)(const endpoint&)) {
    std::map<Key, sent_to> out;
    for (const auto& q : net.queries()) out[key(q.to)].all.push_back(q.at);
    for (const auto& r : net.replies()) {
        out[key(r.to)].all.push_back(r.at);
        out[key(r.to)].answers.push_back(r.at);
    }
    for (auto& [k, s] : out) {
        std::sort(s.all.begin(), s.all.end());
        std::sort(s.answers.begin(), s.answers.end());
    }
    return out;
}
endpoint by_node(const endpoint& e) { return e; }
ip_address by_ip(const endpoint& e) { return e.address; }

double excess(const std::vector<time_point>& times, double rate, double burst) {
    std::vector<std::pair<time_point, double>> events;
    for (const auto t : times) events.emplace_back(t, 1.0);
    return bucket_excess(events, rate, burst);
}

struct crawl_figures {
    std::size_t queries = 0;
    std::size_t responsive = 0;        ///< distinct nodes that answered us
    std::size_t shared_responsive = 0; ///< ... of those behind a shared IP
    std::size_t hashes = 0;            ///< distinct hashes that reached the sink with a peer
    double node_excess = -1e9;         ///< largest excess of everything sent one node over its budget
    double node_answer_excess = -1e9;  ///< ... of the answers alone over the answer budget
    double ip_excess = -1e9;           ///< ... of everything sent one IP over its ceiling
    std::size_t worst_node_window = 0; ///< most datagrams to one node in any 10 s
    std::size_t worst_ip_window = 0;   ///< most datagrams to one IP in any 10 s
    std::size_t querier_answers = 0;   ///< answers the nodes that query us received
    std::size_t querier_queries = 0;
    std::uint64_t deferred = 0;
};

// A 10-minute crawl of 5,000 nodes, most of them BEP-51 nodes holding many hashes; a tenth
// are in groups of 2 to 16 that share an IP; a few nodes query us, some of them faster than
// their budget, so answers and queries share the same destinations' budgets.
crawl_figures crawl_many_samples(bool budgeted) {
    sim::network_options no;
    no.seed = 1801;
    harness h(no);
    auto ids = h.net.add_spread_v4(4500);
    const auto shared = h.net.add_shared_ip_v4(500);
    ids.insert(ids.end(), shared.begin(), shared.end());
    h.net.wire(16, 8);
    for (const auto i : ids) {
        auto& n = h.net.node(i);
        n.bep51 = i % 5 != 0;
        n.interval = 0; // our 60 s floor applies: every node asked as often as we allow
    }
    for (std::uint32_t k = 0; k < 3000; ++k)
        h.net.store_hash(h.net.random_id(), {{ip_address::v4(0x46000000u + k * 256 + 1), 51413}}, 8);
    if (!budgeted) unlimited_destinations(h.options);
    h.start({{h.net.node(1).ep, h.net.node(2).ep}});
    // Some crawled nodes also query us: ten at 5/s each (more than their budget of 2/s), ten
    // at 1/s (within it), half of each behind shared IPs.
    std::vector<endpoint> fast, steady;
    for (std::uint32_t i = 0; i < 10; ++i) {
        fast.push_back(h.net.node(ids[i * 7 + (i % 2 ? 4500 : 0)]).ep);
        steady.push_back(h.net.node(ids[i * 11 + 3 + (i % 2 ? 4500 : 0)]).ep);
    }
    std::size_t step = 0, steady_sent = 0;
    h.net.on_step = [&] {
        ++step;
        if (step % 10 == 0)
            for (const auto& q : fast) h.net.client_send(q, sim::make_ping("qq", h.net.random_id())); // 5/s
        if (step % 50 == 0)
            for (const auto& q : steady) {
                h.net.client_send(q, sim::make_ping("qs", h.net.random_id())); // 1/s
                ++steady_sent;
            }
    };
    h.net.run_for(10min, 20ms);
    h.net.on_step = nullptr;
    h.net.run_for(200ms, 20ms); // the last answers arrive

    crawl_figures f;
    f.queries = h.net.queries().size();
    const std::set<endpoint> shared_eps = [&] {
        std::set<endpoint> out;
        for (const auto i : shared) out.insert(h.net.node(i).ep);
        return out;
    }();
    std::set<endpoint> responsive;
    for (const auto& q : h.net.queries())
        if (q.answered) responsive.insert(q.to);
    f.responsive = responsive.size();
    for (const auto& e : responsive) f.shared_responsive += shared_eps.contains(e);
    std::set<id20> hashes;
    for (const auto& e : h.sink.hashes) hashes.insert(e.info_hash);
    f.hashes = hashes.size();
    const auto& rl = h.options.rate_limit;
    const double node_rate = rl.max_packets_per_destination_per_sec, node_burst = rl.destination_burst;
    for (const auto& [node, s] : sent_by(h.net, by_node)) {
        // Answers first: answers alone stay within the node's budget; with our queries, within
        // rate x t + 2 x burst - headroom (dht/source_table.hpp).
        f.node_answer_excess = std::max(f.node_answer_excess, excess(s.answers, node_rate, node_burst));
        f.node_excess = std::max(f.node_excess, excess(s.all, node_rate, 2 * node_burst - 2));
        f.worst_node_window = std::max(f.worst_node_window, max_in_window(s.all, 10s));
    }
    for (const auto& [ip, s] : sent_by(h.net, by_ip)) {
        f.ip_excess = std::max(f.ip_excess, excess(s.all, rl.max_packets_per_ip_per_sec, rl.ip_burst));
        f.worst_ip_window = std::max(f.worst_ip_window, max_in_window(s.all, 10s));
    }
    f.querier_queries = steady_sent;
    for (const auto& q : steady)
        for (const auto& r : h.net.replies()) f.querier_answers += r.to == q;
    f.deferred = get(h.stats().deferred_destination);
    return f;
}

} // namespace

TEST_SUITE("crawl citizen") {

TEST_CASE("no node and no IP ever gets more than its budget, shared IPs included; discovery per query holds") {
    const crawl_figures before = crawl_many_samples(false);
    const crawl_figures after = crawl_many_samples(true);
    const auto show = [](const char* label, const crawl_figures& f) {
        MESSAGE(std::string(label) << f.queries << " queries, " << f.responsive << " responsive (" << f.shared_responsive
                      << " behind shared IPs), " << f.hashes << " hashes, worst 10 s window: node "
                      << f.worst_node_window << ", IP " << f.worst_ip_window << ", " << f.deferred << " deferred");
    };
    show("without the budgets: ", before);
    show("with the budgets:    ", after);
    CHECK(after.node_answer_excess <= 1e-6);
    CHECK(after.node_excess <= 1e-6);
    CHECK(after.ip_excess <= 1e-6);
    CHECK(after.worst_node_window <= 38);
    CHECK(after.worst_ip_window <= 240);
    CHECK(before.worst_node_window > 38); // the crawl does press the budgets
    CHECK(after.deferred > 0);
    // Nodes that query us within their budget get every answer, budgets or not.
    CHECK(after.querier_answers == after.querier_queries);
    // Discovery holds: the same nodes, those behind shared IPs too, and the same hashes in the
    // same 10 minutes, at the same cost per query within 2%.
    const auto per_query = [](std::size_t n, std::size_t q) { return static_cast<double>(n) / static_cast<double>(q); };
    MESSAGE("per query: responsive " << per_query(before.responsive, before.queries) << " -> "
                                     << per_query(after.responsive, after.queries) << ", hashes "
                                     << per_query(before.hashes, before.queries) << " -> "
                                     << per_query(after.hashes, after.queries));
    CHECK(after.responsive >= before.responsive);
    CHECK(after.shared_responsive >= before.shared_responsive);
    CHECK(after.hashes * 1000 >= before.hashes * 998);
    CHECK(per_query(after.responsive, after.queries) >= 0.98 * per_query(before.responsive, before.queries));
    CHECK(per_query(after.hashes, after.queries) >= 0.98 * per_query(before.hashes, before.queries));
}

TEST_CASE("error 201 and silence back off the node that earned it, not its neighbours on the IP") {
    const auto run = [](bool silent) {
        sim::network_options no;
        no.seed = silent ? 1811 : 1812;
        no.reply_nodes = 32; // node 0, our bootstrap, names all twenty in every answer
        harness h(no);
        h.net.add_spread_v4(300);
        // Twenty nodes on one IP (ports differ): ten answer 201, or never answer; ten behave.
        const ip_address shared = ip("90.0.0.1");
        std::vector<std::uint32_t> grumpy, good;
        for (std::uint16_t p = 0; p < 20; ++p) {
            const auto i = h.net.add_node(endpoint{shared, static_cast<std::uint16_t>(7000 + p)});
            if (p % 2) {
                good.push_back(i);
                continue;
            }
            grumpy.push_back(i);
            if (silent) h.net.node(i).silent = true;
            else h.net.node(i).error_code = 201;
        }
        h.net.wire(12);
        h.net.node(0).known.clear();
        for (const auto g : grumpy) h.net.learn(0, g);
        for (const auto g : good) h.net.learn(0, g);
        h.options.bep51.enabled = false;
        // Each is asked again and again: the crawl starts over from node 0 every 5 s.
        h.options.pool.recent_probe_ttl_secs = 4;
        h.options.bootstrap.interval_secs = 5;
        h.start({{h.net.node(0).ep}});
        h.net.run_for(3min, 20ms);

        std::size_t during = 0, grumpy_queries = 0;
        for (const auto g : grumpy) {
            const endpoint at = h.net.node(g).ep;
            std::vector<time_point> sent, ends;
            for (const auto& q : h.net.queries()) {
                if (q.to != at) continue;
                sent.push_back(q.at);
                if (!q.open) ends.push_back(q.closed_at);
            }
            grumpy_queries += sent.size();
            std::sort(ends.begin(), ends.end());
            // Its back-off starts with its first 201 reply, or once its fourth query timed out.
            const std::size_t trigger = silent ? 3 : 0;
            if (ends.size() <= trigger) continue;
            const time_point start = ends[trigger];
            during += static_cast<std::size_t>(std::count_if(
                sent.begin(), sent.end(), [&](time_point t) { return t > start && t < start + 60s; }));
        }
        std::size_t good_answered = 0;
        for (const auto& q : h.net.queries())
            for (const auto g : good) good_answered += q.answered && q.to == h.net.node(g).ep;
        MESSAGE(std::string(silent ? "silence" : "error 201")
                << ": " << grumpy_queries << " queries to the ten in 3 min, " << during
                << " in the 60 s after each one's back-off began; " << good_answered
                << " answers from their ten neighbours on the IP");
        CHECK(during == 0);
        CHECK(get(h.stats().skipped_backoff) > 0);
        CHECK(good_answered >= 10); // the neighbours are crawled all along
        if (silent) CHECK(h.service->sources().stats().backoffs_silence >= 10);
        else CHECK(h.service->sources().stats().backoffs_rate_limited >= 10);
    };
    SUBCASE("error 201") { run(false); }
    SUBCASE("silence") { run(true); }
}

TEST_CASE("a trusted node keeps its answers under a flood of 50,000 strangers; they keep out of the pool") {
    sim::network_options no;
    no.seed = 1701;
    harness h(no);
    h.net.add_spread_v4(12'000);
    h.net.wire(16, 8);
    h.options.bep51.enabled = false;
    h.options.pool.capacity = 5000;
    // A slow crawl keeps the pool full of nodes learned from answers, as on the real DHT.
    h.options.rate_limit.max_find_node_rate_per_sec = 20;
    h.start({{h.net.node(0).ep}});
    h.net.run_for(20s, 20ms); // the crawl finds the network; node 0 answered us: trusted

    const endpoint friend_ep = h.net.node(0).ep;
    REQUIRE(h.service->sources().trusted(friend_ep.address, h.clock.now()));
    const double budget = h.options.rate_limit.max_response_rate_per_sec;
    std::vector<endpoint> strangers;
    for (std::uint32_t i = 0; i < 50'000; ++i)
        strangers.push_back(endpoint{ip_address::v4(0x29000000u + i), 6881}); // 41.0.0.0 +
    std::set<endpoint> stranger_set(strangers.begin(), strangers.end());
    const auto flood_id = [&](std::size_t i) {
        id20 id;
        for (std::size_t b = 0; b < 20; ++b) id.bytes[b] = static_cast<std::uint8_t>((i * 131 + b * 7) & 0xff);
        return id;
    };
    for (const auto& s : strangers) h.net.add_client(s);
    h.net.add_client(endpoint{friend_ep.address, 9999}); // the friend's own client port
    const endpoint friend_client{friend_ep.address, 9999};
    std::size_t step = 0, flood_sent = 0, friend_sent = 0;
    const auto per_step = static_cast<std::size_t>(budget * 10 / 50); // 10x the budget, 20 ms steps
    h.net.on_step = [&] {
        for (std::size_t k = 0; k < per_step; ++k, ++flood_sent) {
            const std::size_t i = flood_sent % strangers.size();
            h.net.client_send(strangers[i], k % 2 ? sim::make_ping("ff", flood_id(i))
                                                  : sim::make_find_node("ff", flood_id(i), flood_id(i + 1)));
        }
        if (++step % 50 == 0) { // once a second
            h.net.client_send(friend_client, sim::make_ping("fr", h.net.node(0).id));
            ++friend_sent;
        }
    };
    h.net.run_for(60s, 20ms);
    h.net.on_step = nullptr;
    h.net.run_for(200ms, 20ms);

    std::size_t friend_answered = 0;
    for (const auto& r : h.net.inbox(friend_client)) {
        sim::parsed_packet p;
        if (sim::parse_packet(r.payload, p) && p.msg.type == krpc::message_type::response && p.msg.transaction == "fr")
            ++friend_answered;
    }
    std::size_t flood_answered = 0;
    for (const auto& r : h.net.replies()) flood_answered += stranger_set.contains(r.to) ? 1 : 0;
    const auto querier_in_pool = get(h.stats().pool_querier_size);
    MESSAGE("flood: " << flood_sent << " queries from 50,000 sources (" << flood_sent / 60 << "/s, budget " << budget
                      << "/s), " << flood_answered << " answered; trusted node " << friend_answered << "/"
                      << friend_sent << " answered; pool " << get(h.stats().pool_size) << " nodes, "
                      << querier_in_pool << " learned from queries; "
                      << h.service->response_budget().trusted_reserve_used() << " answers from the reserve");
    CHECK(friend_answered * 10 >= friend_sent * 9);
    std::size_t queries_to_strangers = 0;
    for (const auto& q : h.net.queries()) queries_to_strangers += stranger_set.contains(q.to) ? 1 : 0;
    MESSAGE(queries_to_strangers << " of our queries went to flood addresses");
    REQUIRE(get(h.stats().pool_size) >= h.options.pool.capacity * 95 / 100);
    CHECK(querier_in_pool <= h.options.pool.capacity / 10);
    CHECK(querier_in_pool * 10 <= get(h.stats().pool_size));
    CHECK(querier_in_pool > 0); // queriers are still welcome, within their share
    CHECK(get(h.stats().querier_share_full) + get(h.stats().querier_over_rate) > 0);
    // No stranger reached the pool except as a querier, so they are at most that share.
    CHECK(h.service->response_budget().trusted_reserve_used() > 0);
}

TEST_CASE("strict answers: nodes always present; unknown methods with a target or info_hash like find_node") {
    // Sends `payload` (its `t` given) from `from` and returns our answer to it. The client
    // may also get our own find_node: a querier is a crawl candidate.
    const auto probe = [](harness& h, const std::string& payload, std::string_view t, const endpoint& from) {
        h.net.add_client(from);
        const std::size_t before = h.net.inbox(from).size();
        h.net.client_send(from, payload);
        h.net.run_for(100ms);
        auto p = std::make_unique<sim::parsed_packet>();
        const auto& inbox = h.net.inbox(from);
        for (std::size_t i = before; i < inbox.size(); ++i)
            if (sim::parse_packet(inbox[i].payload, *p) && p->msg.type != krpc::message_type::query &&
                p->msg.transaction == t)
                return p;
        FAIL("no answer to " << t);
        return p;
    };
    const auto check_all = [&](harness& h, bool empty_table) {
        const id20 me = h.net.random_id(), target = h.net.random_id();
        const endpoint v4 = ep("60.0.0.1:6881"), v6 = ep("[2a0a::1]:6881");
        const std::string t20(20, '\x12'), id20s(me.view());

        auto r = probe(h, sim::make_find_node("a1", me, target), "a1", v4);
        CHECK(r->msg.type == krpc::message_type::response);
        CHECK(r->msg.response.has_nodes);
        CHECK(r->msg.response.nodes.empty() == empty_table);

        r = probe(h, sim::make_get_peers("a2", me, target), "a2", v4);
        CHECK(r->msg.response.has_nodes);
        CHECK(r->msg.response.has_token);
        CHECK(r->msg.response.nodes.empty() == empty_table);

        // want n4+n6 from IPv4: both lists, each possibly empty (the network here is IPv4).
        const std::string want_both = "d1:ad2:id20:" + id20s + "6:target20:" + t20 + "4:wantl2:n42:n6ee1:q9:find_node1:t2:a31:y1:qe";
        r = probe(h, want_both, "a3", v4);
        CHECK(r->msg.response.has_nodes);
        CHECK(r->msg.response.has_nodes6);

        // An IPv6 querier without want: nodes6 (its family), and nodes still present.
        r = probe(h, sim::make_find_node("a4", me, target), "a4", v6);
        CHECK(r->msg.response.has_nodes);
        CHECK(r->msg.response.has_nodes6);

        for (const char* method : {"get", "vote", "find_nodes"}) {
            CAPTURE(method);
            const std::string m(method);
            const std::string with_target = "d1:ad2:id20:" + id20s + "6:target20:" + t20 + "e1:q" +
                                            std::to_string(m.size()) + ":" + m + "1:t2:a51:y1:qe";
            r = probe(h, with_target, "a5", v4);
            CHECK(r->msg.type == krpc::message_type::response);
            CHECK(r->msg.response.has_nodes);
            const std::string with_hash = "d1:ad2:id20:" + id20s + "9:info_hash20:" + t20 + "e1:q" +
                                          std::to_string(m.size()) + ":" + m + "1:t2:a61:y1:qe";
            r = probe(h, with_hash, "a6", v4);
            CHECK(r->msg.type == krpc::message_type::response);
            CHECK(r->msg.response.has_nodes);
            CHECK_FALSE(r->msg.response.has_token); // nodes only
        }
        const std::string bare = "d1:ad2:id20:" + id20s + "e1:q5:dance1:t2:a71:y1:qe";
        r = probe(h, bare, "a7", v4);
        CHECK(r->msg.type == krpc::message_type::error);
        CHECK(r->msg.err.code == 204);
    };
    SUBCASE("empty table") {
        harness h;
        h.start({});
        check_all(h, true);
    }
    SUBCASE("full table") {
        sim::network_options no;
        no.seed = 1821;
        harness h(no);
        h.net.add_spread_v4(500);
        h.net.wire(12, 4);
        h.options.bep51.enabled = false;
        h.start({{h.net.node(0).ep}});
        h.net.run_for(30s, 20ms);
        REQUIRE(get(h.stats().responsive_size) >= 100);
        check_all(h, false);
    }
}

TEST_CASE("a thin table fills from queriers: they are pinged at once, and those that answer are offered") {
    // 4,000 saved nodes that never answer stand in the pool ahead of everyone (about 24 s of
    // new destinations); 20 live nodes query us. Offered: the nodes a find_node answer names.
    const auto offered_after_3s = [](std::size_t thin_table_nodes) {
        sim::network_options no;
        no.seed = 1831;
        harness h(no);
        const auto ids = h.net.add_spread_v4(4020);
        std::vector<krpc::node_entry> saved;
        for (std::size_t k = 20; k < ids.size(); ++k) {
            h.net.node(ids[k]).silent = true;
            saved.push_back({h.net.node(ids[k]).id, h.net.node(ids[k]).ep});
        }
        h.options.pool.thin_table_nodes = thin_table_nodes;
        h.start({});
        h.service->actor().seed_saved_nodes(saved);
        std::size_t step = 0;
        h.net.on_step = [&] {
            if (step++ % 50 != 0) return; // each live node queries us once a second
            for (std::size_t k = 0; k < 20; ++k)
                h.net.client_send(h.net.node(ids[k]).ep, sim::make_ping("qq", h.net.node(ids[k]).id));
        };
        h.net.run_for(3s, 20ms);
        h.net.on_step = nullptr;
        const endpoint probe = ep("60.0.0.1:6881");
        h.net.add_client(probe);
        h.net.client_send(probe, sim::make_find_node("f1", h.net.random_id(), h.net.random_id()));
        h.net.run_for(100ms);
        auto p = std::make_unique<sim::parsed_packet>();
        for (const auto& d : h.net.inbox(probe))
            if (sim::parse_packet(d.payload, *p) && p->msg.type == krpc::message_type::response)
                return std::pair{p->msg.response.nodes.size(), get(h.stats().queries_ping)};
        return std::pair{std::size_t{0}, get(h.stats().queries_ping)};
    };
    const auto [pinged_offered, pings] = offered_after_3s(64);
    const auto [pooled_offered, no_pings] = offered_after_3s(0);
    MESSAGE("offered after 3 s: " << pinged_offered << " with pings (" << pings << " sent), " << pooled_offered
                                  << " without");
    CHECK(pinged_offered == 8);
    CHECK(pings >= 20);
    CHECK(pings <= 40); // each querier once (and again only after the probe TTL)
    CHECK(no_pings == 0);
    CHECK(pooled_offered == 0);
}

} // TEST_SUITE
