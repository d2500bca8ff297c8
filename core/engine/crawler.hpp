// The whole crawler: the DHT engine (network thread), the metadata pipeline (metadata
// thread) and the delivery thread (application callbacks), wired through bounded queues.
// This is what the C ABI wraps.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine/delivery_thread.hpp"
#include "engine/dht_engine.hpp"
#include "metadata/pipeline.hpp"
#include "retry/scheduler.hpp"

namespace dhtc::engine {

struct crawler_options {
    dht_engine_options dht;
    metadata::pipeline_options metadata;
    std::size_t observation_queue_capacity = 4096;
    retry::retry_options retry;
};

/// Why create() failed.
enum class create_failure : std::uint8_t { none, bind, store };

class crawler {
public:
    /// Binds the sockets; nullptr and `error` on failure. Nothing runs until start().
    /// The retry store is opened here too (on its own thread): a bad connection string, an
    /// unreachable server or an unusable file fails create() with `why` = store.
    static std::unique_ptr<crawler> create(const crawler_options& o, app_callbacks callbacks, std::string& error,
                                           create_failure* why = nullptr);
    ~crawler();

    void start();
    /// Stops crawling and fetching; rounds in flight complete as cancelled (their
    /// completions are delivered); then the delivery thread ends. Idempotent. From a
    /// callback (the delivery thread) it only stops the DHT and the pipeline: the
    /// delivery thread ends when the owner calls stop() or destroys the crawler.
    void stop();

    /// Hands the pipeline a (hash, peer) pair learned outside the DHT (another source, a
    /// test). Any thread; false when the ingress queue is full.
    bool inject_hash(const crawl::hash_event& e) { return pipeline_->ingress().try_push(e); }

    const dht_engine& dht() const noexcept { return *dht_; }
    const metadata::pipeline& pipeline() const noexcept { return *pipeline_; }
    const delivery_thread& delivery() const noexcept { return *delivery_; }
    /// nullptr without a retry store.
    const retry::scheduler* retry_store() const noexcept { return retry_.get(); }
    delivery_thread& delivery() noexcept { return *delivery_; }

private:
    // The DHT side's events, handed to the pipeline and the delivery thread.
    struct sink final : crawl::crawl_sink {
        metadata::pipeline* pipe = nullptr;
        delivery_thread* out = nullptr;
        retry::scheduler* store = nullptr;
        std::atomic<std::uint64_t> hashes_dropped{0};
        void on_hash(const crawl::hash_event& e) override {
            if (!pipe->ingress().try_push(e)) hashes_dropped.fetch_add(1, std::memory_order_relaxed);
        }
        void on_observation(const crawl::observation& o) override {
            // A hash someone looks up or samples may be a dormant one of ours: wake it sooner.
            if (store) store->post_observation(o.info_hash, std::nullopt);
            out->post_observation(o);
        }
        double metadata_pressure() const override { return pipe->pressure(); }
    };

    crawler() = default;
    std::unique_ptr<delivery_thread> delivery_;
    std::unique_ptr<retry::scheduler> retry_;
    std::unique_ptr<metadata::pipeline> pipeline_;
    sink sink_;
    std::unique_ptr<dht_engine> dht_;
};

} // namespace dhtc::engine
