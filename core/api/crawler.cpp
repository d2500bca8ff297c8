#include "api/crawler.hpp"

#include <algorithm>
#include <optional>

#include "engine/routing_state.hpp"

namespace dhtc::api {

// The pipeline's retry_port over the retry scheduler: the pipeline never sees the
// scheduler's class, and the scheduler never sees the pipeline.
class crawler::retry_adapter final : public metadata::retry_port {
public:
    explicit retry_adapter(retry::scheduler& s) : store_(s) {}

    bool post_claim(const id20& h, std::vector<endpoint> peers, std::function<void(metadata::claim_reply)> answer) override {
        return store_.post_claim(h, std::move(peers), [answer = std::move(answer)](retry::claim_answer a) {
            answer({verdict(a.result), a.attempts});
        });
    }
    void post_failure(const id20& h, failure_class cls) override { store_.post_failure(h, cls); }
    void post_done(const id20& h) override { store_.post_done(h); }
    void post_release(const id20& h, std::uint32_t after_secs) override {
        store_.post_release(h, retry::scheduler::now() + after_secs);
    }
    std::optional<metadata::due_hash> take_due() override {
        auto d = store_.due().try_pop();
        if (!d) return std::nullopt;
        return metadata::due_hash{d->info_hash, std::move(d->peers), d->attempts};
    }
    std::size_t due_depth() const override { return store_.due().depth(); }
    void set_retry_room(std::size_t n) override { store_.set_retry_room(n); }

private:
    static metadata::claim_verdict verdict(retry::claim_result r) noexcept {
        switch (r) {
        case retry::claim_result::fetch: return metadata::claim_verdict::fetch;
        case retry::claim_result::done: return metadata::claim_verdict::done;
        case retry::claim_result::busy: return metadata::claim_verdict::busy;
        case retry::claim_result::deferred: return metadata::claim_verdict::deferred;
        }
        return metadata::claim_verdict::busy;
    }
    retry::scheduler& store_;
};

void crawler::sink::on_hash(const hash_event& e) {
    if (!pipe->ingress().try_push(e)) hashes_dropped.fetch_add(1, std::memory_order_relaxed);
}

void crawler::sink::on_observation(const observation& o) {
    // A hash someone looks up or samples may be a dormant one of ours: wake it sooner (an
    // announce does that through its hash event's claim).
    if (store && o.kind != hash_source::announce) store->post_observation(o.info_hash, std::nullopt);
    observation stamped = o;
    stamped.seen_at = std::chrono::system_clock::now();
    out->post_observation(stamped);
}

void crawler::sink::on_scrape(const scrape_event& e) {
    scrape_event stamped = e;
    stamped.at = std::chrono::system_clock::now();
    out->post_scrape(stamped);
}

double crawler::sink::metadata_pressure() const { return pipe->pressure(); }

std::unique_ptr<crawler> crawler::create(const crawler_options& o, std::string& error, create_failure* why) {
    const auto fail = [&](create_failure f) {
        if (why) *why = f;
        return nullptr;
    };
    if (why) *why = create_failure::none;
    std::unique_ptr<crawler> c(new crawler());
    delivery_options d;
    // Torrents and completions outstanding are bounded by the workers (each holds its slot
    // until its completion was delivered), so the main lane never needs more than this.
    d.main_capacity = 2 * o.metadata.max_worker_count + 64;
    d.observation_capacity = o.observation_queue_capacity;
    d.answer_timeout = std::chrono::milliseconds(o.metadata.gate_timeout_millis);
    c->delivery_ = std::make_unique<api::event_delivery>(d);

    metadata::retry_settings retry;
    if (o.retry.kind != retry::store_kind::none) {
        c->retry_ = retry::scheduler::open(o.retry, error);
        if (!c->retry_) return fail(create_failure::store);
        auto* out = c->delivery_.get();
        c->retry_->on_event([out](const retry_event& e) { out->post_retry(e); });
        c->retry_->on_error([out](const std::string& m) { out->post_error(m); });
        c->retry_port_ = std::make_unique<retry_adapter>(*c->retry_);
        retry.store = c->retry_port_.get();
        retry.slots = retry::retry_slots(o.metadata.max_worker_count, o.retry.budget_share);
        retry.lookup_wait_secs = o.retry.policy.lookup_wait_secs;
        retry.gate_rejected_retry_secs = o.retry.policy.ladder_secs.empty() ? 1800 : o.retry.policy.ladder_secs[0];
        // The DHT engine exists only below; the pipeline asks it through this pointer.
        retry.want_peers = [cp = c.get()](const id20& h) { return cp->dht_ && cp->dht_->request_lookup(h); };
    }
    c->pipeline_ = std::make_unique<metadata::pipeline>(o.metadata, *c->delivery_, c->clock_, std::move(retry));
    c->sink_.pipe = c->pipeline_.get();
    c->sink_.out = c->delivery_.get();
    c->sink_.store = c->retry_.get();
    c->dht_ = engine::dht_engine::create(o.dht, c->sink_, error);
    if (!c->dht_) return fail(create_failure::bind);
    c->keep_routing_state(o.dht.crawl.state_file);
    return c;
}

// The routing-state policy is the engine's (engine/routing_state.hpp); the facade only
// says where the retry store keeps it.
void crawler::keep_routing_state(const std::string& state_file) {
    auto* out = delivery_.get();
    std::optional<engine::routing_state_store> store;
    if (retry_)
        store = engine::routing_state_store{retry_->saved_routing_states(), retry_->saved_routing_error(),
                                            [r = retry_.get()](std::string state) { r->post_routing_state(std::move(state)); }};
    engine::keep_routing_state(*dht_, store ? &*store : nullptr, state_file,
                               [out](std::string why) { out->post_error(std::move(why)); });
}

crawler::~crawler() {
    close(std::nullopt);
    // Delivery first: its queued continuations point into the pipeline.
    delivery_.reset();
    dht_.reset();
    pipeline_.reset();
    retry_.reset();
}

bool crawler::configure(event_handlers handlers, bool polling) {
    std::lock_guard lock(mutex_);
    if (started_ || stop_requested_) return false;
    delivery_->configure(std::move(handlers), polling);
    return true;
}

crawler::start_result crawler::start() {
    {
        std::lock_guard lock(mutex_);
        if (stop_requested_) return start_result::shut_down;
        if (started_) return start_result::already_started;
        started_ = true;
        starting_ = true;
    }
    delivery_->start();
    pipeline_->start();
    dht_->start();
    {
        std::lock_guard lock(mutex_);
        starting_ = false;
        // A shutdown that came while starting waited for this moment.
        if (stop_requested_) launch_stopper_locked();
    }
    changed_.notify_all();
    return start_result::started;
}

void crawler::run() {
    start();
    wait(std::nullopt);
}

bool crawler::wait(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock lock(mutex_);
    const auto requested = [&] { return stop_requested_; };
    if (!timeout) {
        changed_.wait(lock, requested);
        return true;
    }
    return changed_.wait_for(lock, *timeout, requested);
}

bool crawler::shut_down() const noexcept {
    std::lock_guard lock(mutex_);
    return stop_requested_;
}

void crawler::shutdown() noexcept {
    // close() waits for every shutdown() that entered before it frees anything.
    shutdowns_in_flight_.fetch_add(1, std::memory_order_acq_rel);
    {
        std::lock_guard lock(mutex_);
        if (!stop_requested_) {
            stop_requested_ = true;
            if (!starting_) launch_stopper_locked();
        }
    }
    changed_.notify_all();
    shutdowns_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

void crawler::launch_stopper_locked() {
    if (stopper_.joinable()) return;
    delivery_->close_input();
    try {
        stopper_ = std::thread([this] { stop_everything(); });
    } catch (...) {
        // No thread to be had: close() stops everything itself (stopper_ stays empty).
    }
}

// On the stopper thread (or in close() when none could be started). Order matters: the DHT
// stops feeding the pipeline; the pipeline's cancelled rounds release their leases; the
// store applies them and its last events; then delivery has every producer behind it.
void crawler::stop_everything() {
    // A crawler whose create() failed half-way has only its first parts.
    if (dht_) dht_->stop();
    if (pipeline_) pipeline_->stop(); // waits for the answer to a torrent a handler has
    if (retry_) retry_->stop();
    if (delivery_) delivery_->finish();
    {
        std::lock_guard lock(mutex_);
        stopped_ = true;
    }
    changed_.notify_all();
}

crawler::close_result crawler::close(std::optional<std::chrono::milliseconds> timeout) {
    if (!delivery_) return close_result::closed;
    if (delivery_->on_this_thread()) return close_result::from_handler;
    const auto deadline = timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
    shutdown();
    std::thread stopper;
    {
        std::unique_lock lock(mutex_);
        if (closed_) return close_result::closed;
        changed_.wait(lock, [&] { return !starting_; });
        // The stopper waits for a torrent handler that is running (its answer settles the
        // round): that wait counts against `timeout` like the handler's own below.
        const auto stopped = [&] { return stopped_ || !stopper_.joinable(); };
        if (deadline && !changed_.wait_until(lock, *deadline, stopped)) return close_result::timeout;
        stopper.swap(stopper_);
    }
    if (stopper.joinable()) {
        stopper.join();
    } else {
        stop_everything(); // idempotent: every stop() is
    }
    const auto left = [&]() -> std::optional<std::chrono::milliseconds> {
        if (!deadline) return std::nullopt;
        const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
        return std::max(rest, std::chrono::milliseconds(0));
    };
    if (!delivery_->join(left())) return close_result::timeout;
    while (shutdowns_in_flight_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    std::lock_guard lock(mutex_);
    closed_ = true;
    return close_result::closed;
}

} // namespace dhtc::api
