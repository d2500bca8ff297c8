// A bounded multi-producer, multi-consumer queue. Every hand-off between threads in the
// engine goes through one: when it is full the new item is refused and counted, so an
// overloaded consumer never makes memory grow. The slots grow on demand (doubling, from
// initial_slots) up to the capacity, so a large capacity costs only what was once queued;
// once the queue reached a depth, pushing to that depth again allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace dhtc {

/// The lock of a bounded_queue whose producer and consumer are one thread (the DHT's
/// network thread hands the queriers it answers to the crawl actor's next turn): the
/// capacity and the drop count without the cost of a mutex.
struct single_thread_lock {
    void lock() noexcept {}
    void unlock() noexcept {}
};

template <class T, class Lock = std::mutex>
class bounded_queue {
public:
    /// Slots allocated at construction (fewer when the capacity is smaller).
    static constexpr std::size_t initial_slots = 256;

    explicit bounded_queue(std::size_t capacity)
        : capacity_(capacity ? capacity : 1), slots_(capacity_ < initial_slots ? capacity_ : initial_slots) {}

    /// Appends `item`; false (and a counted drop) when full (or when growing failed).
    bool try_push(T item) {
        {
            std::lock_guard guard(lock_);
            if (size_ == slots_.size() && slots_.size() < capacity_) grow();
            if (size_ < slots_.size()) {
                slots_[(head_ + size_) % slots_.size()] = std::move(item);
                ++size_;
                depth_.store(size_, std::memory_order_relaxed);
                pushed_.fetch_add(1, std::memory_order_relaxed);
                return true;
            }
        }
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }

    /// Removes the oldest item, if any.
    std::optional<T> try_pop() {
        std::lock_guard guard(lock_);
        if (size_ == 0) return std::nullopt;
        std::optional<T> out(std::move(slots_[head_]));
        head_ = (head_ + 1) % slots_.size();
        --size_;
        depth_.store(size_, std::memory_order_relaxed);
        return out;
    }

    /// Moves up to `max` items into `out` (appended) under one lock; returns how many.
    std::size_t pop_batch(std::vector<T>& out, std::size_t max) {
        std::lock_guard guard(lock_);
        std::size_t n = 0;
        while (size_ > 0 && n < max) {
            out.push_back(std::move(slots_[head_]));
            head_ = (head_ + 1) % slots_.size();
            --size_;
            ++n;
        }
        depth_.store(size_, std::memory_order_relaxed);
        return n;
    }

    std::size_t capacity() const noexcept { return capacity_; }
    /// Slots allocated now (grows toward capacity()).
    std::size_t allocated() const noexcept {
        std::lock_guard guard(lock_);
        return slots_.size();
    }
    /// Current depth; a relaxed read for monitoring and back-pressure decisions.
    std::size_t depth() const noexcept { return depth_.load(std::memory_order_relaxed); }
    std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    std::uint64_t pushed() const noexcept { return pushed_.load(std::memory_order_relaxed); }

private:
    // Doubles the slots (up to the capacity), the items moved in order; on failure the
    // queue stays as it was (and the push is refused as full).
    void grow() noexcept {
        try {
            const std::size_t n = slots_.size() * 2 < capacity_ ? slots_.size() * 2 : capacity_;
            std::vector<T> next(n ? n : 1);
            for (std::size_t i = 0; i < size_; ++i) next[i] = std::move(slots_[(head_ + i) % slots_.size()]);
            slots_.swap(next);
            head_ = 0;
        } catch (...) {
        }
    }

    std::size_t capacity_;
    mutable Lock lock_;
    std::vector<T> slots_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
    std::atomic<std::size_t> depth_{0};
    std::atomic<std::uint64_t> dropped_{0};
    std::atomic<std::uint64_t> pushed_{0};
};

} // namespace dhtc
