// The simulated DHT: every node and every seeder's DHT client on one UDP hub, the
// transactions they have in flight, iterative lookups (find_node / get_peers), routing
// table maintenance (verifying pings, refresh lookups) and churn.
#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bencode/decoder.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "testnet/node.hpp"
#include "testnet/rng.hpp"
#include "testnet/udp_hub.hpp"
#include "testnet/wan_model.hpp"

namespace dhtc::testnet {

struct network_options {
    std::uint16_t port = 0;        ///< the main port (0: any free one)
    /// Ports for port slots 1.. (nodes sharing an address, see ip_groups); 0: any free one.
    std::vector<std::uint16_t> extra_ports;
    std::uint64_t seed = 1;
    double churn = 0.1;            ///< average share of nodes away at any time
    double replace_per_hour = 0;   ///< share of nodes replaced each hour by a new node at the same address
    seconds refresh = 300;         ///< mean interval between a node's refresh lookups
    std::size_t max_lookups = 256; ///< lookups in flight at once (the rest wait)
    double block_rate = 0;         ///< libtorrent's blocker: packets/s over 10 s per IP (0: off)
    seconds block_timeout = 300;
    double nat = 0;                ///< share of nodes behind NAT
    node_settings node;
    /// The wide-area network between every two hosts, the crawler's included (off unless
    /// enabled).
    wan::options wan;
};

/// A responding node a lookup ended with, and the token it gave (get_peers).
struct lookup_reply {
    contact node;
    std::string token;
};
using lookup_done = std::function<void(const std::vector<lookup_reply>& closest)>;

struct network_stats {
    node_stats nodes;
    std::uint64_t malformed = 0;
    std::uint64_t unknown_destination = 0;
    std::uint64_t to_offline = 0;
    std::uint64_t timeouts = 0;
    std::uint64_t lookups_done = 0;
    std::uint64_t verify_pings = 0;
    std::uint64_t learned = 0;
    std::uint64_t announces_sent = 0;
    std::uint64_t announces_acked = 0;
    std::uint64_t tx_dropped = 0;
    std::uint64_t blocked = 0;     ///< packets a node's blocker ignored
    std::uint64_t blocks = 0;      ///< times a node started ignoring an IP
    std::uint64_t blocked_shared_ip = 0; ///< of blocked: by nodes that share their IP
    std::uint64_t blocks_shared_ip = 0;  ///< of blocks: by nodes that share their IP
    std::uint64_t to_nat = 0;      ///< unsolicited queries that a NAT kept from a node
    std::uint64_t replaced = 0;    ///< nodes replaced by a new identity (replace_per_hour)
};

class network {
public:
    network(asio::io_context& io, const network_options& o);
    ~network();

    /// A DHT node on `ip` and the port of `port_slot` (0: the main port), with a BEP-42 id
    /// for that IP (nodes sharing it get different random parts). Returns its host index.
    std::size_t add_node(std::uint32_t ip, std::size_t port_slot = 0);
    /// A seeder's DHT client on `ip` (main port): it sends queries and takes replies, but
    /// answers no query (like a client behind NAT), so nodes never put it in their tables.
    std::size_t add_client(std::uint32_t ip);

    /// Gives every node the table a restarted client has from its saved state: the first
    /// node plus a few random others; clients get the same as their starting contacts.
    void seed_tables();
    /// Marks the nodes that share an address, starts the sockets and the timers.
    void start();
    /// Every online node looks itself up (staggered); `done` runs when all finished.
    void bootstrap(std::function<void()> done);
    void stop();

    std::uint16_t port() const noexcept { return hub_->port(); }
    const dht_node& node(std::size_t i) const { return nodes_[i]; }
    std::size_t shared_ip_nodes() const noexcept;
    std::size_t node_count() const noexcept { return nodes_.size(); }
    std::size_t online_nodes() const noexcept;
    std::uint32_t host_ip(std::size_t host) const noexcept { return hosts_[host].ip; }
    seconds now() const noexcept;

    /// An iterative lookup from `host` towards `target`; `done` gets the closest nodes
    /// that replied, closest first.
    void lookup(std::size_t host, const id20& target, bool get_peers, lookup_done done);
    std::size_t lookups_active() const noexcept { return lookups_.size(); }
    std::size_t max_lookups() const noexcept { return opt_.max_lookups; }
    /// announce_peer from `host` to `to` with the token `to` gave.
    void announce(std::size_t host, const lookup_reply& to, const id20& info_hash, std::uint16_t port);

    /// Datagrams that are not KRPC (uTP, see utp_port) for a host go to `handler` when set;
    /// it returns false when nothing there takes them (counted as unknown_destination).
    using stream_handler = std::function<bool(const datagram&)>;
    void on_stream_datagram(stream_handler handler) { stream_handler_ = std::move(handler); }
    /// A raw datagram from a simulated host on the main port (a uTP seeder's packets).
    void send_datagram(std::uint32_t from_ip, std::uint32_t to_ip, std::uint16_t to_port, std::string_view bytes) {
        hub_->send(from_ip, hub_->port(), to_ip, to_port, bytes);
    }

    const network_stats& stats() const noexcept { return stats_; }
    const udp_hub& hub() const noexcept { return *hub_; }
    /// The WAN model every datagram goes through, and the seeders' TCP; null when it is off.
    wan::model* wan() noexcept { return wan_.get(); }

private:
    enum class tx_kind : std::uint8_t { verify_ping, lookup, announce };
    struct pending_tx {
        std::uint32_t host;
        std::uint32_t lookup;
        std::uint32_t to_ip;
        std::uint16_t to_port;
        tx_kind kind;
        id20 to_id;
    };
    struct host {
        std::uint32_t ip;
        std::uint16_t port;
        id20 id;
        std::int32_t node = -1;            ///< index in nodes_, or -1 for a client
        std::vector<contact> known;        ///< clients only: contacts to start lookups from
    };
    struct candidate {
        id20 id;
        id20 dist;
        std::uint32_t ip;
        std::uint16_t port;
        std::uint8_t state; // 0 new, 1 asked, 2 replied, 3 failed
        std::string token;
    };
    struct lookup_state {
        std::uint32_t host;
        id20 target;
        bool get_peers;
        std::vector<candidate> cands;
        int inflight = 0;
        int queries = 0;
        lookup_done done;
    };
    enum class event_kind : std::uint8_t { refresh, churn, come_back, rotate_tokens, expire_peers, replace };
    struct event {
        std::chrono::steady_clock::time_point due;
        event_kind kind;
        std::uint32_t index;
        bool operator>(const event& o) const noexcept { return due > o.due; }
    };

    std::size_t add_host(std::uint32_t ip, std::uint16_t port, bool node);
    contact contact_of(std::size_t node) const;
    static std::uint64_t endpoint_key(std::uint32_t ip, std::uint16_t port) noexcept {
        return std::uint64_t{ip} << 16 | port;
    }
    void send(const host& from, std::uint32_t to_ip, std::uint16_t to_port) {
        hub_->send(from.ip, from.port, to_ip, to_port, out_);
    }
    void on_datagram(const datagram& d);
    void on_query(host& h, const krpc::message& m, const datagram& d);
    void on_reply(host& h, const krpc::message& m, const datagram& d);
    void maybe_verify(host& h, const krpc::message& m, const datagram& d);
    void learn(host& h, const contact& c);
    bool send_query(std::uint32_t host_index, tx_kind kind, std::uint32_t lookup, const contact& to,
                    const std::function<bool(std::string&, const krpc::query_header&)>& encode);
    void add_candidate(lookup_state& l, const id20& id, std::uint32_t ip, std::uint16_t port);
    void step(std::uint32_t lookup_id);
    void tick();
    void schedule(std::chrono::steady_clock::duration in, event_kind kind, std::uint32_t index);
    void run_event(const event& e);
    void replace_node(std::uint32_t index);
    void sweep_timeouts();

    asio::io_context& io_;
    network_options opt_;
    rng rng_;
    token_keys tokens_;
    std::unique_ptr<wan::model> wan_; // before hub_: the hub holds a reference
    std::unique_ptr<udp_hub> hub_;
    asio::steady_timer timer_;
    std::chrono::steady_clock::time_point started_;
    bool stopped_ = false;

    std::vector<host> hosts_;
    std::vector<dht_node> nodes_;
    std::vector<std::uint32_t> node_host_; // node index -> host index
    std::unordered_map<std::uint64_t, std::uint32_t> by_endpoint_; // endpoint_key -> host index

    static constexpr std::size_t max_transactions = 200000;
    static constexpr auto tx_timeout = std::chrono::seconds(4);
    std::uint32_t next_tid_ = 1;
    std::unordered_map<std::uint32_t, pending_tx> tx_;
    std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint32_t>> tx_order_;
    std::unordered_set<std::uint64_t> verifying_; // (host, ip, port) with a verify ping out

    std::uint32_t next_lookup_ = 1;
    std::unordered_map<std::uint32_t, lookup_state> lookups_;
    std::deque<std::function<void()>> waiting_lookups_; // beyond max_lookups

    std::priority_queue<event, std::vector<event>, std::greater<>> events_;
    std::function<void()> bootstrap_done_;
    std::size_t bootstrap_left_ = 0;

    stream_handler stream_handler_;
    bencode::document doc_;
    std::string out_;
    network_stats stats_;
    double carry_replacements_ = 0; // replacements owed: a share of a node per period adds up
};

} // namespace dhtc::testnet
