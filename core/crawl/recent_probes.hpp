// Endpoints we sent a find_node to recently. The pool refuses duplicates only while a node
// waits in it; this set keeps the crawler from probing the same node again for `ttl` after
// it left the pool, which is what keeps the query budget on new nodes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/slot_index.hpp"
#include "net/address.hpp"
#include "net/clock.hpp"

namespace dhtc::crawl {

struct recent_probes_options {
    std::chrono::seconds ttl{600};  ///< crawl.pool.recent_probe_ttl_secs
    std::size_t capacity = 131'072; ///< above QPS x TTL (200/s x 600 s) with the defaults; 1..2^24-1
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// A bounded set of endpoints with a TTL.
///
/// Entries sit in a ring in insertion-time order, with a hash index beside it. Expired
/// entries are purged from the old end a few at a time by insert() (and by purge()), so no
/// call ever walks the whole set; contains() checks the age itself, so an expired entry not
/// yet purged is already absent. When full, the oldest entry is evicted and counted.
/// Re-inserting a present endpoint refreshes it: it moves to the young end.
///
/// Times passed in must not go backwards (a monotonic clock); if they do, nothing breaks,
/// but purging may lag until time catches up.
///
/// Thread rules: single owner. No allocation after construction.
class recent_probes {
public:
    explicit recent_probes(recent_probes_options options = {});

    /// True when `ep` (canonical form) was inserted less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const;
    /// Records a probe of `ep` at `now`. True when it was not present (or had expired).
    bool insert(const endpoint& ep, time_point now);
    /// Purges up to `max` expired entries; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1));
    void clear() noexcept;

    /// Entries held (including expired ones not purged yet).
    std::size_t size() const noexcept { return live_; }
    std::size_t capacity() const noexcept { return capacity_; }
    std::chrono::seconds ttl() const noexcept { return ttl_; }
    /// Entries pushed out by a full set before they expired.
    std::uint64_t evicted() const noexcept { return evicted_; }
    /// Entries purged after expiry.
    std::uint64_t expired() const noexcept { return expired_; }
    std::size_t memory_bytes() const noexcept;

private:
    struct slot {
        endpoint ep;
        bool live = false; // false: superseded by a refresh, or removed
        time_point at{};
    };

    std::uint64_t hash_of_slot(std::uint32_t i) const noexcept;
    std::uint32_t find(const endpoint& ep, std::uint64_t h) const;
    void drop_head() noexcept;
    bool expired_at(const slot& s, time_point now) const noexcept { return now - s.at >= ttl_; }

    std::chrono::seconds ttl_;
    std::size_t capacity_;
    siphash_key key_;
    std::unique_ptr<slot[]> slots_;
    detail::slot_index index_;
    std::size_t head_ = 0;
    std::size_t count_ = 0; // slots in use, dead ones included
    std::size_t live_ = 0;
    std::uint64_t evicted_ = 0;
    std::uint64_t expired_ = 0;
};

} // namespace dhtc::crawl
