#include "engine/crawler.hpp"

namespace dhtc::engine {

std::unique_ptr<crawler> crawler::create(const crawler_options& o, app_callbacks callbacks, std::string& error) {
    std::unique_ptr<crawler> c(new crawler());
    // Torrents and completions outstanding are bounded by the workers (each holds its slot
    // until its completion ran), so the main lane never needs more than this.
    c->delivery_ = std::make_unique<delivery_thread>(std::move(callbacks), 2 * o.metadata.max_worker_count + 64,
                                                     o.observation_queue_capacity);
    c->pipeline_ = std::make_unique<metadata::pipeline>(o.metadata, *c->delivery_);
    c->sink_.pipe = c->pipeline_.get();
    c->sink_.out = c->delivery_.get();
    c->dht_ = dht_engine::create(o.dht, c->sink_, error);
    if (!c->dht_) return nullptr;
    return c;
}

crawler::~crawler() {
    stop();
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
    if (delivery_ && !delivery_->on_this_thread()) delivery_->stop();
}

} // namespace dhtc::engine
