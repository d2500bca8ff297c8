// Torrents delivered recently. The metadata scheduler checks it before queueing or fetching a
// hash, so a popular torrent announced thousands of times a day is downloaded once per period.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/slot_index.hpp"
#include "net/clock.hpp"
#include "util/id20.hpp"
#include "util/siphash.hpp"

namespace dhtc::metadata {

struct delivered_filter_options {
    std::size_t capacity = 100'000;   ///< 0 disables; at most 2^24-2
    std::chrono::seconds period{86'400}; ///< how long a delivery suppresses refetching; 0 disables
    std::uint64_t hash_seed = 0;      ///< 0: random (tests pass a fixed one)
};

/// A bounded set of 20-byte keys with a TTL.
///
/// Keys are info hashes: the caller inserts both keys of a hybrid torrent (the v1 hash and
/// the v2 hash truncated to 20 bytes), so an announce under either one is recognised.
/// Entries sit in a ring in insertion order beside a keyed hash index (info hashes are
/// chosen by announcers). Re-inserting a present key changes nothing: the period runs from
/// the first delivery, which keeps the ring in time order. When full, the oldest entry is
/// evicted and counted; expired entries are purged from the old end a few per insert, and
/// contains() checks the age itself. Disabled (capacity 0 or period 0): contains() is
/// always false and insert() does nothing.
///
/// Times must not go backwards; if they do, nothing breaks, but purging lags until time
/// catches up. Thread rules: single owner. No allocation after construction.
class delivered_filter {
public:
    explicit delivered_filter(delivered_filter_options options = {});

    bool enabled() const noexcept { return capacity_ != 0; }
    /// True when `key` was inserted less than a period before `now`.
    bool contains(const id20& key, time_point now) const;
    /// Records a delivery under `key` at `now`. True when it was not already present.
    bool insert(const id20& key, time_point now);
    /// Forgets `key` (a delivery that did not stick). True when it was present.
    bool erase(const id20& key);
    /// Purges up to `max` expired entries; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1));
    void clear() noexcept;

    /// Entries held, expired ones not yet purged included.
    std::size_t size() const noexcept { return live_; }
    /// 0 when disabled.
    std::size_t capacity() const noexcept { return capacity_; }
    std::chrono::seconds period() const noexcept { return period_; }
    /// Entries pushed out by a full filter before their period ended.
    std::uint64_t evicted() const noexcept { return evicted_; }
    /// Entries dropped after their period ended.
    std::uint64_t expired() const noexcept { return expired_; }
    std::size_t memory_bytes() const noexcept;

private:
    struct slot {
        id20 key;
        bool live = false; // false: retired (re-inserted after expiry) or dropped
        time_point at{};
    };

    std::uint64_t hash_of(const id20& key) const noexcept { return siphash24(key_, key.view()); }
    std::uint32_t find(const id20& key, std::uint64_t h) const;
    bool expired_at(const slot& s, time_point now) const noexcept { return now - s.at >= period_; }
    void drop_head() noexcept;

    std::chrono::seconds period_;
    std::size_t capacity_;
    siphash_key key_;
    std::unique_ptr<slot[]> slots_;
    detail::slot_index index_;
    std::size_t head_ = 0;
    std::size_t count_ = 0; // ring slots in use, retired ones included
    std::size_t live_ = 0;
    std::uint64_t evicted_ = 0;
    std::uint64_t expired_ = 0;
};

} // namespace dhtc::metadata
