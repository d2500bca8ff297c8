#include "crawl/responsive_ring.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>

#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {
constexpr std::size_t snapshot_reserve = 4096;
} // namespace

namespace {

constexpr int id_bits = 160;

int bit_at(const id20& id, int d) noexcept { return id.bytes[static_cast<std::size_t>(d >> 3)] >> (7 - (d & 7)) & 1; }

int shared_prefix(const id20& a, const id20& b) noexcept {
    for (std::size_t i = 0; i < id20::size; ++i)
        if (const auto x = static_cast<std::uint8_t>(a.bytes[i] ^ b.bytes[i]))
            return static_cast<int>(i * 8) + std::countl_zero(x);
    return id_bits;
}

// True when a is strictly XOR-closer to t than b.
bool closer(const id20& t, const id20& a, const id20& b) noexcept {
    for (std::size_t i = 0; i < id20::size; ++i) {
        const auto da = static_cast<std::uint8_t>(a.bytes[i] ^ t.bytes[i]);
        const auto db = static_cast<std::uint8_t>(b.bytes[i] ^ t.bytes[i]);
        if (da != db) return da < db;
    }
    return false;
}

// Walks the implicit binary trie over the sorted range, visiting the child that agrees
// with the target's next bit first. Every id in that child is XOR-closer than every id in
// the other (they differ from the target's bit at the first position where the two
// children differ), so the first `out.size()` entries reached are exactly the closest.
// A subtree that fits in the remaining room is taken whole without descending.
struct trie_walk {
    const id20& target;
    std::span<const node_entry> e;
    std::span<node_entry> out;
    std::size_t n = 0;

    void take(std::size_t lo, std::size_t hi) noexcept {
        for (std::size_t i = lo; i < hi && n < out.size(); ++i) out[n++] = e[i];
    }

    void visit(std::size_t lo, std::size_t hi, int depth) noexcept {
        if (lo >= hi || n == out.size()) return;
        if (hi - lo <= out.size() - n) return take(lo, hi);
        // The range is sorted, so its first and last ids bound the prefix all of it shares;
        // skipping straight past it keeps the recursion depth at the number of real splits.
        depth = std::max(depth, shared_prefix(e[lo].id, e[hi - 1].id));
        if (depth >= id_bits) return take(lo, hi); // identical ids: any of them will do
        const auto first = e.begin() + static_cast<std::ptrdiff_t>(lo);
        const auto last = e.begin() + static_cast<std::ptrdiff_t>(hi);
        const auto split = std::partition_point(first, last, [depth](const node_entry& x) { return bit_at(x.id, depth) == 0; });
        const auto mid = static_cast<std::size_t>(split - e.begin());
        if (bit_at(target, depth) == 0) {
            visit(lo, mid, depth + 1);
            visit(mid, hi, depth + 1);
        } else {
            visit(mid, hi, depth + 1);
            visit(lo, mid, depth + 1);
        }
    }
};

// The shared_ptr atomic free functions are deprecated in C++20 in favour of
// std::atomic<std::shared_ptr>, which libstdc++ 12 gets wrong (see published_).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
std::shared_ptr<const routing_snapshot> load_published(const std::shared_ptr<const routing_snapshot>& p) noexcept {
    return std::atomic_load_explicit(&p, std::memory_order_acquire);
}
void store_published(std::shared_ptr<const routing_snapshot>& p, std::shared_ptr<const routing_snapshot> v) noexcept {
    std::atomic_store_explicit(&p, std::move(v), std::memory_order_release);
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

} // namespace

std::shared_ptr<const routing_snapshot> responsive_ring::snapshot() const noexcept { return load_published(published_); }

namespace {

// The first `bits` bits of an id (bits <= 16), as a number.
std::uint32_t id_prefix(const id20& id, unsigned bits) noexcept {
    if (bits == 0) return 0;
    const std::uint32_t top = std::uint32_t{id.bytes[0]} << 8 | id.bytes[1];
    return top >> (16 - bits);
}

// About 8 entries per prefix: the 8 closest then sit in one prefix or a few neighbours.
constexpr std::size_t entries_per_prefix = 8;
constexpr unsigned max_index_bits = 16;

} // namespace

void routing_snapshot::prefix_index::build(std::span<const node_entry> sorted) {
    bits = 0;
    while (bits < max_index_bits && (sorted.size() >> (bits + 1)) >= entries_per_prefix) ++bits;
    // assign() keeps the capacity: a steady-state publish allocates nothing.
    first.assign((std::size_t{1} << bits) + 1, static_cast<std::uint32_t>(sorted.size()));
    std::size_t i = 0;
    for (std::uint32_t p = 0; p < (std::uint32_t{1} << bits); ++p) {
        while (i < sorted.size() && id_prefix(sorted[i].id, bits) < p) ++i;
        first[p] = static_cast<std::uint32_t>(i);
    }
}

std::size_t routing_snapshot::closest(const id20& target, std::span<node_entry> out, ip_family f) const noexcept {
    trie_walk w{target, entries(f), out};
    // Every id that shares the target's first j bits is XOR-closer than every id that does
    // not, so when that subtree holds out.size() entries, the answer is inside it: the walk
    // starts there, at depth j, instead of at the root.
    std::size_t lo = 0, hi = w.e.size();
    int depth = 0;
    const prefix_index& ix = f == ip_family::v4 ? v4_index_ : v6_index_;
    if (ix.bits > 0 && hi > out.size()) {
        const std::uint32_t p = id_prefix(target, ix.bits);
        for (unsigned j = ix.bits; j > 0; --j) {
            const unsigned free_bits = ix.bits - j;
            const std::uint32_t begin = p >> free_bits << free_bits;
            const std::uint32_t end = begin + (std::uint32_t{1} << free_bits);
            if (ix.first[end] - ix.first[begin] >= out.size()) {
                lo = ix.first[begin];
                hi = ix.first[end];
                depth = static_cast<int>(j);
                break;
            }
        }
    }
    w.visit(lo, hi, depth);
    // Whole subtrees were copied in id order; order the (few) results by distance.
    std::sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(w.n),
              [&target](const node_entry& a, const node_entry& b) { return closer(target, a.id, b.id); });
    return w.n;
}

responsive_ring::responsive_ring(responsive_ring_options options)
    : snapshot_size_(std::min(options.snapshot_size,
                              std::clamp<std::size_t>(options.capacity, 1, decltype(set_)::max_capacity))),
      set_({.capacity = std::clamp<std::size_t>(options.capacity, 1, decltype(set_)::max_capacity),
            .ttl = options.ttl,
            .repeat = expiring_repeat::refresh,
            .hash_seed = options.hash_seed}) {
    current_ = make_snapshot();
    spare_ = make_snapshot();
    store_published(published_, current_);
}

std::shared_ptr<routing_snapshot> responsive_ring::make_snapshot() {
    auto s = std::make_shared<routing_snapshot>();
    // Reserved up to snapshot_reserve; beyond, the vectors grow as the ring fills and keep
    // their size when the snapshot is recycled, so a large capacity costs what it held.
    s->v4_.reserve(std::min(snapshot_size_, snapshot_reserve));
    s->v6_.reserve(std::min(snapshot_size_, snapshot_reserve));
    return s;
}

ring_insert responsive_ring::insert(const id20& id, const endpoint& ep, time_point now, bool read_only) {
    const endpoint c = canonical(ep);
    if (read_only) {
        // A node that turned read-only no longer answers queries: stop listing it.
        set_.purge(now, decltype(set_)::purge_per_insert);
        set_.erase(c);
        ++refused_read_only_;
        return ring_insert::read_only;
    }
    if (set_.insert(c, now, id) == expiring_insert::refreshed) {
        ++refreshed_;
        return ring_insert::refreshed;
    }
    ++inserted_;
    return ring_insert::inserted;
}

bool responsive_ring::contains(const endpoint& ep, time_point now) const { return set_.contains(canonical(ep), now); }

void responsive_ring::publish(time_point now) {
    std::shared_ptr<routing_snapshot> next;
#if !DHTC_CRAWL_TSAN
    // use_count() is a relaxed read; seeing 1 means every reader has dropped its copy
    // (shared_ptr's decrement is a release operation: the deleter relies on that), and the
    // acquire fence orders their last reads before our writes below. No new reader can
    // reach the spare: published_ no longer holds it.
    if (spare_ && spare_.use_count() == 1) {
        std::atomic_thread_fence(std::memory_order_acquire);
        next = std::move(spare_);
    } else
#endif
    {
        spare_.reset();
        next = make_snapshot();
        ++snapshot_allocations_;
    }
    next->v4_.clear();
    next->v6_.clear();
    // Youngest first, so a full snapshot keeps the nodes most likely still online.
    set_.for_each_youngest(now, [&](const endpoint& ep, const id20& id) {
        auto& v = ep.address.is_v6() ? next->v6_ : next->v4_;
        if (v.size() < snapshot_size_) v.push_back(node_entry{id, ep});
        return next->v4_.size() < snapshot_size_ || next->v6_.size() < snapshot_size_;
    });
    const auto by_id = [](const node_entry& a, const node_entry& b) { return a.id < b.id; };
    std::sort(next->v4_.begin(), next->v4_.end(), by_id);
    std::sort(next->v6_.begin(), next->v6_.end(), by_id);
    next->v4_index_.build(next->v4_);
    next->v6_index_.build(next->v6_);
    next->published_at_ = now;
    next->generation_ = ++publishes_;
    store_published(published_, next);
    spare_ = std::move(current_);
    current_ = std::move(next);
}

std::size_t responsive_ring::memory_bytes() const noexcept {
    std::size_t snapshots = 0;
    for (const auto* s : {current_.get(), spare_.get()})
        if (s)
            snapshots += (s->v4_.capacity() + s->v6_.capacity()) * sizeof(node_entry) +
                         (s->v4_index_.first.capacity() + s->v6_index_.first.capacity()) * sizeof(std::uint32_t) +
                         sizeof(routing_snapshot);
    return sizeof(*this) - sizeof(set_) + set_.memory_bytes() + snapshots;
}

} // namespace dhtc::crawl
