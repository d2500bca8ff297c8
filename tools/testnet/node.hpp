// One simulated DHT node: its id, a K-bucket routing table, the peers announced to it and
// the answers it gives to every KRPC query, as a libtorrent node would. It owns no socket:
// the network hands it parsed queries and sends what it writes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "krpc/compact.hpp"
#include "krpc/message.hpp"
#include "testnet/rng.hpp"
#include "util/id20.hpp"
#include "util/siphash.hpp"

namespace dhtc::testnet {

/// Seconds since the test network started.
using seconds = std::uint32_t;

struct contact {
    id20 id;
    std::uint32_t ip = 0; ///< host order
    std::uint16_t port = 0;
};

/// Kademlia routing table with 160 fixed buckets: bucket b holds the nodes whose id shares
/// exactly b leading bits with ours (the deepest bucket also takes longer prefixes). This is
/// what a split-on-demand table converges to; a flat vector keeps it small in memory.
class routing_table {
public:
    static constexpr std::size_t k = 8;
    static constexpr std::uint8_t max_fails = 3;

    /// `one_per_ip`: libtorrent's dht_restrict_routing_ips (on by default there): a node
    /// whose address is already in the table under another port is refused; one at the
    /// same address and port under a new id replaces the old entry.
    explicit routing_table(const id20& own, bool one_per_ip = false) : own_(own), one_per_ip_(one_per_ip) {}

    /// Adds or refreshes a verified node; false when its bucket is full of good nodes, or
    /// (one_per_ip) its address is taken by another node.
    bool insert(const contact& c, seconds now);
    bool contains(const id20& id) const noexcept;
    /// True when insert() of this node would succeed (a free or replaceable slot).
    bool has_room_for(const contact& c) const noexcept;
    /// A query to this node timed out; it is dropped after max_fails in a row.
    void failed(const id20& id) noexcept;
    /// Up to `n` nodes closest to `target`, closest first.
    void closest(const id20& target, std::size_t n, std::vector<krpc::node_entry>& out) const;
    std::size_t size() const noexcept { return entries_.size(); }
    /// Some node of the table (size() > 0).
    contact pick(rng& r) const noexcept;

private:
    struct entry {
        id20 id;
        std::uint32_t ip;
        std::uint16_t port;
        std::uint8_t bucket;
        std::uint8_t fails;
        seconds last_seen;
    };
    std::uint8_t bucket_of(const id20& id) const noexcept;
    enum class address_check : std::uint8_t { free, same_endpoint, taken };
    /// With one_per_ip: whether another entry (another id) holds c's address.
    address_check check_address(const contact& c) const noexcept;

    id20 own_;
    bool one_per_ip_ = false;
    std::vector<entry> entries_;
};

/// Peers announced to one node, per info hash, with expiry and capacities.
class peer_store {
public:
    static constexpr std::size_t max_hashes = 4096;
    static constexpr std::size_t max_peers_per_hash = 64;

    void put(const id20& hash, std::uint32_t ip, std::uint16_t port, seconds expires);
    /// Live peers of `hash`, at most `max`.
    void get(const id20& hash, seconds now, std::size_t max, std::vector<endpoint>& out);
    /// Up to `max` random distinct hashes (BEP-51 samples).
    void sample(rng& r, std::size_t max, std::vector<id20>& out) const;
    std::size_t size() const noexcept { return peers_.size(); }
    /// Every hash stored (with a live peer or not yet expired).
    const std::vector<id20>& hashes() const noexcept { return keys_; }
    void expire(seconds now);
    std::uint64_t dropped() const noexcept { return dropped_; }

private:
    struct peer {
        std::uint32_t ip;
        std::uint16_t port;
        seconds expires;
    };
    std::unordered_map<id20, std::vector<peer>, id20_hash> peers_;
    std::vector<id20> keys_; // the same hashes, for sampling by index
    std::uint64_t dropped_ = 0;
};

/// Write tokens bound to the querier's IP: SipHash of the address under a secret that
/// rotates; a token from the current or the previous secret is accepted (like libtorrent).
/// The node's own address and port go into the hash, so every node has tokens of its own,
/// nodes sharing an address too (as separate sessions with separate secrets would).
class token_keys {
public:
    explicit token_keys(std::uint64_t seed);
    void rotate();
    std::uint32_t make(std::uint32_t node_ip, std::uint16_t node_port, std::uint32_t querier_ip) const noexcept;
    bool valid(std::uint32_t node_ip, std::uint16_t node_port, std::uint32_t querier_ip,
               std::string_view token) const noexcept;

private:
    static std::uint32_t hash(const siphash_key& key, std::uint32_t node_ip, std::uint16_t node_port,
                              std::uint32_t querier_ip) noexcept;
    rng gen_;
    siphash_key current_{};
    siphash_key previous_{};
};

/// Settings every node shares.
struct node_settings {
    std::int64_t sample_interval = 60; ///< BEP-51 `interval` we ask for
    seconds peer_ttl = 1800;           ///< how long an announced peer is kept
    /// libtorrent's dht_restrict_routing_ips and dht_restrict_search_ips (both on by
    /// default there), per address: a table holds one node per IP, a lookup asks one node
    /// per IP. libtorrent also keeps nodes of one /24 apart within a bucket and a lookup;
    /// that part is not modelled (the address plan spreads hosts over /24s anyway).
    bool restrict_ips = false;
};

struct node_stats {
    std::uint64_t queries = 0;
    std::uint64_t announces_stored = 0;
    std::uint64_t bad_tokens = 0;
    std::uint64_t errors_sent = 0;
};

enum class block_verdict : std::uint8_t { pass, blocked, newly_blocked };

class dht_node {
public:
    dht_node(const id20& id, std::uint32_t ip, std::uint16_t port, bool one_per_ip = false)
        : id_(id), ip_(ip), port_(port), table_(id, one_per_ip) {}

    const id20& id() const noexcept { return id_; }
    std::uint32_t ip() const noexcept { return ip_; }
    std::uint16_t port() const noexcept { return port_; }
    routing_table& table() noexcept { return table_; }
    const routing_table& table() const noexcept { return table_; }
    peer_store& store() noexcept { return store_; }
    const peer_store& store() const noexcept { return store_; }
    bool online = true;
    bool behind_nat = false; ///< queries out, but unsolicited queries in never reach it
    bool shared_ip = false;  ///< other nodes use the same address (other ports)

    /// libtorrent's per-IP blocker (dht_block_ratelimit, dht_block_timeout): an IP that sent
    /// this node more than `rate` packets/s averaged over 10 s is ignored for `timeout`
    /// seconds. Says whether the packet from `ip` is ignored. Tracks a bounded number of IPs,
    /// as libtorrent does.
    block_verdict blocker(std::uint32_t ip, double now_secs, double rate, seconds timeout);

    /// Writes the reply to `q` (a parsed query from from_ip:from_port) into `out`.
    void answer(const krpc::message& q, std::uint32_t from_ip, std::uint16_t from_port, const token_keys& tokens,
                const node_settings& settings, seconds now, rng& r, node_stats& stats, std::string& out);

private:
    std::string closest_nodes(const id20& target) const;

    struct sender {
        std::uint32_t ip;
        double window_start;
        std::uint32_t count;
        double blocked_until;
    };
    std::vector<sender> senders_; ///< the blocker's IPs, at most max_senders
    static constexpr std::size_t max_senders = 32;

    id20 id_;
    std::uint32_t ip_;
    std::uint16_t port_;
    routing_table table_;
    peer_store store_;
};

/// The `v` every simulated node and seeder sends.
inline constexpr std::string_view client_version{"TN\x00\x01", 4};

} // namespace dhtc::testnet
