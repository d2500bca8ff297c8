// Fair answering under a flood, on real sockets (issue 17): a node that answered our queries
// (so it is in the responsive ring) pings the crawler once a second while 50,000 unknown
// loopback sources flood it at 10x its answer budget with a mix of valid queries and
// garbage. The friend keeps >= 90% of its pings answered, and afterwards the flood holds at
// most 10% of the pool. Wall-clock figures are printed, never asserted.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "api/crawler.hpp"
#include "support/eventually.hpp"
#include "support/flood.hpp"
#include "support/loopback_crawler.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::uint64_t load(const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); }

} // namespace

TEST_CASE("flood: a trusted node keeps its answers; 50,000 flooding sources keep out of the pool") {
    test::friend_node friend_node(*ip_address::parse("127.0.0.2"));

    auto o = test::loopback_crawler(friend_node.local());
    o.dht.crawl.pool.capacity = 2000;
    o.dht.crawl.rate_limit.max_find_node_rate_per_sec = 50;
    std::string error;
    auto crawler = api::crawler::create(o, api::event_handlers{}, error);
    REQUIRE_MESSAGE(crawler, error);
    const endpoint target = crawler->dht().local_endpoints().front();
    friend_node.start(endpoint{*ip_address::parse("127.0.0.1"), target.port});
    crawler->start();

    const auto& stats = crawler->dht().service().crawl_stats();
    // The friend answered our bootstrap query: it is in the ring, and the pool fills from its answers.
    REQUIRE(test::eventually([&] { return load(stats.responsive_size) >= 1 && load(stats.pool_size) >= 1000; }, 20s));

    test::flood_options fo;
    fo.target = target;
    fo.sources = 50'000;
    fo.rate_per_sec = 10 * o.dht.crawl.rate_limit.max_response_rate_per_sec;
    fo.datagrams = 100'000; // 20 s at 5,000/s
    test::udp_flooder flooder(fo);
    friend_node.set_pinging(true);
    flooder.start();
    flooder.join();
    friend_node.set_pinging(false);
    std::this_thread::sleep_for(1500ms); // the last ping's answer

    const auto& nc = crawler->dht().service().node_counters();
    const auto sent = friend_node.pings_sent(), answered = friend_node.pings_answered();
    const auto& fc = flooder.counters();
    MESSAGE("flood: " << load(fc.sent) << " datagrams (" << load(fc.sent_bytes) << " bytes) from " << fo.sources
                      << " sources at " << fo.rate_per_sec << "/s; " << load(fc.received) << " answers back ("
                      << load(fc.received_bytes) << " bytes); crawler rx_queries " << load(nc.rx_queries)
                      << ", replies_sent " << load(nc.replies_sent) << "; friend " << answered << "/" << sent
                      << " pings answered; pool " << load(stats.pool_size) << ", learned from queries "
                      << load(stats.pool_querier_size));
    REQUIRE(sent >= 15);
    CHECK(answered * 10 >= sent * 9);
    CHECK(load(stats.pool_querier_size) * 10 <= o.dht.crawl.pool.capacity);
    CHECK(load(stats.pool_querier_size) * 10 <= load(stats.pool_size));
    CHECK(load(fc.received_bytes) < load(fc.sent_bytes)); // no amplification
    crawler->close(std::nullopt);
    friend_node.stop();
}
