// When a failed info hash is tried again. A failure is not a verdict (peers come back, swarms
// revive), so every failed hash is kept and retried on a ladder of growing delays, shaped by
// why it failed, spread by jitter so a million hashes never wake together, and pulled closer
// when the network shows fresh interest. Pure functions: no clock, no randomness of their
// own (the caller passes `now` and a uniform draw), so tests run on a manual clock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/failure.hpp"

namespace dhtc::retry {

using api::failure_class;

/// Seconds since the Unix epoch: retry times outlive the process, so they are wall-clock.
using unix_seconds = std::int64_t;

/// The seed's ladder: +30 min, +2 h, +8 h, +1 day, +7 days, then +30 days for every later attempt.
std::vector<std::uint32_t> default_ladder_secs();

/// Per-class percentages of the ladder delay (100: the ladder as is). Defaults: the transient
/// classes (no_peers, every timeout including utp_timeout, refused connections, disconnects)
/// 50%; encryption_failed 100% like handshake_failed; hash_mismatch
/// 100% the first time and `repeated_mismatch_percent` once mismatches came from two or more
/// rounds (each round's mismatch names one source, so that is "several sources").
std::array<std::uint32_t, api::failure_class_count> default_class_percent();

struct policy_options {
    std::vector<std::uint32_t> ladder_secs = default_ladder_secs(); ///< attempt n uses entry min(n, size) - 1
    std::uint32_t jitter_percent = 20;  ///< each delay is scaled by a uniform factor in [1 - j, 1 + j]
    std::array<std::uint32_t, api::failure_class_count> class_percent = default_class_percent();
    std::uint32_t repeated_mismatch_percent = 400;
    /// Reactivation: the wait left is cut to this percentage ...
    std::uint32_t reactivation_percent = 10;
    /// ... but never below this many seconds (the fresh peers get a moment to settle).
    std::uint32_t reactivation_min_secs = 60;
    std::uint32_t max_priority = 1000; ///< priority saturates here
    /// A leased round may wait this long for get_peers to find peers before it fails no_peers.
    std::uint32_t lookup_wait_secs = 10;
    /// A hash whose every failed round failed through timeouts alone (timeout, connect_timeout,
    /// utp_timeout: a lost datagram, a slow path) is tried again soon before the ladder takes
    /// over: its first timeout_retries failures wait timeout_retry_secs, then 4 times as long
    /// each (2 and 8 minutes by default), and the ladder then starts from its first step.
    /// 0 retries: the ladder alone.
    std::uint32_t timeout_retries = 2;
    std::uint32_t timeout_retry_secs = 120;
};

/// The delay before the next round, after `attempt` failed rounds (1 = the first failure).
/// `mismatch_rounds` counts rounds that ended hash_mismatch, this one included; `u01` is a
/// uniform draw in [0, 1) for the jitter; `timeout_rounds` counts rounds that failed through
/// timeouts alone (is_timeout), this one included. Always at least 1 second.
std::int64_t next_delay_secs(const policy_options& p, std::uint32_t attempt, api::failure_class cls,
                             std::uint32_t mismatch_rounds, double u01, std::uint32_t timeout_rounds = 0) noexcept;

/// The new next_retry_at of a dormant hash observed afresh at `now`: the wait left shrinks to
/// reactivation_percent, at least reactivation_min_secs; never later than `next_retry_at`.
unix_seconds reactivated_at(const policy_options& p, unix_seconds next_retry_at, unix_seconds now) noexcept;

/// The retry budget: how many retry rounds may run at once with `workers` fetch slots, so
/// new hashes always keep at least (1 - share) of the capacity. At least 1 when share > 0
/// and workers > 1; never more than workers - 1 (one slot always stays for new hashes).
std::size_t retry_slots(std::size_t workers, double share) noexcept;

} // namespace dhtc::retry
