// A bounded set of keys with a time to live: the one ring behind the crawler's recent
// probes and responsive nodes and the metadata scheduler's delivered filter and peer
// failure cache. Header-only: the key, its hash and the time stamps are parameters.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/clock.hpp"
#include "util/siphash.hpp"
#include "util/slab_array.hpp"
#include "util/slot_index.hpp"

namespace dhtc {

/// What a re-insert of a present, unexpired key does.
enum class expiring_repeat : std::uint8_t {
    keep,    ///< nothing: the time to live runs from the first insert
    refresh, ///< the key (and its value) becomes the youngest; its old slot is left dead
};

/// What expiring_set::insert() did.
enum class expiring_insert : std::uint8_t {
    added,     ///< the key was absent (or expired): it is now the youngest
    refreshed, ///< present and refreshed (expiring_repeat::refresh)
    present,   ///< present and left alone (expiring_repeat::keep)
    disabled,  ///< capacity 0: nothing is stored
};

/// Full time points per slot (8 bytes), any time to live in seconds.
class wide_stamps {
public:
    using stamp = time_point;
    explicit wide_stamps(std::chrono::seconds ttl) noexcept : ttl_(std::max(ttl, std::chrono::seconds{0})) {}
    std::chrono::seconds ttl() const noexcept { return ttl_; }
    stamp make(time_point now) const noexcept { return now; }
    bool expired(stamp at, time_point now) const noexcept { return now - at >= ttl_; }
    /// Called by insert() before anything else; `each` visits every stamp in the ring.
    template <class Each>
    void before_insert(time_point, std::size_t /*live*/, Each&&) noexcept {}

private:
    std::chrono::seconds ttl_;
};

/// 32-bit millisecond offsets from a base that insert() moves forward about every 24 days
/// (4 bytes per slot). Millisecond resolution; the time to live must stay well below 24 days.
class narrow_stamps {
public:
    using stamp = std::uint32_t;
    explicit narrow_stamps(std::chrono::seconds ttl) noexcept
        : ttl_(std::max(ttl, std::chrono::seconds{0})),
          ttl_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(ttl_).count()) {}
    std::chrono::seconds ttl() const noexcept { return ttl_; }
    stamp make(time_point now) const noexcept {
        return static_cast<stamp>(std::clamp<std::int64_t>(offset_ms(now), 0, rebase_after_ms));
    }
    bool expired(stamp at, time_point now) const noexcept {
        return offset_ms(now) - static_cast<std::int64_t>(at) >= ttl_ms_;
    }
    template <class Each>
    void before_insert(time_point now, std::size_t live, Each&& each) noexcept {
        if (live == 0) {
            // Nothing to translate; dead slots only wait to leave the ring and are never read.
            base_ = now;
            return;
        }
        if (offset_ms(now) < rebase_after_ms) return;
        // Entries older than a TTL are expired whatever their offset, so they can all be
        // pinned at the new base (still expired); younger ones keep their exact age.
        const time_point new_base = now - ttl_;
        const auto shift = static_cast<stamp>(
            std::chrono::duration_cast<std::chrono::milliseconds>(new_base - base_).count());
        each([shift](stamp& at) { at = at > shift ? at - shift : 0; });
        base_ = new_base;
    }

private:
    // Offsets are rebased before they can pass this (about 24.8 days), well below 2^32.
    static constexpr std::int64_t rebase_after_ms = std::int64_t{1} << 31;
    std::int64_t offset_ms(time_point now) const noexcept {
        return std::chrono::duration_cast<std::chrono::milliseconds>(now - base_).count();
    }
    std::chrono::seconds ttl_;
    std::int64_t ttl_ms_;
    time_point base_{};
};

/// No value beside the key.
struct expiring_no_value {};

struct expiring_set_options {
    std::size_t capacity = 0; ///< 0 disables; clamped to max_capacity
    std::chrono::seconds ttl{0};
    expiring_repeat repeat = expiring_repeat::keep;
    std::uint64_t hash_seed = 0; ///< 0: random (tests pass a fixed one)
};

/// A bounded set of keys (each with an optional value) with a time to live.
///
/// Entries sit in a preallocated ring in insertion order beside a keyed hash index
/// (detail::slot_index, 4 bytes per bucket at a load <= 80%). `Hash` is called as
/// `Hash{}(siphash_key, key)`; keys are compared with ==, so callers canonicalise them.
/// Expired entries are purged from the old end a few per insert (and by purge()), so no
/// call walks the whole set; contains() checks the age itself, so an expired entry not yet
/// purged is already absent (and a re-insert of it is an add). When full, the oldest slot
/// is overwritten: a live, unexpired entry there counts as evicted, an expired one as
/// expired. erase() and a refresh leave a dead slot that is skipped when it reaches the
/// old end (a ring cannot close a gap in its middle).
///
/// Slot layout: stamp, key, value, live flag, in that order (no padding between a 4- or
/// 8-byte stamp and a key of byte-aligned members). Times must not go backwards; if they
/// do, nothing breaks, but purging lags until time catches up. Single owner. The ring is
/// allocated in slabs as it first fills and the index doubles as entries arrive, so a set
/// costs what it held at most; once it has held that many, inserting allocates nothing.
/// Should an allocation fail, the key is not recorded (insert returns `disabled`).
template <class Key, class Hash, class Value = expiring_no_value, class Stamps = wide_stamps>
class expiring_set {
public:
    /// The index stores slot numbers in 24 bits.
    static constexpr std::size_t max_capacity = (std::size_t{1} << 24) - 1;
    /// Expired entries purged per insert: more than one, so purging outpaces insertion and
    /// the backlog of a quiet period drains within a few calls.
    static constexpr std::size_t purge_per_insert = 8;

    struct slot {
        typename Stamps::stamp at{};
        Key key{};
        [[no_unique_address]] Value value{};
        bool live = false;
    };

    explicit expiring_set(expiring_set_options o)
        : capacity_(std::min(o.capacity, max_capacity)), repeat_(o.repeat), stamps_(o.ttl),
          key_(detail::hash_key_from_seed(o.hash_seed)),
          ring_(std::min(capacity_, initial_ring)), slots_(capacity_), index_(capacity_, 24, initial_index_entries) {}

    bool enabled() const noexcept { return capacity_ != 0; }

    /// The slot of `key` when present and unexpired at `now`, or nullptr.
    const slot* find(const Key& key, time_point now) const {
        if (!enabled()) return nullptr;
        const std::uint32_t i = locate(key, hash_of(key));
        return i != detail::slot_index::npos && !stamps_.expired(slots_[i].at, now) ? &slots_[i] : nullptr;
    }
    bool contains(const Key& key, time_point now) const { return find(key, now) != nullptr; }

    /// Records `key` (with `value`) at `now`.
    expiring_insert insert(const Key& key, time_point now, const Value& value = Value{}) {
        if (!enabled()) return expiring_insert::disabled;
        purge(now, purge_per_insert);
        stamps_.before_insert(now, live_, [this](auto&& fn) {
            for (std::size_t k = 0, i = head_; k < count_; ++k, i = next(i)) fn(slots_[i].at);
        });
        const std::uint64_t h = hash_of(key);
        auto result = expiring_insert::added;
        if (const std::uint32_t old = locate(key, h); old != detail::slot_index::npos) {
            if (stamps_.expired(slots_[old].at, now)) {
                ++expired_;
            } else if (repeat_ == expiring_repeat::keep) {
                return expiring_insert::present;
            } else {
                result = expiring_insert::refreshed;
            }
            unindex(old, h);
        }
        if (count_ == ring_ && ring_ < capacity_) grow();
        if (count_ == ring_) {
            const slot& s = slots_[head_];
            if (s.live) ++(stamps_.expired(s.at, now) ? expired_ : evicted_);
            drop_head();
        }
        std::size_t tail = head_ + count_;
        if (tail >= ring_) tail -= ring_;
        if (!slots_.ensure(tail) ||
            !index_.insert(h, static_cast<std::uint32_t>(tail), [this](std::uint32_t j) { return hash_of(slots_[j].key); }))
            return expiring_insert::disabled; // out of memory: not recorded
        slots_[tail] = slot{stamps_.make(now), key, value, true};
        ++count_;
        ++live_;
        return result;
    }

    /// Removes `key`; true when it was held (expired ones not yet purged included).
    bool erase(const Key& key) {
        if (!enabled()) return false;
        const std::uint64_t h = hash_of(key);
        const std::uint32_t i = locate(key, h);
        if (i == detail::slot_index::npos) return false;
        unindex(i, h);
        return true;
    }

    /// Purges up to `max` expired entries from the old end; returns how many.
    std::size_t purge(time_point now, std::size_t max = static_cast<std::size_t>(-1)) {
        std::size_t n = 0;
        while (count_ > 0 && n < max) {
            const slot& s = slots_[head_];
            if (s.live && !stamps_.expired(s.at, now)) break;
            if (s.live) {
                ++expired_;
                ++n;
            }
            drop_head();
        }
        return n;
    }

    void clear() noexcept {
        slots_.for_each_allocated([this](std::size_t i) { slots_[i].live = false; });
        index_.clear();
        head_ = count_ = live_ = 0;
    }

    /// Calls `f(key, value)` for the live, unexpired entries, youngest first, until it
    /// returns false.
    template <class F>
    void for_each_youngest(time_point now, F&& f) const {
        for (std::size_t k = count_; k-- > 0;) {
            std::size_t pos = head_ + k;
            if (pos >= ring_) pos -= ring_;
            const slot& s = slots_[pos];
            if (!s.live || stamps_.expired(s.at, now)) continue;
            if (!f(s.key, s.value)) return;
        }
    }

    /// Entries held, expired ones not yet purged included.
    std::size_t size() const noexcept { return live_; }
    std::size_t capacity() const noexcept { return capacity_; }
    std::chrono::seconds ttl() const noexcept { return stamps_.ttl(); }
    /// Live, unexpired entries overwritten by a full set.
    std::uint64_t evicted() const noexcept { return evicted_; }
    /// Entries dropped after they expired.
    std::uint64_t expired() const noexcept { return expired_; }
    /// The object, the ring's allocated slabs and (when enabled) the index.
    std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + slots_.memory_bytes() + (capacity_ ? index_.memory_bytes() : 0);
    }

private:
    std::size_t next(std::size_t i) const noexcept { return i + 1 == ring_ ? 0 : i + 1; }

    // The ring is full below the capacity: double it. A wrapped ring's front part (slots
    // [0, tail)) moves to just past the old end, so the order holds; moved live entries are
    // re-indexed. If a slab cannot be allocated the ring stays as it was (and evicts).
    void grow() noexcept {
        const std::size_t next_size = std::min(capacity_, ring_ * 2);
        const std::size_t wrapped = head_ + count_ > ring_ ? head_ + count_ - ring_ : 0;
        for (std::size_t p = 0; p < wrapped; ++p)
            if (!slots_.ensure(ring_ + p)) return;
        for (std::size_t p = 0; p < wrapped; ++p) {
            slot& from = slots_[p];
            slot& to = slots_[ring_ + p];
            to = from;
            if (from.live) {
                const std::uint64_t h = hash_of(from.key);
                index_.erase(h, static_cast<std::uint32_t>(p), [this](std::uint32_t j) { return hash_of(slots_[j].key); });
                index_.insert(h, static_cast<std::uint32_t>(ring_ + p)); // same count: no growth needed
                from.live = false;
            }
        }
        ring_ = next_size;
    }
    std::uint64_t hash_of(const Key& key) const noexcept { return Hash{}(key_, key); }
    std::uint32_t locate(const Key& key, std::uint64_t h) const {
        return index_.find(h, [&](std::uint32_t i) { return slots_[i].key == key; });
    }
    void unindex(std::uint32_t i, std::uint64_t h) noexcept {
        index_.erase(h, i, [this](std::uint32_t j) { return hash_of(slots_[j].key); });
        slots_[i].live = false;
        --live_;
    }
    void drop_head() noexcept {
        const slot& s = slots_[head_];
        if (s.live) unindex(static_cast<std::uint32_t>(head_), hash_of(s.key));
        head_ = next(head_);
        --count_;
    }

    std::size_t capacity_;
    expiring_repeat repeat_;
    Stamps stamps_;
    siphash_key key_;
    static constexpr std::size_t initial_index_entries = 1024; // the index doubles from here
    static constexpr std::size_t initial_ring = 1024;          // so does the ring
    std::size_t ring_;                   // the ring's size now (grows to capacity_)
    detail::slab_array<slot, 10> slots_;
    detail::slot_index index_;
    std::size_t head_ = 0;
    std::size_t count_ = 0; // ring slots in use, dead ones included
    std::size_t live_ = 0;
    std::uint64_t evicted_ = 0;
    std::uint64_t expired_ = 0;
};

} // namespace dhtc
