// A fixed-capacity array whose storage is allocated in slabs on first use: a table sized
// for millions of entries costs only the slabs its entries have reached (plus one pointer
// per slab). Indexes never move, so tables can keep linking entries by index. Not
// thread-safe (single owner).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace dhtc::detail {

template <class T, unsigned SlabShift = 12>
class slab_array {
public:
    static constexpr std::size_t slab_size = std::size_t{1} << SlabShift;

    explicit slab_array(std::size_t capacity) : capacity_(capacity), slabs_((capacity + slab_size - 1) / slab_size) {}

    std::size_t capacity() const noexcept { return capacity_; }
    /// Element `i`; its slab must have been allocated (ensure()).
    T& operator[](std::size_t i) noexcept { return slabs_[i >> SlabShift][i & (slab_size - 1)]; }
    const T& operator[](std::size_t i) const noexcept { return slabs_[i >> SlabShift][i & (slab_size - 1)]; }
    bool allocated(std::size_t i) const noexcept { return i < capacity_ && slabs_[i >> SlabShift] != nullptr; }
    /// Allocates (value-initialised) the slab holding `i`; false when that failed.
    bool ensure(std::size_t i) noexcept {
        auto& s = slabs_[i >> SlabShift];
        if (!s) {
            s.reset(new (std::nothrow) T[slab_size]());
            if (!s) return false;
            ++allocated_slabs_;
        }
        return true;
    }
    /// Calls fn(i) for every index in an allocated slab (below the capacity).
    template <class Fn>
    void for_each_allocated(Fn&& fn) const {
        for (std::size_t s = 0; s < slabs_.size(); ++s) {
            if (!slabs_[s]) continue;
            const std::size_t end = (s + 1) * slab_size < capacity_ ? (s + 1) * slab_size : capacity_;
            for (std::size_t i = s * slab_size; i < end; ++i) fn(i);
        }
    }
    std::size_t memory_bytes() const noexcept {
        return allocated_slabs_ * slab_size * sizeof(T) + slabs_.size() * sizeof(std::unique_ptr<T[]>);
    }

private:
    std::size_t capacity_;
    std::vector<std::unique_ptr<T[]>> slabs_;
    std::size_t allocated_slabs_ = 0;
};

} // namespace dhtc::detail
