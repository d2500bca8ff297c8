// The retry scheduler: the one thread that talks to the retry store. Every database call
// happens here, never on the network or metadata threads and never under a lock they
// share: they post requests into bounded queues (full queues refuse and count), and get
// answers back through callbacks run on this thread (which post to their own executors).
//
// Each turn takes what is queued, applies it in one transaction (sorted by hash, so two
// crawlers on one PostgreSQL lock rows in the same order), answers the claims after the
// commit, recovers expired leases, and leases due hashes as far as the pipeline has room
// for retries.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "model/events.hpp"
#include "retry/policy.hpp"
#include "retry/store.hpp"
#include "util/bounded_queue.hpp"

namespace dhtc::retry {

enum class store_kind : std::uint8_t { none, sqlite, postgresql };
std::string_view to_string(store_kind k) noexcept;

/// The retry.* options.
struct retry_options {
    store_kind kind = store_kind::none;
    std::string path;     ///< sqlite: the file; empty: an in-memory database (not durable)
    std::string conninfo; ///< postgresql: a libpq connection string or postgresql:// URI
    policy_options policy;
    double budget_share = 0.25;      ///< at most this share of fetch workers runs retries
    std::uint32_t lease_secs = 300;  ///< a round's lease; a crashed crawler's hashes return after it
    std::string owner_id;            ///< empty: host name, process id and a random suffix
    std::size_t batch = 64;          ///< due hashes leased per query at most
    std::size_t queue_capacity = 65'536; ///< each input queue (requests, observations)
    std::uint32_t tick_millis = 10;  ///< how often the store thread looks at its queues
    std::uint32_t counts_interval_secs = 5; ///< how often the state counts are refreshed
};

/// A due hash leased to this crawler, on its way to the pipeline.
struct leased_hash {
    id20 info_hash;
    std::vector<endpoint> peers;
    std::uint32_t attempts = 0; ///< failed rounds before this one
};

/// A state change of a hash, for the application (the `retry` event).
using api::retry_event;

/// Relaxed atomics readable from any thread.
struct scheduler_counters {
    std::atomic<std::uint64_t> claims{0};
    std::array<std::atomic<std::uint64_t>, 4> claim_results{}; ///< by claim_result
    std::atomic<std::uint64_t> observations{0};
    std::atomic<std::uint64_t> reactivated{0};
    std::atomic<std::uint64_t> failures_recorded{0};
    std::atomic<std::uint64_t> done_recorded{0};
    std::atomic<std::uint64_t> released{0};
    std::atomic<std::uint64_t> leased{0};          ///< due hashes leased to us
    std::atomic<std::uint64_t> leases_expired{0};  ///< leases recovered after their expiry (any owner)
    std::atomic<std::uint64_t> transactions{0};
    std::atomic<std::uint64_t> store_errors{0};    ///< failed batches (rolled back)
    std::atomic<std::uint64_t> requests_dropped{0};
    std::atomic<std::uint64_t> observations_dropped{0};
    std::atomic<std::uint64_t> due_dropped{0};     ///< leased but the pipeline's queue was full (lease expires)
    std::atomic<std::uint64_t> lease_query_micros{0}; ///< the last due-work query
    std::array<std::atomic<std::uint64_t>, hash_state_count> by_state{}; ///< refreshed every counts interval
    std::atomic<std::uint64_t> database_bytes{0};
};

/// Opens the store that `o` names (kind must not be none), which creates or migrates its
/// tables, and closes it again: the schema without a crawler (dhtc_store_migrate). Throws
/// store_error naming the database. Blocks the calling thread for as long as the database
/// takes; safe beside crawlers using the same database (the migration takes SQLite's write
/// lock, or PostgreSQL's schema advisory lock).
void migrate_store(const retry_options& o);

class scheduler {
public:
    /// Opens the store on a new store thread and waits for it: nullptr and `error` (naming
    /// the database) when it cannot be opened. kind must not be none.
    static std::unique_ptr<scheduler> open(const retry_options& o, std::string& error);
    /// Opens over a backend made by `make` (tests).
    static std::unique_ptr<scheduler> open(const retry_options& o, std::function<std::unique_ptr<backend>()> make,
                                           std::string& error);
    ~scheduler();

    /// Where state changes go (store thread; keep it short). Set before the first request.
    void on_event(std::function<void(const retry_event&)> sink) { events_ = std::move(sink); }
    /// Where database failures are reported (store thread), e.g. the error callback.
    void on_error(std::function<void(const std::string&)> sink) { errors_ = std::move(sink); }

    // Any thread, never blocking.
    /// False when the queue is full: the caller treats the hash as busy.
    bool post_claim(const id20& info_hash, std::vector<endpoint> peers, std::function<void(claim_answer)> answer);
    void post_failure(const id20& info_hash, api::failure_class cls);
    void post_done(const id20& info_hash);
    void post_release(const id20& info_hash, unix_seconds retry_at);
    void post_observation(const id20& info_hash, std::optional<endpoint> peer);
    /// The DHT routing state to keep (crawl/saved_nodes.hpp), written on the store thread at
    /// its next turn; a newer state replaces one not yet written.
    void post_routing_state(std::string state);
    /// The routing states saved within routing_state_ttl by any owner (a fleet shares
    /// them), newest first, read when the store opened; and why not, if that read failed.
    const std::vector<std::string>& saved_routing_states() const noexcept { return saved_routing_; }
    const std::string& saved_routing_error() const noexcept { return saved_routing_error_; }
    /// How long a saved routing state is worth starting from.
    static constexpr std::chrono::hours routing_state_ttl{24 * 7};

    /// How many more retries the pipeline can take now (it sets this; we lease up to it).
    void set_retry_room(std::size_t n) noexcept { room_.store(n, std::memory_order_relaxed); }
    /// Due hashes leased to us; the pipeline drains it.
    bounded_queue<leased_hash>& due() noexcept { return due_; }

    /// Applies what is queued, then ends the thread. Idempotent.
    void stop();

    const scheduler_counters& counters() const noexcept { return counters_; }
    const retry_options& options() const noexcept { return options_; }
    const std::string& owner() const noexcept { return options_.owner_id; }
    static unix_seconds now() noexcept;

private:
    struct claim_req {
        id20 h;
        std::vector<endpoint> peers;
        std::function<void(claim_answer)> answer;
    };
    struct failure_req {
        id20 h;
        api::failure_class cls;
    };
    struct done_req {
        id20 h;
    };
    struct release_req {
        id20 h;
        unix_seconds at;
    };
    struct observe_req {
        id20 h;
        std::optional<endpoint> peer;
    };
    using request = std::variant<claim_req, failure_req, done_req, release_req, observe_req>;

    explicit scheduler(const retry_options& o);
    void run();
    void turn(bool final);
    void apply_batch(std::vector<request>& batch);
    void lease_due();
    void refresh_counts();
    void save_routing_state();
    void report(const std::string& what);

    retry_options options_;
    std::unique_ptr<store> store_;
    std::function<void(const retry_event&)> events_;
    std::function<void(const std::string&)> errors_;
    bounded_queue<request> requests_;
    bounded_queue<request> observations_;
    bounded_queue<leased_hash> due_;
    std::atomic<std::size_t> room_{0};
    std::vector<request> batch_;
    std::vector<std::pair<std::size_t, claim_answer>> answers_; ///< batch index of each claim, its answer
    std::chrono::steady_clock::time_point next_expire_{}, next_counts_{}, next_lease_{};
    std::mutex m_;
    std::mutex join_m_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::optional<std::string> routing_state_; ///< under m_
    std::vector<std::string> saved_routing_;
    std::string saved_routing_error_;
    std::thread thread_;
    scheduler_counters counters_;
};

} // namespace dhtc::retry
