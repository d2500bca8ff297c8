// The answering half of our DHT node: given one parsed query, it writes the reply a good
// BEP-5 citizen gives and reports what the query taught us (announces, observed hashes,
// live queriers). It owns no socket and no clock of its own, so tests drive it directly.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "dht/sample_store.hpp"
#include "dht/token_manager.hpp"
#include "krpc/compact.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "krpc/reply_encoder.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::dht {

/// Where the node finds the nodes it tells others about (the responsive set's snapshot).
class close_nodes_source {
public:
    virtual ~close_nodes_source() = default;
    /// Writes up to out.size() nodes of `family` closest to `target` into `out`; returns
    /// how many. Called on the network thread for every find_node/get_peers: no locks, no
    /// allocation.
    virtual std::size_t closest(const id20& target, krpc::ip_family family, std::span<krpc::node_entry> out) const = 0;
};

/// What queries tell us. Called on the network thread; implementations hand the events on
/// over bounded queues and must not block.
class query_observer {
public:
    virtual ~query_observer() = default;
    /// A valid announce_peer: `peer` is the announced endpoint (implied port applied).
    virtual void on_announce(const id20& info_hash, const endpoint& peer, const endpoint& source) = 0;
    /// An info hash somebody looked up with get_peers (an observation, never fetched as such).
    virtual void on_get_peers(const id20& info_hash, const endpoint& source) = 0;
    /// A node that queried us and is not read-only: a crawl candidate.
    virtual void on_querier(const id20& id, const endpoint& source) = 0;
};

/// Counters of the answering path; relaxed atomics, readable from any thread.
struct responder_counters {
    std::atomic<std::uint64_t> ping{0};
    std::atomic<std::uint64_t> find_node{0};
    std::atomic<std::uint64_t> get_peers{0};
    std::atomic<std::uint64_t> announce_peer{0};
    std::atomic<std::uint64_t> sample_infohashes{0};
    std::atomic<std::uint64_t> unknown_answered{0};   ///< unknown method answered like find_node
    std::atomic<std::uint64_t> unknown_refused{0};    ///< unknown method answered with 204
    std::atomic<std::uint64_t> malformed{0};          ///< answered with 203
    std::atomic<std::uint64_t> bad_token{0};          ///< announce refused: token missing, expired or foreign
    std::atomic<std::uint64_t> own_id{0};             ///< queries carrying our own id: ignored
    std::atomic<std::uint64_t> bootstrap_lookups{0};  ///< libtorrent bootstrap-lookup hashes kept from fetching
};

class responder {
public:
    /// Nodes returned per family in find_node / get_peers answers (BEP-5's K).
    static constexpr std::size_t close_nodes = 8;

    /// `version` is our `v` (4 bytes: client code + version) or empty.
    responder(const id20& own_id, std::string_view version, token_manager& tokens, sample_store& samples,
              const close_nodes_source& nodes, query_observer& observer, const clock& clk);

    /// Writes the reply to query `q` from `from` into `out` (cleared first). Returns false
    /// when nothing should be sent.
    bool answer(const krpc::message& q, const endpoint& from, std::string& out);

    /// For a query that failed to parse but carried a transaction id: error 203 ("protocol
    /// error") naming what was wrong. Returns false when nothing should be sent.
    bool answer_malformed(const krpc::message& partial, const krpc::parse_result& why, const endpoint& from,
                          std::string& out);

    const id20& own_id() const noexcept { return own_id_; }
    const responder_counters& counters() const noexcept { return counters_; }

private:
    krpc::reply_header header(const krpc::message& q, const endpoint& from) const noexcept;
    /// Fills nodes_/nodes6_ with the compact nodes to send for `target`; sets want6_.
    void collect_nodes(const id20& target, const krpc::message& q, const endpoint& from);
    bool announce(const krpc::message& q, const endpoint& from, std::string& out);

    id20 own_id_;
    std::string version_;
    krpc::reply_encoder replies_; ///< the frequent replies, from pre-encoded fragments
    token_manager& tokens_;
    sample_store& samples_;
    const close_nodes_source& nodes_source_;
    query_observer& observer_;
    const clock& clock_;
    responder_counters counters_;

    // Reused per query; sized once, so answering does not allocate.
    std::array<krpc::node_entry, close_nodes> scratch_{};
    std::string nodes_;
    std::string nodes6_;
    bool want6_ = false; ///< the last collect_nodes() was asked for IPv6 nodes
};

/// libtorrent's own bootstrap lookup is a get_peers for its node id with the tail replaced:
/// fetching such a "hash" gets our address banned (protocol.md b).
inline bool is_bootstrap_lookup(const id20& info_hash, const id20& sender) noexcept {
    return std::equal(info_hash.bytes.begin(), info_hash.bytes.begin() + 12, sender.bytes.begin());
}

} // namespace dhtc::dht
