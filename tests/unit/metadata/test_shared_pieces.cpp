// shared_pieces against the metadata memory budget: every lease is charged before its
// request goes out, given back when unfilled, and everything returns when the job ends.
#include <doctest/doctest.h>

#include <string>

#include "metadata/memory_budget.hpp"
#include "metadata/shared_pieces.hpp"

using namespace dhtc;
using namespace dhtc::metadata;

TEST_SUITE("shared_pieces") {

TEST_CASE("a claimed size costs nothing; leases are charged, unfilled ones given back") {
    memory_budget budget(4 * wire::metadata_piece_size);
    {
        shared_pieces p(wire::default_max_metadata_size, &budget);
        REQUIRE(p.on_metadata_size(std::size_t{10} << 20));
        CHECK(budget.held() == 0);
        CHECK(p.charged() == 0);
        for (int i = 0; i < 4; ++i) REQUIRE(p.acquire(0).has_value());
        CHECK(budget.held() == 4 * wire::metadata_piece_size);
        // Spent: nothing more is leased, the refusal is counted and the job knows why.
        CHECK_FALSE(p.acquire(1).has_value());
        CHECK(p.starved());
        CHECK(budget.refused() == 1);
        CHECK(budget.refused_bytes() == wire::metadata_piece_size);
        // One piece arrives (stays charged), the session ends (its other leases go back).
        REQUIRE(p.deliver(0, 0, std::string(wire::metadata_piece_size, 'x')));
        p.release(0);
        CHECK(budget.held() == wire::metadata_piece_size);
        CHECK(p.charged() == wire::metadata_piece_size);
        REQUIRE(p.acquire(1).has_value());
        CHECK(budget.held() == 2 * wire::metadata_piece_size);
        p.restart();
        CHECK(budget.held() == 0);
        REQUIRE(p.acquire(1).has_value());
    }
    CHECK(budget.held() == 0); // the job's end returns the rest
}

TEST_CASE("a short last piece is charged its own length, and the dict assembles") {
    memory_budget budget(1 << 20);
    const std::size_t size = wire::metadata_piece_size + 10;
    shared_pieces p(wire::default_max_metadata_size, &budget);
    REQUIRE(p.on_metadata_size(size));
    REQUIRE(p.acquire(0) == 0u);
    REQUIRE(p.acquire(0) == 1u);
    CHECK(budget.held() == size);
    CHECK_FALSE(p.acquire(0).has_value()); // none pending: not a budget refusal
    CHECK_FALSE(p.starved());
    CHECK_FALSE(p.deliver(1, 0, std::string(wire::metadata_piece_size, 'a'))); // not the holder
    REQUIRE(p.deliver(0, 1, std::string(10, 'b')));
    REQUIRE(p.deliver(0, 0, std::string(wire::metadata_piece_size, 'a')));
    REQUIRE(p.complete());
    CHECK(p.bytes() == std::string(wire::metadata_piece_size, 'a') + std::string(10, 'b'));
    CHECK(budget.held() == size);
    p.release(0);
    CHECK(budget.held() == size);
}

} // TEST_SUITE
