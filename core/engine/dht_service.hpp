// Our whole DHT side without sockets or threads: the answering node, the response budgets,
// the crawl actor and the wiring between them. The engine feeds it datagrams from UDP
// sockets; simulations feed it from an in-memory network on a manual clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "crawl/actor.hpp"
#include "crawl/events.hpp"
#include "crawl/options.hpp"
#include "dht/rate_limiter.hpp"
#include "dht/node.hpp"
#include "dht/responder.hpp"
#include "dht/sample_store.hpp"
#include "dht/token_manager.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"

namespace dhtc::engine {

class dht_service {
public:
    /// `version` is our KRPC `v` (4 bytes) or empty. `policy` must already know our own
    /// endpoints. Everything is built here; nothing runs until handle()/turn() are called.
    dht_service(const crawl::crawl_options& o, const clock& c, transport& out, const address_policy& policy,
                crawl::crawl_sink& sink, const id20& own_id, std::string_view version, std::uint64_t seed);

    /// One received datagram (network thread).
    void handle(const endpoint& from, std::string_view payload) { node_.handle(from, payload); }
    /// One actor turn (network thread); call it after each receive batch and on a timer.
    void turn() { actor_.turn(); }

    const id20& own_id() const noexcept { return actor_.own_id(); }
    const crawl::crawl_stats& crawl_stats() const noexcept { return actor_.stats(); }
    const dht::node_counters& node_counters() const noexcept { return node_.counters(); }
    const dht::responder_counters& responder_counters() const noexcept { return responder_.counters(); }
    const dht::response_budget& response_budget() const noexcept { return budget_; }
    /// Announces dropped because the announced peer failed the address policy.
    std::uint64_t announces_refused_by_policy() const noexcept { return router_.refused_peers.load(std::memory_order_relaxed); }
    /// Announces not reported as observations: over announce_observations_per_sec.
    std::uint64_t announce_observations_dropped() const noexcept {
        return router_.observations_over_rate.load(std::memory_order_relaxed);
    }
    const crawl::source_table& sources() const noexcept { return sources_; }
    const crawl::actor& actor() const noexcept { return actor_; }
    crawl::actor& actor() noexcept { return actor_; }

private:
    // Routes what queries teach us: announces to the sink (for the pipeline, and within
    // their rate as observations for the application), lookups as observations, queriers
    // to the actor's discovery queue.
    struct router final : dht::query_observer {
        router(crawl::crawl_sink& s, crawl::actor& a, crawl::source_table& t, const clock& c, const address_policy& p,
               double announce_observations_per_sec)
            : sink(s), act(a), sources(t), clk(c), policy(p),
              announce_observations(c, announce_observations_per_sec, std::max(1.0, announce_observations_per_sec)) {}
        void on_announce(const id20& ih, const endpoint& peer, const endpoint& source) override {
            // The metadata side will connect to `peer`: an announce must not steer us at
            // private or our own addresses (the same policy as every DHT destination).
            if (!policy.admissible(peer)) {
                refused_peers.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            const auto now = clk.now();
            // The peer is the announcing node's IP: what its answers to our queries took
            // goes along, for the metadata side's deadlines.
            sink.on_hash(crawl::hash_event{ih, peer, source, crawl::hash_source::announce, now,
                                           api::peer_rtt::of(sources.round_trip(peer.address, now))});
            // Anyone holding a token of ours may announce as fast as our answer budgets allow:
            // the rate keeps announces from crowding out the other observations in their lane.
            if (announce_observations.rate() <= 0) return; // not wanted
            if (!announce_observations.try_acquire_above(1, 0, now)) {
                observations_over_rate.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            crawl::observation o{ih, source, crawl::hash_source::announce, now};
            o.port = peer.port;
            sink.on_observation(o);
        }
        void on_get_peers(const id20& ih, const endpoint& source) override {
            sink.on_observation(crawl::observation{ih, source, crawl::hash_source::get_peers, clk.now()});
        }
        void on_querier(const id20& id, const endpoint& source) override { act.discoveries().try_push({id, source}); }
        crawl::crawl_sink& sink;
        crawl::actor& act;
        crawl::source_table& sources;
        const clock& clk;
        const address_policy& policy;
        crawl::token_bucket announce_observations;
        std::atomic<std::uint64_t> refused_peers{0};
        std::atomic<std::uint64_t> observations_over_rate{0};
    };

    crawl::source_table sources_; // shared by the node's answers and the actor's queries
    crawl::actor actor_;
    router router_;
    dht::token_manager tokens_;
    dht::sample_store samples_;
    dht::responder responder_;
    dht::response_budget budget_;
    dht::node node_;
};

} // namespace dhtc::engine
