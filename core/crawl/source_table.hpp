// What we know of each remote IP, in one bounded table that the answering node and the crawl
// actor share (both run on the network thread):
//   - its answer budget: replies to its queries (crawl.rate_limit.max_response_rate_per_source);
//   - its destination budget: every KRPC datagram we send it, queries and answers alike,
//     because libtorrent's blocker counts both (more than 5 packets/s over 10 s from one IP
//     and it ignores that IP for 5 minutes);
//   - whether it answered one of our queries lately: such a source is trusted, and keeps a
//     reserved share of the global answer budget that a flood of strangers cannot take;
//   - its back-off after error 201 ("too many requests") or a run of unanswered queries.
//
// Bounded by construction: a full table evicts its least recently used entry, but never one
// that still owes destination tokens or is backing off (forgetting either would let us send
// that IP more than its budget); when every candidate is such an entry, the new IP is refused
// and counted. Storage grows in slabs as IPs arrive.
//
// Thread rules: single owner (the network thread). Counters and size() are relaxed atomics,
// readable from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "net/address.hpp"
#include "net/clock.hpp"
#include "util/relaxed_counter.hpp"
#include "util/slab_array.hpp"
#include "util/slot_index.hpp"

namespace dhtc::crawl {

struct source_table_options {
    double answer_rate = 40;        ///< replies per second to one source (burst: the same)
    double destination_rate = 2;    ///< KRPC datagrams per second to one IP, sustained
    double destination_burst = 10;  ///< ... and at once: rate x 10 s + burst = 30 in any 10 s
    /// Destination tokens a query must leave behind, so our own queries never take the
    /// tokens an answer to that node needs (its pings are what keep us in its table).
    double answer_headroom = 2;
    std::size_t capacity = 16'384;  ///< IPs tracked; 1..2^24-1
    std::chrono::seconds trust_ttl{900};      ///< an answer of theirs keeps them trusted this long
    std::chrono::seconds backoff_base{60};    ///< first back-off; doubles per repeat
    std::chrono::seconds backoff_max{3600};
    unsigned silence_limit = 4;     ///< unanswered queries in a row that start a back-off
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// Why a datagram to an IP may or may not go out now.
enum class send_verdict : std::uint8_t {
    ok,
    over_answer_budget, ///< the source's answer budget is spent (answers only)
    over_budget,        ///< the destination budget is spent
    backed_off,         ///< it sent error 201 or stopped answering (queries only)
    table_full,         ///< every entry scanned is still owed tokens: nothing new is tracked
};

class source_table {
public:
    explicit source_table(source_table_options options = {});

    /// The verdict on answering a query of `source`, with nothing taken yet: the caller asks
    /// the global budgets next, and commits only when they agree too.
    struct answer_check {
        send_verdict verdict = send_verdict::table_full;
        bool trusted = false;       ///< it answered one of our queries within trust_ttl
        std::uint32_t slot = none;  ///< for commit_answer
    };
    answer_check check_answer(const ip_address& source, time_point now);
    /// Takes one answer token and one destination token for the answer check_answer allowed.
    void commit_answer(const answer_check& c) noexcept;

    /// A query of ours to `to`: takes one destination token, or says why not (and counts it).
    send_verdict try_query(const ip_address& to, time_point now);
    /// Whether the destination budget of `to` has a query's tokens now (back-off aside);
    /// takes and counts nothing.
    bool has_query_budget(const ip_address& to, time_point now);

    /// A reply of `from` matched one of our queries: it is trusted, its silence is forgiven.
    void on_answered(const ip_address& from, time_point now);
    /// `from` answered with error 201: back off it.
    void on_rate_limited(const ip_address& from, time_point now);
    /// A query of ours to `to` went unanswered.
    void on_silence(const ip_address& to, time_point now);

    bool trusted(const ip_address& a, time_point now) const;
    /// True while queries to `a` are held back.
    bool backing_off(const ip_address& a, time_point now) const;

    /// IPs tracked (any thread: snapshots read it while the owner works).
    std::size_t size() const noexcept { return static_cast<std::size_t>(size_.load()); }
    std::size_t capacity() const noexcept { return capacity_; }
    const source_table_options& options() const noexcept { return options_; }
    std::size_t memory_bytes() const noexcept { return slots_.memory_bytes() + index_.memory_bytes(); }

    struct counters {
        relaxed_counter refused_answer_source; ///< answers refused by the source's answer budget
        relaxed_counter refused_answer_destination; ///< answers refused by the destination budget
        relaxed_counter refused_query_destination;  ///< our queries held back by the destination budget
        relaxed_counter refused_query_backoff;      ///< our queries held back by a back-off
        relaxed_counter refused_table_full;         ///< datagrams to an IP the full table could not track
        relaxed_counter evictions;
        relaxed_counter lossy_evictions;            ///< evicted with part of its answer budget spent
        relaxed_counter trusted_evictions;          ///< evicted while trusted: no untrusted entry owed nothing
        relaxed_counter backoffs_rate_limited;      ///< back-offs started by error 201
        relaxed_counter backoffs_silence;           ///< back-offs started by a run of silence
    };
    const counters& stats() const noexcept { return counters_; }

private:
    static constexpr std::uint32_t none = 0xffffffffu;
    struct entry {
        ip_address address;
        std::uint32_t prev = none;
        std::uint32_t next = none;
        time_point last{};          ///< when both buckets were last refilled
        double answer_tokens = 0;
        double destination_tokens = 0;
        time_point trusted_until{};
        time_point backoff_until{};
        std::uint8_t silent = 0;    ///< unanswered queries in a row
        std::uint8_t backoffs = 0;  ///< back-offs in a row (the doubling exponent)
    };

    /// The entry of `a` (created when absent and room can be made), refilled to `now` and
    /// made the most recent; none when the table is full of entries it may not evict.
    std::uint32_t touch(const ip_address& a, time_point now);
    std::uint32_t find(const ip_address& canonical_address) const;
    std::uint32_t make_room(time_point now);
    /// Owes nothing: its destination budget is whole and it is not backed off.
    bool settled(std::uint32_t i, time_point now) const noexcept;
    std::uint32_t evict(std::uint32_t i, time_point now);
    void refill(entry& e, time_point now) const noexcept;
    void back_off(entry& e, time_point now) noexcept;
    void unlink(std::uint32_t i) noexcept;
    void link_front(std::uint32_t i) noexcept;
    std::uint64_t hash_of_slot(std::uint32_t i) const noexcept;

    source_table_options options_;
    std::size_t capacity_;
    siphash_key key_;
    detail::slab_array<entry, 10> slots_;
    detail::slot_index index_;
    relaxed_counter size_; ///< slots in use; only grows (a full table reuses slots)
    std::uint32_t mru_ = none;
    std::uint32_t lru_ = none;
    counters counters_;
};

} // namespace dhtc::crawl
