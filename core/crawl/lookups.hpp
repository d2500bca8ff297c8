// get_peers lookups for hashes learned from BEP-51 samples: a sample names a hash but no
// peer, so a short iterative lookup towards the hash finds who has it. The node that sampled
// the hash stores its peers (that is where samples come from), so it is asked first: most
// lookups end after that one query. Lookups are small (a bounded number of queries each),
// few at a time, and started at a budgeted rate.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_set>
#include <vector>

#include "crawl/options.hpp"
#include "krpc/compact.hpp"
#include "net/address.hpp"
#include "net/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

class lookups {
public:
    static constexpr std::size_t width = 16;       ///< candidates kept per lookup (closest first)
    static constexpr std::size_t parallelism = 3;  ///< queries in flight per lookup
    static constexpr std::size_t enough_peers = 3; ///< a lookup stops once it found this many,
                                                   ///< or once the holder gave any

    explicit lookups(const bep51_options& o);

    /// Queues a hash for a lookup; false when it was looked up recently or the queue is full.
    /// `holder`: a node known to store peers for it (the one that sampled it), asked first.
    bool want(const id20& info_hash, const std::optional<krpc::node_entry>& holder = std::nullopt);
    /// Queues a lookup the retry side asked for (the hash's peers all failed, minutes or hours
    /// ago): unlike a sampled hash it is wanted again even when it was looked up recently.
    /// False only when the queue is full.
    bool want_again(const id20& info_hash);
    /// Starts a queued lookup in a free slot, seeded with `seeds` (the closest nodes we know).
    /// Returns false when nothing was started (no queued hash or no free slot).
    bool start(std::span<const krpc::node_entry> seeds);
    bool has_queued() const noexcept { return !queue_.empty(); }
    /// The hash start() would look up next, and the node that sampled it; has_queued() must be true.
    const id20& front() const noexcept { return queue_.front().hash; }
    const std::optional<krpc::node_entry>& front_holder() const noexcept { return queue_.front().holder; }
    /// Moves the next hash to the back of the queue (its holder cannot be asked yet), unless
    /// it has waited requeue_limit since it was first moved: false, and it stays in front.
    bool requeue_front(time_point now);
    /// How long a hash may wait for its holder before its lookup starts anyway (a holder that
    /// queries us hard spends its whole destination budget on our answers).
    static constexpr std::chrono::seconds requeue_limit{10};
    bool has_free_slot() const noexcept;

    struct query {
        std::uint32_t slot;
        id20 target;
        krpc::node_entry to;
    };
    /// The next get_peers to send at `now`, if any lookup has one; the candidate is marked as
    /// queried.
    std::optional<query> next(time_point now);
    /// The candidate at `from` answered: `nodes` may bring closer candidates.
    void on_reply(std::uint32_t slot, const endpoint& from, const krpc::compact_nodes& nodes, std::size_t peers_found);
    /// The candidate at `from` timed out, erred or was never sent to.
    void on_failure(std::uint32_t slot, const endpoint& from);
    /// The query next() gave for `from` was not sent: its destination's budget is spent. The
    /// candidate waits (deferral_wait) and is asked again, since it may be the one that holds
    /// the peers; after max_deferrals it is skipped, so a node that queries us hard (and so
    /// spends its budget on our answers) cannot stall a lookup. The query does not count
    /// against the lookup's queries_per_lookup.
    void on_deferred(std::uint32_t slot, const endpoint& from, time_point now);
    static constexpr std::uint8_t max_deferrals = 5;
    static constexpr std::chrono::milliseconds deferral_wait{1000};

    std::size_t active() const noexcept { return active_; }
    std::size_t queued() const noexcept { return queue_.size(); }
    std::uint64_t started() const noexcept { return started_; }
    std::uint64_t completed() const noexcept { return completed_; }
    std::uint64_t dropped() const noexcept { return dropped_; }
    std::uint64_t duplicates() const noexcept { return duplicates_; }

private:
    enum class state : std::uint8_t { fresh, queried, answered, failed };
    struct candidate {
        krpc::node_entry node;
        state st = state::fresh;
        std::uint8_t deferrals = 0;
        time_point not_before{}; ///< a deferred candidate waits until then
    };
    struct lookup {
        id20 target;
        std::optional<candidate> holder; ///< queried before the closest candidates
        std::array<candidate, width> c{};
        std::uint8_t n = 0;
        std::uint8_t in_flight = 0;
        std::uint8_t sent = 0;
        std::uint8_t peers = 0;
        bool holder_had_peers = false; ///< it stores the swarm's announces: the rest would repeat them
        bool active = false;
        bool satisfied() const noexcept { return peers >= enough_peers || holder_had_peers; }
    };
    void add_candidate(lookup& l, const krpc::node_entry& e);
    candidate* find(lookup& l, const endpoint& ep);
    void finish_if_done(lookup& l);
    void remember(const id20& h);
    bool enqueue(const id20& info_hash, const std::optional<krpc::node_entry>& holder);

    bep51_options options_;
    std::size_t max_slots_;
    std::vector<lookup> slots_; // grows to max_slots_ as lookups run at once
    std::size_t active_ = 0;
    struct waiting {
        id20 hash;
        std::optional<krpc::node_entry> holder;
        std::optional<time_point> requeued; ///< when it was first moved back
    };
    std::deque<waiting> queue_;
    // Recently looked-up hashes: many nodes sample the same popular hashes.
    std::unordered_set<id20, id20_hash> recent_;
    std::deque<id20> recent_order_;
    std::size_t cursor_ = 0; // round-robin over slots in next()
    std::uint64_t started_ = 0;
    std::uint64_t completed_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t duplicates_ = 0;
};

} // namespace dhtc::crawl
