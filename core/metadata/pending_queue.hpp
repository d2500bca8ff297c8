// The deduplicating queue between hash ingress and the metadata fetch workers. One entry per
// info hash with up to three fresh peers; workers take the newest entry first, because the
// fresher a peer sighting, the likelier the peer is still online.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "model/events.hpp"
#include "util/slab_array.hpp"
#include "util/slot_index.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"
#include "util/siphash.hpp"

namespace dhtc::metadata {

struct pending_queue_options {
    std::size_t capacity = 10'000;   ///< metadata.max_queue_size; clamped to 1..2^24-2
    std::chrono::seconds ttl{60};    ///< fixed by the spec; configurable for tests only
    std::uint64_t hash_seed = 0;     ///< 0: random (tests pass a fixed one)
};

/// What offer() did. added, merged, duplicate_peer, peer_replaced and evicted_oldest keep
/// the sighting; peers_full, stale and expired_event refuse it.
enum class offer_result : std::uint8_t {
    added,          ///< a new entry
    merged,         ///< a new distinct peer joined an existing entry; the entry became the newest
    duplicate_peer, ///< the peer was already listed: its sighting time and source were refreshed
    peer_replaced,  ///< the entry held 3 peers: the stalest was replaced; the entry became the newest
    evicted_oldest, ///< queue full: the entry that arrived first was evicted, then this one added
    peers_full,     ///< the entry held 3 peers, all fresher than this event: refused
    stale,          ///< queue full and the event is older than the oldest entry's arrival: refused
    expired_event,  ///< the event is already ttl old: refused
};
inline constexpr std::size_t offer_result_count = 8;

/// One peer of an entry.
struct pending_peer {
    endpoint peer;
    api::hash_source source = api::hash_source::announce;
    time_point seen_at{}; ///< the event time of its latest sighting
    api::peer_rtt rtt{};  ///< the DHT's round trip to its IP (the latest sighting that had one)
};

/// What take() hands to a worker.
struct pending_entry {
    static constexpr std::size_t max_peers = 3;
    id20 info_hash;
    std::array<pending_peer, max_peers> peers{}; ///< freshest first (from take())
    std::uint8_t peer_count = 0;
    time_point first_seen{}; ///< arrival: `now` of the first offer; the entry expires ttl after it
    time_point last_seen{};  ///< `now` of the latest offer that added a peer (its recency)
};

/// A bounded queue of info hashes, deduplicated, newest first.
///
/// Every entry sits in two intrusive lists over one preallocated node pool: the recency list
/// (take() pops its newest end; added, merged and peer_replaced move an entry there) and the
/// arrival list (never reordered, so its head is always the entry that expires first and the
/// one a full queue evicts). A keyed hash index maps info hashes to nodes: info hashes are
/// chosen by whoever announces them, so an unkeyed hash would let them be made to collide.
///
/// Time rules: an entry expires when `now - first_seen >= ttl`, whatever merges came later;
/// an event is refused as expired when `now - event_time >= ttl` (the same boundary). An event
/// time later than `now` is taken as `now`. Expired entries are purged from the arrival head
/// by offer(), take() and purge(); each entry is purged once, so the cost is amortised O(1).
/// `now` must not go backwards; if it does, arrival times are clamped so the arrival list
/// stays ordered, and nothing breaks.
///
/// Thread rules: single owner (the metadata scheduler). No allocation after construction.
class pending_queue {
public:
    explicit pending_queue(pending_queue_options options = {});

    /// Offers a sighting of `peer` holding `info_hash`, seen at `event_time`.
    /// `rtt`: the DHT's round trip to the peer's IP, when known.
    offer_result offer(const id20& info_hash, const endpoint& peer, api::hash_source src, time_point event_time,
                       time_point now, api::peer_rtt rtt = {});
    /// Removes and returns the newest unexpired entry (peers freshest first), or nothing.
    std::optional<pending_entry> take(time_point now);
    /// Removes `info_hash` (e.g. already delivered). False when absent.
    bool remove(const id20& info_hash);
    /// True when `info_hash` is queued and not expired at `now`.
    bool contains(const id20& info_hash, time_point now) const;
    /// Drops every entry expired at `now`; returns how many.
    std::size_t purge(time_point now);
    void clear() noexcept;

    /// Entries held, expired ones not yet purged included.
    std::size_t size() const noexcept { return size_; }
    std::size_t capacity() const noexcept { return capacity_; }
    std::chrono::seconds ttl() const noexcept { return ttl_; }
    /// size() / capacity(): the pressure fed back to the crawl rate.
    double fill_ratio() const noexcept { return static_cast<double>(size_) / static_cast<double>(capacity_); }

    /// How many offers ended with `r`.
    std::uint64_t count(offer_result r) const noexcept { return counts_[static_cast<std::size_t>(r)]; }
    /// Entries dropped unfetched because they expired (purged or skipped by take()).
    std::uint64_t expired() const noexcept { return expired_; }
    /// Entries handed out by take().
    std::uint64_t taken() const noexcept { return taken_; }
    /// Entries removed by remove().
    std::uint64_t removed() const noexcept { return removed_; }
    std::size_t memory_bytes() const noexcept;

private:
    static constexpr std::uint32_t nil = 0xffffffffu;

    struct node {
        pending_entry e;
        std::uint32_t newer = nil, older = nil;     // recency list
        std::uint32_t next_arr = nil, prev_arr = nil; // arrival list (next = arrived later)
    };

    std::uint64_t hash_of(const id20& h) const noexcept;
    std::uint32_t find(const id20& h, std::uint64_t hv) const;
    bool expired_at(const node& n, time_point now) const noexcept { return now - n.e.first_seen >= ttl_; }
    void unlink_recency(std::uint32_t i) noexcept;
    void push_newest(std::uint32_t i) noexcept;
    void erase_node(std::uint32_t i) noexcept;

    std::chrono::seconds ttl_;
    std::size_t capacity_;
    siphash_key key_;
    static constexpr std::size_t initial_index_entries = 1024; // the index doubles from here
    detail::slab_array<node, 10> nodes_; // slabs of 1024 nodes, allocated as the queue first fills
    std::uint32_t fresh_ = 0;            // nodes at or above this were never used
    detail::slot_index index_;
    std::uint32_t free_ = nil;                   // free list, chained through `older`
    std::uint32_t newest_ = nil, oldest_ = nil;  // recency ends
    std::uint32_t arr_head_ = nil, arr_tail_ = nil;
    std::size_t size_ = 0;
    std::array<std::uint64_t, offer_result_count> counts_{};
    std::uint64_t expired_ = 0;
    std::uint64_t taken_ = 0;
    std::uint64_t removed_ = 0;
};

std::string_view to_string(offer_result r) noexcept;

} // namespace dhtc::metadata
