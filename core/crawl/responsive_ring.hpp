// Nodes that answered us recently: the crawler's stand-in for a routing table. Its
// snapshot answers other nodes' find_node/get_peers (the closest ids we know) and feeds
// revisits. It is not a second crawl pool: nothing here is queued for probing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "krpc/compact.hpp"
#include "model/address.hpp"
#include "model/address_hash.hpp"
#include "util/clock.hpp"
#include "util/expiring_set.hpp"
#include "util/id20.hpp"

// ThreadSanitizer does not model the fence publish() uses to recycle snapshots; under it,
// every publish allocates a fresh snapshot instead (correct, just not allocation-free).
#if defined(__SANITIZE_THREAD__)
#define DHTC_CRAWL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DHTC_CRAWL_TSAN 1
#endif
#endif
#ifndef DHTC_CRAWL_TSAN
#define DHTC_CRAWL_TSAN 0
#endif

namespace dhtc::crawl {

using krpc::ip_family;
using krpc::node_entry;

/// An immutable, id-sorted view of the responsive nodes, one array per family. Shared by
/// any number of reader threads through std::shared_ptr<const routing_snapshot>.
class routing_snapshot {
public:
    /// The entries of family `f`, sorted by id (ascending, big-endian).
    std::span<const node_entry> entries(ip_family f) const noexcept { return f == ip_family::v4 ? v4_ : v6_; }
    std::size_t size() const noexcept { return v4_.size() + v6_.size(); }
    /// When the owner built it.
    time_point published_at() const noexcept { return published_at_; }
    /// 1 for the first published snapshot, +1 per publish (0: the empty initial one).
    std::uint64_t generation() const noexcept { return generation_; }

    /// Writes the min(out.size(), entries) entries of family `f` XOR-closest to `target`
    /// into `out`, closest first, and returns how many. Exact (equal to sorting all entries
    /// by XOR distance), no allocation. The prefix index takes it straight to the smallest
    /// subtree around the target that holds out.size() entries, so it walks a few dozen
    /// entries whatever the size of the snapshot.
    std::size_t closest(const id20& target, std::span<node_entry> out, ip_family f) const noexcept;

private:
    friend class responsive_ring;
    /// Where each prefix of the first `bits` id bits starts in its family's sorted array:
    /// entries with prefix p are [first[p], first[p + 1]).
    struct prefix_index {
        unsigned bits = 0;
        std::vector<std::uint32_t> first;
        void build(std::span<const node_entry> sorted);
    };
    std::vector<node_entry> v4_;
    std::vector<node_entry> v6_;
    prefix_index v4_index_;
    prefix_index v6_index_;
    time_point published_at_{};
    std::uint64_t generation_ = 0;
};

struct responsive_ring_options {
    std::size_t capacity = 16'384;     ///< crawl.pool.responsive_capacity; 1..2^24-1
    std::chrono::seconds ttl{900};     ///< crawl.pool.responsive_ttl_secs
    std::size_t snapshot_size = 4'096; ///< scheduler.routing_snapshot_size, per family
    std::uint64_t hash_seed = 0;       ///< 0: random (tests pass a fixed one)
};

/// What responsive_ring::insert() did.
enum class ring_insert : std::uint8_t {
    inserted,  ///< a new endpoint
    refreshed, ///< already present: its id and time were updated, it became the youngest
    read_only, ///< refused (and dropped if present): BEP-43 read-only nodes do not answer queries
};

/// A bounded ring of responsive nodes with a TTL, deduplicated by endpoint.
///
/// An expiring_set (util/expiring_set.hpp) from endpoint to id, ordered by last answer: a
/// refresh moves the node to the young end (its old slot stays behind as a dead
/// placeholder), and a full ring overwrites the oldest slot.
/// So the ring holds the nodes among the last `capacity` answers that are younger than
/// `ttl`, each once.
///
/// Thread rules: insert(), contains(), purge() and publish() belong to the single owner
/// (the crawl actor). snapshot() may be called from any thread at any time; what it
/// returns stays valid and unchanged for as long as the caller holds it.
class responsive_ring {
public:
    explicit responsive_ring(responsive_ring_options options = {});

    /// Records that `id` at `ep` (canonical form) answered at `now`.
    ring_insert insert(const id20& id, const endpoint& ep, time_point now, bool read_only = false);
    /// True when `ep` answered less than ttl before `now`.
    bool contains(const endpoint& ep, time_point now) const;
    /// Drops up to `max` expired entries from the old end; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1)) { return set_.purge(now, max); }

    /// Builds a snapshot of the youngest unexpired entries (up to snapshot_size per family)
    /// and makes it the one snapshot() returns. Reuses the previous snapshot's buffers when
    /// no reader holds it any more, so in steady state it does not allocate.
    void publish(time_point now);
    /// The latest published snapshot (never null; empty before the first publish).
    /// Copying the pointer is serialised with publish()'s pointer swap only, never with
    /// the work of building a snapshot.
    std::shared_ptr<const routing_snapshot> snapshot() const noexcept;

    /// False only in ThreadSanitizer builds (see DHTC_CRAWL_TSAN).
    static constexpr bool recycles_snapshots = !DHTC_CRAWL_TSAN;

    /// Live entries (including expired ones not purged yet).
    std::size_t size() const noexcept { return set_.size(); }
    std::size_t capacity() const noexcept { return set_.capacity(); }
    std::uint64_t inserted() const noexcept { return inserted_; }
    std::uint64_t refreshed() const noexcept { return refreshed_; }
    std::uint64_t refused_read_only() const noexcept { return refused_read_only_; }
    /// Live, unexpired entries overwritten by a full ring.
    std::uint64_t evicted() const noexcept { return set_.evicted(); }
    std::uint64_t expired() const noexcept { return set_.expired(); }
    std::uint64_t publishes() const noexcept { return publishes_; }
    /// Snapshots allocated because every spare was still held by a reader.
    std::uint64_t snapshot_allocations() const noexcept { return snapshot_allocations_; }
    std::size_t memory_bytes() const noexcept;

private:
    std::shared_ptr<routing_snapshot> make_snapshot();

    std::size_t snapshot_size_;
    expiring_set<endpoint, expiring_endpoint_hash, id20> set_; // keyed by canonical endpoint

    std::shared_ptr<routing_snapshot> current_; // what published_ holds, writable by us
    std::shared_ptr<routing_snapshot> spare_;   // the one before; reused once readers let go
    // Only touched through std::atomic_load/atomic_store: libstdc++ 12's
    // std::atomic<std::shared_ptr> unlocks with a relaxed store after reading the pointer
    // in load(), a data race ThreadSanitizer reports.
    std::shared_ptr<const routing_snapshot> published_;

    std::uint64_t inserted_ = 0;
    std::uint64_t refreshed_ = 0;
    std::uint64_t refused_read_only_ = 0;
    std::uint64_t publishes_ = 0;
    std::uint64_t snapshot_allocations_ = 0;
};

} // namespace dhtc::crawl
