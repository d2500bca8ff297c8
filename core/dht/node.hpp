// The receive path of our DHT node: every datagram is decoded and parsed once; queries are
// answered at once (within the response budgets), and replies to our own queries are handed,
// parsed, to the crawl actor while their bytes are still in the receive buffer. The node
// holds no crawl state and never blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "bencode/decoder.hpp"
#include "dht/rate_limit_options.hpp"
#include "dht/rate_limiter.hpp"
#include "dht/source_table.hpp"
#include "dht/responder.hpp"
#include "krpc/message.hpp"
#include "net/transport.hpp"

namespace dhtc::dht {

/// Where the node hands each reply (or error) to one of our queries, parsed once, by the node.
/// `m` views the receive buffer and the node's decoded document: both are reused for the next
/// datagram, so a handler keeps nothing of `m` beyond the call (it copies what it keeps, such
/// as node entries, field by field). Called on the network thread, once per reply.
class reply_handler {
public:
    /// `parsed` false: the packet decoded but is no valid KRPC message; `m` then holds what
    /// was read before the error, at least its `t` (of the length we issue).
    virtual void on_reply(const endpoint& from, const krpc::message& m, bool parsed) = 0;

protected:
    ~reply_handler() = default;
};

/// The reply budgets: packets and bytes per second in total (the seed's crawl.rate_limit
/// table, 10% of it kept for ping and get_peers answers), per source and per destination (the
/// shared source table). A share of the total (trusted_response_percent) is kept for sources
/// that answered our own queries lately, so a flood of strangers cannot starve them.
class response_budget {
public:
    response_budget(const clock& c, const crawl::rate_limit_options& o, crawl::source_table& sources);
    /// Takes the budget for one reply of `bytes` to node `id` at `to` (zero id: its query
    /// carried none); false when any budget refuses.
    bool allow(const endpoint& to, const id20& id, krpc::method m, std::size_t bytes);

    std::uint64_t refused_source() const noexcept { return sources_.stats().refused_answer_source; }
    std::uint64_t refused_destination() const noexcept { return sources_.stats().refused_answer_destination; }
    std::uint64_t refused_ip() const noexcept { return sources_.stats().refused_answer_ip; }
    std::uint64_t refused_packets() const noexcept;
    std::uint64_t refused_bytes() const noexcept;
    /// Answers to trusted sources that only the reserved share could pay for.
    std::uint64_t trusted_reserve_used() const noexcept { return trusted_reserve_used_; }

private:
    // Packets and bytes drawn together: an answer needs both.
    struct pair_budget {
        crawl::reserved_share_bucket packets;
        crawl::reserved_share_bucket bytes;
        bool take(std::size_t n, crawl::traffic_class cls, time_point now) noexcept {
            return packets.try_acquire(1, cls, now) && bytes.try_acquire(static_cast<double>(n), cls, now);
        }
    };

    const clock& clock_;
    crawl::source_table& sources_;
    pair_budget shared_;  ///< what anyone may use
    pair_budget trusted_; ///< only for trusted sources, once shared_ refuses them
    relaxed_counter trusted_reserve_used_;
};

struct node_counters {
    std::atomic<std::uint64_t> rx_bad_bencode{0};    ///< not decodable within packet limits
    std::atomic<std::uint64_t> rx_bad_krpc{0};       ///< decodable but not a valid KRPC message
    std::atomic<std::uint64_t> rx_queries{0};
    std::atomic<std::uint64_t> rx_replies{0};        ///< responses and errors
    std::atomic<std::uint64_t> replies_sent{0};
    std::atomic<std::uint64_t> replies_over_budget{0};
    std::atomic<std::uint64_t> replies_send_failed{0};
    std::atomic<std::uint64_t> foreign_transactions{0}; ///< replies whose `t` we can never have issued
    /// Always 0: replies go to the actor as they arrive, through no queue (issue 30). Kept so
    /// the snapshot's names stay stable.
    std::atomic<std::uint64_t> reply_queue_dropped{0};
};

class node {
public:
    /// `transaction_size`: the length of every `t` we issue; replies with another length
    /// are dropped here, before they cost the actor anything.
    node(responder& r, response_budget& budget, transport& out, reply_handler& replies, std::size_t transaction_size);

    /// Handles one received datagram. Runs on the network thread.
    void handle(const endpoint& from, std::string_view payload);

    const node_counters& counters() const noexcept { return counters_; }

private:
    void answer(const endpoint& from, const id20& id, krpc::method m);

    responder& responder_;
    response_budget& budget_;
    transport& out_;
    reply_handler& replies_;
    std::size_t transaction_size_;
    node_counters counters_;

    // Reused for every packet: decoding, parsing and encoding allocate nothing.
    bencode::document doc_;
    krpc::message msg_;
    std::string reply_;
};

} // namespace dhtc::dht
