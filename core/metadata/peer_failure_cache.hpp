// Peers that recently timed out, refused a connection, or refused us. A hit means the metadata
// scheduler skips the peer without a network attempt (and without spending one of its three
// real attempts on it), so a hash announced by many dead peers does not eat the worker pool,
// and a peer that closes our handshake is not asked again at every re-announce.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "model/failure.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/expiring_set.hpp"
#include "util/siphash.hpp"

namespace dhtc::metadata {

struct peer_failure_cache_options {
    std::size_t capacity = 200'000; ///< metadata.peer_failure_cache_capacity; 0 disables; at most 2^24-2
    std::chrono::seconds ttl{60};   ///< metadata.peer_failure_ttl_secs; 0 disables; at most 24 h
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

// The key types of the expiring set below (a namespace of their own: a nested type cannot
// name the base class it is the key of).
namespace ring_keys {
/// A canonical endpoint in 19 bytes: ip_address::raw() (v4 in the first 4 bytes, zeros
/// after), the port big-endian, and the family (which keeps 1.2.3.4 apart from the v6
/// address 0102:0304::, both with the same 16 raw bytes).
struct peer_key {
    std::uint8_t b[19];
    bool operator==(const peer_key&) const = default;
};
struct peer_key_hash {
    std::uint64_t operator()(const siphash_key& k, const peer_key& p) const noexcept;
};
using peer_failure_set = expiring_set<peer_key, peer_key_hash, expiring_no_value, narrow_stamps>;
static_assert(sizeof(peer_failure_set::slot) == 24);
} // namespace ring_keys

/// A bounded set of endpoints (full IP + port) with a TTL.
///
/// An expiring_set (util/expiring_set.hpp) with a keyed hash (endpoints are chosen by
/// whoever announces them) and 32-bit millisecond stamps (narrow_stamps). The caller
/// inserts only timeouts and connect failures. Inserting an endpoint already present (and
/// unexpired) changes nothing: its TTL runs from the first failure, which keeps the ring in
/// time order without leaving holes. When full, the oldest entry is evicted and counted;
/// expired entries are purged from the old end a few per insert, and contains() checks the
/// age itself, so an expired entry not yet purged is already absent. Endpoints are keyed on
/// their canonical form (::ffff:a.b.c.d is a.b.c.d).
///
/// Memory: 24 bytes per slot (address, port, family, live flag, and a 32-bit millisecond
/// offset from a base that insert() moves forward about every 24 days) plus a 4-byte index
/// bucket per 0.8 slot: about 5.8 MB at the default capacity. Times have millisecond resolution.
///
/// Disabled (capacity 0 or ttl 0): contains() is always false, insert() does nothing, and
/// nothing is allocated.
///
/// Times must not go backwards; if they do, nothing breaks, but purging lags until time
/// catches up. Thread rules: single owner. No allocation after construction.
class peer_failure_cache : private ring_keys::peer_failure_set {
    using base = ring_keys::peer_failure_set;

public:
    explicit peer_failure_cache(peer_failure_cache_options options = {});

    /// True when `ep` failed less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const { return base::contains(key_of(ep), now); }
    /// Records a failure of `ep` at `now`. True when it was not already present.
    bool insert(const endpoint& ep, time_point now) { return base::insert(key_of(ep), now) == expiring_insert::added; }
    /// enabled(), purge(now, max), clear(), size() (expired entries not yet purged
    /// included), capacity() (0 when disabled), ttl(), evicted() (pushed out by a full
    /// cache before they expired), expired() and memory_bytes(): as in expiring_set.
    using base::enabled, base::purge, base::clear, base::size, base::capacity, base::ttl, base::evicted,
        base::expired, base::memory_bytes;

private:
    static ring_keys::peer_key key_of(const endpoint& ep) noexcept;
};

struct peer_failures_options {
    std::size_t capacity = 200'000;       ///< metadata.peer_failure_cache_capacity, for each of the two
    std::chrono::seconds ttl{60};         ///< metadata.peer_failure_ttl_secs: unreachable peers
    std::chrono::seconds refusal_ttl{600}; ///< metadata.refusal_ttl_secs: peers that refused us
    std::uint64_t hash_seed = 0;
    /// metadata.first_timeout_ttl_secs: a peer's first timeout within `ttl` skips it this long
    /// only; 0 (or `ttl` or more): as long as any unreachable peer.
    std::chrono::seconds first_timeout_ttl{10};
};

/// The peer failure cache as the pipeline uses it: which failure classes it holds, each for
/// its own time (docs/options.md, "The peer failure cache").
///  - unreachable (connect_refused, connect_timeout, utp_timeout, timeout) for `ttl`: the
///    address is dead or silent now, and a dead peer's announces linger in the DHT;
///  - refused (handshake_failed) for `refusal_ttl`: the peer answered and closed our handshake
///    (it forces an encryption or a transport we did not offer, or does not serve the
///    torrent), a policy that does not change from one re-announce to the next.
///  - a first timeout (connect_timeout, utp_timeout, timeout) for `first_timeout_ttl` only:
///    one lost datagram at a few hundred milliseconds of round trip costs a whole attempt,
///    so the peer gets a second chance soon (issue 32); a second timeout within `ttl` of the
///    first is held for `ttl` like any unreachable peer.
///  - a first refusal for `first_timeout_ttl` only, likewise: over a lossy path, or racing a
///    connection of ours the peer has not seen closed yet, one closed handshake is weak
///    evidence of a policy (issue 32); a second refusal within `refusal_ttl` of the first is
///    held for `refusal_ttl`.
/// Other classes are not held: they concern one torrent or one exchange, or our own side.
/// One peer_failure_cache per lifetime, so each ring stays in time order; each costs what it holds.
class peer_failures {
public:
    enum class kind : std::uint8_t { none, unreachable, refused };
    /// Where a failure of class `c` is remembered (none: not at all).
    static kind remembered_as(api::failure_class c) noexcept;

    explicit peer_failures(peer_failures_options o = {});
    /// True when `ep` failed in a remembered way recently enough at `now`.
    bool contains(const endpoint& ep, time_point now) const {
        return unreachable_.contains(ep, now) || refused_.contains(ep, now) || first_timeouts_.contains(ep, now) ||
               first_refusals_.contains(ep, now);
    }
    /// Records a failure of class `c` of `ep` at `now` (nothing for a class not held).
    void record(const endpoint& ep, api::failure_class c, time_point now);
    /// True when `ep` timed out once within `ttl` before `now` (it is on its second chance).
    bool timed_out_once(const endpoint& ep, time_point now) const { return timeouts_seen_.contains(ep, now); }

    const peer_failure_cache& unreachable() const noexcept { return unreachable_; }
    const peer_failure_cache& refused() const noexcept { return refused_; }

private:
    peer_failure_cache unreachable_;
    peer_failure_cache refused_;
    peer_failure_cache first_timeouts_; ///< skipped for first_timeout_ttl
    peer_failure_cache timeouts_seen_;  ///< not skipped: remembers first timeouts for `ttl`
    peer_failure_cache first_refusals_; ///< skipped for first_timeout_ttl
    peer_failure_cache refusals_seen_;  ///< not skipped: remembers first refusals for `refusal_ttl`
};

} // namespace dhtc::metadata
