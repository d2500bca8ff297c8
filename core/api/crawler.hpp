// The crawler: the DHT engine (network thread), the metadata pipeline (metadata thread),
// the retry store (store thread) and delivery (the application's thread), wired through
// bounded queues, with the one lifecycle every binding sees:
//
//   create ─▶ start/run ─▶ shutdown (any thread, any number of times, never blocks)
//          ─▶ close (joins everything; may time out on a running handler) ─▶ destroyed
//
// shutdown() only asks: a stopper thread stops the DHT, then the pipeline (its rounds in
// flight complete as cancelled; one whose torrent the application has settles with its
// answer), then the retry store (after the pipeline, so its releases are applied), and then
// tells delivery that every producer is done. close() waits for the stopper and for delivery
// to end; only then may the object be destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/delivery.hpp"
#include "engine/dht_engine.hpp"
#include "metadata/pipeline.hpp"
#include "util/clock.hpp"
#include "retry/policy.hpp"
#include "retry/scheduler.hpp"

namespace dhtc::api {

struct crawler_options {
    engine::dht_engine_options dht;
    metadata::pipeline_options metadata;
    std::size_t observation_queue_capacity = 4096;
    retry::retry_options retry;
};

/// Why create() failed.
enum class create_failure : std::uint8_t { none, bind, store };

class crawler {
public:
    /// Binds the sockets and opens the retry store (on its own thread); nullptr and `error`
    /// (with `why`) on failure. Nothing runs until start().
    static std::unique_ptr<crawler> create(const crawler_options& o, std::string& error,
                                           create_failure* why = nullptr);
    /// create() and configure() in one (push delivery): for C++ hosts and tests.
    static std::unique_ptr<crawler> create(const crawler_options& o, event_handlers handlers, std::string& error,
                                           create_failure* why = nullptr) {
        auto c = create(o, error, why);
        if (c) c->configure(std::move(handlers), false);
        return c;
    }
    /// close() without a time limit. Not from a handler.
    ~crawler();

    /// Where events go: push to `handlers`, or pull (`polling`). Before start(); false after.
    bool configure(event_handlers handlers, bool polling);

    enum class start_result : std::uint8_t { started, already_started, shut_down };
    /// Starts every thread, once. Any thread except a handler.
    start_result start();
    /// start() if needed, then waits until shutdown() was called.
    void run();
    /// Waits until shutdown() was called, at most `timeout` (nullopt: no limit); true then.
    bool wait(std::optional<std::chrono::milliseconds> timeout);
    /// Asks everything to stop and returns at once. Any thread, handlers included, any number
    /// of times, concurrently with itself and with close().
    void shutdown() noexcept;
    bool shut_down() const noexcept;

    enum class close_result : std::uint8_t { closed, timeout, from_handler };
    /// shutdown(), then waits for every thread to end, at most `timeout` for a handler that is
    /// still running (nullopt: no limit). After `closed` nothing of the crawler runs and no
    /// handler is called again; after `timeout` call it again later. One host thread.
    close_result close(std::optional<std::chrono::milliseconds> timeout);

    /// Pull delivery (when created with polling).
    api::event_delivery& events() noexcept { return *delivery_; }
    /// Hands the pipeline a (hash, peer) pair learned outside the DHT (another source, a
    /// test). Any thread; false when the ingress queue is full.
    bool inject_hash(const hash_event& e) { return pipeline_->ingress().try_push(e); }
    /// Asks for a BEP-33 scrape of `info_hash`; the answer comes as a scrape event. Any
    /// thread; false when the request queue is full.
    bool request_scrape(const id20& info_hash) { return dht_->request_scrape(info_hash); }

    // Observation (snapshots, metrics): any thread between create and destruction.
    const engine::dht_engine& dht() const noexcept { return *dht_; }
    const metadata::pipeline& pipeline() const noexcept { return *pipeline_; }
    const api::event_delivery& delivery() const noexcept { return *delivery_; }
    /// nullptr without a retry store.
    const retry::scheduler* retry_store() const noexcept { return retry_.get(); }
    std::uint64_t hashes_dropped() const noexcept { return sink_.hashes_dropped.load(std::memory_order_relaxed); }

private:
    // The DHT side's events, handed to the pipeline and to delivery.
    struct sink final : crawl::crawl_sink {
        metadata::pipeline* pipe = nullptr;
        api::event_delivery* out = nullptr;
        retry::scheduler* store = nullptr;
        std::atomic<std::uint64_t> hashes_dropped{0};
        void on_hash(const hash_event& e) override;
        void on_observation(const observation& o) override;
        void on_scrape(const scrape_event& e) override;
        double metadata_pressure() const override;
    };
    class retry_adapter;

    crawler() = default;
    void launch_stopper_locked();
    void keep_routing_state(const std::string& state_file);
    void stop_everything();

    steady_clock_source clock_;
    std::unique_ptr<api::event_delivery> delivery_;
    std::unique_ptr<retry::scheduler> retry_;
    std::unique_ptr<retry_adapter> retry_port_;
    std::unique_ptr<metadata::pipeline> pipeline_;
    sink sink_;
    std::unique_ptr<engine::dht_engine> dht_;

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    bool started_ = false;
    bool starting_ = false;      ///< start() is running: the stopper is launched when it ends
    bool stop_requested_ = false;
    bool stopped_ = false; ///< stop_everything() has returned
    bool closed_ = false;
    std::thread stopper_;
    std::atomic<int> shutdowns_in_flight_{0};
};

} // namespace dhtc::api
