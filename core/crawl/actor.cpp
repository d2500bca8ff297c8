#include "crawl/actor.hpp"

#include <algorithm>
#include <cmath>

#include "dht/node_id.hpp"
#include "krpc/encode.hpp"

namespace dhtc::crawl {

namespace {

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept { c.fetch_add(n, std::memory_order_relaxed); }
void set(std::atomic<std::uint64_t>& c, std::uint64_t v) noexcept { c.store(v, std::memory_order_relaxed); }

// How many bytes of the destination's id our sender id copies when neighbor_sender_id is on:
// close enough to look like its neighbour, while the tail still carries our own bits.
constexpr int neighbor_prefix_bits = 120;
// Work done per turn on the TTL structures, so one turn never stalls on a big purge.
constexpr std::size_t purge_per_turn = 512;
// Consecutive pool heads whose subnet is busy before a turn gives up on find_node.
constexpr std::size_t max_busy_in_a_row = 64;
// A node that sampled nothing new is asked again after this many of its intervals.
constexpr int stale_sample_backoff = 4;
// find_node candidates parked at most (each about 60 bytes); beyond, they wait in the pool.
constexpr std::size_t max_parked_nodes = 65'536;
// A candidate whose subnet has its in-flight cap of queries waits this long: one of them is
// answered or times out (request_timeout_secs) soon, and which one is not known in advance.
constexpr auto busy_subnet_wait = std::chrono::milliseconds(250);

recent_probes_options probe_options(const crawl_options& o) {
    recent_probes_options r;
    r.ttl = std::chrono::seconds(o.pool.recent_probe_ttl_secs);
    // Enough for every probe within one TTL at the full query rate, within sane bounds.
    const double want = o.rate_limit.max_find_node_rate_per_sec * o.pool.recent_probe_ttl_secs * 1.1;
    r.capacity = static_cast<std::size_t>(std::clamp(want, 1024.0, 4'000'000.0));
    return r;
}

} // namespace

actor::actor(const crawl_options& o, const clock& c, transport& out, const address_policy& policy,
             crawl_sink& sink, source_table& sources, const id20& own_id, std::uint64_t seed)
    : options_(o), clock_(c), out_(out), policy_(policy), sink_(sink), sources_(sources), own_id_(own_id), rng_(seed),
      discoveries_(o.scheduler.discovery_event_channel_capacity),
      lookup_requests_(o.bep51.lookup_queue_capacity), scrape_requests_(o.scrape.queue_capacity),
      pool_(c, policy, node_pool_options{o.pool.capacity, 100, 25, o.rate_limit.max_replacements_per_minute, seed ^ 1}),
      parked_(std::min<std::size_t>(o.pool.capacity, max_parked_nodes)),
      recent_(probe_options(o)),
      subnets_(subnet_counter_options{o.rate_limit.max_in_flight_per_subnet, o.rate_limit.max_in_flight, seed ^ 2}),
      ring_(responsive_ring_options{o.pool.responsive_capacity, std::chrono::seconds(o.pool.responsive_ttl_secs),
                                    o.scheduler.routing_snapshot_size, seed ^ 3}),
      transactions_(o.rate_limit.max_in_flight, seed ^ 4), lookups_(o.bep51, [this](const krpc::node_entry& n, time_point now) {
          return sources_.query_ready_at(n.ep, n.id, now);
      }), scrapes_(o.scrape),
      query_rate_(c, o.rate_limit.max_find_node_rate_per_sec, o.rate_limit.burst),
      new_destinations_(token_bucket::per_minute(c, o.rate_limit.max_new_destinations_per_minute)),
      sample_rate_(c, o.bep51.max_sample_rate_per_sec, std::max(1.0, o.bep51.max_sample_rate_per_sec)),
      lookup_rate_(c, o.bep51.max_lookup_rate_per_sec, std::max(1.0, o.bep51.max_lookup_rate_per_sec)),
      querier_rate_(c, o.pool.max_querier_admissions_per_sec, std::max(1.0, o.pool.max_querier_admissions_per_sec)),
      querier_cap_(pool_.capacity() * std::min(o.pool.max_querier_percent, 100u) / 100),
      sampled_(sampled_nodes_options{std::chrono::seconds(21'600), std::size_t{1} << 23, seed ^ 5}) {
    discovery_batch_.reserve(o.scheduler.event_batch_limit);
    bootstrap_.resize(o.bootstrap.sources.size());
    packet_.reserve(1500);
    sample_scheduled_.reserve(std::min<std::size_t>(o.pool.responsive_capacity, 4096)); // grows beyond, as the ring fills
    const auto now = c.now();
    next_bootstrap_round_ = now;
    next_publish_ = now;
    set(stats_.pool_capacity, pool_.capacity());
}

void actor::set_bootstrap_endpoints(std::size_t index, std::vector<endpoint> endpoints) {
    if (index >= bootstrap_.size()) bootstrap_.resize(index + 1);
    bootstrap_[index].endpoints = std::move(endpoints);
    bootstrap_[index].cursor = 0;
    // The first round opens at start, before any name resolved; without this the freshly
    // resolved source would wait a whole bootstrap interval (300 s by default).
    if (!bootstrap_round_open_) next_bootstrap_round_ = {};
}

void actor::seed_saved_nodes(std::span<const krpc::node_entry> nodes) {
    const auto now = clock_.now();
    for (const auto& n : nodes) admit(n, now);
    if (!nodes.empty())
        next_bootstrap_round_ = now + std::chrono::seconds(options_.rate_limit.request_timeout_secs + 1);
}

std::vector<krpc::node_entry> actor::routing_to_save(std::size_t max) {
    std::vector<krpc::node_entry> out;
    next_publish_ = {};
    maybe_publish(clock_.now());
    const auto snap = ring_.snapshot();
    if (!snap || max == 0) return out;
    const std::size_t from_pool = std::min(pool_.size(), max / 4);
    const std::size_t from_ring = max - from_pool;
    const std::size_t total = snap->size();
    // Every k-th node of the id-sorted lists: the whole id space, not one corner of it.
    const std::size_t step = std::max<std::size_t>(1, (total + from_ring - 1) / from_ring);
    for (auto f : {krpc::ip_family::v4, krpc::ip_family::v6}) {
        const auto entries = snap->entries(f);
        for (std::size_t i = 0; i < entries.size() && out.size() < from_ring; i += step) out.push_back(entries[i]);
    }
    // The ring first: a restart queries the saved nodes in this order.
    pool_.sample(max - out.size(), out);
    return out;
}

void actor::turn() {
    const auto now = clock_.now();

    discovery_batch_.clear();
    discoveries_.pop_batch(discovery_batch_, options_.scheduler.event_batch_limit);
    querier_subnets_.clear();
    for (const auto& n : discovery_batch_) admit_querier(n, now);

    lookup_batch_.clear();
    lookup_requests_.pop_batch(lookup_batch_, options_.scheduler.event_batch_limit);
    for (const auto& h : lookup_batch_)
        if (lookups_.want_again(h)) bump(stats_.retry_lookups);
    lookup_batch_.clear();
    scrape_requests_.pop_batch(lookup_batch_, options_.scheduler.event_batch_limit);
    for (const auto& h : lookup_batch_)
        if (!scrapes_.want(h, now)) bump(stats_.scrapes_dropped);
    // A scrape that could not start (no node known) or whose answers did not come ends now.
    scrape_results_.clear();
    scrapes_.expire(now, scrape_results_);
    for (const auto& r : scrape_results_) report_scrape(r);

    transactions_.expire(now, std::chrono::seconds(options_.rate_limit.request_timeout_secs),
                         [&](const pending_query& q) {
                             bump(stats_.timeouts);
                             subnets_.release(q.to);
                             sources_.on_silence(q.to, q.node_id, now);
                             handle_timeout(q, now);
                         });
    recent_.purge(now, purge_per_turn);
    ring_.purge(now, purge_per_turn);

    maybe_publish(now);
    maybe_bootstrap(now);
    send_queries(now);
    publish_stats();
}

// ---- replies ------------------------------------------------------------------------------

void actor::on_reply(const endpoint& from, const krpc::message& m, bool parsed) {
    handle_reply(from, m, parsed, clock_.now());
}

void actor::handle_reply(const endpoint& from, const krpc::message& msg, bool parsed, time_point now) {
    const auto q = transactions_.close(msg.transaction, from);
    if (!q) {
        bump(stats_.reply_unmatched);
        return;
    }
    subnets_.release(q->to);
    if (!parsed) {
        bump(stats_.reply_malformed);
        handle_failure(*q);
        return;
    }
    if (msg.type == krpc::message_type::error) {
        bump(stats_.reply_errors);
        // 201 is BEP-5's "generic error", which libtorrent and others send as "too many
        // requests": whatever it says, an IP that sends it gets fewer of our packets.
        if (msg.err.code == krpc::error_generic) sources_.on_rate_limited(from, q->node_id, now);
        // A node that answers with an error is alive: for bootstrap that is a success.
        if (q->kind == query_kind::bootstrap && q->context < bootstrap_.size()) {
            auto& src = bootstrap_[q->context];
            src.answered = true;
            if (src.awaiting) --src.awaiting;
        } else {
            handle_failure(*q);
        }
        return;
    }
    if (msg.id == own_id_) {
        bump(stats_.reply_own_id);
        handle_failure(*q);
        return;
    }
    bump(stats_.replies);
    // Replies are handled as they arrive (node.cpp hands them over in place): now - sent_at
    // is their round trip.
    sources_.on_answered(from, msg.id, now, now - q->sent_at);
    const krpc::node_entry responder{msg.id, from};
    ring_.insert(msg.id, from, now, msg.read_only);

    const auto& resp = msg.response;
    if (resp.has_nodes)
        for (const auto& e : resp.nodes) admit(e, now);
    if (resp.has_nodes6)
        for (const auto& e : resp.nodes6) admit(e, now);

    switch (q->kind) {
    case query_kind::bootstrap:
        if (q->context < bootstrap_.size()) {
            auto& src = bootstrap_[q->context];
            src.answered = true;
            src.failures = 0;
            if (src.awaiting) --src.awaiting;
        }
        [[fallthrough]];
    case query_kind::find_node:
    case query_kind::ping:
        if (options_.bep51.enabled && !msg.read_only) {
            if (sampled_.contains(responder.ep, now))
                bump(stats_.sample_skipped_remembered);
            else
                schedule_sample(responder, now, now);
        }
        break;
    case query_kind::sample:
        // Only a reply with `samples` proves BEP-51 support; nodes that answered like
        // find_node are not asked again.
        if (resp.has_samples) {
            bump(stats_.samples_received, resp.sample_count());
            std::size_t fresh = 0;
            for (std::size_t i = 0; i < resp.sample_count(); ++i) {
                const id20 h = resp.sample(i);
                sink_.on_observation(observation{h, from, hash_source::bep51_sample, now});
                if (lookups_.want(h, responder)) ++fresh; // it stores the hash's peers: asked first
            }
            if (q->attempt > 0) {
                bump(stats_.sample_retry_answers);
                bump(stats_.sample_retry_hashes, fresh);
            }
            const std::int64_t interval = resp.has_interval ? resp.interval : 0;
            auto wait = std::chrono::seconds(std::max<std::int64_t>(interval, options_.bep51.min_interval_secs));
            // A node whose samples we all knew has little new to show soon: asking it at
            // its interval regardless spent a third of our queries in the test network.
            if (fresh == 0) wait *= stale_sample_backoff;
            // Due after it leaves the responsive ring, the node would be skipped at its turn
            // anyway, and six hours in the schedule (libtorrent's interval) would hold a slot
            // a new node needs: it is remembered instead, and asked again when met again
            // after its interval.
            if (wait > std::chrono::seconds(options_.pool.responsive_ttl_secs)) {
                sampled_.insert(responder.ep, now);
                bump(stats_.samples_remembered);
            } else {
                schedule_sample(responder, now + wait, now);
            }
        }
        break;
    case query_kind::get_peers: {
        std::size_t peers = 0;
        if (resp.has_values) {
            for (const endpoint& peer : resp.values) {
                if (!policy_.admissible(peer)) continue;
                // The peer's IP is often a DHT node we asked too: its round trip goes along.
                sink_.on_hash(hash_event{q->target, peer, from, hash_source::sample, now,
                                         api::peer_rtt::of(sources_.round_trip(peer.address, now))});
                ++peers;
            }
            bump(stats_.lookup_peers, peers);
        }
        // A lookup's nodes of the other family are of no use to it; the pool got them above.
        const auto& toward = from.address.is_v6() ? resp.nodes6 : resp.nodes;
        lookups_.on_reply(q->context, from, toward, peers);
        break;
    }
    case query_kind::scrape: handle_scrape_reply(*q, from, resp); break;
    }
}

// A scrape's reply: its filters (or, from a node without BEP-33, its values) go to the
// scrape; its peers are not fetched from (a scrape is asked for hashes already held).
void actor::handle_scrape_reply(const pending_query& q, const endpoint& from, const krpc::response_args& resp) {
    scrapes::reply r;
    r.nodes = from.address.is_v6() ? &resp.nodes6 : &resp.nodes;
    r.seeds_filter = resp.seeds_filter;
    r.peers_filter = resp.peers_filter;
    if (resp.has_values) r.values = &resp.values;
    report_scrape(scrapes_.on_reply(q.context, q.target, from, r));
}

void actor::report_scrape(const std::optional<scrape_result>& r) {
    if (!r) return;
    bump(stats_.scrapes_completed);
    if (r->timed_out) bump(stats_.scrapes_timed_out);
    scrape_event e;
    e.info_hash = r->info_hash;
    e.seeders = r->seeders;
    e.leechers = r->leechers;
    e.responders = r->responders;
    e.queried = r->queried;
    e.timed_out = r->timed_out;
    sink_.on_scrape(e); // its `at` is the sink's to stamp
}

void actor::handle_failure(const pending_query& q) {
    switch (q.kind) {
    case query_kind::bootstrap:
        if (q.context < bootstrap_.size()) {
            auto& src = bootstrap_[q.context];
            if (src.awaiting) --src.awaiting;
            if (src.awaiting == 0 && !src.answered) {
                // Nobody from this source answered the whole round: back off exponentially.
                ++src.failures;
                const unsigned shift = std::min(src.failures - 1, 16u);
                const auto backoff = std::min<std::uint64_t>(
                    std::uint64_t{options_.bootstrap.source_backoff_base_secs} << shift,
                    options_.bootstrap.source_backoff_max_secs);
                src.next_try = clock_.now() + std::chrono::seconds(backoff);
            }
        }
        break;
    case query_kind::get_peers:
        lookups_.on_failure(q.context, q.to);
        break;
    case query_kind::scrape: report_scrape(scrapes_.on_failure(q.context, q.target, q.to)); break;
    case query_kind::find_node:
    case query_kind::sample:
    case query_kind::ping:
        break;
    }
}

// An unanswered query. The ones a hash's discovery hangs on are asked again (issue 32: one
// dropped datagram must not cost a torrent): a node's sample (its hashes are seen nowhere
// else until its next interval) and a lookup's get_peers to a holder (lookups). find_node
// stays send-once: the crawl frontier has plenty of other nodes to ask.
void actor::handle_timeout(const pending_query& q, time_point now) {
    switch (q.kind) {
    case query_kind::sample:
        if (q.attempt < options_.bep51.sample_retries) {
            bump(stats_.sample_retries);
            // Due now: sampling runs first among the due work once the turn's lookups are sent.
            schedule_sample({q.node_id, q.to}, now, q.sent_at, static_cast<std::uint8_t>(q.attempt + 1));
        }
        break;
    case query_kind::get_peers: lookups_.on_timeout(q.context, q.to, now); break;
    default: handle_failure(q); break;
    }
}

// A node that queried us is a crawl candidate too, but anyone can send queries from any
// number of addresses: such nodes enter the pool at a bounded rate, one per subnet per turn,
// and never hold more than their share of it.
void actor::admit_querier(const krpc::node_entry& e, time_point now) {
    if (pool_.querier_count() >= querier_cap_) {
        bump(stats_.querier_share_full);
        return;
    }
    const subnet_key subnet = subnet_of(canonical(e.ep.address));
    if (std::find(querier_subnets_.begin(), querier_subnets_.end(), subnet) != querier_subnets_.end() ||
        !querier_rate_.try_acquire_above(1, 0, now)) {
        bump(stats_.querier_over_rate);
        return;
    }
    querier_subnets_.push_back(subnet);
    if (ring_.size() < options_.pool.thin_table_nodes && queue_ping(e, now)) return;
    admit(e, now, node_pool::origin::query);
}

// Our answers offer only nodes that answered us. While those are few, a querier is pinged
// ahead of the pool (send_queries) rather than after it: if it answers, it joins the ring
// (handle_reply) and so our answers. At most thin_table_nodes wait; the rest go to the pool.
bool actor::queue_ping(const krpc::node_entry& e, time_point now) {
    if (e.id.is_zero() || e.id == own_id_ || recent_.contains(e.ep, now) || ring_.contains(e.ep, now)) return false;
    if (pings_due_.size() >= options_.pool.thin_table_nodes) return false;
    if (std::any_of(pings_due_.begin(), pings_due_.end(), [&](const krpc::node_entry& p) { return p.ep == e.ep; }))
        return true;
    pings_due_.push_back(e);
    return true;
}

void actor::admit(const krpc::node_entry& e, time_point now, node_pool::origin from) {
    // protocol.md d.15: an all-zero id is nobody's; our own id is us or an impostor.
    if (e.id.is_zero() || e.id == own_id_) {
        bump(stats_.skipped_zero_id);
        return;
    }
    if (recent_.contains(e.ep, now) || ring_.contains(e.ep, now)) {
        bump(stats_.skipped_recent);
        return;
    }
    switch (pool_.push(e, from)) {
    case push_result::accepted: bump(stats_.pool_accepted); break;
    case push_result::replaced_oldest: bump(stats_.pool_replaced); break;
    case push_result::duplicate: bump(stats_.pool_duplicate); break;
    case push_result::bogon: bump(stats_.pool_bogon); break;
    case push_result::family_full: bump(stats_.pool_family_full); break;
    case push_result::over_budget: bump(stats_.pool_over_budget); break;
    }
}

void actor::schedule_sample(const krpc::node_entry& n, time_point due, time_point answered, std::uint8_t attempt) {
    if (sample_scheduled_.contains(n.ep)) return;
    if (samples_due_.size() >= options_.pool.responsive_capacity) {
        bump(stats_.sample_schedule_dropped);
        return;
    }
    sample_scheduled_.insert(n.ep);
    samples_due_.push({due, answered, n, attempt});
}

// ---- periodic work ------------------------------------------------------------------------

void actor::maybe_publish(time_point now) {
    if (now < next_publish_) return;
    next_publish_ = now + std::chrono::milliseconds(options_.scheduler.snapshot_refresh_millis);
    ring_.publish(now);
    snapshot_nodes_.snap = ring_.snapshot();
    bucket_counts_.fill(0);
    if (snapshot_nodes_.snap) {
        for (auto f : {krpc::ip_family::v4, krpc::ip_family::v6})
            for (const auto& e : snapshot_nodes_.snap->entries(f)) ++bucket_counts_[e.id.bytes[0]];
    }
}

void actor::maybe_bootstrap(time_point now) {
    if (!bootstrap_round_open_) {
        if (now < next_bootstrap_round_ || pool_.size() >= options_.pool.low_watermark) return;
        bootstrap_round_open_ = true;
        ++bootstrap_round_;
        bump(stats_.bootstrap_rounds);
    }
    // A round may span several turns: bootstrap queries draw on the query budget like
    // any other, so a drained bucket postpones the remaining sources to the next turn.
    for (std::size_t i = 0; i < bootstrap_.size(); ++i) {
        auto& src = bootstrap_[i];
        if (src.round == bootstrap_round_) continue;
        if (src.endpoints.empty() || now < src.next_try || src.awaiting > 0) {
            src.round = bootstrap_round_; // nothing to do for this one in this round
            continue;
        }
        // Bootstrap runs before crawl queries in a turn, so it gets the tokens that accrued
        // since the last turn; a source takes what is there (at least one query) rather
        // than waiting for its full share, which a saturated crawl would never leave.
        const auto tokens = static_cast<std::size_t>(query_rate_.available());
        if (tokens == 0) return;
        const std::size_t n = std::min({options_.bootstrap.max_nodes_per_round, src.endpoints.size(), tokens});
        src.round = bootstrap_round_;
        src.answered = false;
        for (std::size_t k = 0; k < n; ++k) {
            const endpoint to = src.endpoints[src.cursor++ % src.endpoints.size()];
            if (send_query(query_kind::bootstrap, {id20{}, to}, own_id_, static_cast<std::uint32_t>(i), now).result ==
                send_result::sent)
                ++src.awaiting;
        }
        // Nothing could be sent (policy, in-flight caps): tried again next round, no backoff.
    }
    bootstrap_round_open_ = false;
    next_bootstrap_round_ = now + std::chrono::seconds(std::max(options_.bootstrap.interval_secs, 1u));
}

void actor::send_queries(time_point now) {
    double depth = sink_.metadata_pressure();
    depth = depth >= 0.0 ? std::min(depth, 1.0) : 0.0; // also maps NaN to 0
    const double pressure = pressure_factor(static_cast<std::size_t>(std::lround(depth * 10000.0)), 10000,
                                            options_.rate_limit.metadata_pressure_floor_percent);
    query_rate_.set_rate(options_.rate_limit.max_find_node_rate_per_sec * pressure);
    set(stats_.query_rate_millis, static_cast<std::uint64_t>(query_rate_.rate() * 1000.0));

    // Work a budget holds back is parked until that budget allows it (the parked find_node
    // candidates, the sample schedule, the lookups' queues), so each step below either sends,
    // parks something once, or finds nothing due; a turn whose work is all parked ends at once.
    std::array<krpc::node_entry, lookups::width> seeds;
    std::size_t busy_in_a_row = 0;
    for (std::size_t step = 0; step < options_.scheduler.node_batch_limit; ++step) {
        if (query_rate_.available() < 1.0) {
            bump(stats_.rate_limited_turns);
            return;
        }
        if (transactions_.in_flight() >= transactions_.capacity()) {
            bump(stats_.refused_in_flight);
            return;
        }
        // 0. Queriers to ping while our table is thin: a ping the budgets defer sends the
        //    querier to the pool like any other.
        if (!pings_due_.empty()) {
            const auto e = pings_due_.front();
            pings_due_.pop_front();
            if (ring_.contains(e.ep, now) || recent_.contains(e.ep, now)) continue;
            if (send_query(query_kind::ping, e, e.id, 0, now).result != send_result::sent)
                admit(e, now, node_pool::origin::query);
            continue;
        }
        // 1. get_peers for sampled hashes, then BEP-33 scrapes: both before new crawling.
        if (send_lookup_query(now, seeds)) continue;
        if (send_scrape_query(now, seeds)) continue;
        // 2. BEP-51 samples from responsive nodes whose interval has passed.
        if (!samples_due_.empty() && samples_due_.top().due <= now && sample_rate_.available() >= 1.0) {
            send_sample_query(now);
            continue;
        }
        // 3. find_node to a parked candidate whose budget is back, else the oldest in the pool.
        if (!send_find_node(now, busy_in_a_row)) return;
    }
}

// 1. Lookups start at their own rate, seeded with the responsive nodes closest to the hash,
//    and take precedence over new crawling. The nodes that sampled a hash store its peers and
//    are asked first; a hash none of whose holders can be asked yet is parked (lookups).
bool actor::send_lookup_query(time_point now, std::span<krpc::node_entry> seeds) {
    if (lookups_.has_queued() && lookups_.has_free_slot() && snapshot_nodes_.snap && lookup_rate_.available() >= 1.0) {
        const auto parkings = lookups_.parkings();
        const double parked_seconds = lookups_.parked_seconds();
        if (const auto target = lookups_.next_to_start(now)) {
            std::size_t n = snapshot_nodes_.closest(*target, krpc::ip_family::v4, seeds.first(8));
            n += snapshot_nodes_.closest(*target, krpc::ip_family::v6, seeds.subspan(n, 8));
            if (n > 0 && lookups_.start(seeds.first(n))) {
                lookup_rate_.try_acquire();
                bump(stats_.lookups_started);
            }
        }
        bump(stats_.deferred_destination, lookups_.parkings() - parkings);
        bump(stats_.deferred_micros, static_cast<std::uint64_t>((lookups_.parked_seconds() - parked_seconds) * 1e6));
    }
    const auto q = lookups_.next(now);
    if (!q) return false;
    const auto sent = send_query(query_kind::get_peers, q->to, q->target, q->slot, now);
    if (sent.result == send_result::deferred) {
        note_deferral(now, sent.ready_at);
        lookups_.on_deferred(q->slot, q->to.ep, sent.ready_at);
    } else if (sent.result != send_result::sent) {
        lookups_.on_failure(q->slot, q->to.ep);
    }
    return true;
}

// 2. A sample whose node's budget is spent is scheduled again for when it is back.
void actor::send_sample_query(time_point now) {
    const auto s = samples_due_.top();
    samples_due_.pop();
    sample_scheduled_.erase(s.node.ep);
    // Responsive still, even when a busy ring has already let it go: sampling runs slower
    // than a crawl finds new nodes, so the first turns wait minutes.
    const bool responsive =
        ring_.contains(s.node.ep, now) || now - s.answered < std::chrono::seconds(options_.pool.responsive_ttl_secs);
    if (!responsive) return;
    sample_rate_.try_acquire();
    const auto sent = send_query(query_kind::sample, s.node, dht::random_id(rng_), 0, now, s.attempt);
    if (sent.result == send_result::deferred) {
        note_deferral(now, sent.ready_at);
        schedule_sample(s.node, sent.ready_at, s.answered, s.attempt);
    } else if (sent.result != send_result::sent) {
        schedule_sample(s.node, now + std::chrono::seconds(options_.bep51.min_interval_secs), s.answered);
    }
}

// 3. One find_node. False when the turn should end (nothing to crawl now, or the
//    new-destination budget is spent).
bool actor::send_find_node(time_point now, std::size_t& busy_in_a_row) {
    if (new_destinations_.available() < 1.0) {
        bump(stats_.refused_new_destination);
        return false;
    }
    auto node = parked_.pop_due(now);
    if (!node) node = pool_.pop();
    if (!node) return false;
    if (recent_.contains(node->ep, now)) {
        bump(stats_.skipped_recent);
        return true;
    }
    const auto park = [&](time_point until) {
        if (parked_.park(*node, until)) return true;
        // A full parking: back of the line instead, never dropped. A pool full of one spent
        // destination must not make every turn spin through the whole batch.
        pool_.push(*node);
        return ++busy_in_a_row < max_busy_in_a_row;
    };
    const auto sent = send_query(query_kind::find_node, *node, crawl_target(), 0, now);
    switch (sent.result) {
    case send_result::sent:
        busy_in_a_row = 0;
        new_destinations_.try_acquire();
        return true;
    case send_result::refused: return park(sent.ready_at); // its subnet is busy
    case send_result::deferred:
        note_deferral(now, sent.ready_at);
        return park(sent.ready_at);
    case send_result::no_rate: pool_.push(*node); return false;
    case send_result::backed_off: // it sent error 201 or went silent
    case send_result::inadmissible: return true;
    }
    return true;
}

void actor::note_deferral(time_point now, time_point until) {
    bump(stats_.deferred_destination);
    if (until > now)
        bump(stats_.deferred_micros,
             static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(until - now).count()));
}

actor::send_outcome actor::send_query(query_kind kind, const krpc::node_entry& to, const id20& target,
                                     std::uint32_t context, time_point now, std::uint8_t attempt) {
    if (!policy_.admissible(to.ep)) {
        bump(stats_.refused_policy);
        return {send_result::inadmissible};
    }
    switch (subnets_.try_acquire(to.ep)) {
    case subnet_acquire::ok: break;
    case subnet_acquire::subnet_full: bump(stats_.refused_subnet); return {send_result::refused, now + busy_subnet_wait};
    case subnet_acquire::total_full: bump(stats_.refused_in_flight); return {send_result::no_rate};
    }
    // Every datagram to a node and to its IP counts, answers too (the node draws on the same table).
    const auto budget = sources_.try_query(to.ep, to.id, now);
    if (budget.verdict != send_verdict::ok) {
        subnets_.release(to.ep);
        if (budget.verdict == send_verdict::backed_off) {
            bump(stats_.skipped_backoff);
            return {send_result::backed_off, budget.ready_at};
        }
        return {send_result::deferred, budget.ready_at};
    }
    // A get_peers reply must name the hash looked up, not the node asked (handle_reply).
    const auto t = transactions_.open(
        pending_query{to.ep, to.id, target, now, kind, context, attempt});
    if (!t) {
        subnets_.release(to.ep);
        bump(stats_.refused_in_flight);
        return {send_result::no_rate};
    }
    const krpc::query_header h{std::string_view(t->data(), t->size()), sender_id_for(to.id), {}};
    packet_.clear();
    bool encoded = false;
    switch (kind) {
    case query_kind::bootstrap:
    case query_kind::find_node:
        encoded = krpc::encode_find_node(packet_, h, target);
        bump(kind == query_kind::bootstrap ? stats_.queries_bootstrap : stats_.queries_find_node);
        break;
    case query_kind::sample:
        encoded = krpc::encode_sample_infohashes(packet_, h, target);
        bump(stats_.queries_sample);
        break;
    case query_kind::get_peers:
        encoded = krpc::encode_get_peers(packet_, h, target);
        bump(stats_.queries_get_peers);
        break;
    case query_kind::scrape:
        encoded = krpc::encode_get_peers(packet_, h, target, krpc::want::none, true);
        bump(stats_.queries_scrape);
        break;
    case query_kind::ping:
        encoded = krpc::encode_ping(packet_, h);
        bump(stats_.queries_ping);
        break;
    }
    query_rate_.try_acquire();
    if (kind == query_kind::find_node || kind == query_kind::bootstrap || kind == query_kind::ping)
        recent_.insert(to.ep, now);
    // A datagram the transport refused stays an open transaction and times out like a lost
    // one: one failure path instead of two, and the budget was spent anyway.
    if (!encoded || !out_.send(to.ep, packet_)) bump(stats_.send_failed);
    return {send_result::sent, now};
}

// 1b. BEP-33 scrapes the application asked for: started when a slot is free, seeded like a
//     lookup, and sent before crawling (they are few, and someone waits for each).
bool actor::send_scrape_query(time_point now, std::span<krpc::node_entry> seeds) {
    if (scrapes_.has_queued() && scrapes_.has_free_slot() && snapshot_nodes_.snap) {
        const id20 target = scrapes_.front();
        std::size_t n = snapshot_nodes_.closest(target, krpc::ip_family::v4, seeds.first(8));
        n += snapshot_nodes_.closest(target, krpc::ip_family::v6, seeds.subspan(n, 8));
        if (n > 0 && scrapes_.start(seeds.first(n))) bump(stats_.scrapes_started);
    }
    const auto q = scrapes_.next();
    if (!q) return false;
    if (send_query(query_kind::scrape, q->to, q->target, q->slot, now).result != send_result::sent)
        report_scrape(scrapes_.on_failure(q->slot, q->target, q->to.ep));
    return true;
}

id20 actor::crawl_target() {
    const auto roll = static_cast<unsigned>(rng_() % 100);
    id20 target = dht::random_id(rng_);
    if (roll >= options_.target.random_walk_percent) {
        // Sparse bucket: aim where our responsive set knows the fewest nodes.
        const auto fewest = *std::min_element(bucket_counts_.begin(), bucket_counts_.end());
        std::array<std::uint8_t, 256> candidates;
        std::size_t n = 0;
        for (std::size_t b = 0; b < 256; ++b)
            if (bucket_counts_[b] == fewest) candidates[n++] = static_cast<std::uint8_t>(b);
        target.bytes[0] = candidates[rng_() % n];
    }
    return target;
}

id20 actor::sender_id_for(const id20& node_id) const {
    if (!options_.target.neighbor_sender_id || node_id.is_zero()) return own_id_;
    return dht::id_near(node_id, own_id_, neighbor_prefix_bits);
}

void actor::publish_stats() {
    set(stats_.pool_size, pool_.size());
    set(stats_.responsive_size, ring_.size());
    set(stats_.pool_querier_size, pool_.querier_count());
    set(stats_.in_flight, transactions_.in_flight());
    set(stats_.lookups_dropped, lookups_.dropped());
    set(stats_.lookup_holders_added, lookups_.holders_added());
    set(stats_.holder_retries, lookups_.holder_retries());
    set(stats_.holder_retry_answers, lookups_.holder_retry_answers());
    set(stats_.holder_retry_peers, lookups_.holder_retry_peers());
    set(stats_.lookup_retries, lookups_.lookup_retries());
    set(stats_.lookup_retries_found, lookups_.lookup_retries_found());
    set(stats_.parked_size, parked_.size());
    set(stats_.discoveries_dropped, discoveries_.dropped());
}

} // namespace dhtc::crawl
