// A bounded table of entries in recency order: the storage of source_table's per-IP and
// per-node tables. Slots live in slabs allocated as the table fills, a keyed hash index finds
// them (it stores no keys: the caller confirms a candidate against its own slot), and a list
// from most to least recently used says which to evict when the table is full.
//
// Thread rules: single owner. size() is a relaxed atomic, readable from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "util/relaxed_counter.hpp"
#include "util/slab_array.hpp"
#include "util/slot_index.hpp"

namespace dhtc {

/// What a full table's eviction scan makes of an entry (see lru_slots::make_room).
enum class eviction_choice : std::uint8_t {
    evict,        ///< take it now
    second_best,  ///< take it only if the scan finds nothing better
    keep,         ///< never (it still owes something): moved to the young end
};

template <class Entry>
class lru_slots {
public:
    static constexpr std::uint32_t none = 0xffffffffu;
    /// Index values carry 24 bits.
    static constexpr std::size_t max_capacity = (std::size_t{1} << 24) - 1;
    /// Entries a full table's eviction scan looks at, oldest first.
    static constexpr int eviction_scan = 16;

    explicit lru_slots(std::size_t capacity, std::size_t initial_index_entries = 1024)
        : capacity_(std::clamp<std::size_t>(capacity, 1, max_capacity)), slots_(capacity_),
          index_(capacity_, 24, initial_index_entries) {}

    Entry& operator[](std::uint32_t i) noexcept { return slots_[i].entry; }
    const Entry& operator[](std::uint32_t i) const noexcept { return slots_[i].entry; }

    /// The slot stored under hash `h` whose entry satisfies `match(entry)`, or none.
    template <class Match>
    std::uint32_t find(std::uint64_t h, Match&& match) const {
        const std::uint32_t i = index_.find(h, [&](std::uint32_t s) { return match(slots_[s].entry); });
        return i == detail::slot_index::npos ? none : i;
    }

    /// A slot for a new entry stored under `h`, made the most recent, its entry value-initialised:
    /// an unused slot while the table has room, else one make_room's scan gives up (`choose`
    /// says what each scanned entry is worth; `evicted(slot, entry)` sees the entry that goes,
    /// before its slot is reused; `hash_of(entry)` gives the hash an entry was inserted with). none
    /// when nothing may go, or the index could not grow.
    template <class Choose, class Evicted, class HashOf>
    std::uint32_t insert(std::uint64_t h, Choose&& choose, Evicted&& evicted, HashOf&& hash_of) {
        const auto slot_hash = [&](std::uint32_t s) { return hash_of(slots_[s].entry); };
        std::uint32_t i = none;
        if (size_.load() < capacity_) {
            i = static_cast<std::uint32_t>(size_.load());
            if (!slots_.ensure(i)) return none;
            ++size_;
        } else {
            i = make_room(choose, slot_hash);
            if (i == none) return none;
            evicted(i, static_cast<const Entry&>(slots_[i].entry));
        }
        if (!index_.insert(h, i, slot_hash)) {
            // The index could not grow: the slot stays unused (unlinked, out of the index).
            return none;
        }
        slots_[i].entry = Entry{};
        link_front(i);
        return i;
    }

    /// Makes `i` the most recently used.
    void touch(std::uint32_t i) noexcept {
        if (mru_ == i) return;
        unlink(i);
        link_front(i);
    }

    /// Re-files slot `i` from hash `from` to hash `to` (its key changed).
    template <class HashOf>
    void rehash(std::uint32_t i, std::uint64_t from, std::uint64_t to, HashOf&& hash_of) {
        const auto slot_hash = [&](std::uint32_t s) { return hash_of(slots_[s].entry); };
        index_.erase(from, i, slot_hash);
        index_.insert(to, i); // the slot's own bucket was just freed: there is room
    }

    std::size_t size() const noexcept { return static_cast<std::size_t>(size_.load()); }
    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t memory_bytes() const noexcept { return slots_.memory_bytes() + index_.memory_bytes(); }
    std::uint64_t evictions() const noexcept { return evictions_; }

private:
    struct slot {
        Entry entry;
        std::uint32_t prev = none;
        std::uint32_t next = none;
    };

    // The oldest entry `choose` says to evict, among the eviction_scan oldest; else the first
    // it ranked second best. Entries kept move to the young end (a second chance), so under a
    // flood the old end is strangers.
    template <class Choose, class SlotHash>
    std::uint32_t make_room(Choose& choose, SlotHash& slot_hash) {
        std::uint32_t second = none;
        for (int k = 0; k < eviction_scan && lru_ != none; ++k) {
            const std::uint32_t i = lru_;
            const eviction_choice c = choose(slots_[i].entry);
            if (c == eviction_choice::evict) return evict(i, slot_hash);
            if (c == eviction_choice::second_best && second == none) second = i;
            touch(i);
        }
        return second == none ? none : evict(second, slot_hash);
    }

    template <class SlotHash>
    std::uint32_t evict(std::uint32_t i, SlotHash& slot_hash) {
        ++evictions_;
        index_.erase(slot_hash(i), i, slot_hash);
        unlink(i);
        return i;
    }

    void unlink(std::uint32_t i) noexcept {
        slot& s = slots_[i];
        if (s.prev != none) slots_[s.prev].next = s.next;
        else mru_ = s.next;
        if (s.next != none) slots_[s.next].prev = s.prev;
        else lru_ = s.prev;
    }

    void link_front(std::uint32_t i) noexcept {
        slot& s = slots_[i];
        s.prev = none;
        s.next = mru_;
        if (mru_ != none) slots_[mru_].prev = i;
        mru_ = i;
        if (lru_ == none) lru_ = i;
    }

    std::size_t capacity_;
    detail::slab_array<slot, 10> slots_;
    detail::slot_index index_;
    relaxed_counter size_; ///< slots in use; only grows (a full table reuses slots)
    std::uint32_t mru_ = none;
    std::uint32_t lru_ = none;
    relaxed_counter evictions_;
};

} // namespace dhtc
