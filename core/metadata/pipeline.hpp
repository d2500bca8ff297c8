// The metadata pipeline: captured (hash, peer) pairs in, verified and parsed torrents out,
// with exactly one completion per gated round. It runs on its own thread (an io_context
// with one coroutine per fetch job) and meets the DHT side only through the bounded hash
// ingress, and the application only through the delivery thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "model/events.hpp"
#include "metadata/peer_session.hpp"
#include "metadata/ports.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "stats/histogram.hpp"
#include "util/bounded_queue.hpp"

namespace dhtc::metadata {

/// The seed's metadata.* options and hash_queue_capacity, plus ours.
struct pipeline_options {
    std::size_t hash_queue_capacity = 10'000;
    unsigned timeout_secs = 4;                  ///< one end-to-end deadline per peer attempt
    std::size_t max_queue_size = 10'000;        ///< pending hashes
    std::size_t max_worker_count = 256;         ///< concurrent fetch jobs
    std::size_t peer_failure_cache_capacity = 200'000;
    unsigned peer_failure_ttl_secs = 60;      ///< a peer that timed out or refused the connection
    unsigned refusal_ttl_secs = 600;          ///< a peer that refused us (handshake_failed); 0: not kept
    unsigned first_timeout_ttl_secs = 10;     ///< a peer's first timeout within peer_failure_ttl_secs (issue 32)
    std::size_t max_metadata_size = 10 * 1024 * 1024;
    /// Metadata bytes held in flight across all jobs (leased and received pieces); a fetch
    /// that finds it spent waits, and fails as size_limit if its deadline passes first.
    std::size_t max_in_flight_bytes = std::size_t{64} << 20;
    unsigned max_attempts = 3;                  ///< real peer attempts per round
    std::size_t delivered_filter_capacity = 100'000;
    unsigned delivered_filter_period_secs = 86'400;
    unsigned gate_timeout_millis = 5'000;       ///< an unanswered gate takes gate_default
    bool gate_default = true;
    std::optional<ip_address> bind_v4;          ///< source address of outgoing TCP (v4)
    // Chosen on issue 16's mixed libtorrent swarm (docs/performance.md, "Choosing the
    // connection-policy defaults"): every torrent, one try each.
    encryption_policy encryption = encryption_policy::prefer_encrypted; ///< metadata.encryption
    transport_policy transports = transport_policy::utp_first;          ///< metadata.transports
};

/// The retry store's side of the pipeline (all optional).
struct retry_settings {
    retry_port* store = nullptr;                   ///< nullptr: no retry store
    std::size_t slots = 0;                         ///< retry rounds at once (the budget's share of the workers)
    unsigned claim_timeout_millis = 5'000;         ///< an unanswered claim counts as busy
    unsigned lookup_wait_secs = 10;                ///< a retry without peers waits this long for a lookup
    unsigned gate_rejected_retry_secs = 1'800;     ///< a hash the gate refused is offered again after this
    std::function<bool(const id20&)> want_peers;   ///< asks the DHT side for a get_peers lookup
};

/// Counters; relaxed atomics readable from any thread.
struct pipeline_counters {
    std::atomic<std::uint64_t> hashes_in{0};          ///< events taken from the ingress
    std::atomic<std::uint64_t> already_delivered{0};  ///< skipped: delivered within the filter period
    std::atomic<std::uint64_t> merged_in_flight{0};   ///< a new peer joined a running job
    std::atomic<std::uint64_t> pending_refused{0};    ///< stale, expired or full (see the queue)
    std::atomic<std::uint64_t> gate_rejected{0};
    std::atomic<std::uint64_t> gate_timeouts{0};
    std::atomic<std::uint64_t> jobs_started{0};
    std::atomic<std::uint64_t> attempts{0};
    std::atomic<std::uint64_t> failure_cache_hits{0};
    std::atomic<std::uint64_t> second_chance_fetches{0}; ///< served by a peer that had timed out once (issue 32)
    /// Sessions a peer refused while another session of ours to it was open or had just
    /// closed: asked again, not held against the peer (issue 32) ...
    std::atomic<std::uint64_t> crowded_refusals{0};
    std::atomic<std::uint64_t> crowded_saves{0}; ///< ... in rounds that then delivered the torrent
    std::atomic<std::uint64_t> deadline_extensions{0};      ///< sessions whose slow round trip pushed the deadline back
    std::atomic<std::uint64_t> deadline_extension_saves{0}; ///< ... that succeeded after the first deadline
    std::atomic<std::uint64_t> dht_rtt_extensions{0}; ///< sessions whose deadline or SYN wait the DHT's round trip lengthened
    std::atomic<std::uint64_t> dht_rtt_saves{0};      ///< ... that succeeded after the unscaled deadline or SYN wait
    std::atomic<std::uint64_t> refetches{0};          ///< multi-peer dicts that failed and were refetched from one
    std::atomic<std::uint64_t> duplicates{0};         ///< a hybrid already delivered under its other key
    std::atomic<std::uint64_t> bytes_fetched{0};
    std::atomic<std::uint64_t> memory_held{0};          ///< metadata bytes charged to the budget now
    std::atomic<std::uint64_t> memory_refused{0};       ///< piece requests held back: the budget was spent
    std::atomic<std::uint64_t> memory_refused_bytes{0}; ///< bytes of those requests
    std::atomic<std::uint64_t> memory_starved{0};       ///< attempts that ended as size_limit for want of budget
    std::array<std::atomic<std::uint64_t>, failure_class_count> attempt_failures{}; ///< per class
    std::array<std::atomic<std::uint64_t>, outcome_count> outcomes{};               ///< per outcome
    /// Session tries by mode (0: plaintext, 1: MSE), their successes and failures; a session
    /// that fell back counts one failed try in its first mode and one try in the other.
    std::array<std::atomic<std::uint64_t>, 2> encryption_tries{};
    std::array<std::atomic<std::uint64_t>, 2> encryption_successes{};
    std::array<std::atomic<std::uint64_t>, 2> encryption_failures{};
    std::atomic<std::uint64_t> encryption_fallbacks{0}; ///< sessions that tried the other mode
    std::atomic<std::uint64_t> mse_failures{0};         ///< sessions whose last try's MSE exchange failed on the protocol (an mse_error; encryption_failed)
    std::atomic<std::uint64_t> rc4_sessions{0};         ///< successful sessions whose peer selected RC4
    /// Session tries by transport (0: TCP, 1: uTP), their successes and failures, counted
    /// like the encryption ones; a fallback is a session whose later try changed transport.
    std::array<std::atomic<std::uint64_t>, 2> transport_tries{};
    std::array<std::atomic<std::uint64_t>, 2> transport_successes{};
    std::array<std::atomic<std::uint64_t>, 2> transport_failures{};
    std::atomic<std::uint64_t> transport_fallbacks{0};
    /// The same tries crossed, transport x encryption (docs/metrics.md, dhtc_metadata_session_*):
    /// tries and failures by [transport: 0 TCP, 1 uTP][mode tried: 0 plaintext, 1 MSE],
    /// failures also by class (the try's own, see session_failure_classes); successes by
    /// [transport][stream that served: 0 plaintext, 1 MSE with plaintext selected, 2 MSE+RC4].
    using by_mode = std::array<std::atomic<std::uint64_t>, 2>;
    std::array<by_mode, 2> session_tries{};
    std::array<std::array<std::atomic<std::uint64_t>, 3>, 2> session_successes{};
    std::array<std::array<std::array<std::atomic<std::uint64_t>, failure_class_count>, 2>, 2> session_failures{};
    std::atomic<std::uint64_t> store_done{0};         ///< skipped: the retry store knows it is done
    std::atomic<std::uint64_t> store_busy{0};         ///< skipped: leased elsewhere (or the claim went unanswered)
    std::atomic<std::uint64_t> store_deferred{0};     ///< skipped: dormant and not due (reactivated instead)
    std::atomic<std::uint64_t> retry_rounds{0};       ///< rounds started for due hashes leased from the store
    std::atomic<std::uint64_t> retry_lookups{0};      ///< retries that came due without peers
    std::atomic<std::uint64_t> sink_failures{0};      ///< fetched, but the application could not store it
    std::atomic<std::uint64_t> in_flight{0};
    std::atomic<std::uint64_t> retries_in_flight{0};
    std::atomic<std::uint64_t> pending{0};
    /// From a hash's arrival in the pending queue to the start of its round.
    stats::queue_wait_histogram queue_wait_ms{stats::queue_wait_bounds_ms};
    /// From the first connection of a round to verified bytes (successful rounds).
    stats::fetch_duration_histogram fetch_duration_ms{stats::fetch_duration_bounds_ms};
    /// Size of verified info dicts.
    stats::payload_size_histogram payload_bytes{stats::payload_size_bounds_bytes};
};

class pipeline {
public:
    /// `app` and `clock` outlive the pipeline. The clock times the pipeline's own
    /// bookkeeping (queues, caches, filters); peer sessions keep their own deadlines.
    pipeline(const pipeline_options& o, application_port& app, const dhtc::clock& clock, retry_settings retry = {});
    ~pipeline();

    /// Where the DHT side puts captured pairs (any thread).
    bounded_queue<api::hash_event>& ingress() noexcept { return ingress_; }
    const bounded_queue<api::hash_event>& ingress() const noexcept { return ingress_; }
    /// 0..1: how full the pipeline's queues are, for the DHT query-rate feedback.
    double pressure() const noexcept { return pressure_.load(std::memory_order_relaxed); }

    void start();
    /// Cancels every job (gated rounds complete as cancelled, through the delivery
    /// thread), then stops the thread. Idempotent; not from the metadata thread.
    void stop();

    const pipeline_counters& counters() const noexcept { return counters_; }
    std::size_t pending_capacity() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
    bounded_queue<api::hash_event> ingress_;
    std::atomic<double> pressure_{0.0};
    pipeline_counters counters_;
};

} // namespace dhtc::metadata
