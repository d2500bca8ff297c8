// The crawl actor: the single owner of all crawl state (node pool, recent probes, queries
// in flight, per-subnet counts, the responsive ring, BEP-51 schedule, lookups, bootstrap).
// It runs on the network thread: in turns, and for each reply to one of our queries as the
// node receives it (parsed once, by the node: see dht::reply_handler). The other threads
// reach it only through the bounded queues below, so nothing here is locked.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "crawl/events.hpp"
#include "crawl/lookups.hpp"
#include "crawl/node_pool.hpp"
#include "crawl/options.hpp"
#include "crawl/parked_nodes.hpp"
#include "dht/rate_limiter.hpp"
#include "crawl/recent_probes.hpp"
#include "crawl/responsive_ring.hpp"
#include "crawl/sampled_nodes.hpp"
#include "crawl/scrapes.hpp"
#include "dht/source_table.hpp"
#include "crawl/subnet_counter.hpp"
#include "crawl/transactions.hpp"
#include "dht/node.hpp"
#include "dht/responder.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"
#include "util/bounded_queue.hpp"

namespace dhtc::crawl {

/// Counters of the crawl side, published by the actor each turn; relaxed atomics readable
/// from any thread (a monitoring view, not a transaction across fields).
struct crawl_stats {
    std::atomic<std::uint64_t> pool_size{0};
    std::atomic<std::uint64_t> pool_capacity{0};
    std::atomic<std::uint64_t> responsive_size{0};
    std::atomic<std::uint64_t> in_flight{0};
    std::atomic<std::uint64_t> queries_find_node{0};
    std::atomic<std::uint64_t> queries_bootstrap{0};
    std::atomic<std::uint64_t> queries_sample{0};
    std::atomic<std::uint64_t> queries_get_peers{0};
    std::atomic<std::uint64_t> queries_ping{0};      ///< queriers pinged while our table was thin
    std::atomic<std::uint64_t> replies{0};
    std::atomic<std::uint64_t> reply_errors{0};      ///< KRPC error replies
    std::atomic<std::uint64_t> reply_malformed{0};   ///< replies to our queries that did not parse
    std::atomic<std::uint64_t> reply_unmatched{0};   ///< unknown/stale `t` or wrong source (dropped)
    std::atomic<std::uint64_t> reply_own_id{0};      ///< replies claiming our id (dropped)
    std::atomic<std::uint64_t> timeouts{0};
    std::atomic<std::uint64_t> send_failed{0};       ///< the transport refused a query datagram
    std::atomic<std::uint64_t> rate_limited_turns{0}; ///< actor turns that ended on an empty query budget
    std::atomic<std::uint64_t> refused_new_destination{0};
    std::atomic<std::uint64_t> refused_subnet{0};
    std::atomic<std::uint64_t> refused_in_flight{0};
    std::atomic<std::uint64_t> refused_policy{0};    ///< destinations refused by the address policy
    std::atomic<std::uint64_t> deferred_destination{0}; ///< work parked until a destination budget allows it
    std::atomic<std::uint64_t> deferred_micros{0};       ///< ... and how long, together (microseconds)
    std::atomic<std::uint64_t> parked_size{0};           ///< find_node candidates parked now
    std::atomic<std::uint64_t> skipped_backoff{0};   ///< queries not sent: the IP sent error 201 or went silent
    std::atomic<std::uint64_t> pool_querier_size{0}; ///< pooled nodes learned only from their queries
    std::atomic<std::uint64_t> querier_share_full{0}; ///< queriers not pooled: their share is full
    std::atomic<std::uint64_t> querier_over_rate{0};  ///< queriers not pooled: admission rate or subnet turn
    std::atomic<std::uint64_t> skipped_recent{0};    ///< nodes not queued again: probed recently
    std::atomic<std::uint64_t> skipped_zero_id{0};
    std::atomic<std::uint64_t> pool_accepted{0};
    std::atomic<std::uint64_t> pool_replaced{0};
    std::atomic<std::uint64_t> pool_duplicate{0};
    std::atomic<std::uint64_t> pool_bogon{0};
    std::atomic<std::uint64_t> pool_over_budget{0};
    std::atomic<std::uint64_t> pool_family_full{0};
    std::atomic<std::uint64_t> samples_received{0};  ///< hashes in sample_infohashes replies
    std::atomic<std::uint64_t> sample_retries{0};    ///< sample_infohashes sent again after a timeout
    std::atomic<std::uint64_t> sample_retry_answers{0}; ///< ... and answered
    std::atomic<std::uint64_t> sample_retry_hashes{0};  ///< hashes those answers queued for a lookup
    std::atomic<std::uint64_t> sample_schedule_dropped{0};
    std::atomic<std::uint64_t> samples_remembered{0};      ///< sampled nodes due after the ring forgets them
    std::atomic<std::uint64_t> sample_skipped_remembered{0}; ///< met again while remembered: not asked
    std::atomic<std::uint64_t> lookups_started{0};
    std::atomic<std::uint64_t> lookups_dropped{0};
    std::atomic<std::uint64_t> lookup_holders_added{0}; ///< a waiting hash sampled by one more node
    std::atomic<std::uint64_t> lookup_peers{0};      ///< peers found for sampled hashes
    std::atomic<std::uint64_t> holder_retries{0};    ///< get_peers sent again to a holder after a timeout
    std::atomic<std::uint64_t> holder_retry_answers{0}; ///< ... and answered
    std::atomic<std::uint64_t> holder_retry_peers{0};   ///< peers those answers brought
    std::atomic<std::uint64_t> lookup_retries{0};    ///< lookups run again after ending on timeouts alone
    std::atomic<std::uint64_t> lookup_retries_found{0}; ///< ... that found peers
    std::atomic<std::uint64_t> retry_lookups{0};     ///< lookups asked for by the retry side
    std::atomic<std::uint64_t> queries_scrape{0};    ///< get_peers with scrape=1 (BEP-33)
    std::atomic<std::uint64_t> scrapes_started{0};
    std::atomic<std::uint64_t> scrapes_completed{0};
    std::atomic<std::uint64_t> scrapes_timed_out{0}; ///< ended by crawl.scrape.timeout_secs (of the completed)
    std::atomic<std::uint64_t> scrapes_dropped{0};   ///< requests refused: the scrape queue was full
    std::atomic<std::uint64_t> bootstrap_rounds{0};
    std::atomic<std::uint64_t> discoveries_dropped{0};
    std::atomic<std::uint64_t> replies_dropped{0};   ///< always 0: replies reach the actor through no queue (issue 30)
    std::atomic<std::uint64_t> query_rate_millis{0}; ///< current query rate x 1000 (pressure feedback)
};

class actor final : public dht::reply_handler {
public:
    /// `sources` is shared with the answering node (dht_service owns it).
    actor(const crawl_options& o, const clock& c, transport& out, const address_policy& policy, crawl_sink& sink,
          source_table& sources, const id20& own_id, std::uint64_t seed);

    /// A reply to one of our queries, from the node (network thread): handled at once.
    void on_reply(const endpoint& from, const krpc::message& m, bool parsed) override;
    /// Fed by the responder: nodes that queried us (crawl candidates). The responder runs on
    /// the thread that runs turn() (the network thread), so the queue takes no lock.
    using discovery_queue = bounded_queue<krpc::node_entry, single_thread_lock>;
    discovery_queue& discoveries() noexcept { return discoveries_; }
    /// Fed by the retry side (any thread): hashes due for a retry without fresh peers. Each
    /// becomes a get_peers lookup like a sampled hash; the peers found arrive as hash events.
    bounded_queue<id20>& lookup_requests() noexcept { return lookup_requests_; }
    /// Fed by the application (any thread): hashes to scrape (BEP-33); each answer reaches
    /// the sink's on_scrape().
    bounded_queue<id20>& scrape_requests() noexcept { return scrape_requests_; }

    /// Resolved endpoints of bootstrap source `index` (the engine resolves names).
    void set_bootstrap_endpoints(std::size_t index, std::vector<endpoint> endpoints);

    /// Nodes saved by an earlier run: queried first (they go to the head of an empty pool),
    /// and the first bootstrap round waits one query timeout for them. Before the first turn.
    void seed_saved_nodes(std::span<const krpc::node_entry> nodes);
    /// Up to `max` nodes for the next run: responsive ones spread over the id space (from a
    /// snapshot published now), then a sample of the pool in what is left (at least a quarter
    /// of `max` when the pool holds that many), so a crawler stopped before its ring filled
    /// still leaves enough to start from. Same thread as turn().
    std::vector<krpc::node_entry> routing_to_save(std::size_t max);

    /// One turn: handle queued events, expire queries, bootstrap when due, publish the
    /// routing snapshot when due, and send the queries the budgets allow.
    void turn();

    /// Close nodes for answers, from the latest published snapshot. Same thread only.
    const dht::close_nodes_source& close_nodes() const noexcept { return snapshot_nodes_; }
    const crawl_stats& stats() const noexcept { return stats_; }
    const id20& own_id() const noexcept { return own_id_; }

private:
    struct snapshot_nodes final : dht::close_nodes_source {
        std::shared_ptr<const routing_snapshot> snap;
        std::size_t closest(const id20& target, krpc::ip_family f, std::span<krpc::node_entry> out) const override {
            return snap ? snap->closest(target, out, f) : 0;
        }
    };
    struct bootstrap_source {
        std::vector<endpoint> endpoints;
        std::size_t cursor = 0;
        time_point next_try{};
        unsigned failures = 0;
        std::size_t awaiting = 0;  ///< queries of the current round still in flight
        bool answered = false;     ///< some query of the current round was answered
        std::uint64_t round = 0;   ///< the last bootstrap round that served (or skipped) it
    };
    struct scheduled_sample {
        time_point due;
        time_point answered; // its last reply to us when it was scheduled
        krpc::node_entry node;
        std::uint8_t attempt = 0; // 0: first send; n: n-th retry after a timeout
        bool operator>(const scheduled_sample& o) const noexcept { return due > o.due; }
    };
    enum class send_result : std::uint8_t {
        sent,
        no_rate,    ///< a global cap (in flight, budget): nothing more this turn
        refused,    ///< this destination, now (its subnet has its cap in flight)
        deferred,   ///< this destination's own budget is spent: later
        backed_off, ///< this destination sent error 201 or went silent: not for a while
        inadmissible, ///< the address policy refuses this destination
    };
    struct send_outcome {
        send_result result;
        time_point ready_at{}; ///< deferred or refused: when to try that destination again
    };

    void handle_reply(const endpoint& from, const krpc::message& m, bool parsed, time_point now);
    void handle_failure(const pending_query& q);
    void handle_timeout(const pending_query& q, time_point now);
    void handle_scrape_reply(const pending_query& q, const endpoint& from, const krpc::response_args& resp);
    bool send_scrape_query(time_point now, std::span<krpc::node_entry> seeds);
    void report_scrape(const std::optional<scrape_result>& r);
    void admit(const krpc::node_entry& e, time_point now, node_pool::origin from = node_pool::origin::answer);
    void admit_querier(const krpc::node_entry& e, time_point now);
    bool queue_ping(const krpc::node_entry& e, time_point now);
    void schedule_sample(const krpc::node_entry& n, time_point due, time_point answered, std::uint8_t attempt = 0);
    void maybe_bootstrap(time_point now);
    void maybe_publish(time_point now);
    void send_queries(time_point now);
    send_outcome send_query(query_kind kind, const krpc::node_entry& to, const id20& target, std::uint32_t context,
                            time_point now, std::uint8_t attempt = 0);
    bool send_lookup_query(time_point now, std::span<krpc::node_entry> seeds);
    void send_sample_query(time_point now);
    bool send_find_node(time_point now, std::size_t& busy_in_a_row);
    void note_deferral(time_point now, time_point until);
    id20 crawl_target();
    id20 sender_id_for(const id20& node_id) const;
    void publish_stats();

    crawl_options options_;
    const clock& clock_;
    transport& out_;
    const address_policy& policy_;
    crawl_sink& sink_;
    source_table& sources_;
    id20 own_id_;
    std::mt19937_64 rng_;

    discovery_queue discoveries_;
    bounded_queue<id20> lookup_requests_;
    std::vector<id20> lookup_batch_;
    bounded_queue<id20> scrape_requests_;
    std::vector<krpc::node_entry> discovery_batch_;

    node_pool pool_;
    parked_nodes parked_; // find_node candidates waiting for a budget; never dropped: a full
                          // parking sends them back to the pool
    recent_probes recent_;
    subnet_counter subnets_;
    responsive_ring ring_;
    transaction_table transactions_;
    lookups lookups_;
    scrapes scrapes_;
    std::vector<scrape_result> scrape_results_; // scratch: the scrapes a turn's deadline ended
    token_bucket query_rate_;
    token_bucket new_destinations_;
    token_bucket sample_rate_;
    token_bucket lookup_rate_;
    token_bucket querier_rate_;
    std::size_t querier_cap_;
    std::vector<subnet_key> querier_subnets_; // admitted this turn: one per subnet
    std::deque<krpc::node_entry> pings_due_;  // queriers to ping while the table is thin (queue_ping)

    std::priority_queue<scheduled_sample, std::vector<scheduled_sample>, std::greater<>> samples_due_;
    std::unordered_set<endpoint, endpoint_hash> sample_scheduled_;
    sampled_nodes sampled_; // nodes whose next sample is too far off for the schedule

    std::vector<bootstrap_source> bootstrap_;
    time_point next_bootstrap_round_{};
    std::uint64_t bootstrap_round_ = 0;
    bool bootstrap_round_open_ = false;
    time_point next_publish_{};
    std::array<std::uint32_t, 256> bucket_counts_{}; // responsive nodes per top id byte
    snapshot_nodes snapshot_nodes_;

    std::string packet_;
    crawl_stats stats_;
};

} // namespace dhtc::crawl
