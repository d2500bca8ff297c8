// The scrape lookups' own rules, without a network: who is asked, when a scrape ends (its
// nodes answered, or its deadline passed), how filters and values-only replies are counted,
// and the bounded request queue.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "crawl/scrapes.hpp"
#include "krpc/message.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using dhtc::crawl::scrape_options;
using dhtc::crawl::scrapes;

namespace {

id20 id_with(std::uint8_t first) {
    id20 id;
    id.bytes[0] = first;
    return id;
}

krpc::node_entry node(std::uint8_t first, int port) {
    return {id_with(first), *endpoint::parse("10.0.0.1:" + std::to_string(port))};
}

ip_address ip(const char* text) { return endpoint::parse(std::string(text) + ":1")->address; }

std::string filter_of(std::initializer_list<const char*> ips) {
    krpc::scrape_bloom bf;
    for (const char* a : ips) bf.insert(ip(a));
    return std::string(bf.wire());
}

} // namespace

TEST_SUITE("scrapes") {

TEST_CASE("a scrape asks the closest nodes, merges their filters and ends when they answered") {
    scrapes s(scrape_options{});
    const id20 target = id_with(0);
    const time_point t0{};
    REQUIRE(s.want(target, t0));
    CHECK(s.want(target, t0)); // queued already: not twice
    CHECK(s.queued() == 1);
    std::vector<krpc::node_entry> seeds;
    for (int i = 0; i < 10; ++i) seeds.push_back(node(static_cast<std::uint8_t>(i + 1), 1000 + i));
    REQUIRE(s.start(seeds));

    const std::string seeds_a = filter_of({"1.1.1.1", "1.1.1.2"}), seeds_b = filter_of({"1.1.1.2", "1.1.1.3"});
    const std::string peers = filter_of({"2.2.2.2"});
    std::optional<crawl::scrape_result> result;
    std::vector<int> asked;
    for (int round = 0; round < 10 && !result; ++round) {
        std::vector<scrapes::query> batch;
        while (auto q = s.next()) batch.push_back(*q);
        REQUIRE_FALSE(batch.empty());
        CHECK(batch.size() <= scrapes::parallelism);
        for (const auto& q : batch) {
            asked.push_back(q.to.ep.port);
            scrapes::reply r;
            r.seeds_filter = q.to.ep.port % 2 ? seeds_a : seeds_b;
            r.peers_filter = peers;
            if (auto done = s.on_reply(q.slot, q.target, q.to.ep, r)) result = done;
        }
    }
    REQUIRE(result);
    // Only the 8 closest (ids 1..8, ports 1000..1007) were asked, closest first.
    CHECK(asked == std::vector<int>{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007});
    CHECK(result->info_hash == target);
    CHECK(result->seeders == 3); // the union of both seed filters
    CHECK(result->leechers == 1);
    CHECK(result->responders == 8);
    CHECK(result->queried == 8);
    CHECK_FALSE(result->timed_out);
    CHECK(s.active() == 0);
    CHECK(s.completed() == 1);
}

TEST_CASE("failures let farther candidates in; values-only replies count as peers unless seeds") {
    scrapes s(scrape_options{1, 4, 24});
    REQUIRE(s.want(id_with(0), time_point{}));
    std::vector<krpc::node_entry> seeds;
    for (int i = 0; i < 9; ++i) seeds.push_back(node(static_cast<std::uint8_t>(i + 1), 2000 + i));
    REQUIRE(s.start(seeds));
    // values-only (no BEP-33) replies: 3.3.3.3 and 1.1.1.1; one node lists 1.1.1.1 as a seed
    bencode::document doc;
    using namespace std::string_literals;
    const std::string values = "l6:\x03\x03\x03\x03\x00\x01"s + "6:\x01\x01\x01\x01\x00\x01"s + "e";
    REQUIRE(bencode::decode(std::string_view(values), doc, krpc::packet_limits));
    const auto vals = krpc::compact_values::from(doc.root());
    REQUIRE(vals);
    const std::string seed = filter_of({"1.1.1.1"});
    std::optional<crawl::scrape_result> result;
    int n = 0, failed = 0;
    while (!result) {
        auto q = s.next();
        REQUIRE(q);
        ++n;
        if (q->to.ep.port == 2000) { // the closest times out: the 9th candidate is asked instead
            ++failed;
            result = s.on_failure(q->slot, q->target, q->to.ep);
            continue;
        }
        scrapes::reply r;
        if (q->to.ep.port == 2001) r.seeds_filter = seed;
        else r.values = &*vals;
        result = s.on_reply(q->slot, q->target, q->to.ep, r);
    }
    CHECK(failed == 1);
    CHECK(n == 9);
    CHECK(result->seeders == 1);
    CHECK(result->leechers == 1); // 3.3.3.3 only: 1.1.1.1 is a seed
    CHECK(result->responders == 8);
}

TEST_CASE("the request queue is bounded and counts what it refuses") {
    scrapes s(scrape_options{1, 2, 24});
    CHECK(s.want(id_with(1), time_point{}));
    CHECK(s.want(id_with(2), time_point{}));
    CHECK_FALSE(s.want(id_with(3), time_point{}));
    CHECK(s.dropped() == 1);
    CHECK_FALSE(s.start({})); // no seed: nothing starts
    CHECK(s.queued() == 2);
}

TEST_CASE("a scrape with no node to ask ends at its deadline, with zero responders") {
    scrape_options o;
    o.timeout_secs = 5;
    scrapes s(o);
    const time_point t0 = time_point{} + 1h;
    REQUIRE(s.want(id_with(1), t0));
    REQUIRE(s.want(id_with(2), t0 + 2s));
    CHECK_FALSE(s.start({})); // the crawler knows no node yet
    std::vector<crawl::scrape_result> ended;
    s.expire(t0 + 5s - 1ms, ended);
    CHECK(ended.empty());
    s.expire(t0 + 5s, ended);
    REQUIRE(ended.size() == 1); // the second has 2 s left
    CHECK(ended[0].info_hash == id_with(1));
    CHECK(ended[0].timed_out);
    CHECK(ended[0].responders == 0);
    CHECK(ended[0].queried == 0);
    CHECK(ended[0].seeders == 0);
    CHECK(ended[0].leechers == 0);
    s.expire(t0 + 7s, ended);
    REQUIRE(ended.size() == 2);
    CHECK(ended[1].info_hash == id_with(2));
    CHECK(s.queued() == 0);
    CHECK(s.completed() == 2);
    CHECK(s.timed_out() == 2);
}

TEST_CASE("a scrape whose nodes do not all answer ends at its deadline with what came; late answers are ignored") {
    scrape_options o;
    o.max_concurrent = 1;
    o.timeout_secs = 10;
    scrapes s(o);
    const time_point t0 = time_point{} + 1h;
    const std::string seeds_filter = filter_of({"1.1.1.1", "1.1.1.2"});
    std::vector<krpc::node_entry> seeds;
    for (int i = 0; i < 4; ++i) seeds.push_back(node(static_cast<std::uint8_t>(i + 1), 3000 + i));
    REQUIRE(s.want(id_with(0), t0));
    REQUIRE(s.start(seeds));
    std::vector<scrapes::query> out;
    while (auto q = s.next()) out.push_back(*q);
    REQUIRE(out.size() == scrapes::parallelism);
    // One node answers; the other two never do (their queries are still out at the deadline).
    scrapes::reply answered;
    answered.seeds_filter = seeds_filter;
    CHECK_FALSE(s.on_reply(out[0].slot, out[0].target, out[0].to.ep, answered));
    REQUIRE(s.next()); // the fourth node, asked in its place, does not answer either
    std::vector<crawl::scrape_result> ended;
    s.expire(t0 + 10s - 1ms, ended);
    CHECK(ended.empty());
    s.expire(t0 + 10s, ended);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0].timed_out);
    CHECK(ended[0].responders == 1);
    CHECK(ended[0].seeders == 2);
    CHECK(ended[0].queried == 4);
    CHECK(s.active() == 0);

    // The slot serves the next request; a late answer to the ended scrape changes nothing.
    REQUIRE(s.want(id_with(9), t0 + 11s));
    REQUIRE(s.start(seeds));
    const auto fresh = s.next();
    REQUIRE(fresh);
    CHECK(fresh->slot == out[1].slot);
    scrapes::reply late;
    late.peers_filter = filter_of({"2.2.2.2"});
    CHECK_FALSE(s.on_reply(out[1].slot, out[1].target, out[1].to.ep, late));
    CHECK_FALSE(s.on_failure(out[2].slot, out[2].target, out[2].to.ep));
    CHECK(s.active() == 1);
    std::optional<crawl::scrape_result> second = s.on_reply(fresh->slot, fresh->target, fresh->to.ep, {});
    while (!second) {
        const auto q = s.next();
        REQUIRE(q);
        second = s.on_reply(q->slot, q->target, q->to.ep, {});
    }
    CHECK(second->info_hash == id_with(9));
    CHECK_FALSE(second->timed_out);
    CHECK(second->leechers == 0); // the late answer's peers are not in it
}

} // TEST_SUITE
