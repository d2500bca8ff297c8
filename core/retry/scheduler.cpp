#include "retry/scheduler.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <random>

#include "retry/postgres_store.hpp"
#include "retry/sqlite_store.hpp"

namespace dhtc::retry {

namespace {

constexpr std::size_t max_batch = 2048;
// Observations (every get_peers we answer) may outnumber everything else; a turn applies at
// most this many, so claims and outcomes never wait behind them. The rest wait in their
// bounded queue, which refuses and counts when full.
constexpr std::size_t max_observations_per_turn = 256;
constexpr auto lease_interval = std::chrono::milliseconds(200);

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept { c.fetch_add(n, std::memory_order_relaxed); }

std::string default_owner() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    std::random_device rd;
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(rd()));
    return std::string(host[0] ? host : "host") + "-" + std::to_string(getpid()) + "-" + suffix;
}

} // namespace

std::string_view to_string(store_kind k) noexcept {
    switch (k) {
    case store_kind::none: return "none";
    case store_kind::sqlite: return "sqlite";
    case store_kind::postgresql: return "postgresql";
    }
    return "unknown";
}

unix_seconds scheduler::now() noexcept {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

scheduler::scheduler(const retry_options& o)
    : options_(o), requests_(std::max<std::size_t>(o.queue_capacity, 1)),
      observations_(std::max<std::size_t>(o.queue_capacity, 1)),
      due_(std::max<std::size_t>(std::max<std::size_t>(o.batch, 1) * 4, 64)) {
    if (options_.owner_id.empty()) options_.owner_id = default_owner();
    batch_.reserve(max_batch);
}

namespace {

// How the store that the options name is opened (opening creates or migrates its tables).
std::function<std::unique_ptr<backend>()> backend_of(const retry_options& o) {
    if (o.kind == store_kind::sqlite) return [path = o.path] { return open_sqlite(path); };
    if (o.kind == store_kind::postgresql) return [conninfo = o.conninfo] { return open_postgres(conninfo); };
    return nullptr;
}

} // namespace

void migrate_store(const retry_options& o) {
    const auto open_backend = backend_of(o);
    if (!open_backend) throw store_error("retry.store.kind is none: there is no store to migrate");
    open_backend(); // migrated once open; closed again at once
}

std::unique_ptr<scheduler> scheduler::open(const retry_options& o, std::string& error) {
    auto open_backend = backend_of(o);
    if (!open_backend) {
        error = "retry.store.kind is none";
        return nullptr;
    }
    return open(o, std::move(open_backend), error);
}

std::unique_ptr<scheduler> scheduler::open(const retry_options& o, std::function<std::unique_ptr<backend>()> make,
                                           std::string& error) {
    std::unique_ptr<scheduler> s(new scheduler(o));
    std::promise<std::string> opened;
    auto result = opened.get_future();
    auto* self = s.get();
    // The database is opened on the store thread too: every call to it happens there.
    s->thread_ = std::thread([self, make = std::move(make), &opened]() mutable {
        try {
            self->store_ = std::make_unique<store>(make(), self->options_.policy, self->options_.owner_id,
                                                   self->options_.lease_secs);
            try {
                const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(routing_state_ttl).count();
                self->saved_routing_ = self->store_->db().load_routing(now() - ttl, 8);
            } catch (const std::exception& e) {
                self->saved_routing_error_ = std::string("reading the saved DHT routing state: ") + e.what();
            }
            opened.set_value({});
        } catch (const std::exception& e) {
            opened.set_value(e.what());
            return;
        }
        self->run();
    });
    error = result.get();
    if (!error.empty()) {
        s->thread_.join();
        return nullptr;
    }
    return s;
}

scheduler::~scheduler() { stop(); }

void scheduler::stop() {
    {
        std::lock_guard lock(m_);
        stopping_ = true;
    }
    cv_.notify_all();
    // Two concurrent joins of one std::thread hang: a second caller waits for the first.
    std::lock_guard join_lock(join_m_);
    if (thread_.joinable()) thread_.join();
}

bool scheduler::post_claim(const id20& h, std::vector<endpoint> peers, std::function<void(claim_answer)> answer) {
    if (requests_.try_push(claim_req{h, std::move(peers), std::move(answer)})) return true;
    bump(counters_.requests_dropped);
    return false;
}

void scheduler::post_failure(const id20& h, api::failure_class cls) {
    if (!requests_.try_push(failure_req{h, cls})) bump(counters_.requests_dropped);
}

void scheduler::post_done(const id20& h) {
    if (!requests_.try_push(done_req{h})) bump(counters_.requests_dropped);
}

void scheduler::post_release(const id20& h, unix_seconds at) {
    if (!requests_.try_push(release_req{h, at})) bump(counters_.requests_dropped);
}

void scheduler::post_observation(const id20& h, std::optional<endpoint> peer) {
    if (!observations_.try_push(observe_req{h, peer})) bump(counters_.observations_dropped);
}

void scheduler::post_routing_state(std::string state) {
    std::lock_guard lock(m_);
    routing_state_ = std::move(state);
}

void scheduler::save_routing_state() {
    std::optional<std::string> state;
    {
        std::lock_guard lock(m_);
        state.swap(routing_state_);
    }
    if (!state) return;
    const unix_seconds t = now();
    try {
        store_->begin();
        store_->db().save_routing(owner(), t, *state,
                                  t - std::chrono::duration_cast<std::chrono::seconds>(routing_state_ttl).count());
        store_->commit();
    } catch (const std::exception& e) {
        store_->rollback();
        report(std::string("saving the DHT routing state: ") + e.what());
    }
}

void scheduler::run() {
    std::unique_lock lock(m_);
    for (;;) {
        cv_.wait_for(lock, std::chrono::milliseconds(std::max(options_.tick_millis, 1u)), [&] { return stopping_; });
        const bool final = stopping_;
        lock.unlock();
        turn(final);
        lock.lock();
        if (final) break;
    }
    store_.reset(); // closed on this thread, like every other call
}

void scheduler::report(const std::string& what) {
    bump(counters_.store_errors);
    if (!errors_) return;
    try {
        errors_("retry store (" + std::string(to_string(options_.kind)) + "): " + what);
    } catch (...) {
    }
}

void scheduler::turn(bool final) {
    // Requests first (their answers are awaited), then observations, each bounded per turn;
    // on the final turn everything queued is applied.
    do {
        batch_.clear();
        requests_.pop_batch(batch_, max_batch);
        observations_.pop_batch(batch_, final ? max_batch - batch_.size()
                                              : std::min(max_observations_per_turn, max_batch - batch_.size()));
        if (batch_.empty()) break;
        apply_batch(batch_);
    } while (final);
    save_routing_state();
    if (final) return;
    const auto t = std::chrono::steady_clock::now();
    if (t >= next_expire_) {
        next_expire_ = t + std::chrono::seconds(std::clamp<std::uint32_t>(options_.lease_secs / 4, 1, 60));
        try {
            store_->begin();
            const auto n = store_->expire_leases(now());
            store_->commit();
            bump(counters_.leases_expired, n);
        } catch (const std::exception& e) {
            store_->rollback();
            report(std::string("recovering expired leases: ") + e.what());
        }
    }
    lease_due();
    if (t >= next_counts_) {
        next_counts_ = t + std::chrono::seconds(std::max(options_.counts_interval_secs, 1u));
        refresh_counts();
    }
}

void scheduler::apply_batch(std::vector<request>& batch) {
    const auto key = [](const request& r) {
        return std::visit([](const auto& x) -> const id20& { return x.h; }, r);
    };
    std::stable_sort(batch.begin(), batch.end(), [&](const request& a, const request& b) { return key(a) < key(b); });
    std::vector<retry_event> events;
    const unix_seconds t = now();
    // A failed batch is tried once more: a deadlock victim or a dropped connection that
    // came back usually goes through the second time.
    struct {
        std::uint64_t failures = 0, done = 0, released = 0, observations = 0, reactivated = 0;
    } applied; // counted once the transaction committed
    for (int attempt = 0;; ++attempt) try {
        answers_.clear();
        events.clear();
        applied = {};
        store_->begin();
        for (std::size_t i = 0; i < batch.size(); ++i) {
            auto& r = batch[i];
            if (auto* c = std::get_if<claim_req>(&r)) {
                answers_.emplace_back(i, store_->claim(c->h, c->peers, t));
            } else if (auto* f = std::get_if<failure_req>(&r)) {
                if (const auto row = store_->record_failure(f->h, f->cls, t)) {
                    ++applied.failures;
                    events.push_back({row->info_hash,
                                      row->state == hash_state::done ? api::retry_state::done
                                                                     : api::retry_state::dormant,
                                      row->attempts, f->cls, row->next_retry_at});
                }
            } else if (auto* d = std::get_if<done_req>(&r)) {
                store_->record_done(d->h, t);
                ++applied.done;
                events.push_back({d->h, api::retry_state::done, 0, api::failure_class::none, 0});
            } else if (auto* rel = std::get_if<release_req>(&r)) {
                store_->release(rel->h, rel->at);
                ++applied.released;
            } else if (auto* o = std::get_if<observe_req>(&r)) {
                ++applied.observations;
                // Sorted by hash: a popular hash looked up many times is read once per turn.
                if (!o->peer && i > 0) {
                    const auto* prev = std::get_if<observe_req>(&batch[i - 1]);
                    if (prev && prev->h == o->h) continue;
                }
                std::vector<endpoint> peers;
                if (o->peer) peers.push_back(*o->peer);
                if (store_->observe(o->h, peers, t)) ++applied.reactivated;
            }
        }
        store_->commit();
        bump(counters_.transactions);
        bump(counters_.failures_recorded, applied.failures);
        bump(counters_.done_recorded, applied.done);
        bump(counters_.released, applied.released);
        bump(counters_.observations, applied.observations);
        bump(counters_.reactivated, applied.reactivated);
        break;
    } catch (const std::exception& e) {
        store_->rollback();
        report(e.what());
        if (attempt == 0) continue;
        // Nothing was stored: every claim is answered busy (the hash comes again); leases
        // taken before are recovered after their expiry.
        events.clear();
        answers_.clear();
        for (std::size_t i = 0; i < batch.size(); ++i)
            if (std::holds_alternative<claim_req>(batch[i])) answers_.emplace_back(i, claim_answer{claim_result::busy, 0});
        break;
    }
    // Answered after the commit: a lease we announce is one the database holds.
    for (const auto& [i, a] : answers_) {
        bump(counters_.claims);
        bump(counters_.claim_results[static_cast<std::size_t>(a.result)]);
        auto& c = std::get<claim_req>(batch[i]);
        if (c.answer) c.answer(a);
    }
    if (events_)
        for (const auto& e : events) events_(e);
}

void scheduler::lease_due() {
    const auto t = std::chrono::steady_clock::now();
    if (t < next_lease_) return;
    next_lease_ = t + lease_interval;
    const std::size_t room = room_.load(std::memory_order_relaxed);
    const std::size_t space = due_.capacity() - std::min(due_.capacity(), due_.depth());
    const std::size_t n = std::min({room, options_.batch, space});
    if (n == 0) return;
    std::vector<retry_row> rows;
    try {
        const auto started = std::chrono::steady_clock::now();
        store_->begin();
        rows = store_->lease_due(n, now());
        store_->commit();
        counters_.lease_query_micros.store(static_cast<std::uint64_t>(
                                               std::chrono::duration_cast<std::chrono::microseconds>(
                                                   std::chrono::steady_clock::now() - started)
                                                   .count()),
                                           std::memory_order_relaxed);
    } catch (const std::exception& e) {
        store_->rollback();
        report(std::string("leasing due hashes: ") + e.what());
        return;
    }
    bump(counters_.leased, rows.size());
    // The room is spent until the pipeline publishes it again.
    room_.fetch_sub(std::min(rows.size(), room_.load(std::memory_order_relaxed)), std::memory_order_relaxed);
    for (auto& r : rows)
        if (!due_.try_push(leased_hash{r.info_hash, std::move(r.peers), r.attempts})) bump(counters_.due_dropped);
}

void scheduler::refresh_counts() {
    try {
        const auto c = store_->counts();
        for (std::size_t i = 0; i < hash_state_count; ++i)
            counters_.by_state[i].store(c.by_state[i], std::memory_order_relaxed);
        counters_.database_bytes.store(c.database_bytes, std::memory_order_relaxed);
    } catch (const std::exception& e) {
        report(std::string("counting: ") + e.what());
    }
}

} // namespace dhtc::retry
