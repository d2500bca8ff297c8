// The one cap on metadata bytes held in flight by a crawler's fetches: every piece a
// session requests is charged here before the request goes out (so bytes are charged as
// they can arrive, never from a peer's claimed metadata_size), and returned when the
// fetch's buffer is dropped or the lease is given back unfilled.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dhtc::metadata {

class memory_budget {
public:
    using counter = std::atomic<std::uint64_t>;
    /// capacity 0: unlimited (only counted). The counters may live elsewhere (the
    /// pipeline's, read by the stats snapshot); null ones are kept here.
    explicit memory_budget(std::size_t capacity = 0, counter* held = nullptr, counter* refused = nullptr,
                           counter* refused_bytes = nullptr) noexcept
        : capacity_(capacity), held_(held ? *held : own_held_), refused_(refused ? *refused : own_refused_),
          refused_bytes_(refused_bytes ? *refused_bytes : own_refused_bytes_) {}
    memory_budget(const memory_budget&) = delete;
    memory_budget& operator=(const memory_budget&) = delete;

    /// Charges `n` bytes if they fit; false (and one refusal counted) otherwise.
    bool try_charge(std::size_t n) noexcept {
        std::uint64_t cur = held_.load(std::memory_order_relaxed);
        for (;;) {
            if (capacity_ != 0 && cur + n > capacity_) {
                refused_.fetch_add(1, std::memory_order_relaxed);
                refused_bytes_.fetch_add(n, std::memory_order_relaxed);
                return false;
            }
            if (held_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed)) return true;
        }
    }
    void release(std::size_t n) noexcept { held_.fetch_sub(n, std::memory_order_relaxed); }

    std::size_t capacity() const noexcept { return capacity_; }
    std::uint64_t held() const noexcept { return held_.load(std::memory_order_relaxed); }
    std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
    std::uint64_t refused_bytes() const noexcept { return refused_bytes_.load(std::memory_order_relaxed); }

private:
    std::size_t capacity_;
    counter own_held_{0};
    counter own_refused_{0};
    counter own_refused_bytes_{0};
    counter& held_;
    counter& refused_;
    counter& refused_bytes_;
};

} // namespace dhtc::metadata
