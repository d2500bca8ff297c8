// A counter with one writer and any number of readers on other threads: relaxed atomic
// load and store, no read-modify-write (the writer is the only one who increments), so it
// costs what a plain integer costs and is still race-free for snapshot readers.
#pragma once

#include <atomic>
#include <cstdint>

namespace dhtc {

class relaxed_counter {
public:
    relaxed_counter() = default;
    relaxed_counter(const relaxed_counter& o) noexcept : v_(o.load()) {}
    relaxed_counter& operator=(const relaxed_counter& o) noexcept {
        v_.store(o.load(), std::memory_order_relaxed);
        return *this;
    }

    relaxed_counter& operator++() noexcept {
        v_.store(load() + 1, std::memory_order_relaxed);
        return *this;
    }
    std::uint64_t load() const noexcept { return v_.load(std::memory_order_relaxed); }
    operator std::uint64_t() const noexcept { return load(); }

private:
    std::atomic<std::uint64_t> v_{0};
};

} // namespace dhtc
