// The lookups' retries after timeouts (issue 32), on a manual clock and without a network: a
// holder that did not answer is asked again before the lookup walks on, and a lookup that
// got nothing but timeouts runs again minutes later, with back-off, a bounded number of times.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "crawl/lookups.hpp"
#include "util/clock.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using dhtc::crawl::lookups;

namespace {

id20 id_with(std::uint8_t first) {
    id20 id;
    id.bytes[0] = first;
    return id;
}

krpc::node_entry node(std::uint8_t first, int port) {
    return {id_with(first), *endpoint::parse("10.0.0.1:" + std::to_string(port))};
}

struct fixture {
    crawl::bep51_options options;
    manual_clock clock;
    std::vector<krpc::node_entry> seeds = {node(0x11, 2001), node(0x12, 2002)};
    krpc::node_entry holder = node(0x10, 2000);
    id20 hash = id_with(0x10);

    // Starts the next lookup that may start now; true when one did.
    bool start(lookups& l) { return l.next_to_start(clock.now()) && l.start(seeds); }
    // Lets every query the lookup sends now time out; how many there were.
    std::size_t time_out_all(lookups& l) {
        std::size_t n = 0;
        while (const auto q = l.next(clock.now())) {
            l.on_timeout(q->slot, q->to.ep, clock.now());
            ++n;
        }
        return n;
    }
};

} // namespace

TEST_SUITE("lookups") {


TEST_CASE("a holder that timed out is asked again, first, without spending the lookup's queries") {
    fixture f;
    f.options.queries_per_lookup = 1; // the retry must not need a second query of the budget
    lookups l(f.options);
    REQUIRE(l.want(f.hash, f.holder));
    REQUIRE(f.start(l));
    auto q = l.next(f.clock.now());
    REQUIRE(q);
    CHECK(q->to.ep == f.holder.ep);
    l.on_timeout(q->slot, q->to.ep, f.clock.now());
    CHECK(l.holder_retries() == 1);
    CHECK(l.active() == 1);
    q = l.next(f.clock.now());
    REQUIRE(q);
    CHECK(q->to.ep == f.holder.ep); // the holder again, not the closest nodes
    const krpc::compact_nodes none;
    l.on_reply(q->slot, q->to.ep, none, 2);
    CHECK(l.holder_retry_answers() == 1);
    CHECK(l.holder_retry_peers() == 2);
    CHECK(l.active() == 0);
    CHECK(l.lookup_retries() == 0);
}

TEST_CASE("holder_retries 0: a silent holder is given up at once") {
    fixture f;
    f.options.holder_retries = 0;
    lookups l(f.options);
    REQUIRE(l.want(f.hash, f.holder));
    REQUIRE(f.start(l));
    auto q = l.next(f.clock.now());
    REQUIRE(q);
    l.on_timeout(q->slot, q->to.ep, f.clock.now());
    q = l.next(f.clock.now());
    REQUIRE(q);
    CHECK(q->to.ep != f.holder.ep);
    CHECK(l.holder_retries() == 0);
}

TEST_CASE("a lookup that got nothing but timeouts runs again after 1, then 4 minutes, then never") {
    fixture f;
    lookups l(f.options);
    REQUIRE(l.want(f.hash, f.holder));
    REQUIRE(f.start(l));
    CHECK(f.time_out_all(l) == 4); // the holder twice, then both seeds
    CHECK(l.active() == 0);
    CHECK(l.lookup_retries() == 1);
    CHECK(l.queued() == 1);

    f.clock.advance(59s);
    CHECK_FALSE(l.next_to_start(f.clock.now()));
    f.clock.advance(1s);
    REQUIRE(f.start(l));
    auto q = l.next(f.clock.now());
    REQUIRE(q);
    CHECK(q->to.ep == f.holder.ep); // it keeps its holder
    l.on_timeout(q->slot, q->to.ep, f.clock.now());
    f.time_out_all(l);
    CHECK(l.lookup_retries() == 2);

    f.clock.advance(239s);
    CHECK_FALSE(l.next_to_start(f.clock.now()));
    f.clock.advance(1s);
    REQUIRE(f.start(l));
    f.time_out_all(l);
    CHECK(l.lookup_retries() == 2); // lookup_retries (2) used up: left to later samples and the ladder
    CHECK(l.queued() == 0);
}

TEST_CASE("a lookup run again that finds peers is counted; one that got any answer is not run again") {
    fixture f;
    lookups l(f.options);
    REQUIRE(l.want(f.hash, f.holder));
    REQUIRE(f.start(l));
    f.time_out_all(l);
    f.clock.advance(60s);
    REQUIRE(f.start(l));
    auto q = l.next(f.clock.now());
    REQUIRE(q);
    const krpc::compact_nodes none;
    l.on_reply(q->slot, q->to.ep, none, 1);
    CHECK(l.lookup_retries_found() == 1);

    // An answer without peers (or an error) is not a lost datagram: the lookup is over.
    const id20 other = id_with(0x20);
    REQUIRE(l.want(other, f.holder));
    REQUIRE(f.start(l));
    q = l.next(f.clock.now());
    REQUIRE(q);
    l.on_reply(q->slot, q->to.ep, none, 0);
    f.time_out_all(l);
    CHECK(l.active() == 0);
    CHECK(l.lookup_retries() == 1);
    CHECK(l.queued() == 0);
}

TEST_CASE("lookup_retries 0: a lookup of timeouts alone is not run again") {
    fixture f;
    f.options.lookup_retries = 0;
    lookups l(f.options);
    REQUIRE(l.want(f.hash, f.holder));
    REQUIRE(f.start(l));
    f.time_out_all(l);
    CHECK(l.lookup_retries() == 0);
    CHECK(l.queued() == 0);
}

} // TEST_SUITE

