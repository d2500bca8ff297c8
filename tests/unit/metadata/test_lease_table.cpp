#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "metadata/lease_table.hpp"

using namespace dhtc::metadata;
using C = lease_complete_result;

namespace {

constexpr std::size_t kib16 = 16'384;

// Checks the table's counters and holders against a full scan of its pieces.
void check_consistent(const lease_table& t) {
    std::size_t leased = 0, received = 0;
    for (std::uint32_t i = 0; i < t.piece_count(); ++i) {
        const bool held = t.holder(i).has_value();
        const bool got = t.is_received(i);
        REQUIRE_FALSE((held && got));
        leased += held;
        received += got;
    }
    REQUIRE(leased == t.leased());
    REQUIRE(received == t.received());
    REQUIRE(t.pending() + t.leased() + t.received() == t.piece_count());
    REQUIRE(t.all_received() == (t.piece_count() > 0 && received == t.piece_count()));
}

} // namespace

TEST_SUITE("lease_table") {

TEST_CASE("piece count and lengths follow the 16 KiB split") {
    lease_table t;
    CHECK(t.max_metadata_size() == 10u * 1024 * 1024);
    struct row {
        std::size_t size, pieces, last;
    };
    for (const row r : {row{1, 1, 1}, row{kib16 - 1, 1, kib16 - 1}, row{kib16, 1, kib16}, row{kib16 + 1, 2, 1},
                        row{3 * kib16, 3, kib16}, row{10u * 1024 * 1024, 640, kib16}}) {
        CAPTURE(r.size);
        REQUIRE(t.reset(r.size));
        CHECK(t.metadata_size() == r.size);
        CHECK(t.piece_count() == r.pieces);
        CHECK(t.pending() == r.pieces);
        CHECK(t.piece_length(0) == (r.pieces == 1 ? r.last : kib16));
        CHECK(t.piece_length(static_cast<std::uint32_t>(r.pieces - 1)) == r.last);
        CHECK(t.piece_length(static_cast<std::uint32_t>(r.pieces)) == 0);
        CHECK_FALSE(t.all_received());
    }
}

TEST_CASE("sizes of 0 or above the maximum leave an empty table") {
    lease_table t(100'000);
    REQUIRE(t.reset(50'000));
    REQUIRE(t.acquire(0));
    CHECK_FALSE(t.reset(0));
    CHECK(t.piece_count() == 0);
    CHECK(t.leased() == 0);
    CHECK_FALSE(t.acquire(0));
    CHECK_FALSE(t.all_received());
    CHECK_FALSE(t.reset(100'001));
    CHECK(t.piece_count() == 0);
    CHECK(t.reset(100'000));
    CHECK(t.piece_count() == 7);
    // An absurd maximum is clamped instead of allocating it.
    lease_table huge(static_cast<std::size_t>(-1));
    CHECK(huge.max_metadata_size() == std::size_t{256} * 1024 * 1024);
}

TEST_CASE("acquire leases the lowest pending piece; only the holder completes it") {
    lease_table t;
    REQUIRE(t.reset(3 * kib16 + 10)); // 4 pieces
    CHECK(t.acquire(1) == 0u);
    CHECK(t.acquire(2) == 1u);
    CHECK(t.acquire(1) == 2u);
    CHECK(t.holder(0) == std::optional<lease_table::owner_id>(1));
    CHECK(t.holder(1) == std::optional<lease_table::owner_id>(2));
    CHECK_FALSE(t.holder(3)); // pending
    CHECK(t.pending() == 1);
    CHECK(t.leased() == 3);

    CHECK(t.complete(1, 1) == C::not_holder);
    CHECK(t.complete(3, 1) == C::not_leased);
    CHECK(t.complete(4, 1) == C::out_of_range);
    CHECK(t.complete(0, lease_table::max_owner + 1) == C::out_of_range);
    CHECK(t.refused() == 4);
    CHECK(t.complete(1, 2) == C::completed);
    CHECK(t.complete(1, 2) == C::already_received);
    CHECK_FALSE(t.holder(1)); // received
    CHECK(t.is_received(1));
    CHECK(t.refused() == 5);

    CHECK(t.acquire(3) == 3u);
    CHECK_FALSE(t.acquire(3)); // nothing pending, though pieces are still in flight
    CHECK_FALSE(t.all_received());
    CHECK(t.complete(0, 1) == C::completed);
    CHECK(t.complete(2, 1) == C::completed);
    CHECK(t.complete(3, 3) == C::completed);
    CHECK(t.all_received());
    CHECK(t.pending() == 0);
    CHECK(t.leased() == 0);
    CHECK(t.received() == 4);
    check_consistent(t);
}

TEST_CASE("release returns a failed peer's pieces, which are fetched first again") {
    lease_table t;
    REQUIRE(t.reset(5 * kib16)); // 5 pieces
    REQUIRE(t.acquire(0) == 0u);
    REQUIRE(t.acquire(1) == 1u);
    REQUIRE(t.acquire(0) == 2u);
    REQUIRE(t.acquire(1) == 3u);
    REQUIRE(t.complete(2, 0) == C::completed);
    // Owner 0 fails: piece 0 goes back, its received piece 2 stays received.
    CHECK(t.release(0) == 1);
    CHECK(t.released() == 1);
    CHECK_FALSE(t.holder(0));
    CHECK(t.is_received(2));
    // The late answer of the failed peer is refused.
    CHECK(t.complete(0, 0) == C::not_leased);
    CHECK(t.acquire(1) == 0u);
    CHECK(t.acquire(2) == 4u);
    CHECK(t.release(0) == 0);
    CHECK(t.release(1) == 3); // pieces 0, 1 and 3
    CHECK(t.acquire(2) == 0u);
    CHECK(t.acquire(2) == 1u);
    CHECK(t.acquire(2) == 3u);
    CHECK_FALSE(t.acquire(2));
    CHECK(t.release(lease_table::max_owner + 1) == 0);
    check_consistent(t);
}

TEST_CASE("reset_all sends every piece back to pending, received ones included") {
    lease_table t;
    REQUIRE(t.reset(2 * kib16));
    REQUIRE(t.acquire(0) == 0u);
    REQUIRE(t.acquire(1) == 1u);
    REQUIRE(t.complete(0, 0) == C::completed);
    REQUIRE(t.complete(1, 1) == C::completed);
    REQUIRE(t.all_received());
    t.reset_all(); // the assembled dict failed its hash
    CHECK(t.piece_count() == 2);
    CHECK(t.pending() == 2);
    CHECK(t.received() == 0);
    CHECK_FALSE(t.all_received());
    CHECK(t.complete(1, 1) == C::not_leased);
    CHECK(t.acquire(5) == 0u);
    CHECK(t.acquire(5) == 1u);
    check_consistent(t);
}

TEST_CASE("invalid owner ids are refused") {
    lease_table t;
    REQUIRE(t.reset(kib16));
    CHECK_FALSE(t.acquire(lease_table::max_owner + 1));
    CHECK_FALSE(t.acquire(0xffff));
    CHECK(t.refused() == 2);
    CHECK(t.pending() == 1);
    CHECK(t.acquire(lease_table::max_owner) == 0u);
    CHECK(t.complete(0, lease_table::max_owner) == C::completed);
}

TEST_CASE("random interleavings of three owners keep the lease invariants") {
    for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
        CAPTURE(seed);
        std::mt19937 rng(seed);
        lease_table t;
        const std::size_t size = 1 + rng() % (40 * kib16);
        REQUIRE(t.reset(size));
        const std::size_t n = t.piece_count();
        // The model: -1 pending, -2 received, else the owner.
        std::vector<int> model(n, -1);
        std::uint64_t refused = 0;
        int rounds = 0;
        for (int step = 0; step < 20'000; ++step) {
            CAPTURE(step);
            const auto owner = static_cast<lease_table::owner_id>(rng() % 3);
            const unsigned op = rng() % 100;
            if (op < 40) {
                std::optional<std::uint32_t> want;
                for (std::size_t i = 0; i < n; ++i)
                    if (model[i] == -1) {
                        want = static_cast<std::uint32_t>(i);
                        break;
                    }
                const auto got = t.acquire(owner);
                REQUIRE(got == want);
                if (got) model[*got] = owner;
            } else if (op < 85) {
                // Mostly the owner's own pieces, sometimes anyone's (a confused or late peer).
                std::vector<std::uint32_t> mine;
                for (std::size_t i = 0; i < n; ++i)
                    if (model[i] == owner) mine.push_back(static_cast<std::uint32_t>(i));
                const std::uint32_t piece = !mine.empty() && rng() % 4 != 0 ? mine[rng() % mine.size()]
                                                                              : static_cast<std::uint32_t>(rng() % (n + 1));
                const C got = t.complete(piece, owner);
                C want;
                if (piece >= n) want = C::out_of_range;
                else if (model[piece] == -2) want = C::already_received;
                else if (model[piece] == -1) want = C::not_leased;
                else if (model[piece] != owner) want = C::not_holder;
                else want = C::completed;
                REQUIRE(to_string(got) == to_string(want));
                if (want == C::completed) model[piece] = -2;
                else ++refused;
            } else if (op < 97) {
                std::size_t want = 0;
                for (auto& m : model)
                    if (m == owner) {
                        m = -1;
                        ++want;
                    }
                REQUIRE(t.release(owner) == want);
            } else if (op < 98 || t.all_received()) {
                t.reset_all();
                for (auto& m : model) m = -1;
                ++rounds;
            }
            // At most one holder per piece, as the model says; received never goes back.
            for (std::size_t i = 0; i < n; ++i) {
                const auto h = t.holder(static_cast<std::uint32_t>(i));
                if (model[i] >= 0) REQUIRE(h == std::optional<lease_table::owner_id>(model[i]));
                else REQUIRE_FALSE(h);
                REQUIRE(t.is_received(static_cast<std::uint32_t>(i)) == (model[i] == -2));
            }
            check_consistent(t);
            REQUIRE(t.refused() == refused);
        }
        CHECK(rounds > 0);
    }
}

TEST_CASE("result names") {
    for (C r : {C::completed, C::not_holder, C::not_leased, C::already_received, C::out_of_range})
        CHECK(to_string(r) != "unknown");
}

} // TEST_SUITE
