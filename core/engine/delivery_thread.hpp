// The library's own callback thread. Every application callback runs here: never on the
// network or metadata threads, never two at once, in order. Three bounded lanes: gate
// requests first (so a gate never waits behind a queue of torrents), then torrents,
// completions and errors, then observations (high volume; dropped and counted when full).
// Exceptions thrown by callbacks are caught here and never travel further.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "crawl/events.hpp"
#include "metadata/outcome.hpp"
#include "retry/scheduler.hpp"

namespace dhtc::engine {

/// What the application registered; any may be empty.
struct app_callbacks {
    /// Before a hash first goes to peers: true lets it through. Empty: accept.
    std::function<bool(const id20& info_hash)> gate;
    /// A verified torrent: true accepts it. Empty: the round ends delivery_rejected.
    std::function<bool(const metadata::delivery&)> torrent;
    std::function<void(const metadata::completion&)> completion;
    std::function<void(const std::string& message)> error;
    std::function<void(const crawl::observation&)> observation;
    /// A hash's retry state changed (dormant with its next time, or done).
    std::function<void(const retry::retry_event&)> retry;
};

struct delivery_counters {
    std::atomic<std::uint64_t> gates{0};
    std::atomic<std::uint64_t> torrents{0};
    std::atomic<std::uint64_t> completions{0};
    std::atomic<std::uint64_t> observations{0};
    std::atomic<std::uint64_t> observations_dropped{0};
    std::atomic<std::uint64_t> errors_dropped{0};
    std::atomic<std::uint64_t> retry_events{0};
    std::atomic<std::uint64_t> retry_events_dropped{0};
    std::atomic<std::uint64_t> callback_exceptions{0};
};

class delivery_thread {
public:
    /// `main_capacity` bounds torrents + completions + errors; the pipeline keeps at most
    /// two per worker outstanding, so size it from the worker count.
    delivery_thread(app_callbacks callbacks, std::size_t main_capacity, std::size_t observation_capacity);
    ~delivery_thread();

    void start();
    /// Runs what is queued, then stops the thread. Idempotent. After it returns no callback
    /// runs again.
    void stop();

    // Any thread. Each `answer`/`done` continuation runs on the delivery thread right after
    // the callback (keep it short: post to the caller's own executor).
    /// False when the lane is full (the caller applies its default).
    bool post_gate(const id20& info_hash, std::function<void(bool)> answer);
    bool post_torrent(metadata::delivery d, std::function<void(bool accepted)> ack);
    bool post_completion(metadata::completion c, std::function<void()> done);
    void post_error(std::string message);
    void post_observation(const crawl::observation& o);
    /// Dropped (and counted) when the main lane is full or nobody listens.
    void post_retry(const retry::retry_event& e);

    /// Whether observations are queued at all (hosts that did not subscribe pay nothing).
    void want_observations(bool on) noexcept { observations_wanted_.store(on, std::memory_order_relaxed); }

    /// True on the delivery thread (callbacks may call shutdown, never destroy).
    bool on_this_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }
    const delivery_counters& counters() const noexcept { return counters_; }

private:
    struct gate_item {
        id20 info_hash;
        std::function<void(bool)> answer;
    };
    struct torrent_item {
        metadata::delivery d;
        std::function<void(bool)> ack;
    };
    struct completion_item {
        metadata::completion c;
        std::function<void()> done;
    };
    using main_item = std::variant<torrent_item, completion_item, std::string, retry::retry_event>;

    void run();
    void handle(gate_item& g);
    void handle(main_item& m);
    void report(const char* what, const std::exception* e);

    app_callbacks callbacks_;
    std::size_t main_capacity_;
    std::size_t observation_capacity_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<gate_item> gates_;
    std::deque<main_item> main_;
    std::deque<crawl::observation> observations_;
    bool stopping_ = false;
    std::atomic<bool> observations_wanted_{true};
    std::thread thread_;
    // Held while joining: stop() may come from two host threads at once (a shutdown from
    // one, a destroy from another), and two concurrent joins of one std::thread hang.
    std::mutex join_mutex_;
    delivery_counters counters_;
};

} // namespace dhtc::engine
