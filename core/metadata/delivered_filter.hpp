// Torrents delivered recently. The metadata scheduler checks it before queueing or fetching a
// hash, so a popular torrent announced thousands of times a day is downloaded once per period.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "util/clock.hpp"
#include "util/expiring_set.hpp"
#include "util/id20.hpp"
#include "util/siphash.hpp"

namespace dhtc::metadata {

struct delivered_filter_options {
    std::size_t capacity = 100'000;   ///< 0 disables; at most 2^24-2
    std::chrono::seconds period{86'400}; ///< how long a delivery suppresses refetching; 0 disables
    std::uint64_t hash_seed = 0;      ///< 0: random (tests pass a fixed one)
};

// The key types of the expiring set below (a namespace of their own: a nested type cannot
// name the base class it is the key of).
namespace ring_keys {
struct info_hash_key_hash {
    std::uint64_t operator()(const siphash_key& k, const id20& key) const noexcept { return siphash24(k, key.view()); }
};
} // namespace ring_keys

/// A bounded set of 20-byte keys with a TTL.
///
/// Keys are info hashes: the caller inserts both keys of a hybrid torrent (the v1 hash and
/// the v2 hash truncated to 20 bytes), so an announce under either one is recognised.
/// An expiring_set (util/expiring_set.hpp) with a keyed hash (info hashes are chosen by
/// announcers). Re-inserting a present key changes nothing: the period runs from the first
/// delivery, which keeps the ring in time order. When full, the oldest entry is evicted and
/// counted. Disabled (capacity 0 or period 0): contains() is always false and insert()
/// does nothing.
///
/// Times must not go backwards; if they do, nothing breaks, but purging lags until time
/// catches up. Thread rules: single owner. No allocation after construction.
class delivered_filter : private expiring_set<id20, ring_keys::info_hash_key_hash> {
    using base = expiring_set<id20, ring_keys::info_hash_key_hash>;

public:
    explicit delivered_filter(delivered_filter_options options = {});

    /// True when `key` was inserted less than a period before `now`.
    using base::contains;
    /// Records a delivery under `key` at `now`. True when it was not already present.
    bool insert(const id20& key, time_point now) { return base::insert(key, now) == expiring_insert::added; }
    /// Takes `key` back out (say, the application could not store the torrent, so the next
    /// announce should fetch it again). True when it was held, expired or not.
    using base::erase;
    std::chrono::seconds period() const noexcept { return base::ttl(); }
    /// enabled(), purge(now, max), clear(), size() (expired entries not yet purged
    /// included), capacity() (0 when disabled), evicted() (pushed out by a full filter
    /// before their period ended), expired() and memory_bytes(): as in expiring_set.
    using base::enabled, base::purge, base::clear, base::size, base::capacity, base::evicted, base::expired,
        base::memory_bytes;
};

} // namespace dhtc::metadata
