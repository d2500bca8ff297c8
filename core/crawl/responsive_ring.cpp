#include "crawl/responsive_ring.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>

#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {

constexpr int id_bits = 160;
constexpr std::size_t purge_per_insert = 8;

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

std::size_t routing_snapshot::closest(const id20& target, std::span<node_entry> out, ip_family f) const noexcept {
    trie_walk w{target, entries(f), out};
    w.visit(0, w.e.size(), 0);
    // Whole subtrees were copied in id order; order the (few) results by distance.
    std::sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(w.n),
              [&target](const node_entry& a, const node_entry& b) { return closer(target, a.id, b.id); });
    return w.n;
}

responsive_ring::responsive_ring(responsive_ring_options options)
    : capacity_(std::clamp<std::size_t>(options.capacity, 1, (std::size_t{1} << 24) - 1)),
      ttl_(std::max(options.ttl, std::chrono::seconds{0})),
      snapshot_size_(std::min(options.snapshot_size, capacity_)), key_(detail::hash_key_from_seed(options.hash_seed)),
      slots_(std::make_unique<slot[]>(capacity_)), index_(capacity_, 24) {
    current_ = make_snapshot();
    spare_ = make_snapshot();
    store_published(published_, current_);
}

std::shared_ptr<routing_snapshot> responsive_ring::make_snapshot() {
    auto s = std::make_shared<routing_snapshot>();
    // Never filled beyond snapshot_size_, so publish() never reallocates these.
    s->v4_.reserve(snapshot_size_);
    s->v6_.reserve(snapshot_size_);
    return s;
}

std::uint64_t responsive_ring::hash_of_slot(std::uint32_t i) const noexcept {
    const endpoint& ep = slots_[i].node.ep;
    return detail::hash_endpoint(key_, ep.address, ep.port);
}

std::uint32_t responsive_ring::find(const endpoint& ep, std::uint64_t h) const {
    return index_.find(h, [&](std::uint32_t i) { return slots_[i].node.ep == ep; });
}

void responsive_ring::unindex(std::uint32_t i) noexcept {
    index_.erase(hash_of_slot(i), i, [this](std::uint32_t j) { return hash_of_slot(j); });
    slots_[i].live = false;
    --live_;
}

void responsive_ring::drop_head() noexcept {
    if (slots_[head_].live) unindex(static_cast<std::uint32_t>(head_));
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    --count_;
}

std::size_t responsive_ring::purge(time_point now, std::size_t max) {
    std::size_t n = 0;
    while (count_ > 0 && n < max) {
        const slot& s = slots_[head_];
        if (s.live && !expired_at(s, now)) break;
        if (s.live) {
            ++expired_;
            ++n;
        }
        drop_head();
    }
    return n;
}

ring_insert responsive_ring::insert(const id20& id, const endpoint& ep, time_point now, bool read_only) {
    purge(now, purge_per_insert);
    const endpoint c = canonical(ep);
    const std::uint64_t h = detail::hash_endpoint(key_, c.address, c.port);
    const std::uint32_t old = find(c, h);
    if (read_only) {
        // A node that turned read-only no longer answers queries: stop listing it.
        if (old != detail::slot_index::npos) unindex(old);
        ++refused_read_only_;
        return ring_insert::read_only;
    }
    ring_insert result = ring_insert::inserted;
    if (old != detail::slot_index::npos) {
        // Moving to the young end keeps the ring ordered by last answer; the old slot is
        // left as a dead placeholder because a ring cannot close a gap in its middle.
        result = ring_insert::refreshed;
        unindex(old);
    }
    if (count_ == capacity_) {
        if (slots_[head_].live && !expired_at(slots_[head_], now)) ++evicted_;
        drop_head();
    }
    std::size_t tail = head_ + count_;
    if (tail >= capacity_) tail -= capacity_;
    slot& s = slots_[tail];
    s.node = node_entry{id, c};
    s.at = now;
    s.live = true;
    index_.insert(h, static_cast<std::uint32_t>(tail));
    ++count_;
    ++live_;
    ++(result == ring_insert::refreshed ? refreshed_ : inserted_);
    return result;
}

bool responsive_ring::contains(const endpoint& ep, time_point now) const {
    const endpoint c = canonical(ep);
    const std::uint32_t i = find(c, detail::hash_endpoint(key_, c.address, c.port));
    return i != detail::slot_index::npos && !expired_at(slots_[i], now);
}

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
    for (std::size_t k = count_; k-- > 0 && (next->v4_.size() < snapshot_size_ || next->v6_.size() < snapshot_size_);) {
        std::size_t pos = head_ + k;
        if (pos >= capacity_) pos -= capacity_;
        const slot& s = slots_[pos];
        if (!s.live || expired_at(s, now)) continue;
        auto& v = s.node.ep.address.is_v6() ? next->v6_ : next->v4_;
        if (v.size() < snapshot_size_) v.push_back(s.node);
    }
    const auto by_id = [](const node_entry& a, const node_entry& b) { return a.id < b.id; };
    std::sort(next->v4_.begin(), next->v4_.end(), by_id);
    std::sort(next->v6_.begin(), next->v6_.end(), by_id);
    next->published_at_ = now;
    next->generation_ = ++publishes_;
    store_published(published_, next);
    spare_ = std::move(current_);
    current_ = std::move(next);
}

std::size_t responsive_ring::memory_bytes() const noexcept {
    return sizeof(*this) + capacity_ * sizeof(slot) + index_.memory_bytes() +
           2 * (2 * snapshot_size_ * sizeof(node_entry) + sizeof(routing_snapshot));
}

} // namespace dhtc::crawl
