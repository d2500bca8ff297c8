// BEP-33 DHT scrapes: for a requested info hash, an iterative get_peers lookup with
// scrape=1 toward the nodes closest to the hash (where its announces are stored). Every
// answering node's BFsd (seeds) and BFpe (peers) bloom filters are ORed; a node that answers
// with values only (no filters: it does not speak BEP-33) has its peers' addresses counted as
// peers, unless the seed filters hold them (the BEP's legacy rule). When the closest
// candidates have all answered or failed, or the query budget is spent, the scrape ends with
// the two estimates. Every scrape also has a deadline from its request: one still queued
// then (no node to ask) or still waiting for answers ends with what it has, so a request is
// always answered.
//
// Like the lookups of sampled hashes this is pure state: the actor sends the queries and
// feeds back the replies. Few scrapes run at once (the BEP suggests few for inactive
// torrents) and the queue of requests is bounded, its overflow counted.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "crawl/options.hpp"
#include "krpc/compact.hpp"
#include "krpc/scrape_bloom.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

/// A finished scrape.
struct scrape_result {
    id20 info_hash;
    std::uint64_t seeders = 0;
    std::uint64_t leechers = 0;
    std::uint32_t responders = 0; ///< nodes whose reply described the swarm (filters or values)
    std::uint32_t queried = 0;    ///< get_peers queries sent
    bool timed_out = false;       ///< its deadline ended it: no node to ask, or answers missing
};

class scrapes {
public:
    static constexpr std::size_t width = 16;       ///< candidates kept (closest first)
    static constexpr std::size_t closest = 8;      ///< the scrape ends once these have all replied
    static constexpr std::size_t parallelism = 3;  ///< queries in flight per scrape
    static constexpr std::size_t max_legacy = 256; ///< values-only peer addresses kept per scrape

    explicit scrapes(const scrape_options& o);

    /// Queues a hash, to be answered by `now` + timeout_secs at the latest; false when the
    /// queue is full (counted in dropped()). A hash already queued or running is not queued
    /// twice (true: it will be answered).
    bool want(const id20& info_hash, time_point now);
    bool has_queued() const noexcept { return !queue_.empty(); }
    const id20& front() const noexcept { return queue_.front().target; }
    bool has_free_slot() const noexcept { return active_ < options_.max_concurrent; }
    /// Starts the front request, seeded with the closest nodes we know; false when nothing
    /// started (no request, no slot or no seed).
    bool start(std::span<const krpc::node_entry> seeds);

    struct query {
        std::uint32_t slot;
        id20 target;
        krpc::node_entry to;
    };
    /// The next get_peers (scrape=1) to send, if any scrape has one.
    std::optional<query> next();

    /// What a reply to a scrape query carried.
    struct reply {
        const krpc::compact_nodes* nodes = nullptr; ///< closer candidates (the sender's family)
        std::string_view seeds_filter;              ///< BFsd (256 bytes) or empty
        std::string_view peers_filter;              ///< BFpe (256 bytes) or empty
        const krpc::compact_values* values = nullptr;
    };
    /// The candidate at `from` answered the query for `target`; the scrape's result when this
    /// ended it. A late answer to a scrape that has ended is ignored.
    std::optional<scrape_result> on_reply(std::uint32_t slot, const id20& target, const endpoint& from,
                                          const reply& r);
    /// The candidate at `from` timed out, erred or was never sent to; the result when this
    /// ended the scrape.
    std::optional<scrape_result> on_failure(std::uint32_t slot, const id20& target, const endpoint& from);
    /// Ends every scrape, queued or running, whose deadline is past at `now`, each with what
    /// it has (timed_out); their results are appended to `out`.
    void expire(time_point now, std::vector<scrape_result>& out);

    std::size_t active() const noexcept { return active_; }
    std::size_t queued() const noexcept { return queue_.size(); }
    std::uint64_t started() const noexcept { return started_; }
    std::uint64_t completed() const noexcept { return completed_; }
    std::uint64_t dropped() const noexcept { return dropped_; }
    std::uint64_t timed_out() const noexcept { return timed_out_; }

private:
    enum class state : std::uint8_t { fresh, queried, answered, failed };
    struct candidate {
        krpc::node_entry node;
        state st = state::fresh;
    };
    struct request {
        id20 target;
        time_point deadline;
    };
    struct scrape {
        id20 target;
        time_point deadline{};
        std::array<candidate, width> c{};
        std::uint8_t n = 0;
        std::uint8_t in_flight = 0;
        std::uint32_t sent = 0;
        std::uint32_t responders = 0;
        krpc::scrape_bloom seeds, peers;
        std::vector<ip_address> legacy; ///< peers from values-only replies, at most max_legacy
        bool active = false;
    };
    void add_candidate(scrape& s, const krpc::node_entry& e);
    candidate* find(scrape& s, const endpoint& ep);
    candidate* pick(scrape& s);
    /// The running scrape in `slot` for `target` (nullptr when it has ended).
    scrape* running(std::uint32_t slot, const id20& target);
    std::optional<scrape_result> finish_if_done(scrape& s);
    scrape_result finish(scrape& s, bool timed_out);

    scrape_options options_;
    std::vector<scrape> slots_; // grows to max_concurrent, then reused
    std::size_t active_ = 0;
    std::deque<request> queue_; // in request order, so in deadline order too
    std::size_t cursor_ = 0;
    std::uint64_t started_ = 0;
    std::uint64_t completed_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t timed_out_ = 0;
};

} // namespace dhtc::crawl
