#include "metadata/pipeline.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "metadata/delivered_filter.hpp"
#include "util/hashing.hpp"
#include "metadata/peer_failure_cache.hpp"
#include "metadata/peer_session.hpp"
#include "metadata/pending_queue.hpp"
#include "streams/utp_stream.hpp"
#include "metadata/shared_pieces.hpp"
#include "util/clock.hpp"

// Coroutine note: g++ 12 miscompiles `co_await` inside an if/while condition; every await
// here is assigned to a variable first.

namespace dhtc::metadata {

namespace {

constexpr auto drain_interval = std::chrono::milliseconds(5);
constexpr std::size_t drain_batch = 1024;
constexpr std::size_t max_job_peers = 8; ///< peers remembered per job (merges included)

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept { c.fetch_add(n, std::memory_order_relaxed); }

// Built outside the coroutines: g++ 12 rejects brace-initialising aggregates that hold
// arrays (id20) inside a coroutine body ("array used as initializer").
completion make_completion(const id20& key, outcome o, failure_class f, unsigned attempts,
                           std::optional<endpoint> peer, std::optional<api::stream_encryption> enc = std::nullopt,
                           std::optional<api::stream_transport> tr = std::nullopt) {
    completion c;
    if (peer) c.encryption = enc;
    if (peer) c.transport = tr;
    c.info_hash = key;
    c.result = o;
    c.failure = f;
    c.attempts = attempts;
    c.peer = peer;
    return c;
}

struct job {
    explicit job(asio::io_context& io) : wake(io) {}
    id20 key;
    std::vector<endpoint> peers; ///< freshest first; capped at max_job_peers
    std::vector<bool> tried;
    std::vector<api::peer_rtt> rtts; ///< per peer: the DHT's round trip to it, when known
    bool gated = false;     ///< passed the gate: exactly one completion is owed
    bool completed = false;
    unsigned attempts = 0;
    std::optional<gate_verdict> gate_answer;
    std::optional<torrent_reply> ack;
    asio::steady_timer wake; ///< woken by answers from the delivery thread and by sessions
    std::vector<std::unique_ptr<asio::cancellation_signal>> sessions;
    time_point queued_at{};
    // Retry store.
    bool retry = false;        ///< a due hash leased from the store (not a fresh sighting)
    bool holds_lease = false;  ///< the store leased this hash to us: its outcome is owed there
    std::uint32_t round = 0;   ///< failed rounds before this one
    std::optional<claim_reply> claim;
    bool waiting_for_peers = false;
    std::optional<id20> sibling; ///< a hybrid's other key, remembered as done with this one
    /// Per session of the last run_sessions: another round of ours had that peer open already.
    std::vector<bool> crowded;
    bool refused_while_crowded = false; ///< a session of this round was (crowded_saves)
    /// Waits for the application's answer to a torrent of its other key (ended_as_sibling):
    /// shutdown lets it end as that answer says.
    bool awaiting_answer = false;

    /// Makes `p` pickable again.
    void untry(const endpoint& p) {
        for (std::size_t i = 0; i < peers.size(); ++i)
            if (peers[i] == p) tried[i] = false;
    }

    void add_peer(const endpoint& p, api::peer_rtt rtt = {}) {
        for (std::size_t i = 0; i < peers.size(); ++i)
            if (peers[i] == p) {
                if (rtt.known()) rtts[i] = rtt; // the later measurement wins
                return;
            }
        if (peers.size() >= max_job_peers) return;
        peers.push_back(p);
        tried.push_back(false);
        rtts.push_back(rtt);
        if (waiting_for_peers) wake.cancel();
    }

    api::peer_rtt rtt_of(const endpoint& p) const {
        for (std::size_t i = 0; i < peers.size(); ++i)
            if (peers[i] == p) return rtts[i];
        return {};
    }
};

/// How a gated round ends when the pipeline shuts down around it (not an attempt).
completion cancelled(const job& j) {
    return make_completion(j.key, outcome::cancelled, failure_class::none, j.attempts, std::nullopt);
}

/// A torrent handed to the application: rounds of its other key wait for the answer.
struct handover {
    bool settled = false;
    torrent_reply answered; ///< nullopt once settled: never offered (shutting down)
    std::vector<std::weak_ptr<job>> waiting;
};

} // namespace

struct pipeline::impl {
    impl(pipeline& o, const pipeline_options& opt, application_port& a, const dhtc::clock& c, retry_settings r)
        : owner(o), options(opt), app(a), clock(c), retry(std::move(r)), retry_cap(retry.store ? retry.slots : 0),
          budget(opt.max_in_flight_bytes, &o.counters_.memory_held, &o.counters_.memory_refused,
                 &o.counters_.memory_refused_bytes),
          pending(pending_queue_options{opt.max_queue_size, std::chrono::seconds(60), 0}),
          failures(peer_failures_options{opt.peer_failure_cache_capacity, std::chrono::seconds(opt.peer_failure_ttl_secs),
                                         std::chrono::seconds(opt.refusal_ttl_secs), 0,
                                         std::chrono::seconds(opt.first_timeout_ttl_secs)}),
          delivered(delivered_filter_options{opt.delivered_filter_capacity,
                                             std::chrono::seconds(opt.delivered_filter_period_secs), 0}),
          rng(std::random_device{}()),
          recently_closed(peer_failure_cache_options{recently_closed_capacity, closed_session_linger, 0}) {
        batch.reserve(drain_batch);
    }

    pipeline& owner;
    pipeline_options options;
    application_port& app; ///< every callback runs behind it, on the application's side
    const dhtc::clock& clock;
    retry_settings retry;
    std::size_t retry_cap;        ///< retry rounds at once (the budget)
    std::size_t retry_active = 0;
    /// Metadata bytes in flight, across every job. Before io: the jobs' frames (destroyed
    /// with io) give their charges back.
    memory_budget budget;
    asio::io_context io{1};
    asio::steady_timer drain_timer{io};
    std::shared_ptr<utp_host> utp; ///< the uTP sockets, opened on first use (metadata.transports)
    pending_queue pending;
    peer_failures failures; ///< which classes it holds, and how long: peer_failure_cache.hpp
    delivered_filter delivered;
    std::unordered_map<id20, std::shared_ptr<job>, id20_hash> jobs; ///< rounds in flight
    /// Torrents with the application, under each of their keys, until it answered.
    std::unordered_map<id20, std::shared_ptr<handover>, id20_hash> handovers;
    /// Rounds waiting for the application's answer to a torrent (theirs, or their other
    /// key's): shutdown lets them settle before the thread stops.
    std::size_t answers_awaited = 0;
    std::size_t active = 0; ///< worker slots: held from take() until the completion ran
    std::vector<api::hash_event> batch;
    std::mt19937_64 rng;
    std::thread thread;
    std::mutex lifecycle;
    bool started = false;
    bool stopped = false;
    bool stopping = false; ///< metadata thread only

    void arm_drain();
    void drain();
    void admit(const api::hash_event& e, time_point now);
    void schedule(time_point now);
    void start_retries(time_point now);
    void settle_lease(const job& j, const completion& c);
    void release_slot();
    void complete(job& j, completion c);
    void report_sink_failure(const job& j);
    void complete_as_duplicate(job& j, std::optional<endpoint> served_by = std::nullopt,
                               std::optional<api::stream_encryption> served_enc = std::nullopt,
                               std::optional<api::stream_transport> served_tr = std::nullopt);
    void end_sessions_of_round(const id20& key);
    void shutdown_jobs();
    void count_tries(const session_result& r);

    asio::awaitable<void> run_job(std::shared_ptr<job> j);
    asio::awaitable<gate_verdict> gate(std::shared_ptr<job> j);
    /// How a wait for the application's reply takes shutdown.
    enum class on_shutdown : std::uint8_t { give_up, keep_waiting };
    template <class T, class Post>
    asio::awaitable<std::optional<T>> await_reply(std::shared_ptr<job> j, std::optional<T> job::*slot, Post post,
                                                  std::optional<std::chrono::milliseconds> timeout,
                                                  on_shutdown shutdown = on_shutdown::give_up);
    /// Shutting down: stops the thread once no round waits for an answer any more.
    void stop_when_answered() {
        if (answers_awaited == 0) io.stop();
    }
    asio::awaitable<claim_reply> claim(std::shared_ptr<job> j);
    asio::awaitable<bool> claimed(std::shared_ptr<job> j);
    asio::awaitable<bool> admitted(std::shared_ptr<job> j);
    asio::awaitable<void> await_peers(std::shared_ptr<job> j);
    asio::awaitable<std::vector<session_result>> run_sessions(std::shared_ptr<job> j, shared_pieces& pieces,
                                                              std::vector<endpoint> peers);
    asio::awaitable<torrent_reply> deliver(std::shared_ptr<job> j, delivery d);
    asio::awaitable<bool> ended_as_sibling(std::shared_ptr<job> j, std::vector<id20> keys,
                                           std::optional<endpoint> served_by,
                                           std::optional<api::stream_encryption> served_enc,
                                           std::optional<api::stream_transport> served_tr);
    /// A session that timed out while the memory budget held its requests back failed for
    /// our want of memory, not the peer's: size_limit (not cached against the peer).
    void starved_as_size_limit(const shared_pieces& pieces, std::vector<session_result>& results) {
        if (!pieces.starved() || pieces.complete()) return;
        for (auto& r : results)
            if (r.failure == failure_class::timeout) {
                r.failure = failure_class::size_limit;
                bump(owner.counters_.memory_starved);
            }
    }
    asio::awaitable<void> wait(job& j) {
        std::error_code ec;
        co_await j.wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    std::vector<endpoint> pick_peers(job& j, std::size_t max);
    bool peer_crowded(const endpoint& peer) const {
        const auto it = open_sessions.find(peer);
        return (it != open_sessions.end() && it->second > 0) ||
               recently_closed.contains(peer, std::chrono::steady_clock::now());
    }
    asio::awaitable<void> await_uncrowded(std::shared_ptr<job> j, std::vector<endpoint> peers);
    // Sessions of ours open to each peer, over every round: a peer may refuse a second
    // connection for a torrent it is already serving us (libtorrent sees our uTP connections
    // all come from one UDP port), which a hybrid's two keys ask for side by side.
    std::unordered_map<endpoint, unsigned, endpoint_hash> open_sessions;
    // The peer's side of a session we just closed lives on until our close reaches it: a
    // round trip or more (longer when the FIN is lost), during which it may still refuse a
    // second connection. So a peer counts as crowded for a while after our last session it
    // accepted ended, and a refusal then is not held against it for refusal_ttl_secs (issue
    // 32: at a few hundred milliseconds of round trip, the next torrent of the same seeder
    // met it). The set keeps the first close's time within the linger (peer_failure_cache.hpp).
    // Real time, as await_uncrowded() waits in: the linger is the wire's, not the schedule's.
    static constexpr std::size_t recently_closed_capacity = 4096;
    static constexpr std::chrono::seconds closed_session_linger{3};
    peer_failure_cache recently_closed;
    id20 random_peer_id() {
        id20 id;
        for (auto& b : id.bytes) b = static_cast<std::uint8_t>(rng());
        // Azureus-style client prefix: peers see who we are, the rest stays random.
        const char prefix[] = "-DC0001-";
        std::copy(prefix, prefix + 8, id.bytes.begin());
        return id;
    }
};

void pipeline::impl::arm_drain() {
    drain_timer.expires_after(drain_interval);
    drain_timer.async_wait([this](const std::error_code& ec) {
        if (ec || stopping) return;
        drain();
        arm_drain();
    });
}

void pipeline::impl::drain() {
    batch.clear();
    owner.ingress_.pop_batch(batch, drain_batch);
    const auto now = clock.now();
    for (const auto& e : batch) admit(e, now);
    pending.purge(now);
    schedule(now);
    const double fill = std::max(static_cast<double>(pending.size()) / static_cast<double>(pending.capacity()),
                                 static_cast<double>(owner.ingress_.depth()) /
                                     static_cast<double>(owner.ingress_.capacity()));
    owner.pressure_.store(fill, std::memory_order_relaxed);
    owner.counters_.pending.store(pending.size(), std::memory_order_relaxed);
    owner.counters_.in_flight.store(jobs.size(), std::memory_order_relaxed);
}

void pipeline::impl::admit(const api::hash_event& e, time_point now) {
    auto& c = owner.counters_;
    bump(c.hashes_in);
    if (delivered.contains(e.info_hash, now)) {
        bump(c.already_delivered);
        return;
    }
    if (handovers.count(e.info_hash)) { // with the application now: its answer decides
        bump(c.merged_in_flight);
        return;
    }
    if (const auto it = jobs.find(e.info_hash); it != jobs.end()) {
        it->second->add_peer(e.peer, e.rtt);
        bump(c.merged_in_flight);
        return;
    }
    switch (pending.offer(e.info_hash, e.peer, e.kind, std::min(e.at, now), now, e.rtt)) {
    case offer_result::stale:
    case offer_result::expired_event:
    case offer_result::peers_full: bump(c.pending_refused); break;
    default: break;
    }
}

void pipeline::impl::schedule(time_point now) {
    if (retry.store) start_retries(now);
    while (!stopping && active < options.max_worker_count) {
        auto entry = pending.take(now);
        if (!entry) return;
        if (delivered.contains(entry->info_hash, now)) {
            bump(owner.counters_.already_delivered);
            continue;
        }
        auto j = std::make_shared<job>(io);
        j->key = entry->info_hash;
        j->queued_at = entry->first_seen;
        for (std::size_t i = 0; i < entry->peer_count; ++i) j->add_peer(entry->peers[i].peer, entry->peers[i].rtt);
        jobs.emplace(j->key, j);
        owner.counters_.queue_wait_ms.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(now - entry->first_seen).count()));
        ++active;
        bump(owner.counters_.jobs_started);
        asio::co_spawn(io, run_job(j), asio::detached);
    }
}

// Due hashes leased from the store, within the retry budget: at most retry_cap rounds at
// once, so fresh hashes always keep the rest of the workers.
void pipeline::impl::start_retries(time_point now) {
    while (!stopping && active < options.max_worker_count && retry_active < retry_cap) {
        auto due = retry.store->take_due();
        if (!due) break;
        auto& d = *due;
        if (jobs.count(d.info_hash) || handovers.count(d.info_hash)) continue; // one of our rounds holds it already
        if (delivered.contains(d.info_hash, now)) {
            retry.store->post_done(d.info_hash);
            bump(owner.counters_.already_delivered);
            continue;
        }
        auto j = std::make_shared<job>(io);
        j->key = d.info_hash;
        j->queued_at = now;
        j->retry = true;
        j->holds_lease = true;
        j->round = d.attempts;
        for (const auto& p : d.peers) j->add_peer(p);
        jobs.emplace(j->key, j);
        ++active;
        ++retry_active;
        bump(owner.counters_.jobs_started);
        bump(owner.counters_.retry_rounds);
        asio::co_spawn(io, run_job(j), asio::detached);
    }
    const std::size_t queued = retry.store->due_depth();
    const std::size_t used = retry_active + queued;
    retry.store->set_retry_room(used < retry_cap ? retry_cap - used : 0);
    owner.counters_.retries_in_flight.store(retry_active, std::memory_order_relaxed);
}

// The store learns how the round it leased to us ended (a cancelled round is no attempt).
void pipeline::impl::settle_lease(const job& j, const completion& c) {
    if (!retry.store || !j.holds_lease) return;
    switch (c.result) {
    case outcome::accepted:
    case outcome::delivery_rejected: // fetched and offered: never again, under either key
        retry.store->post_done(j.key);
        if (j.sibling) retry.store->post_done(*j.sibling);
        break;
    case outcome::fetch_failed: retry.store->post_failure(j.key, c.failure); break;
    case outcome::sink_failed: retry.store->post_failure(j.key, failure_class::sink_failed); break;
    case outcome::cancelled: retry.store->post_release(j.key, 0); break;
    }
}

void pipeline::impl::release_slot() {
    if (active) --active;
    if (!stopping) schedule(clock.now());
}

void pipeline::impl::complete(job& j, completion c) {
    if (j.completed) return;
    j.completed = true;
    c.round = j.round; // which round of the hash this was (0 without a store)
    settle_lease(j, c);
    if (j.retry && retry_active) --retry_active;
    bump(owner.counters_.outcomes[static_cast<std::size_t>(c.result)]);
    // The worker slot stays taken until the application has seen the completion: a slow
    // application slows fetching (and, through the pressure, the crawl) instead of
    // letting completions pile up.
    auto ex = io.get_executor();
    const bool posted = app.post_completion(c, [this, ex] { asio::post(ex, [this] { release_slot(); }); });
    if (!posted) release_slot();
    if (stopping) stop_when_answered(); // this may have been the last answer shutdown waited for
}

// Posts a request whose answer comes back on another thread, then sleeps on the job's
// timer until the answer lands in `slot`, the time runs out (nullopt: no limit) or the
// pipeline stops. nullopt when the request could not be posted or no answer came.
template <class T, class Post>
asio::awaitable<std::optional<T>> pipeline::impl::await_reply(std::shared_ptr<job> j, std::optional<T> job::*slot,
                                                              Post post,
                                                              std::optional<std::chrono::milliseconds> timeout,
                                                              on_shutdown shutdown) {
    std::weak_ptr<job> weak = j;
    auto ex = io.get_executor();
    auto reply = [weak, ex, slot](T value) {
        asio::post(ex, [weak, slot, value] {
            if (auto live = weak.lock()) {
                (*live).*slot = value;
                live->wake.cancel();
            }
        });
    };
    if (!post(std::function<void(T)>(std::move(reply)))) co_return std::nullopt;
    if (timeout)
        j->wake.expires_after(*timeout);
    else
        j->wake.expires_at(asio::steady_timer::time_point::max());
    while (!((*j).*slot) && (!stopping || shutdown == on_shutdown::keep_waiting)) {
        std::error_code ec;
        co_await j->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) co_return std::nullopt; // the time ran out
    }
    co_return (*j).*slot;
}

asio::awaitable<gate_verdict> pipeline::impl::gate(std::shared_ptr<job> j) {
    bool posted = true;
    const auto verdict = co_await await_reply<gate_verdict>(
        j, &job::gate_answer,
        [&](std::function<void(gate_verdict)> reply) { return posted = app.post_gate(j->key, std::move(reply)); },
        std::chrono::milliseconds(options.gate_timeout_millis));
    if (verdict) co_return *verdict;
    if (posted && !stopping) bump(owner.counters_.gate_timeouts); // the application did not answer in time
    co_return options.gate_default ? gate_verdict::fetch : gate_verdict::skip;
}

asio::awaitable<claim_reply> pipeline::impl::claim(std::shared_ptr<job> j) {
    // No answer in time counts as busy; should it come later, the lease expires.
    const auto a = co_await await_reply<claim_reply>(
        j, &job::claim,
        [&](std::function<void(claim_reply)> reply) { return retry.store->post_claim(j->key, j->peers, std::move(reply)); },
        std::chrono::milliseconds(retry.claim_timeout_millis));
    co_return a.value_or(claim_reply{claim_verdict::busy, 0});
}

// The store decides before the gate: delivered before, leased by another crawler, or
// dormant and not yet due (the sighting reactivated it) all end here, without a round.
asio::awaitable<bool> pipeline::impl::claimed(std::shared_ptr<job> j) {
    const claim_reply a = co_await claim(j);
    if (stopping) co_return false;
    if (a.verdict == claim_verdict::fetch) {
        j->holds_lease = true;
        j->round = a.attempts;
        co_return true;
    }
    auto& c = owner.counters_;
    if (a.verdict == claim_verdict::done) {
        delivered.insert(j->key, clock.now()); // the bounded done cache: no claim next time
        bump(c.store_done);
    } else {
        bump(a.verdict == claim_verdict::busy ? c.store_busy : c.store_deferred);
    }
    jobs.erase(j->key);
    release_slot();
    co_return false;
}

// Everything before a round's first peer: the store's claim (fresh sightings), the
// application's gate (which has the last word), and for a retry without peers a lookup.
// False when there is no round: the job is gone and its slot released, or, when shutting
// down, left for shutdown_jobs().
asio::awaitable<bool> pipeline::impl::admitted(std::shared_ptr<job> j) {
    if (retry.store && !j->retry) {
        const bool leased = co_await claimed(j);
        if (stopping || !leased) co_return false;
    }
    const gate_verdict verdict = co_await gate(j);
    // Shutting down before the application was asked: no round. The job stays for
    // shutdown_jobs(), which gives an ungated round's lease back as due at once.
    if (stopping || verdict == gate_verdict::closed) co_return false;
    if (verdict == gate_verdict::skip) {
        bump(owner.counters_.gate_rejected);
        if (retry.store && j->holds_lease)
            retry.store->post_release(j->key, retry.gate_rejected_retry_secs);
        if (j->retry && retry_active) --retry_active;
        jobs.erase(j->key);
        release_slot(); // a rejected hash produces no completion
        co_return false;
    }
    j->gated = true;
    if (j->retry && j->peers.empty()) co_await await_peers(j);
    co_return true;
}

// A retry that came due without peers: ask the DHT side for a get_peers lookup and wait a
// bounded time for the peers it finds (they arrive as hash events and join this job).
asio::awaitable<void> pipeline::impl::await_peers(std::shared_ptr<job> j) {
    bump(owner.counters_.retry_lookups);
    if (!retry.want_peers || !retry.want_peers(j->key)) co_return;
    j->waiting_for_peers = true;
    j->wake.expires_after(std::chrono::seconds(retry.lookup_wait_secs));
    while (j->peers.empty() && !stopping) {
        std::error_code ec;
        co_await j->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) break; // waited long enough
    }
    j->waiting_for_peers = false;
}

std::vector<endpoint> pipeline::impl::pick_peers(job& j, std::size_t max) {
    std::vector<endpoint> out;
    const auto now = clock.now();
    for (std::size_t i = 0; i < j.peers.size() && out.size() < max; ++i) {
        if (j.tried[i]) continue;
        j.tried[i] = true;
        // A peer that timed out, refused the connection or refused us recently is skipped:
        // no packet, no attempt.
        if (failures.contains(j.peers[i], now)) {
            bump(owner.counters_.failure_cache_hits);
            continue;
        }
        out.push_back(j.peers[i]);
    }
    return out;
}

// Every try but the last failed (it was followed by a fallback); the last one is the
// session's outcome, not counted when it was cancelled.
void pipeline::impl::count_tries(const session_result& r) {
    auto& c = owner.counters_;
    if (r.tries == 0) return;
    bool mse_changed = false;
    bool utp_changed = false;
    for (std::size_t t = 0; t < r.tries; ++t) {
        const std::uint8_t mode = r.try_modes[t];
        const std::size_t enc = (mode & try_mse) ? 1 : 0;
        const std::size_t tr = (mode & try_utp) ? 1 : 0;
        if (t > 0) {
            mse_changed |= (mode & try_mse) != (r.try_modes[t - 1] & try_mse);
            utp_changed |= (mode & try_utp) != (r.try_modes[t - 1] & try_utp);
        }
        bump(c.encryption_tries[enc]);
        bump(c.transport_tries[tr]);
        bump(c.session_tries[tr][enc]);
        const bool last = t + 1 == r.tries;
        const failure_class f = last ? r.failure : r.try_failures[t];
        if (last && r.ok()) {
            bump(c.encryption_successes[enc]);
            bump(c.transport_successes[tr]);
            // The stream that served: plaintext, or MSE with its select (plaintext or RC4).
            const std::size_t served = enc == 0 ? 0 : (r.encryption == api::stream_encryption::rc4 ? 2 : 1);
            bump(c.session_successes[tr][served]);
        } else if (f != failure_class::cancelled) {
            bump(c.encryption_failures[enc]);
            bump(c.transport_failures[tr]);
            bump(c.session_failures[tr][enc][static_cast<std::size_t>(f)]);
        }
    }
    if (mse_changed) bump(c.encryption_fallbacks);
    if (utp_changed) bump(c.transport_fallbacks);
    if (r.ok() && r.encryption == api::stream_encryption::rc4) bump(c.rc4_sessions);
    if (r.mse_error != mse::mse_error::none) bump(c.mse_failures);
}

asio::awaitable<std::vector<session_result>> pipeline::impl::run_sessions(std::shared_ptr<job> j,
                                                                         shared_pieces& pieces,
                                                                         std::vector<endpoint> peers) {
    std::vector<session_result> results(peers.size());
    std::size_t running = peers.size();
    j->sessions.clear();
    j->crowded.assign(peers.size(), false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_secs);
    for (std::size_t i = 0; i < peers.size(); ++i) {
        session_request req;
        req.info_hash = j->key;
        req.peer = peers[i];
        req.peer_id = random_peer_id();
        req.deadline = deadline;
        // A slow path may push it back up to twice metadata.timeout_secs (peer_session.hpp).
        req.deadline_limit = deadline + std::chrono::seconds(options.timeout_secs);
        req.dht_rtt = j->rtt_of(peers[i]); // so may the DHT's round trip to it, before a connect
        req.max_metadata_size = options.max_metadata_size;
        if (peers[i].address.is_v4()) req.bind_address = options.bind_v4;
        req.encryption = options.encryption;
        req.transports = options.transports;
        if (options.transports != transport_policy::tcp) {
            if (!utp) utp = utp_host::create(io.get_executor(), options.bind_v4);
            req.utp = utp;
        }
        j->crowded[i] = peer_crowded(peers[i]);
        ++open_sessions[peers[i]];
        auto& signal = *j->sessions.emplace_back(std::make_unique<asio::cancellation_signal>());
        asio::co_spawn(io, run_peer_session(req, pieces, static_cast<std::uint32_t>(i)),
                       asio::bind_cancellation_slot(signal.slot(), [this, &results, &running, &peers, i,
                                                                    j](std::exception_ptr e, session_result r) {
                           if (e) r.failure = session_failure::protocol_error; // bad_alloc inside the session
                           if (const auto it = open_sessions.find(peers[i]); it != open_sessions.end() && --it->second == 0) {
                               open_sessions.erase(it);
                               // Only a connection the peer accepted lives on at its side (a
                               // peer that refused us holds nothing of ours).
                               if (r.ok() || r.metadata_size > 0)
                                   recently_closed.insert(peers[i], std::chrono::steady_clock::now());
                           }
                           results[i] = r;
                           if (--running == 0) j->wake.cancel();
                       }));
    }
    while (running > 0 && !stopping) {
        j->wake.expires_at(asio::steady_timer::time_point::max());
        co_await wait(*j);
    }
    j->sessions.clear();
    for (const session_result& r : results) {
        count_tries(r);
        if (r.deadline_extended) bump(owner.counters_.deadline_extensions);
        if (r.saved_by_extension) bump(owner.counters_.deadline_extension_saves);
        if (r.dht_rtt_extended) bump(owner.counters_.dht_rtt_extensions);
        if (r.saved_by_dht_rtt) bump(owner.counters_.dht_rtt_saves);
    }
    co_return results;
}

asio::awaitable<torrent_reply> pipeline::impl::deliver(std::shared_ptr<job> j, delivery d) {
    // No time limit: a slow application slows fetching. Nor does shutdown end the wait: a
    // torrent the application has is answered all the same (push: its callback returns, which
    // destroy waits for anyway; pull: the answer table's default comes after
    // gate_timeout_millis; one never offered is answered at once), and that answer settles
    // the round and its lease.
    bool posted = true;
    ++answers_awaited;
    const auto a = co_await await_reply<torrent_reply>(
        j, &job::ack,
        [&](std::function<void(torrent_reply)> reply) { return posted = app.post_torrent(std::move(d), std::move(reply)); },
        std::nullopt, on_shutdown::keep_waiting);
    --answers_awaited;
    if (a) co_return *a;
    // Its lane was full: not stored, so fetched again rather than taken as rejected.
    co_return posted ? torrent_reply{} : torrent_reply{answer::retry};
}

asio::awaitable<void> pipeline::impl::run_job(std::shared_ptr<job> j) {
    auto& c = owner.counters_;
    const bool go = co_await admitted(j);
    if (stopping || !go) co_return;

    completion result = make_completion(j->key, outcome::fetch_failed, failure_class::no_peers, 0, std::nullopt);
    const auto fetch_started = clock.now();
    std::optional<std::string> bytes;
    std::optional<endpoint> served_by;
    std::optional<api::stream_encryption> served_enc;
    std::optional<api::stream_transport> served_tr;
    // A hybrid delivered under its other key meanwhile ends the loop: nothing is left to fetch.
    while (!bytes && j->attempts < options.max_attempts && !delivered.contains(j->key, clock.now())) {
        const unsigned left = options.max_attempts - j->attempts;
        // Several peers share one dict's pieces, but one attempt stays in reserve, so a dict
        // assembled from several peers that fails verification can be refetched from one
        // peer alone: a hash_mismatch then always names its source.
        auto peers = pick_peers(*j, left > 1 ? left - 1 : 1);
        if (peers.empty()) break;
        j->attempts += static_cast<unsigned>(peers.size());
        bump(c.attempts, peers.size());
        shared_pieces pieces(options.max_metadata_size, &budget);
        auto results = co_await run_sessions(j, pieces, peers);
        if (stopping) co_return;
        starved_as_size_limit(pieces, results);
        std::vector<endpoint> crowded;
        for (std::size_t i = 0; i < results.size(); ++i) {
            const auto cls = results[i].failure;
            if (cls == failure_class::none || cls == failure_class::cancelled) continue;
            if (j->crowded[i] && (cls == failure_class::handshake_failed || cls == failure_class::disconnected)) {
                // Refused while another round of ours had it open: not the peer's fault, so
                // not remembered against it either. It is asked again once that session ends
                // (and that round may deliver this torrent).
                crowded.push_back(peers[i]);
                bump(c.crowded_refusals);
                j->refused_while_crowded = true;
                continue;
            }
            bump(c.attempt_failures[static_cast<std::size_t>(cls)]);
            failures.record(peers[i], cls, clock.now());
            // A timeout names the round only when every peer timed out: the retry store
            // tries such a hash again within minutes (retry.policy.timeout_retries).
            if (!api::is_timeout(cls) || result.failure == failure_class::no_peers || api::is_timeout(result.failure))
                result.failure = cls;
        }
        if (!pieces.complete()) {
            if (!crowded.empty()) {
                co_await await_uncrowded(j, crowded);
                if (stopping) co_return;
                std::vector<id20> own_key(1, j->key);
                if (co_await ended_as_sibling(j, std::move(own_key), std::nullopt, std::nullopt, std::nullopt)) {
                    jobs.erase(j->key); // over: a later announce of its key starts a new round
                    co_return;
                }
                for (const auto& p : crowded) j->untry(p);
            }
            continue;
        }
        const std::string_view dict = pieces.bytes();
        const auto verified = [&](std::string_view b) { return sha1_id(b) == j->key || sha256_id(b) == j->key; };
        // Credit (or blame) the session that delivered the most pieces.
        std::size_t main_source = 0;
        for (std::size_t i = 1; i < results.size(); ++i)
            if (results[i].pieces_received > results[main_source].pieces_received) main_source = i;
        if (verified(dict)) {
            bytes.emplace(dict);
            served_by = peers[main_source];
            if (failures.timed_out_once(*served_by, clock.now())) bump(c.second_chance_fetches);
            if (j->refused_while_crowded) bump(c.crowded_saves);
            served_enc = results[main_source].encryption;
            served_tr = results[main_source].transport;
            break;
        }
        bump(c.attempt_failures[static_cast<std::size_t>(failure_class::hash_mismatch)]);
        result.failure = failure_class::hash_mismatch;
        result.peer = peers[main_source];
        if (pieces.contributors() > 1 && j->attempts < options.max_attempts) {
            // Several authors: refetch everything from one of them, so the verdict names a
            // single source.
            bump(c.refetches);
            ++j->attempts;
            bump(c.attempts);
            const endpoint one = peers[main_source];
            shared_pieces again(options.max_metadata_size, &budget);
            auto second = co_await run_sessions(j, again, std::vector<endpoint>(1, one));
            if (stopping) co_return;
            starved_as_size_limit(again, second);
            result.peer = one;
            if (again.complete() && verified(again.bytes())) {
                bytes.emplace(again.bytes());
                served_by = one;
                served_enc = second[0].encryption;
                served_tr = second[0].transport;
                break;
            }
            result.failure = again.complete() ? failure_class::hash_mismatch : second[0].failure;
            if (again.complete()) bump(c.attempt_failures[static_cast<std::size_t>(failure_class::hash_mismatch)]);
        }
    }
    result.attempts = j->attempts;
    jobs.erase(j->key);

    if (!bytes) {
        // A hybrid's two keys make two rounds that run side by side against the same seeders,
        // which may refuse the second connection for a torrent (libtorrent's uTP-only seeders
        // did): a round that failed while its other key delivered the torrent ends as that did.
        std::vector<id20> own_key(1, j->key);
        if (co_await ended_as_sibling(j, std::move(own_key), std::nullopt, std::nullopt, std::nullopt)) co_return;
        complete(*j, result);
        co_return;
    }
    bump(c.bytes_fetched, bytes->size());
    c.payload_bytes.record(bytes->size());
    c.fetch_duration_ms.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - fetch_started).count()));
    api::delivery d;
    d.peer = *served_by;
    d.encryption = served_enc.value_or(api::stream_encryption::plaintext);
    d.transport = served_tr.value_or(api::stream_transport::tcp);
    d.discovered_at = std::chrono::system_clock::now();
    const auto parsed = parse_info(*bytes, j->key, d.info);
    if (!parsed) {
        bump(c.attempt_failures[static_cast<std::size_t>(failure_class::parse_error)]);
        complete(*j, make_completion(j->key, outcome::fetch_failed, failure_class::parse_error, j->attempts, served_by, served_enc, served_tr));
        co_return;
    }
    const id20 v1 = to_id20(d.info.sha1);
    const id20 v2 = truncate_to_id20(d.info.sha256);
    std::vector<id20> keys;
    if (d.info.has_v1()) keys.push_back(v1);
    if (d.info.has_v2()) keys.push_back(v2);
    const bool hybrid = keys.size() == 2;
    if (co_await ended_as_sibling(j, keys, served_by, served_enc, served_tr)) co_return;
    const auto mine = std::make_shared<handover>();
    for (const auto& k : keys) handovers[k] = mine;
    d.raw = std::move(*bytes);
    const torrent_reply reply = co_await deliver(j, std::move(d));
    for (const auto& k : keys) handovers.erase(k);
    mine->settled = true;
    mine->answered = reply;
    for (auto& w : mine->waiting)
        if (auto live = w.lock()) live->wake.cancel();
    if (!reply) { // never offered, the application is shutting down: neither delivered nor failed
        complete(*j, cancelled(*j));
        co_return;
    }
    const answer taken = *reply;
    if (taken == answer::retry) {
        // Not stored: nothing remembers it as delivered, so it is fetched again.
        report_sink_failure(*j);
        bump(c.sink_failures);
        complete(*j, make_completion(j->key, outcome::sink_failed, failure_class::sink_failed, j->attempts, served_by, served_enc, served_tr));
        co_return;
    }
    for (const auto& k : keys) delivered.insert(k, clock.now());
    if (hybrid) {
        j->sibling = j->key == v1 ? v2 : v1;
        end_sessions_of_round(*j->sibling);
    }
    complete(*j, make_completion(j->key, taken == answer::accept ? outcome::accepted : outcome::delivery_rejected,
                                 failure_class::none, j->attempts, served_by, served_enc, served_tr));
}

// Waits until no other round of ours has any of `peers` open, at most one fetch timeout.
asio::awaitable<void> pipeline::impl::await_uncrowded(std::shared_ptr<job> j, std::vector<endpoint> peers) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_secs);
    while (!stopping && std::chrono::steady_clock::now() < until &&
           std::any_of(peers.begin(), peers.end(), [&](const endpoint& p) { return peer_crowded(p); })) {
        j->wake.expires_after(std::chrono::milliseconds(100));
        co_await wait(*j);
    }
}

// A hybrid has two keys: whichever round finishes first delivers it, once. A round whose
// torrent is with the application under another of `keys` waits for that answer and ends as
// that delivery did: cancelled when it was never offered, sink_failed when it could not be
// stored, a duplicate when the answer stuck (or the torrent was delivered before). False, with
// nothing done, when no other round delivered it.
asio::awaitable<bool> pipeline::impl::ended_as_sibling(std::shared_ptr<job> j, std::vector<id20> keys,
                                                       std::optional<endpoint> served_by,
                                                       std::optional<api::stream_encryption> served_enc,
                                                       std::optional<api::stream_transport> served_tr) {
    std::shared_ptr<handover> earlier;
    for (const auto& k : keys)
        if (const auto it = handovers.find(k); it != handovers.end()) earlier = it->second;
    if (earlier) {
        // The answer comes, shutdown or not (deliver), and this round ends as it says.
        earlier->waiting.push_back(j);
        ++answers_awaited;
        j->awaiting_answer = true;
        while (!earlier->settled) {
            j->wake.expires_at(asio::steady_timer::time_point::max());
            co_await wait(*j);
        }
        j->awaiting_answer = false;
        --answers_awaited;
        if (!earlier->answered) { // its torrent never reached the application: nor does this one
            complete(*j, cancelled(*j));
            co_return true;
        }
        if (*earlier->answered == answer::retry) {
            complete(*j, make_completion(j->key, outcome::sink_failed, failure_class::sink_failed, j->attempts,
                                         served_by, served_enc, served_tr));
            co_return true;
        }
    }
    const auto now = clock.now();
    if (!earlier && std::none_of(keys.begin(), keys.end(), [&](const id20& k) { return delivered.contains(k, now); }))
        co_return false;
    if (keys.size() == 2) j->sibling = j->key == keys[0] ? keys[1] : keys[0];
    complete_as_duplicate(*j, served_by, served_enc, served_tr);
    co_return true;
}

// The torrent of this round's key reached the application under another key: accepted, once.
void pipeline::impl::complete_as_duplicate(job& j, std::optional<endpoint> served_by,
                                           std::optional<api::stream_encryption> served_enc,
                                           std::optional<api::stream_transport> served_tr) {
    bump(owner.counters_.duplicates);
    complete(j, make_completion(j.key, outcome::accepted, failure_class::none, j.attempts, served_by, served_enc,
                                served_tr));
}

// A hybrid's other key was delivered: that key's round, when one is fetching, has nothing left
// to fetch. Its sessions end now (cancelled, which blames no peer), and its loop sees the key
// delivered and ends as a duplicate, instead of holding seeders' connections to the end.
void pipeline::impl::end_sessions_of_round(const id20& key) {
    const auto it = jobs.find(key);
    if (it == jobs.end()) return;
    for (auto& s : it->second->sessions) s->emit(asio::cancellation_type::terminal);
}

// Without a store the application hears how a torrent it could not store comes back.
void pipeline::impl::report_sink_failure(const job& j) {
    if (!retry.store)
        app.post_error("torrent " + j.key.hex() +
                       " could not be stored (a sink failed); it is fetched again when it is next announced");
}

// Every round in flight ends now, cancelled, except those waiting for the application's
// answer to a torrent (deliver, ended_as_sibling): the thread runs on until they settled.
void pipeline::impl::shutdown_jobs() {
    stopping = true;
    drain_timer.cancel();
    for (auto& [key, j] : jobs) {
        for (auto& s : j->sessions) s->emit(asio::cancellation_type::terminal);
        if (j->awaiting_answer) continue;
        j->wake.cancel();
        if (j->gated && delivered.contains(key, clock.now()))
            complete_as_duplicate(*j); // its hybrid's other key was delivered: this one is not lost
        else if (j->gated)
            complete(*j, cancelled(*j));
        else if (retry.store && j->holds_lease)
            retry.store->post_release(key, 0); // not gated yet: give the lease back
    }
    if (utp) utp->shutdown();
    stop_when_answered();
}

pipeline::pipeline(const pipeline_options& o, application_port& app, const dhtc::clock& clock, retry_settings retry)
    : impl_(std::make_unique<impl>(*this, o, app, clock, std::move(retry))), ingress_(o.hash_queue_capacity) {}

pipeline::~pipeline() {
    stop();
    impl_.reset(); // its jobs give their budget charges back into counters_, which must still exist
}

std::size_t pipeline::pending_capacity() const noexcept { return impl_->pending.capacity(); }

void pipeline::start() {
    std::lock_guard lock(impl_->lifecycle);
    if (impl_->started || impl_->stopped) return;
    impl_->started = true;
    auto* m = impl_.get();
    m->arm_drain();
    m->thread = std::thread([m] { m->io.run(); });
}

void pipeline::stop() {
    std::lock_guard lock(impl_->lifecycle);
    if (impl_->stopped) return;
    impl_->stopped = true;
    auto* m = impl_.get();
    if (m->thread.joinable()) {
        asio::post(m->io, [m] { m->shutdown_jobs(); });
        m->thread.join();
    }
}

} // namespace dhtc::metadata
