// Endpoints we sent a find_node to recently. The pool refuses duplicates only while a node
// waits in it; this set keeps the crawler from probing the same node again for `ttl` after
// it left the pool, which is what keeps the query budget on new nodes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "model/address.hpp"
#include "model/address_hash.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
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
class recent_probes : private expiring_set<endpoint, expiring_endpoint_hash> {
    using base = expiring_set<endpoint, expiring_endpoint_hash>;

public:
    explicit recent_probes(recent_probes_options options = {});

    /// True when `ep` (canonical form) was inserted less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const { return base::contains(canonical(ep), now); }
    /// Records a probe of `ep` at `now`. True when it was not present (or had expired).
    bool insert(const endpoint& ep, time_point now) {
        return base::insert(canonical(ep), now) == expiring_insert::added;
    }
    /// purge(now, max), clear(), size() (expired entries not yet purged included),
    /// capacity(), ttl(), evicted() (pushed out by a full set before they expired),
    /// expired() and memory_bytes(): as in expiring_set.
    using base::purge, base::clear, base::size, base::capacity, base::ttl, base::evicted, base::expired,
        base::memory_bytes;
};

} // namespace dhtc::crawl
