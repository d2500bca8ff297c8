// The crawl frontier: candidate nodes waiting for one find_node each, served strictly
// first in, first out. Every node the crawler learns of is offered here, so it is the
// biggest structure of the crawl actor and is laid out for memory: fixed rings of packed
// entries (26 bytes per IPv4 node, 38 per IPv6 node), one bit per node recording the
// family order, and a 4-byte-per-bucket hash index for deduplication. The rings and the
// index start at 4096 nodes and double as the pool first fills (each doubling lays the
// rings out afresh and rebuilds the index); once grown, push and pop never allocate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "dht/rate_limiter.hpp"
#include "util/slot_index.hpp"
#include "krpc/compact.hpp"
#include "model/address.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

/// A candidate node: the id it claimed and where to reach it (the KRPC node entry, so a
/// parsed `nodes` list feeds push() and pop() feeds the query writer directly).
using pool_node = krpc::node_entry;

/// What push() did; counters index arrays by this value.
enum class push_result : std::uint8_t {
    accepted,        ///< appended
    replaced_oldest, ///< the pool was full: the oldest node was evicted, then appended
    duplicate,       ///< the endpoint is already waiting
    bogon,           ///< refused by the address_policy (see bogon_count())
    family_full,     ///< the ring of its address family is full (or sized 0)
    over_budget,     ///< the pool was full and the replacement budget is spent
};
inline constexpr std::size_t push_result_count = 6;

struct node_pool_options {
    std::size_t capacity = 100'000;            ///< nodes in total; clamped to 1..max_capacity
    unsigned v4_share_percent = 100;           ///< IPv4 ring size, percent of capacity (0..100)
    unsigned v6_share_percent = 25;            ///< IPv6 ring size, percent of capacity (0..100)
    double max_replacements_per_minute = 25'000; ///< evictions of the oldest allowed when full
    std::uint64_t hash_seed = 0;               ///< 0: random (tests pass a fixed one)
};

/// Strict FIFO pool of nodes to query.
///
/// The two families live in separate rings so an IPv4 node costs 26 bytes, not the 38 an
/// IPv6 one needs; one bit per node, in push order, says which ring holds the next-oldest
/// node, so pop() is FIFO across both. An IPv4-only crawler sets v6_share_percent to 0.
///
/// Thread rules: single owner (the crawl actor). The policy is read on every push and
/// must outlive the pool; so must the clock (it times the replacement budget).
class node_pool {
public:
    /// Ring positions are stored in 24 bits of the index.
    static constexpr std::size_t max_capacity = (std::size_t{1} << 24) - 2;

    node_pool(const clock& c, const address_policy& policy, node_pool_options options = {});

    /// Where a node was learned: named in an answer to our query, or only from its own query
    /// to us (a flood of queriers must not fill the pool; see querier_count()).
    enum class origin : std::uint8_t { answer, query };

    /// Offers a node (its endpoint made canonical first). See push_result.
    push_result push(const id20& id, const endpoint& ep, origin from = origin::answer);
    push_result push(const pool_node& n, origin from = origin::answer) { return push(n.id, n.ep, from); }
    /// The oldest node, removed; nothing when empty.
    std::optional<pool_node> pop();
    /// True when `ep` (canonical form) is waiting in the pool.
    bool contains(const endpoint& ep) const;
    /// Appends up to `max` waiting nodes to `out`, every k-th of each family's queue, so the
    /// sample spans the whole queue (what a restart may start from besides the ring).
    void sample(std::size_t max, std::vector<pool_node>& out) const;
    /// Drops every node; counters are kept.
    void clear() noexcept;

    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t size_v4() const noexcept { return v4_.count; }
    std::size_t size_v6() const noexcept { return v6_.count; }
    std::size_t capacity_v4() const noexcept { return v4_max_; }
    std::size_t capacity_v6() const noexcept { return v6_max_; }

    /// Pushes that ended with `r`.
    std::uint64_t count(push_result r) const noexcept { return results_[static_cast<std::size_t>(r)]; }
    /// Bogon refusals by policy verdict (verdict ok is always 0).
    std::uint64_t bogon_count(admission_verdict v) const noexcept { return bogons_[static_cast<std::size_t>(v)]; }
    std::uint64_t popped() const noexcept { return popped_; }
    /// Nodes waiting that were pushed with origin::query.
    std::size_t querier_count() const noexcept { return querier_positions_.size(); }

    /// Bytes this pool holds: the object, both rings, the order bits and the index.
    std::size_t memory_bytes() const noexcept;
    /// The bytes of one entry of each family.
    static constexpr std::size_t v4_entry_bytes = 26;
    static constexpr std::size_t v6_entry_bytes = 38;

private:
    template <std::size_t AddrBytes>
    struct entry {
        std::uint8_t id[20];
        std::uint8_t addr[AddrBytes];
        std::uint8_t port[2];
    };
    template <std::size_t AddrBytes>
    struct ring {
        std::unique_ptr<entry<AddrBytes>[]> slots;
        std::uint32_t cap = 0;
        std::uint32_t head = 0;
        std::uint32_t count = 0;
        std::uint32_t tail() const noexcept { return head + count >= cap ? head + count - cap : head + count; }
    };
    static constexpr std::uint32_t v6_flag = std::uint32_t{1} << 24;

    std::uint64_t hash_of(const ip_address& a, std::uint16_t port) const noexcept;
    std::uint64_t hash_of_value(std::uint32_t value) const noexcept;
    std::uint32_t find(const ip_address& a, std::uint16_t port, std::uint64_t h) const;
    pool_node node_at(std::uint32_t value) const noexcept;
    bool order_bit(std::size_t pos) const noexcept { return order_[pos >> 6] >> (pos & 63) & 1; }
    pool_node remove_oldest() noexcept;
    bool resize(std::size_t cur) noexcept;
    static constexpr std::size_t initial_nodes = 4096; // the rings double from here

    const address_policy* policy_;
    std::size_t capacity_;
    std::size_t cur_ = 0;             // nodes the rings hold now (doubles toward capacity_)
    unsigned v4_share_ = 100, v6_share_ = 25;
    std::uint32_t v4_max_ = 0, v6_max_ = 0; // ring sizes at full capacity
    siphash_key key_;
    ring<4> v4_;
    ring<16> v6_;
    std::unique_ptr<std::uint64_t[]> order_; // bit i: the node at global position i is IPv6
    std::size_t order_words_ = 0;
    std::size_t order_head_ = 0;
    std::size_t size_ = 0;
    detail::slot_index index_;
    token_bucket replacements_;
    std::array<std::uint64_t, push_result_count> results_{};
    std::array<std::uint64_t, admission_verdict_count> bogons_{};
    std::uint64_t popped_ = 0;
    // The pool is strict FIFO, so a node's push sequence number tells whether it is still
    // waiting: those of origin::query nodes, oldest first, with every number below removed_
    // gone. Costs 8 bytes per waiting querier, none for the rest.
    std::deque<std::uint64_t> querier_positions_;
    std::uint64_t pushed_ = 0;
    std::uint64_t removed_ = 0;
};

} // namespace dhtc::crawl
