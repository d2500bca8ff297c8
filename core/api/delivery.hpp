// Delivery: the one way events reach the application. Three bounded lanes (gates first, so
// a gate never waits behind torrents; then torrents, completions, retry events and errors;
// then observations, high volume, dropped and counted when full) feed either
//  - push: the library's delivery thread runs the application's handlers, one at a time, in
//    order, never on a network thread; anything they throw is caught and reported; or
//  - pull: the host takes events with poll() on its own thread and answers gates and
//    torrents by id; the answer table applies the default to an answer that does not come
//    in time (the delivery thread then only keeps that time).
// Either way the continuation of a gate, torrent or completion runs exactly once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "model/events.hpp"
#include "metadata/ports.hpp"

namespace dhtc::api {

/// What the application registered for push delivery; any may be empty.
struct event_handlers {
    /// Before a hash first goes to peers: true lets it through. Empty: accept.
    std::function<bool(const id20& info_hash)> gate;
    /// A verified torrent. Empty: the round ends delivery_rejected.
    std::function<answer(const delivery&)> torrent;
    std::function<void(const completion&)> completion;
    std::function<void(const retry_event&)> retry;
    std::function<void(const std::string& message)> error;
    std::function<void(const observation&)> observation;
    /// The answer to a scrape request (crawler::request_scrape).
    std::function<void(const scrape_event&)> scrape;
};

/// A torrent handler written as yes/no: true accepts, false rejects.
template <class F>
std::function<answer(const delivery&)> yes_no(F f) {
    return [f = std::move(f)](const delivery& d) { return f(d) ? answer::accept : answer::reject; };
}

/// One event taken by poll(): its JSON envelope (event_json.hpp), and for a torrent the raw
/// info dict.
struct polled_event {
    std::string json;
    std::string info;
};

struct delivery_options {
    std::size_t main_capacity = 576;        ///< torrents + completions + retry events + errors
    std::size_t observation_capacity = 4096;
    /// pull: how long a polled gate or torrent is awaited (a torrent then gets its retry; a
    /// gate's default is the pipeline's, metadata.gate_default, taken before this runs out)
    std::chrono::milliseconds answer_timeout{5000};
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
    std::atomic<std::uint64_t> scrapes{0};
    std::atomic<std::uint64_t> scrapes_dropped{0}; ///< the main lane was full
    std::atomic<std::uint64_t> callback_exceptions{0};
    std::atomic<std::uint64_t> answers_timed_out{0}; ///< pull: defaults applied to unanswered events
    std::atomic<std::uint64_t> polled{0};            ///< pull: events taken
};

class event_delivery final : public metadata::application_port {
public:
    explicit event_delivery(const delivery_options& o);
    ~event_delivery() override;

    /// Push to `handlers`, or pull (`polling`). Before start(); until then events go nowhere.
    /// Observations are queued only for a host that takes them.
    void configure(event_handlers handlers, bool polling);
    bool polling() const noexcept { return polling_; }

    void start();
    /// Shutdown began: no new gates or torrents are taken (those queued are answered at once,
    /// without reaching the application: a gate starts no round, a torrent's round ends
    /// cancelled); completions, retry events and errors still are. A gate or torrent the
    /// application has is still answered: by its handler (push), or by the host within
    /// answer_timeout, else as if it had been queued (pull). Never blocks; any thread.
    void close_input() noexcept;
    /// Every producer has stopped: once the lanes are empty the delivery thread ends and
    /// poll() reports closed. Never blocks; any thread.
    void finish() noexcept;
    /// Waits until the delivery thread has ended, at most `timeout` (nullopt: no limit).
    /// False when it is still running (a handler has not returned). Not from the delivery
    /// thread; one caller at a time.
    bool join(std::optional<std::chrono::milliseconds> timeout);

    // The pipeline's side (metadata::application_port); any thread.
    bool post_gate(const id20& info_hash, std::function<void(metadata::gate_verdict)> answer) override;
    bool post_torrent(api::delivery d, std::function<void(metadata::torrent_reply)> answered) override;
    bool post_completion(completion c, std::function<void()> done) override;
    void post_error(std::string message) override;
    /// Dropped (and counted) when the lane is full or nobody listens.
    void post_observation(const observation& o);
    void post_retry(const retry_event& e);
    /// Dropped (and counted) when the main lane is full; not queued when nobody listens.
    void post_scrape(const scrape_event& e);

    enum class poll_status : std::uint8_t { event, timeout, closed };
    /// Pull: the next event, waiting at most `timeout` (nullopt: no limit). `closed` once the
    /// input is closed and every event was taken.
    poll_status poll(std::optional<std::chrono::milliseconds> timeout, polled_event& out);
    /// Pull: answers gate or torrent `id` (for a gate: 0 refuses, anything else fetches; for
    /// a torrent: answer_from_int). False when it was answered already or its time ran out.
    bool answer_event(std::uint64_t id, int value);

    /// True on the delivery thread (handlers may shut down, never destroy).
    bool on_this_thread() const noexcept { return std::this_thread::get_id() == thread_id_.load(); }
    const delivery_counters& counters() const noexcept { return counters_; }

private:
    struct gate_item {
        id20 info_hash;
        std::function<void(metadata::gate_verdict)> answer;
    };
    struct torrent_item {
        api::delivery d;
        std::function<void(metadata::torrent_reply)> answered;
    };
    struct completion_item {
        completion c;
        std::function<void()> done;
    };
    using item =
        std::variant<gate_item, torrent_item, completion_item, retry_event, std::string, observation, scrape_event>;
    /// A pull event waiting for its answer; the default is applied at `deadline`.
    struct awaited {
        std::chrono::steady_clock::time_point deadline;
        std::variant<gate_item, torrent_item> what;
    };

    enum class pushed : std::uint8_t { yes, full, closed };
    /// A question (gate, torrent) is refused once input closed, checked under the lock that
    /// close_input() takes, so none slips in behind it. `i` is moved from only when pushed.
    pushed push(std::deque<item>& lane, item&& i, std::size_t capacity, std::atomic<std::uint64_t>* dropped,
                bool question = false);
    std::optional<item> take_locked();
    void run();
    void run_pull(std::unique_lock<std::mutex>& lock);
    void dispatch(item& i);
    /// An unanswered gate or torrent gets its default (`closing`: shutdown has begun).
    void settle_default(awaited& a, bool closing);
    void report(const char* what, const std::exception* e);

    event_handlers handlers_;
    delivery_options options_;
    bool polling_ = false;
    std::atomic<bool> observations_wanted_{false};

    std::mutex mutex_;
    std::condition_variable wake_;    ///< the delivery thread
    std::condition_variable pollers_; ///< hosts waiting in poll() or join()
    std::deque<item> gates_, main_, observations_;
    std::map<std::uint64_t, awaited> awaited_;
    std::uint64_t next_id_ = 1;
    bool input_closed_ = false;
    bool finished_ = false;
    bool started_ = false;
    bool ended_ = false; ///< the delivery thread has returned (or never started)
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};
    delivery_counters counters_;
};

} // namespace dhtc::api
