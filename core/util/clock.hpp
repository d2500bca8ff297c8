// The time source of everything that measures intervals (rate budgets, TTLs, timeouts).
// Protocol and crawl classes take a `clock&` instead of calling steady_clock directly, so
// tests and simulations run on a manual clock and never sleep.
#pragma once

#include <atomic>
#include <chrono>

namespace dhtc {

/// Monotonic instants and spans, shared by every user of `clock`.
using time_point = std::chrono::steady_clock::time_point;
using duration = std::chrono::steady_clock::duration;

/// A monotonic time source. Implementations must be safe to call from any thread.
class clock {
public:
    using time_point = dhtc::time_point;
    using duration = dhtc::duration;

    virtual ~clock() = default;
    /// The current instant; never goes backwards for a real clock.
    virtual time_point now() const noexcept = 0;

protected:
    clock() = default;
    clock(const clock&) = default;
    clock& operator=(const clock&) = default;
};

/// The real clock: std::chrono::steady_clock.
class steady_clock_source final : public clock {
public:
    time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
};

/// The time read once per batch of work: the DHT's network thread refreshes it before each
/// receive batch and each turn, and what runs there reads that instant. The datagrams of a
/// batch arrived together, and protocol code never waits for time to pass within one call
/// (its tests run on a manual clock), so this changes what a read costs, not what it says.
/// Reads are atomic: another thread (a stats snapshot) may read it too.
class batch_clock final : public clock {
public:
    explicit batch_clock(const clock& source) noexcept
        : source_(source), ticks_(source.now().time_since_epoch().count()) {}

    time_point now() const noexcept override { return time_point{duration{ticks_.load(std::memory_order_relaxed)}}; }
    void refresh() noexcept { ticks_.store(source_.now().time_since_epoch().count(), std::memory_order_relaxed); }

private:
    const clock& source_;
    std::atomic<duration::rep> ticks_;
};

/// A clock that moves only when told to. Reads and writes are atomic, so a test may
/// advance it on one thread while the code under test reads it on another.
class manual_clock final : public clock {
public:
    /// Starts a day after the epoch, so code subtracting a TTL from now() stays positive.
    explicit manual_clock(time_point start = time_point{} + std::chrono::hours(24)) noexcept
        : ticks_(start.time_since_epoch().count()) {}

    time_point now() const noexcept override { return time_point{duration{ticks_.load(std::memory_order_acquire)}}; }
    /// Moves the clock forward by `d` (a negative `d` moves it back: only tests do that).
    void advance(duration d) noexcept { ticks_.fetch_add(d.count(), std::memory_order_acq_rel); }
    /// Jumps to `t`.
    void set(time_point t) noexcept { ticks_.store(t.time_since_epoch().count(), std::memory_order_release); }

private:
    std::atomic<duration::rep> ticks_;
};

} // namespace dhtc
