// Endpoints we sent a find_node to recently. The pool refuses duplicates only while a node
// waits in it; this set keeps the crawler from probing the same node again for `ttl` after
// it left the pool, which is what keeps the query budget on new nodes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "net/address.hpp"
#include "net/address_policy.hpp"
#include "net/clock.hpp"
#include "util/expiring_set.hpp"

namespace dhtc::crawl {

struct recent_probes_options {
    std::chrono::seconds ttl{600};  ///< crawl.pool.recent_probe_ttl_secs
    std::size_t capacity = 131'072; ///< above QPS x TTL (200/s x 600 s) with the defaults; 1..2^24-1
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// A bounded set of endpoints with a TTL.
///
/// An expiring_set (util/expiring_set.hpp) of canonical endpoints: oldest evicted first,
/// expired entries purged a few per insert. Re-inserting a present endpoint refreshes it:
/// it moves to the young end.
///
/// Times passed in must not go backwards (a monotonic clock); if they do, nothing breaks,
/// but purging may lag until time catches up.
///
/// Thread rules: single owner. No allocation after construction.
class recent_probes {
public:
    explicit recent_probes(recent_probes_options options = {});

    /// True when `ep` (canonical form) was inserted less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const { return set_.contains(canonical(ep), now); }
    /// Records a probe of `ep` at `now`. True when it was not present (or had expired).
    bool insert(const endpoint& ep, time_point now) {
        return set_.insert(canonical(ep), now) == expiring_insert::added;
    }
    /// Purges up to `max` expired entries; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1)) { return set_.purge(now, max); }
    void clear() noexcept { set_.clear(); }

    /// Entries held (including expired ones not purged yet).
    std::size_t size() const noexcept { return set_.size(); }
    std::size_t capacity() const noexcept { return set_.capacity(); }
    std::chrono::seconds ttl() const noexcept { return set_.ttl(); }
    /// Entries pushed out by a full set before they expired.
    std::uint64_t evicted() const noexcept { return set_.evicted(); }
    /// Entries dropped after expiry.
    std::uint64_t expired() const noexcept { return set_.expired(); }
    std::size_t memory_bytes() const noexcept { return set_.memory_bytes(); }

private:
    expiring_set<endpoint, expiring_endpoint_hash> set_;
};

} // namespace dhtc::crawl
