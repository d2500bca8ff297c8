// Where the DHT side delivers what it learns: captured (info hash, peer) pairs for the
// metadata pipeline and observed hashes for the application. The event types themselves
// are the library's (model/events.hpp); this is the crawl side's own port.
#pragma once

#include "model/events.hpp"

namespace dhtc::crawl {

using api::hash_event;
using api::hash_source;
using api::observation;
using api::scrape_event;

/// Called on the network thread: implementations push onto bounded queues and never block.
class crawl_sink {
public:
    virtual ~crawl_sink() = default;
    virtual void on_hash(const hash_event& e) = 0;
    virtual void on_observation(const observation& o) = 0;
    /// A scrape ended (its `at` is left for the sink to stamp). Sinks that never request
    /// scrapes need not listen.
    virtual void on_scrape(const scrape_event&) {}
    /// 0.0 (idle) .. 1.0 (full): how deep the metadata pipeline's queue is, for the
    /// query-rate feedback.
    virtual double metadata_pressure() const = 0;
};

/// A sink that keeps nothing: for the DHT side on its own (benchmarks, engine tests).
class null_sink final : public crawl_sink {
public:
    void on_hash(const hash_event&) override {}
    void on_observation(const observation&) override {}
    double metadata_pressure() const override { return 0.0; }
};

} // namespace dhtc::crawl
