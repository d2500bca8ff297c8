#include "engine/crawler.hpp"

namespace dhtc::engine {

std::unique_ptr<crawler> crawler::create(const crawler_options& o, app_callbacks callbacks, std::string& error,
                                         create_failure* why) {
    const auto fail = [&](create_failure f) {
        if (why) *why = f;
        return nullptr;
    };
    if (why) *why = create_failure::none;
    std::unique_ptr<crawler> c(new crawler());
    // Torrents and completions outstanding are bounded by the workers (each holds its slot
    // until its completion ran), so the main lane never needs more than this.
    c->delivery_ = std::make_unique<delivery_thread>(std::move(callbacks), 2 * o.metadata.max_worker_count + 64,
                                                     o.observation_queue_capacity);
    metadata::retry_hooks hooks;
    if (o.retry.kind != retry::store_kind::none) {
        c->retry_ = retry::scheduler::open(o.retry, error);
        if (!c->retry_) return fail(create_failure::store);
        auto* out = c->delivery_.get();
        c->retry_->on_event([out](const retry::retry_event& e) { out->post_retry(e); });
        c->retry_->on_error([out](const std::string& m) { out->post_error(m); });
        hooks.store = c->retry_.get();
        hooks.budget_share = o.retry.budget_share;
        hooks.lookup_wait_secs = o.retry.policy.lookup_wait_secs;
        hooks.gate_rejected_retry_secs = o.retry.policy.ladder_secs.empty() ? 1800 : o.retry.policy.ladder_secs[0];
        // The DHT engine exists only below; the pipeline asks it through this pointer.
        hooks.want_peers = [cp = c.get()](const id20& h) { return cp->dht_ && cp->dht_->request_lookup(h); };
    }
    c->pipeline_ = std::make_unique<metadata::pipeline>(o.metadata, *c->delivery_, std::move(hooks));
    c->sink_.pipe = c->pipeline_.get();
    c->sink_.out = c->delivery_.get();
    c->sink_.store = c->retry_.get();
    c->dht_ = dht_engine::create(o.dht, c->sink_, error);
    if (!c->dht_) return fail(create_failure::bind);
    return c;
}

crawler::~crawler() {
    stop();
    if (retry_) retry_->stop();
    if (delivery_) delivery_->stop();
}

void crawler::start() {
    delivery_->start();
    pipeline_->start();
    dht_->start();
}

void crawler::stop() {
    if (dht_) dht_->stop();
    if (pipeline_) pipeline_->stop();
    // After the pipeline: the releases of cancelled rounds are applied before the store closes.
    if (retry_ && !delivery_->on_this_thread()) retry_->stop();
    if (delivery_ && !delivery_->on_this_thread()) delivery_->stop();
}

} // namespace dhtc::engine
