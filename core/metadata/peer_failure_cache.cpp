#include "metadata/peer_failure_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "net/address_policy.hpp"

namespace dhtc::metadata {

namespace {
// Expired entries purged per insert: more than one, so purging outpaces insertion and the
// backlog of a quiet period drains within a few calls without one call walking it all.
constexpr std::size_t purge_per_insert = 8;
// Slot times are 32-bit millisecond offsets; insert() moves the base before an offset can
// pass this (about 24.8 days), leaving ample headroom below 2^32.
constexpr std::int64_t rebase_after_ms = std::int64_t{1} << 31;
constexpr std::chrono::seconds max_ttl{24 * 3600};
} // namespace

peer_failure_cache::peer_failure_cache(peer_failure_cache_options options)
    : ttl_(std::clamp(options.ttl, std::chrono::seconds{0}, max_ttl)),
      ttl_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(ttl_).count()),
      capacity_(ttl_.count() == 0 ? 0 : std::min<std::size_t>(options.capacity, (std::size_t{1} << 24) - 2)),
      key_(detail::hash_key_from_seed(options.hash_seed)),
      slots_(capacity_ ? std::make_unique<slot[]>(capacity_) : nullptr), index_(capacity_, 24) {}

peer_failure_cache::slot peer_failure_cache::make_slot(const endpoint& ep) noexcept {
    const endpoint c = canonical(ep);
    slot s{};
    std::memcpy(s.addr, c.address.raw().data(), 16);
    s.port = c.port;
    s.flags = static_cast<std::uint8_t>((c.address.is_v6() ? flag_v6 : 0) | flag_live);
    return s;
}

std::uint64_t peer_failure_cache::hash_of(const slot& s) const noexcept {
    // Address, port and family: the family byte keeps 1.2.3.4 apart from the v6 address
    // 0102:0304:: (both have the same 16 raw bytes).
    char buf[19];
    std::memcpy(buf, s.addr, 16);
    buf[16] = static_cast<char>(s.port >> 8);
    buf[17] = static_cast<char>(s.port & 0xff);
    buf[18] = static_cast<char>(s.flags & flag_v6);
    return siphash24(key_, std::string_view(buf, sizeof buf));
}

std::uint32_t peer_failure_cache::find(const slot& probe, std::uint64_t h) const {
    return index_.find(h, [&](std::uint32_t i) {
        const slot& s = slots_[i];
        return s.port == probe.port && (s.flags & flag_v6) == (probe.flags & flag_v6) &&
               std::memcmp(s.addr, probe.addr, 16) == 0;
    });
}

std::int64_t peer_failure_cache::offset_ms(time_point now) const noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - base_).count();
}

bool peer_failure_cache::expired_at(const slot& s, time_point now) const noexcept {
    return offset_ms(now) - static_cast<std::int64_t>(s.at) >= ttl_ms_;
}

void peer_failure_cache::rebase(time_point now) noexcept {
    if (live_ == 0) {
        // Nothing to translate; retired slots only wait to leave the ring and are never read.
        base_ = now;
        return;
    }
    if (offset_ms(now) < rebase_after_ms) return;
    // Entries older than a TTL are expired whatever their offset, so they can all be pinned
    // at the new base (still expired); younger ones keep their exact age.
    const time_point new_base = now - ttl_;
    const auto shift = static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(new_base - base_).count());
    for (std::size_t k = 0, i = head_; k < count_; ++k, i = i + 1 == capacity_ ? 0 : i + 1)
        slots_[i].at = slots_[i].at > shift ? slots_[i].at - shift : 0;
    base_ = new_base;
}

bool peer_failure_cache::contains(const endpoint& ep, time_point now) const {
    if (!enabled()) return false;
    const slot probe = make_slot(ep);
    const std::uint32_t i = find(probe, hash_of(probe));
    return i != detail::slot_index::npos && !expired_at(slots_[i], now);
}

void peer_failure_cache::drop_head() noexcept {
    slot& s = slots_[head_];
    if (s.flags & flag_live) {
        const auto i = static_cast<std::uint32_t>(head_);
        index_.erase(hash_of(s), i, [this](std::uint32_t j) { return hash_of(slots_[j]); });
        s.flags = static_cast<std::uint8_t>(s.flags & ~flag_live);
        --live_;
    }
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    --count_;
}

std::size_t peer_failure_cache::purge(time_point now, std::size_t max) {
    std::size_t n = 0;
    while (count_ > 0 && n < max) {
        const slot& s = slots_[head_];
        const bool live = (s.flags & flag_live) != 0;
        if (live && !expired_at(s, now)) break;
        if (live) {
            ++expired_;
            ++n;
        }
        drop_head();
    }
    return n;
}

bool peer_failure_cache::insert(const endpoint& ep, time_point now) {
    if (!enabled()) return false;
    purge(now, purge_per_insert);
    rebase(now);
    slot fresh = make_slot(ep);
    const std::uint64_t h = hash_of(fresh);
    if (const std::uint32_t old = find(fresh, h); old != detail::slot_index::npos) {
        if (!expired_at(slots_[old], now)) return false;
        // Expired but not purged yet: retire its slot (purge skips it later) and re-add.
        index_.erase(h, old, [this](std::uint32_t j) { return hash_of(slots_[j]); });
        slots_[old].flags = static_cast<std::uint8_t>(slots_[old].flags & ~flag_live);
        --live_;
        ++expired_;
    }
    if (count_ == capacity_) {
        if (slots_[head_].flags & flag_live) ++evicted_;
        drop_head();
    }
    std::size_t tail = head_ + count_;
    if (tail >= capacity_) tail -= capacity_;
    fresh.at = static_cast<std::uint32_t>(std::clamp<std::int64_t>(offset_ms(now), 0, rebase_after_ms));
    slots_[tail] = fresh;
    index_.insert(h, static_cast<std::uint32_t>(tail));
    ++count_;
    ++live_;
    return true;
}

void peer_failure_cache::clear() noexcept {
    for (std::size_t i = 0; i < capacity_; ++i) slots_[i].flags = 0;
    index_.clear();
    head_ = count_ = live_ = 0;
}

std::size_t peer_failure_cache::memory_bytes() const noexcept {
    return sizeof(*this) + capacity_ * sizeof(slot) + (capacity_ ? index_.memory_bytes() : 0);
}

} // namespace dhtc::metadata
