// The retry policy on a manual clock: the ladder, jitter bounds, per-class shapes,
// reactivation and the retry budget. Pure functions: `now` and the random draw are inputs.
#include <doctest/doctest.h>

#include <random>

#include "retry/policy.hpp"

using namespace dhtc::retry;
using fc = dhtc::api::failure_class;

TEST_SUITE("retry_policy") {

TEST_CASE("the seed's ladder without jitter: +30 min, +2 h, +8 h, +1 day, +7 days, then +30 days") {
    policy_options p;
    p.jitter_percent = 0;
    const std::int64_t expected[] = {1800, 7200, 28800, 86400, 604800, 2592000, 2592000, 2592000};
    for (std::uint32_t attempt = 1; attempt <= 8; ++attempt) {
        CAPTURE(attempt);
        // A class at 100%: the ladder as it is; the draw does not matter without jitter.
        CHECK(next_delay_secs(p, attempt, fc::rejected, 0, 0.0) == expected[attempt - 1]);
        CHECK(next_delay_secs(p, attempt, fc::rejected, 0, 0.999) == expected[attempt - 1]);
    }
    CHECK(next_delay_secs(p, 0, fc::rejected, 0, 0.5) == 1800); // attempt 0 reads as the first
    CHECK(next_delay_secs(p, 1000000, fc::rejected, 0, 0.5) == 2592000);
}

TEST_CASE("timeouts alone: tried again after 2 and 8 minutes, then the ladder from its first step (issue 32)") {
    policy_options p;
    p.jitter_percent = 0;
    // Every round so far timed out (timeout_rounds == attempt).
    CHECK(next_delay_secs(p, 1, fc::timeout, 0, 0.5, 1) == 120);
    CHECK(next_delay_secs(p, 2, fc::connect_timeout, 0, 0.5, 2) == 480);
    CHECK(next_delay_secs(p, 3, fc::utp_timeout, 0, 0.5, 3) == 900);  // 1800 x 50%: the first rung
    CHECK(next_delay_secs(p, 4, fc::timeout, 0, 0.5, 4) == 3600);     // 7200 x 50%
    // A round that failed otherwise ends the quick retries; the rungs spent on them do not count.
    CHECK(next_delay_secs(p, 2, fc::connect_refused, 0, 0.5, 1) == 900);
    CHECK(next_delay_secs(p, 2, fc::timeout, 0, 0.5, 1) == 900); // a refusal came first
    CHECK(next_delay_secs(p, 1, fc::no_peers, 0, 0.5, 0) == 900);    // no_peers is not a timeout
    CHECK(next_delay_secs(p, 1, fc::rejected, 0, 0.5, 0) == 1800);
    // Without the timeout count (the old callers) or with the quick retries off: the ladder.
    CHECK(next_delay_secs(p, 1, fc::timeout, 0, 0.5) == 900);
    p.timeout_retries = 0;
    CHECK(next_delay_secs(p, 1, fc::timeout, 0, 0.5, 1) == 900);
    CHECK(next_delay_secs(p, 3, fc::timeout, 0, 0.5, 3) == 14400);
    // Jittered like the ladder.
    p.timeout_retries = 2;
    p.jitter_percent = 20;
    CHECK(next_delay_secs(p, 1, fc::timeout, 0, 0.0, 1) == 96);
    CHECK(next_delay_secs(p, 1, fc::timeout, 0, 0.999, 1) == 144);
}

TEST_CASE("jitter stays within its bounds and spreads the delays") {
    policy_options p;
    p.jitter_percent = 20;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 10000; ++i) {
        const auto d = next_delay_secs(p, 2, fc::rejected, 0, u(rng));
        CHECK(d >= 5760);  // 7200 * 0.8
        CHECK(d <= 8640);  // 7200 * 1.2
        lo = std::min(lo, d);
        hi = std::max(hi, d);
    }
    // Spread over most of the window: a million hashes do not wake together.
    CHECK(lo < 5900);
    CHECK(hi > 8500);
    CHECK(next_delay_secs(p, 2, fc::rejected, 0, 0.0) == 5760);
    CHECK(next_delay_secs(p, 2, fc::rejected, 0, 0.5) == 7200);
}

TEST_CASE("per-class shapes: transient failures sooner, repeated mismatches later") {
    policy_options p;
    p.jitter_percent = 0;
    const auto d = [&](fc c, std::uint32_t mismatches = 0) { return next_delay_secs(p, 3, c, mismatches, 0.5); };
    CHECK(d(fc::no_peers) == 14400);
    CHECK(d(fc::timeout) == 14400);
    CHECK(d(fc::connect_timeout) == 14400);
    CHECK(d(fc::connect_refused) == 14400);
    CHECK(d(fc::disconnected) == 14400);
    CHECK(d(fc::utp_timeout) == 14400);       // connect_timeout over uTP
    CHECK(d(fc::encryption_failed) == 28800); // like handshake_failed: configurations do not heal
    CHECK(d(fc::handshake_failed) == 28800);
    CHECK(d(fc::no_metadata_support) == 28800);
    CHECK(d(fc::hash_mismatch, 1) == 28800);  // one source lied once: the ladder
    CHECK(d(fc::hash_mismatch, 2) == 115200); // repeated: 4x
    CHECK(d(fc::no_peers) < d(fc::hash_mismatch, 3));
    // The table is an option.
    p.class_percent[static_cast<std::size_t>(fc::no_peers)] = 10;
    p.repeated_mismatch_percent = 1000;
    CHECK(d(fc::no_peers) == 2880);
    CHECK(d(fc::hash_mismatch, 5) == 288000);
    p.ladder_secs = {10, 20};
    CHECK(next_delay_secs(p, 1, fc::rejected, 0, 0.5) == 10);
    CHECK(next_delay_secs(p, 9, fc::rejected, 0, 0.5) == 20);
    p.ladder_secs = {1};
    p.class_percent[static_cast<std::size_t>(fc::no_peers)] = 1;
    CHECK(next_delay_secs(p, 1, fc::no_peers, 0, 0.0) == 1); // never below one second
}

TEST_CASE("reactivation pulls next_retry_at closer, never later, never below the floor") {
    policy_options p; // 10%, at least 60 s
    const unix_seconds now = 1'700'000'000;
    CHECK(reactivated_at(p, now + 100'000, now) == now + 10'000);
    CHECK(reactivated_at(p, now + 300, now) == now + 60);   // floor
    CHECK(reactivated_at(p, now + 30, now) == now + 30);    // already closer than the floor
    CHECK(reactivated_at(p, now - 5, now) == now - 5);      // already due
    // Repeated sightings keep pulling it in, down to the floor.
    unix_seconds next = now + 2'592'000;
    for (int i = 0; i < 10; ++i) next = reactivated_at(p, next, now);
    CHECK(next == now + 60);
    p.reactivation_percent = 100;
    p.reactivation_min_secs = 0;
    CHECK(reactivated_at(p, now + 500, now) == now + 500);
}

TEST_CASE("the retry budget leaves new hashes room") {
    CHECK(retry_slots(256, 0.25) == 64);
    CHECK(retry_slots(10, 0.25) == 2);
    CHECK(retry_slots(3, 0.1) == 1);     // at least one when retries are on
    CHECK(retry_slots(4, 1.0) == 3);     // never every worker
    CHECK(retry_slots(1, 0.5) == 0);     // one worker: it is for new hashes
    CHECK(retry_slots(100, 0.0) == 0);   // off
    for (std::size_t w = 2; w < 300; ++w)
        for (const double s : {0.01, 0.25, 0.5, 0.99, 1.0}) {
            const auto n = retry_slots(w, s);
            CHECK(n >= 1);
            CHECK(n < w);
        }
}

}
