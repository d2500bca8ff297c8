// Peers that recently timed out or refused a connection. A hit means the metadata scheduler
// skips the peer without a network attempt (and without spending one of its three real
// attempts on it), so a hash announced by many dead peers does not eat the worker pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/slot_index.hpp"
#include "net/address.hpp"
#include "net/clock.hpp"
#include "util/siphash.hpp"

namespace dhtc::metadata {

struct peer_failure_cache_options {
    std::size_t capacity = 200'000; ///< metadata.peer_failure_cache_capacity; 0 disables; at most 2^24-2
    std::chrono::seconds ttl{60};   ///< metadata.peer_failure_ttl_secs; 0 disables; at most 24 h
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// A bounded set of endpoints (full IP + port) with a TTL.
///
/// Entries sit in a ring in insertion order beside a keyed hash index (endpoints are chosen
/// by whoever announces them). The caller inserts only timeouts and connect failures.
/// Inserting an endpoint already present (and unexpired) changes nothing: its TTL runs from
/// the first failure, which keeps the ring in time order without leaving holes. When full,
/// the oldest entry is evicted and counted; expired entries are purged from the old end a
/// few per insert, and contains() checks the age itself, so an expired entry not yet purged
/// is already absent. Endpoints are keyed on their canonical form (::ffff:a.b.c.d is a.b.c.d).
///
/// Memory: 24 bytes per slot (address, port, family, and a 32-bit millisecond offset from a
/// base that insert() moves forward about every 24 days) plus a 4-byte index bucket per
/// 0.8 slot: about 5.8 MB at the default capacity. Times have millisecond resolution.
///
/// Disabled (capacity 0 or ttl 0): contains() is always false, insert() does nothing, and
/// nothing is allocated.
///
/// Times must not go backwards; if they do, nothing breaks, but purging lags until time
/// catches up. Thread rules: single owner. No allocation after construction.
class peer_failure_cache {
public:
    explicit peer_failure_cache(peer_failure_cache_options options = {});

    bool enabled() const noexcept { return capacity_ != 0; }
    /// True when `ep` failed less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const;
    /// Records a failure of `ep` at `now`. True when it was not already present.
    bool insert(const endpoint& ep, time_point now);
    /// Purges up to `max` expired entries; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1));
    void clear() noexcept;

    /// Entries held, expired ones not yet purged included.
    std::size_t size() const noexcept { return live_; }
    /// 0 when disabled.
    std::size_t capacity() const noexcept { return capacity_; }
    std::chrono::seconds ttl() const noexcept { return ttl_; }
    /// Entries pushed out by a full cache before they expired.
    std::uint64_t evicted() const noexcept { return evicted_; }
    /// Entries dropped after they expired.
    std::uint64_t expired() const noexcept { return expired_; }
    std::size_t memory_bytes() const noexcept;

private:
    struct slot {
        std::uint8_t addr[16];  // ip_address::raw(): v4 in the first 4 bytes, zeros after
        std::uint32_t at;       // milliseconds since base_
        std::uint16_t port;
        std::uint8_t flags;     // flag_v6 | flag_live
    };
    static_assert(sizeof(slot) == 24);
    static constexpr std::uint8_t flag_v6 = 1, flag_live = 2;

    static slot make_slot(const endpoint& ep) noexcept; // canonical, live, at = 0
    std::uint64_t hash_of(const slot& s) const noexcept;
    std::uint32_t find(const slot& probe, std::uint64_t h) const;
    std::int64_t offset_ms(time_point now) const noexcept;
    bool expired_at(const slot& s, time_point now) const noexcept;
    void rebase(time_point now) noexcept;
    void drop_head() noexcept;

    std::chrono::seconds ttl_;
    std::int64_t ttl_ms_;
    std::size_t capacity_;
    siphash_key key_;
    std::unique_ptr<slot[]> slots_;
    detail::slot_index index_;
    time_point base_{};
    std::size_t head_ = 0;
    std::size_t count_ = 0; // ring slots in use, retired ones included
    std::size_t live_ = 0;
    std::uint64_t evicted_ = 0;
    std::uint64_t expired_ = 0;
};

} // namespace dhtc::metadata
