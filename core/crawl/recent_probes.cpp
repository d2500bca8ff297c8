#include "crawl/recent_probes.hpp"

#include <algorithm>

#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {
// Expired entries purged per insert: more than one, so the purge outpaces insertion and
// the backlog left by a quiet period drains within a few calls.
constexpr std::size_t purge_per_insert = 8;
} // namespace

recent_probes::recent_probes(recent_probes_options options)
    : ttl_(std::max(options.ttl, std::chrono::seconds{0})),
      capacity_(std::clamp<std::size_t>(options.capacity, 1, (std::size_t{1} << 24) - 1)),
      key_(detail::hash_key_from_seed(options.hash_seed)), slots_(std::make_unique<slot[]>(capacity_)),
      index_(capacity_, 24) {}

std::uint64_t recent_probes::hash_of_slot(std::uint32_t i) const noexcept {
    return detail::hash_endpoint(key_, slots_[i].ep.address, slots_[i].ep.port);
}

std::uint32_t recent_probes::find(const endpoint& ep, std::uint64_t h) const {
    return index_.find(h, [&](std::uint32_t i) { return slots_[i].ep == ep; });
}

bool recent_probes::contains(const endpoint& ep, time_point now) const {
    const endpoint c = canonical(ep);
    const std::uint32_t i = find(c, detail::hash_endpoint(key_, c.address, c.port));
    return i != detail::slot_index::npos && !expired_at(slots_[i], now);
}

void recent_probes::drop_head() noexcept {
    slot& s = slots_[head_];
    if (s.live) {
        const auto i = static_cast<std::uint32_t>(head_);
        index_.erase(hash_of_slot(i), i, [this](std::uint32_t j) { return hash_of_slot(j); });
        s.live = false;
        --live_;
    }
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    --count_;
}

std::size_t recent_probes::purge(time_point now, std::size_t max) {
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

bool recent_probes::insert(const endpoint& ep, time_point now) {
    purge(now, purge_per_insert);
    const endpoint c = canonical(ep);
    const std::uint64_t h = detail::hash_endpoint(key_, c.address, c.port);
    bool fresh = true;
    if (const std::uint32_t old = find(c, h); old != detail::slot_index::npos) {
        // Refresh: the old slot stays in the ring as a dead placeholder (removing from the
        // middle of a ring is not possible); it is skipped when it reaches the head.
        fresh = expired_at(slots_[old], now);
        index_.erase(h, old, [this](std::uint32_t j) { return hash_of_slot(j); });
        slots_[old].live = false;
        --live_;
    }
    if (count_ == capacity_) {
        if (slots_[head_].live) ++evicted_;
        drop_head();
    }
    std::size_t tail = head_ + count_;
    if (tail >= capacity_) tail -= capacity_;
    slot& s = slots_[tail];
    s.ep = c;
    s.live = true;
    s.at = now;
    index_.insert(h, static_cast<std::uint32_t>(tail));
    ++count_;
    ++live_;
    return fresh;
}

void recent_probes::clear() noexcept {
    for (std::size_t i = 0; i < capacity_; ++i) slots_[i].live = false;
    index_.clear();
    head_ = count_ = live_ = 0;
}

std::size_t recent_probes::memory_bytes() const noexcept {
    return sizeof(*this) + capacity_ * sizeof(slot) + index_.memory_bytes();
}

} // namespace dhtc::crawl
