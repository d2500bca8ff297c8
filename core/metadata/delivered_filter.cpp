#include "metadata/delivered_filter.hpp"

#include <algorithm>

namespace dhtc::metadata {

namespace {
// Expired entries purged per insert: more than one, so purging outpaces insertion and the
// backlog of a quiet period drains within a few calls without one call walking it all.
constexpr std::size_t purge_per_insert = 8;
} // namespace

delivered_filter::delivered_filter(delivered_filter_options options)
    : period_(std::max(options.period, std::chrono::seconds{0})),
      capacity_(period_.count() == 0 ? 0 : std::min<std::size_t>(options.capacity, (std::size_t{1} << 24) - 2)),
      key_(detail::hash_key_from_seed(options.hash_seed)),
      slots_(capacity_ ? std::make_unique<slot[]>(capacity_) : nullptr), index_(capacity_, 24) {}

std::uint32_t delivered_filter::find(const id20& key, std::uint64_t h) const {
    return index_.find(h, [&](std::uint32_t i) { return slots_[i].key == key; });
}

bool delivered_filter::contains(const id20& key, time_point now) const {
    if (!enabled()) return false;
    const std::uint32_t i = find(key, hash_of(key));
    return i != detail::slot_index::npos && !expired_at(slots_[i], now);
}

void delivered_filter::drop_head() noexcept {
    slot& s = slots_[head_];
    if (s.live) {
        const auto i = static_cast<std::uint32_t>(head_);
        index_.erase(hash_of(s.key), i, [this](std::uint32_t j) { return hash_of(slots_[j].key); });
        s.live = false;
        --live_;
    }
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    --count_;
}

std::size_t delivered_filter::purge(time_point now, std::size_t max) {
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

bool delivered_filter::insert(const id20& key, time_point now) {
    if (!enabled()) return false;
    purge(now, purge_per_insert);
    const std::uint64_t h = hash_of(key);
    if (const std::uint32_t old = find(key, h); old != detail::slot_index::npos) {
        if (!expired_at(slots_[old], now)) return false;
        // Expired but not purged yet: retire its slot (purge skips it later) and re-add.
        index_.erase(h, old, [this](std::uint32_t j) { return hash_of(slots_[j].key); });
        slots_[old].live = false;
        --live_;
        ++expired_;
    }
    if (count_ == capacity_) {
        if (slots_[head_].live) ++evicted_;
        drop_head();
    }
    std::size_t tail = head_ + count_;
    if (tail >= capacity_) tail -= capacity_;
    slots_[tail] = slot{key, true, now};
    index_.insert(h, static_cast<std::uint32_t>(tail));
    ++count_;
    ++live_;
    return true;
}

bool delivered_filter::erase(const id20& key) {
    if (!enabled()) return false;
    const std::uint64_t h = hash_of(key);
    const std::uint32_t i = find(key, h);
    if (i == detail::slot_index::npos) return false;
    // Retired in place, like a re-inserted key: purge skips the slot when it reaches it.
    index_.erase(h, i, [this](std::uint32_t j) { return hash_of(slots_[j].key); });
    slots_[i].live = false;
    --live_;
    return true;
}

void delivered_filter::clear() noexcept {
    for (std::size_t i = 0; i < capacity_; ++i) slots_[i].live = false;
    index_.clear();
    head_ = count_ = live_ = 0;
}

std::size_t delivered_filter::memory_bytes() const noexcept {
    return sizeof(*this) + capacity_ * sizeof(slot) + (capacity_ ? index_.memory_bytes() : 0);
}

} // namespace dhtc::metadata
