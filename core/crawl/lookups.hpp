// get_peers lookups for hashes learned from BEP-51 samples: a sample names a hash but no
// peer, so a short iterative lookup towards the hash finds who has it. The nodes that sampled
// the hash store its peers (that is where samples come from; about 8 nodes store each hash
// and all of them sample it), so they are asked first: most lookups end after one query.
// Lookups are small (a bounded number of queries each), few at a time, and started at a
// budgeted rate.
//
// A hash none of whose holders can be asked yet (their destination budgets are spent) is
// parked until the first of them can, at most requeue_limit: the crawl loop does not look at
// it again before, and the hashes behind it start meanwhile.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <queue>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "crawl/options.hpp"
#include "krpc/compact.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

class lookups {
public:
    static constexpr std::size_t width = 16;       ///< candidates kept per lookup (closest first)
    static constexpr std::size_t parallelism = 3;  ///< queries in flight per lookup
    static constexpr std::size_t enough_peers = 3; ///< a lookup stops once it found this many,
                                                   ///< or once a holder gave any
    static constexpr std::size_t max_holders = 4;  ///< nodes that sampled a hash, kept per lookup

    /// When a query to a node could go (now, or the instant its budgets allow it).
    using ready_fn = std::function<time_point(const krpc::node_entry&, time_point now)>;

    /// `ready_at` is asked about holders before a lookup starts; empty: always ready.
    explicit lookups(const bep51_options& o, ready_fn ready_at = {});

    /// Queues a hash for a lookup, `holder` (a node that sampled it, so stores its peers) to be
    /// asked first. A hash still waiting gains the holder (up to max_holders) and returns
    /// false, as does one looked up recently or a full queue.
    bool want(const id20& info_hash, const std::optional<krpc::node_entry>& holder = std::nullopt);
    /// Queues a lookup the retry side asked for (the hash's peers all failed, minutes or hours
    /// ago): unlike a sampled hash it is wanted again even when it was looked up recently.
    /// False only when the queue is full.
    bool want_again(const id20& info_hash);

    /// The hash of the next lookup that may start at `now`: a parked one now due, else the
    /// front of the queue. A hash none of whose holders can be asked yet is parked meanwhile
    /// (counted in parkings(), its wait in parked_seconds()), and the next one is looked at,
    /// a bounded number per call. Nothing when no hash may start now. start() starts it.
    std::optional<id20> next_to_start(time_point now);
    /// Starts the lookup next_to_start() named, in a free slot, seeded with `seeds` (the
    /// closest nodes we know). False when nothing was started (no hash named, no free slot or
    /// no seed); the hash then stays first in line.
    bool start(std::span<const krpc::node_entry> seeds);
    bool has_queued() const noexcept { return next_ || !queue_.empty() || !parked_.empty(); }
    bool has_free_slot() const noexcept;
    /// How long a hash may wait for its holders before its lookup starts anyway (holders that
    /// query us hard spend their whole destination budgets on our answers).
    static constexpr std::chrono::seconds requeue_limit{10};

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
    /// The candidate at `from` erred or was never sent to.
    void on_failure(std::uint32_t slot, const endpoint& from);
    /// The candidate at `from` left our query unanswered within the request timeout. A holder
    /// is asked again, up to holder_retries times (a lost datagram must not cost the hash's
    /// peers), without counting against queries_per_lookup. A lookup that ends with no peer
    /// and nothing but timeouts is parked to run again (lookup_retries, lookup_retry_secs).
    void on_timeout(std::uint32_t slot, const endpoint& from, time_point now);
    /// The query next() gave for `from` was not sent: its destination's budget is spent until
    /// `ready_at`. The candidate waits until then and is asked again, since it may hold the
    /// peers; meanwhile the lookup asks its next holder. After max_deferrals it is skipped, so
    /// a node that queries us hard (and so spends its budget on our answers) cannot stall a
    /// lookup. The query does not count against the lookup's queries_per_lookup.
    void on_deferred(std::uint32_t slot, const endpoint& from, time_point ready_at);
    static constexpr std::uint8_t max_deferrals = 5;

    std::size_t active() const noexcept { return active_; }
    std::size_t queued() const noexcept { return queue_.size() + parked_.size() + (next_ ? 1 : 0); }
    std::uint64_t started() const noexcept { return started_; }
    std::uint64_t completed() const noexcept { return completed_; }
    std::uint64_t dropped() const noexcept { return dropped_; }
    std::uint64_t duplicates() const noexcept { return duplicates_; }
    std::uint64_t parkings() const noexcept { return parkings_; }
    double parked_seconds() const noexcept { return parked_seconds_; }
    /// Holders added to a hash already waiting (a second node sampled it).
    std::uint64_t holders_added() const noexcept { return holders_added_; }
    /// get_peers sent again to a holder that timed out; of those, answered; and the peers
    /// those answers brought (what the retries saved).
    std::uint64_t holder_retries() const noexcept { return holder_retries_; }
    std::uint64_t holder_retry_answers() const noexcept { return holder_retry_answers_; }
    std::uint64_t holder_retry_peers() const noexcept { return holder_retry_peers_; }
    /// Lookups parked to run again after ending on timeouts alone; of those runs, the ones
    /// that found peers.
    std::uint64_t lookup_retries() const noexcept { return lookup_retries_; }
    std::uint64_t lookup_retries_found() const noexcept { return lookup_retries_found_; }

private:
    enum class state : std::uint8_t { fresh, queried, answered, failed };
    struct candidate {
        krpc::node_entry node;
        state st = state::fresh;
        std::uint8_t deferrals = 0;
        std::uint8_t retries = 0;  ///< times asked again after a timeout
        time_point not_before{}; ///< a deferred candidate waits until then
    };
    struct lookup {
        id20 target;
        std::array<candidate, max_holders> holders{}; ///< asked before the closest candidates
        std::uint8_t holder_count = 0;
        std::array<candidate, width> c{};
        std::uint8_t n = 0;
        std::uint8_t in_flight = 0;
        std::uint8_t sent = 0;
        std::uint8_t peers = 0;
        std::uint8_t timeouts = 0;       ///< candidates that never answered
        std::uint8_t other_outcomes = 0; ///< answers, errors and refused sends
        std::uint8_t again = 0;          ///< 0: the first run; n: the n-th run after timeouts alone
        bool holder_had_peers = false; ///< it stores the swarm's announces: the rest would repeat them
        bool active = false;
        bool satisfied() const noexcept { return peers >= enough_peers || holder_had_peers; }
        std::span<candidate> holder_span() noexcept { return {holders.data(), holder_count}; }
    };
    struct holder_list {
        std::array<krpc::node_entry, max_holders> nodes{};
        std::uint8_t count = 0;
    };
    struct waiting {
        id20 hash;
        time_point due{};                       ///< parked: when its first holder can be asked
        std::optional<time_point> parked_since; ///< when it was first parked
        std::uint8_t again = 0;                 ///< lookup::again of the run it will start
        bool operator>(const waiting& o) const noexcept { return due > o.due; }
    };

    void add_candidate(lookup& l, const krpc::node_entry& e);
    candidate* find(lookup& l, const endpoint& ep);
    bool is_holder(lookup& l, const candidate* c) const noexcept;
    void finish_if_done(lookup& l, std::optional<time_point> now = std::nullopt);
    void run_again_later(const lookup& l, time_point now);
    void remember(const id20& h);
    bool enqueue(const id20& info_hash, const std::optional<krpc::node_entry>& holder);
    time_point holders_ready_at(const holder_list& h, time_point now) const;

    bep51_options options_;
    ready_fn ready_at_;
    std::size_t max_slots_;
    std::vector<lookup> slots_; // grows to max_slots_ as lookups run at once
    std::size_t active_ = 0;
    std::deque<waiting> queue_;
    std::priority_queue<waiting, std::vector<waiting>, std::greater<>> parked_;
    std::optional<waiting> next_; ///< what next_to_start() named
    // The holders of every waiting hash (queued, parked or named): a second node sampling a
    // hash that waits adds itself here. At most lookup_queue_capacity entries.
    std::unordered_map<id20, holder_list, id20_hash> holders_;
    // Recently looked-up hashes: many nodes sample the same popular hashes.
    std::unordered_set<id20, id20_hash> recent_;
    std::deque<id20> recent_order_;
    std::size_t cursor_ = 0; // round-robin over slots in next()
    std::uint64_t started_ = 0;
    std::uint64_t completed_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t duplicates_ = 0;
    std::uint64_t parkings_ = 0;
    double parked_seconds_ = 0;
    std::uint64_t holders_added_ = 0;
    std::uint64_t holder_retries_ = 0;
    std::uint64_t holder_retry_answers_ = 0;
    std::uint64_t holder_retry_peers_ = 0;
    std::uint64_t lookup_retries_ = 0;
    std::uint64_t lookup_retries_found_ = 0;
};

} // namespace dhtc::crawl
