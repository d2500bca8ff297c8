// What we know of each remote node and each remote IP, in two bounded tables that the
// answering node and the crawl actor share (both run on the network thread).
//
// Per node (an endpoint: IP and port; endpoints of one IP that carry the same node id are
// one node, so NAT rebinding or a stale pool entry earns no second budget):
//   - its destination budget: every KRPC datagram we send it. libtorrent's DoS blocker is per
//     session: each counts the packets it receives from one source IP (more than 5/s over
//     10 s and it ignores that IP for 5 minutes), so several sessions behind one IP (CGNAT,
//     a seedbox) each keep their own count of what we send them;
//   - its answer budget: our answers to its queries. Answers come first: a node that queries
//     us within this budget gets every answer, whatever we sent it ourselves. Our queries go
//     out only while its destination bucket keeps `answer_headroom` tokens; answers may take
//     that bucket below zero, so everything we send one node stays within
//     rate x t + 2 x burst - headroom in any t seconds (38 in 10 s at the defaults);
//   - its back-off after error 201 ("too many requests") or a run of unanswered queries.
// Per IP, all its nodes together:
//   - a looser ceiling on everything we send it (what one address can draw from us), which
//     our queries also leave headroom in;
//   - its answer budget (crawl.rate_limit.max_response_rate_per_source);
//   - whether it answered one of our queries lately: such a source is trusted, and keeps a
//     reserved share of the global answer budget that a flood of strangers cannot take;
//   - the round trip its answers took, smoothed (RFC 6298's SRTT: 1/8 of each new sample),
//     told while it is trusted: the metadata side scales a peer's deadlines with it (issue 32).
//
// Bounded by construction: a full table evicts its least recently used entry, but never one
// that still owes tokens or (nodes) is backing off, since forgetting either would let us send
// more than the budget. A node is tracked only once its IP's budgets let a datagram through,
// so one address rotating source ports creates nodes no faster than its IP budget sends, and
// those owe a token for half a second: the old end of the node table stays evictable. When
// every entry scanned still owes, the new one is refused and counted. Storage grows in slabs.
//
// Thread rules: single owner (the network thread). Counters and sizes are relaxed atomics,
// readable from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "util/lru_slots.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"
#include "util/relaxed_counter.hpp"
#include "util/slot_index.hpp"

namespace dhtc::crawl {

struct source_table_options {
    double answer_rate = 40;   ///< replies per second to one IP (burst: the same)
    double node_rate = 2;      ///< KRPC datagrams per second to one node, sustained
    double node_burst = 10;    ///< ... and at once
    double ip_rate = 16;       ///< KRPC datagrams per second to one IP, all its nodes together
    double ip_burst = 80;
    /// Destination tokens our queries leave a node for its answers (and, scaled by
    /// ip_burst / node_burst, its IP), so our own queries never take what an answer needs.
    double answer_headroom = 2;
    std::size_t capacity = 16'384;  ///< IPs tracked, and as many nodes; 1..2^24-1
    std::chrono::seconds trust_ttl{900};      ///< an answer of theirs keeps an IP trusted this long
    std::chrono::seconds backoff_base{60};    ///< first back-off; doubles per repeat
    std::chrono::seconds backoff_max{3600};
    unsigned silence_limit = 4;     ///< unanswered queries in a row that start a back-off
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// Why a datagram to a node may or may not go out now.
enum class send_verdict : std::uint8_t {
    ok,
    over_answer_budget, ///< the source IP's answer budget is spent (answers only)
    over_budget,        ///< the node's or its IP's budget is spent
    backed_off,         ///< it sent error 201 or stopped answering (queries only)
    table_full,         ///< every entry scanned is still owed tokens: nothing new is tracked
};

class source_table {
public:
    explicit source_table(source_table_options options = {});

    /// The verdict on answering a query of `source` (whose query carried node id `id`; zero
    /// when it had none), with nothing taken yet: the caller asks the global budgets next, and
    /// commits only when they agree too.
    struct answer_check {
        send_verdict verdict = send_verdict::table_full;
        bool trusted = false;           ///< its IP answered one of our queries within trust_ttl
        std::uint32_t ip_slot = none;   ///< for commit_answer
        std::uint32_t node_slot = none;
    };
    answer_check check_answer(const endpoint& source, const id20& id, time_point now);
    /// Takes the tokens of the answer check_answer allowed.
    void commit_answer(const answer_check& c) noexcept;

    /// A query of ours: its verdict, and when a query to that node could go (now when sent;
    /// for a refusal, the instant its budgets or back-off allow one, so the caller can park it).
    /// Refusals for one spent budget are told successive instants, one token apart: many
    /// nodes parked behind one IP wake one per token, not all at each.
    struct query_check {
        send_verdict verdict = send_verdict::table_full;
        time_point ready_at{};
    };
    /// A query of ours to node `id` at `to` (zero id: unknown, as for a bootstrap router):
    /// takes one token of the node's and of its IP's budget, or says why not (and counts it).
    query_check try_query(const endpoint& to, const id20& id, time_point now);
    /// When a query to `to` could go, back-off included (now when it could go now); takes,
    /// counts and tracks nothing.
    time_point query_ready_at(const endpoint& to, const id20& id, time_point now) const;

    /// A reply of `from` matched one of our queries: its IP is trusted, its silence forgiven.
    /// `round_trip`: the time since that query went out, a sample of the IP's round trip.
    void on_answered(const endpoint& from, const id20& id, time_point now,
                     std::optional<duration> round_trip = std::nullopt);
    /// `from` answered with error 201: back off that node.
    void on_rate_limited(const endpoint& from, const id20& id, time_point now);
    /// A query of ours to `to` went unanswered.
    void on_silence(const endpoint& to, const id20& id, time_point now);

    bool trusted(const ip_address& a, time_point now) const;
    /// The smoothed round trip of `a`'s answers, while it is trusted (answered us within
    /// trust_ttl); nothing when it is not, or no answer was timed. Counted (rtt_lookups,
    /// rtt_known).
    std::optional<duration> round_trip(const ip_address& a, time_point now);
    /// True while queries to the node at `ep` are held back.
    bool backing_off(const endpoint& ep, time_point now) const;

    /// IPs and nodes tracked (any thread: snapshots read them while the owner works).
    std::size_t size() const noexcept { return ips_.size(); }
    std::size_t node_count() const noexcept { return nodes_.size(); }
    std::size_t capacity() const noexcept { return ips_.capacity(); }
    const source_table_options& options() const noexcept { return options_; }
    std::size_t memory_bytes() const noexcept {
        return ips_.memory_bytes() + nodes_.memory_bytes() + aliases_.memory_bytes();
    }

    struct counters {
        relaxed_counter refused_answer_source;      ///< answers refused by the source IP's answer budget
        relaxed_counter refused_answer_destination; ///< answers refused by the node's answer budget
        relaxed_counter refused_answer_ip;          ///< answers refused by the IP's ceiling
        relaxed_counter refused_query_destination;  ///< our queries held back by the node's budget
        relaxed_counter refused_query_ip;           ///< our queries held back by the IP's ceiling
        relaxed_counter refused_query_backoff;      ///< our queries held back by a back-off
        relaxed_counter refused_table_full;         ///< datagrams to an IP the full IP table could not track
        relaxed_counter refused_node_table_full;    ///< datagrams to a node the full node table could not track
        relaxed_counter evictions;                  ///< IPs evicted
        relaxed_counter lossy_evictions;            ///< IPs evicted with part of their answer budget spent
        relaxed_counter trusted_evictions;          ///< IPs evicted while trusted: no untrusted entry owed nothing
        relaxed_counter node_evictions;
        relaxed_counter node_rebinds;               ///< a node id met at a new port of its IP: one node
        relaxed_counter backoffs_rate_limited;      ///< back-offs started by error 201
        relaxed_counter backoffs_silence;           ///< back-offs started by a run of silence
        relaxed_counter rtt_samples;                ///< answers whose round trip fed their IP's
        relaxed_counter rtt_lookups;                ///< round_trip() asked (a peer handed to the metadata side)
        relaxed_counter rtt_known;                  ///< ... and an IP's round trip was known
    };
    const counters& stats() const noexcept { return counters_; }

private:
    static constexpr std::uint32_t none = 0xffffffffu;

    struct ip_entry {
        ip_address address;
        time_point last{};          ///< when both buckets were last refilled
        double answer_tokens = 0;
        double tokens = 0;          ///< the IP's ceiling, everything we send it
        time_point trusted_until{};
        time_point next_slot{};     ///< the next query refused for its ceiling is told to wait until then
        std::uint32_t srtt_us = 0;  ///< its answers' smoothed round trip, microseconds (0: none timed)
    };
    struct node_entry {
        endpoint ep;                ///< canonical
        id20 id;                    ///< the id last seen at it (zero: none yet)
        bool id_indexed = false;    ///< in aliases_ under (IP, id)
        std::uint8_t silent = 0;    ///< unanswered queries in a row
        std::uint8_t backoffs = 0;  ///< back-offs in a row (the doubling exponent)
        time_point last{};
        double answer_tokens = 0;   ///< its answer budget
        double tokens = 0;          ///< everything we send it; answers may take it below zero
        time_point backoff_until{};
        time_point next_slot{};     ///< as for the IP
    };

    std::uint32_t touch_ip(const ip_address& canonical_address, time_point now);
    std::uint32_t touch_node(const endpoint& canonical_ep, const id20& id, time_point now);
    std::uint32_t find_ip(const ip_address& canonical_address) const;
    std::uint32_t find_node(const endpoint& canonical_ep, const id20& id) const;
    void set_id(std::uint32_t node, const id20& id);
    void refill(ip_entry& e, time_point now) const noexcept;
    void refill(node_entry& e, time_point now) const noexcept;
    time_point ready_at(const ip_entry* ip, const node_entry* node, time_point now) const noexcept;
    time_point reserve_slot(time_point& next_slot, time_point ready, double rate) const noexcept;
    void back_off(node_entry& e, time_point now) noexcept;
    static void smooth_rtt(ip_entry& e, duration sample) noexcept;
    std::uint64_t ip_hash(const ip_address& a) const noexcept;
    std::uint64_t node_hash(const endpoint& ep) const noexcept;
    std::uint64_t alias_hash(const ip_address& a, const id20& id) const noexcept;
    /// The hash an indexed node slot is filed under in aliases_.
    auto alias_slot_hash() const noexcept {
        return [this](std::uint32_t s) { return alias_hash(nodes_[s].ep.address, nodes_[s].id); };
    }

    source_table_options options_;
    double ip_headroom_;
    siphash_key key_;
    lru_slots<ip_entry> ips_;
    lru_slots<node_entry> nodes_;
    detail::slot_index aliases_; ///< (IP, node id) -> node slot
    counters counters_;
};

} // namespace dhtc::crawl
