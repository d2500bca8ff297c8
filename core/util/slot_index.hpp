// The hash index shared by the crawl tables (node pool, recent probes, responsive ring,
// per-source limiter, subnet counter). Each table keeps its entries in its own
// preallocated slot array; this index maps a key's hash to a slot value. It stores no
// keys: a lookup confirms a candidate by comparing against the table's own slot, which
// keeps the index at 4 bytes per bucket.
//
// Linear probing with backward-shift deletion: no tombstones, so a table that churns
// forever (the node pool pops and pushes millions of times) never degrades or needs a
// rebuild. Hashes are keyed SipHash: node lists are attacker-written, and an unkeyed hash
// would let a peer fill our tables with colliding endpoints.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <random>

#include "util/siphash.hpp"

namespace dhtc::detail {

/// A seed from std::random_device, or (if the device fails) from the clock and an address in memory.
inline std::uint64_t random_seed() noexcept {
    try {
        std::random_device rd;
        return std::uint64_t{rd()} << 32 ^ rd();
    } catch (...) {
        // No entropy device: the seed only spreads buckets, so a weaker one degrades the
        // flooding resistance, not correctness.
        static int anchor = 0;
        return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               reinterpret_cast<std::uintptr_t>(&anchor);
    }
}

/// A SipHash key derived from `seed` (0: a random one).
inline siphash_key hash_key_from_seed(std::uint64_t seed) noexcept {
    std::uint64_t s = seed ? seed : random_seed();
    const auto next = [&s] {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    const std::uint64_t k0 = next();
    return {k0, next()};
}

/// Open-addressing index from hashes to slot values. Not thread-safe (single owner).
///
/// Each 4-byte bucket holds a slot value in its low `value_bits` bits and, above them, the
/// entry's distance from its home bucket (saturating). The distance does two jobs without
/// touching the table's slots: a lookup only compares entries with its own home bucket
/// (the others have another hash), and a deletion's backward shift knows where each
/// following entry may move. Only an entry whose distance saturated needs its hash
/// recomputed (`hash_of`), which a keyed hash at load <= 80% makes rare.
class slot_index {
public:
    static constexpr std::uint32_t npos = 0xffffffffu;

    /// Room for `max_entries` values up to max_value(). `value_bits` is clamped to 16..30,
    /// leaving at least 2 bits of distance. Buckets: the power of two keeping the load at
    /// or below 80% (at least 8).
    ///
    /// `initial_entries` below `max_entries` makes the index growable: it starts with the
    /// buckets for `initial_entries` and grow() doubles them (up to those for max_entries)
    /// by reinserting every value; a growable index must be filled with insert(h, v, hash_of).
    slot_index(std::size_t max_entries, unsigned value_bits, std::size_t initial_entries = ~std::size_t{0})
        : value_bits_(value_bits < 16 ? 16 : value_bits > 30 ? 30 : value_bits),
          value_mask_((std::uint32_t{1} << value_bits_) - 1), saturated_(~std::uint32_t{0} >> value_bits_),
          max_buckets_(buckets_for(max_entries)),
          buckets_(initial_entries < max_entries ? buckets_for(initial_entries) : max_buckets_),
          mask_(buckets_ - 1), table_(std::make_unique<std::uint32_t[]>(buckets_)) {
        clear();
    }

    /// Inserts like insert(h, value), first growing the buckets when one more entry would
    /// pass 80% of them. `hash_of(v)` gives the hash a stored value was inserted with.
    /// False (nothing inserted) when growing was needed and its allocation failed.
    template <class HashOf>
    bool insert(std::uint64_t h, std::uint32_t value, HashOf&& hash_of) noexcept {
        if (size_ + 1 > limit(buckets_) && buckets_ < max_buckets_ && !grow(hash_of)) return false;
        insert(h, value);
        return true;
    }

    /// Largest value the index can store (all-ones is reserved: with a saturated distance
    /// it would read as an empty bucket).
    std::uint32_t max_value() const noexcept { return value_mask_ - 1; }

    /// The value stored under `h` whose slot satisfies `match(value)`, or npos.
    template <class Match>
    std::uint32_t find(std::uint64_t h, Match&& match) const {
        std::uint32_t d = 0;
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_, ++d) {
            const std::uint32_t w = table_[i];
            if (w == npos) return npos;
            const std::uint32_t wd = w >> value_bits_;
            if ((wd == d || (wd == saturated_ && d >= saturated_)) && match(w & value_mask_)) return w & value_mask_;
        }
    }

    /// Stores `value` under `h`. The caller checked it is absent and that size() < the
    /// constructor's max_entries (so an empty bucket always exists).
    void insert(std::uint64_t h, std::uint32_t value) noexcept {
        std::uint32_t d = 0;
        std::size_t i = h & mask_;
        for (; table_[i] != npos; i = (i + 1) & mask_) ++d;
        table_[i] = word(d, value);
        ++size_;
    }

    /// Removes `value`, stored under `h`. `hash_of(v)` must give the hash a stored value
    /// was inserted with; it is called only for entries whose distance saturated.
    template <class HashOf>
    bool erase(std::uint64_t h, std::uint32_t value, HashOf&& hash_of) {
        std::size_t hole = h & mask_;
        for (;; hole = (hole + 1) & mask_) {
            const std::uint32_t w = table_[hole];
            if (w == npos) return false;
            if ((w & value_mask_) == value) break; // values are unique in the index
        }
        // Backward shift: pull back every later entry of the cluster whose home does not lie
        // cyclically in (hole, j], so no lookup is cut short by the hole.
        for (std::size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
            const std::uint32_t w = table_[j];
            if (w == npos) break;
            std::size_t d = w >> value_bits_;
            if (d == saturated_) d = (j - (hash_of(w & value_mask_) & mask_)) & mask_;
            const std::size_t gap = (j - hole) & mask_;
            if (d >= gap) {
                table_[hole] = word(static_cast<std::uint32_t>(d - gap), w & value_mask_);
                hole = j;
            }
        }
        table_[hole] = npos;
        --size_;
        return true;
    }

    void clear() noexcept {
        for (std::size_t i = 0; i < buckets_; ++i) table_[i] = npos;
        size_ = 0;
    }

    std::size_t size() const noexcept { return size_; }
    std::size_t bucket_count() const noexcept { return buckets_; }
    std::size_t memory_bytes() const noexcept { return buckets_ * sizeof(std::uint32_t); }
    /// Distances at or above this are stored as this value.
    std::uint32_t saturated_distance() const noexcept { return saturated_; }

private:
    static std::size_t buckets_for(std::size_t entries) noexcept {
        const std::size_t want = entries + entries / 4 + 1;
        return std::bit_ceil(want < 8 ? std::size_t{8} : want);
    }
    // Entries a bucket count takes at a load <= 80%.
    static std::size_t limit(std::size_t buckets) noexcept { return buckets - buckets / 5; }

    template <class HashOf>
    bool grow(HashOf& hash_of) noexcept {
        const std::size_t n = buckets_ * 2 < max_buckets_ ? buckets_ * 2 : max_buckets_;
        std::unique_ptr<std::uint32_t[]> next(new (std::nothrow) std::uint32_t[n]);
        if (!next) return false;
        std::unique_ptr<std::uint32_t[]> old = std::move(table_);
        const std::size_t old_buckets = buckets_;
        table_ = std::move(next);
        buckets_ = n;
        mask_ = n - 1;
        clear();
        for (std::size_t i = 0; i < old_buckets; ++i)
            if (old[i] != npos) insert(hash_of(old[i] & value_mask_), old[i] & value_mask_);
        return true;
    }

    std::uint32_t word(std::uint32_t d, std::uint32_t value) const noexcept {
        return (d < saturated_ ? d : saturated_) << value_bits_ | value;
    }

    unsigned value_bits_;
    std::uint32_t value_mask_;
    std::uint32_t saturated_;
    std::size_t max_buckets_;
    std::size_t buckets_;
    std::size_t mask_;
    std::unique_ptr<std::uint32_t[]> table_;
    std::size_t size_ = 0;
};

} // namespace dhtc::detail
