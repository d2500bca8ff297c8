// A deterministic in-memory DHT for driving engine::dht_service on a manual clock: a few
// thousand simulated nodes with small routing tables, a delivery queue keyed by time with
// loss and latency, simulated clients that query us, and a transport that records every
// datagram we send so tests can check budgets, caps and ordering after the fact.
//
// Everything is single-threaded and seeded: the same options give the same run.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bencode/decoder.hpp"
#include "engine/dht_service.hpp"
#include "krpc/compact.hpp"
#include "krpc/message.hpp"
#include "model/address.hpp"
#include "net/address_policy.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"
#include "util/id20.hpp"

namespace dhtc::sim {

using namespace std::chrono_literals;

struct network_options {
    duration latency_min = 20ms; ///< one-way, uniform in [min, max]
    duration latency_max = 80ms;
    double loss = 0.0;           ///< per datagram between us and simulated nodes (clients are lossless)
    std::size_t reply_nodes = 8; ///< nodes per family in find_node/get_peers/sample answers
    std::uint64_t seed = 1;
    /// Must equal crawl_options.rate_limit.request_timeout_secs: the in-flight tracker
    /// closes unanswered queries at the same instant the actor expires them.
    duration query_timeout = 2s;
};

/// What a datagram is, from its bencode.
enum class kind : std::uint8_t {
    ping,
    find_node,
    get_peers,
    announce_peer,
    sample_infohashes,
    other_query,
    response,
    error,
    unparsable
};
std::string_view to_string(kind k) noexcept;

/// One simulated DHT node.
struct sim_node {
    id20 id;
    endpoint ep;
    std::vector<std::uint32_t> known;          ///< indices of the nodes it tells about
    std::vector<krpc::node_entry> extra;       ///< appended verbatim to every node list (hostile tests)
    std::vector<std::uint32_t> stored;         ///< indices of stored hashes (sim_network::hash_at)
    bool bep51 = false;                        ///< answers sample_infohashes with samples
    std::int64_t interval = 0;                 ///< BEP-51 interval it advertises
    bool silent = false;                       ///< receives but never answers
    std::uint32_t lose_samples = 0;            ///< the next this many sample_infohashes are lost
    std::uint32_t lose_get_peers = 0;          ///< the next this many get_peers are lost
    std::int64_t error_code = 0;               ///< answers every query with this KRPC error (0: none)
    std::optional<id20> reply_id;              ///< answers with this id instead of its own
    duration extra_latency{};                  ///< added to its replies
    // What it saw.
    std::uint64_t queries = 0;
    std::vector<time_point> sampled_at;        ///< sample_infohashes arrivals
    std::vector<time_point> find_node_at;      ///< find_node arrivals
    std::vector<time_point> get_peers_at;
};

/// An info hash stored in the simulated DHT, with the peers that hold it.
struct stored_hash {
    id20 hash;
    std::vector<endpoint> peers;
};

/// A query we sent, as the transport saw it, and how it ended.
struct sent_query {
    time_point at{};
    endpoint to;
    std::size_t size = 0;
    kind k = kind::other_query;
    bool bootstrap = false;   ///< sent to an endpoint marked with mark_bootstrap()
    std::string t;
    id20 target;              ///< target / info_hash of the query
    bool open = true;         ///< neither answered nor timed out yet
    bool answered = false;    ///< a reply from `to` with `t` reached us within the timeout
    time_point closed_at{};
};

/// A reply or error we sent (answers to queriers).
struct sent_reply {
    time_point at{};
    endpoint to;
    std::size_t size = 0;
    kind k = kind::response;
};

/// A datagram a simulated client received from us.
struct received {
    time_point at{};
    std::string payload;
};

struct parsed_packet;

class sim_network final : public transport {
public:
    sim_network(manual_clock& clock, network_options options = {});
    ~sim_network() override;
    sim_network(const sim_network&) = delete;
    sim_network& operator=(const sim_network&) = delete;

    // ---- population -------------------------------------------------------------------
    /// Adds a node; returns its index.
    std::uint32_t add_node(const endpoint& ep, const id20& id);
    std::uint32_t add_node(const endpoint& ep) { return add_node(ep, random_id()); }
    /// `n` IPv4 nodes at first_octet.a.b.h, `per_subnet` per /24 (distinct hosts), port 6881.
    std::vector<std::uint32_t> add_spread_v4(std::size_t n, std::uint8_t first_octet = 20, std::size_t per_subnet = 1);
    /// `n` IPv4 nodes in groups that share one IP each (CGNAT, a seedbox host), on ports 6881
    /// and up: group sizes cycle from `group_min` to `group_max`; each group has its own /24 at
    /// first_octet.a.b.1.
    std::vector<std::uint32_t> add_shared_ip_v4(std::size_t n, std::size_t group_min = 2, std::size_t group_max = 16,
                                                std::uint8_t first_octet = 30);
    /// `n` IPv6 nodes in 2a00:a:b:c::/64 prefixes, `per_subnet` per /64, port 6881.
    std::vector<std::uint32_t> add_spread_v6(std::size_t n, std::size_t per_subnet = 1);
    /// `n` IPv4 nodes in the /24 of `base` (hosts 1..254, then further ports).
    std::vector<std::uint32_t> add_in_subnet_v4(std::size_t n, const ip_address& base);
    /// `n` IPv6 nodes in the /64 of `base`.
    std::vector<std::uint32_t> add_in_subnet_v6(std::size_t n, const ip_address& base);
    /// Every node learns `random_k` random others and its `close_k` XOR-closest ones.
    void wire(std::size_t random_k, std::size_t close_k = 0);
    /// Node `a` tells about node `b`.
    void learn(std::uint32_t a, std::uint32_t b) { nodes_[a].known.push_back(b); }
    /// Stores `hash` with `peers` on the `replicas` nodes XOR-closest to it; returns its index.
    std::uint32_t store_hash(const id20& hash, std::vector<endpoint> peers, std::size_t replicas);

    sim_node& node(std::uint32_t i) { return nodes_[i]; }
    const sim_node& node(std::uint32_t i) const { return nodes_[i]; }
    std::size_t size() const noexcept { return nodes_.size(); }
    std::optional<std::uint32_t> find(const endpoint& ep) const;
    const stored_hash& hash_at(std::uint32_t i) const { return hashes_[i]; }
    std::size_t hash_count() const noexcept { return hashes_.size(); }
    id20 random_id();
    std::mt19937_64& rng() noexcept { return rng_; }

    // ---- us ---------------------------------------------------------------------------
    /// Where our service lives (one endpoint per family) and which service receives.
    void attach(engine::dht_service& service, const endpoint& us_v4, const endpoint& us_v6);
    /// Queries to `ep` are recorded as bootstrap queries.
    void mark_bootstrap(const endpoint& ep) { bootstrap_.insert(ep); }

    // ---- clients ----------------------------------------------------------------------
    /// Datagrams to `ep` from us are kept in inbox(ep); clients never answer queries.
    void add_client(const endpoint& ep) { inboxes_[ep]; }
    /// Sends `payload` from `from` to us, arriving after `delay` (no loss).
    void client_send(const endpoint& from, std::string payload, duration delay = 0ms);
    /// Delivers a datagram to us from any source (forgeries, replies with odd `t`...).
    void inject(const endpoint& from, std::string payload, duration delay = 0ms) {
        client_send(from, std::move(payload), delay);
    }
    const std::vector<received>& inbox(const endpoint& ep) { return inboxes_[ep]; }

    // ---- time -------------------------------------------------------------------------
    /// Advances the clock by `step`, delivers what is due, closes timed-out queries, runs
    /// one service turn, then on_step.
    void step(duration step = 10ms);
    /// step() until `total` has passed.
    void run_for(duration total, duration step = 10ms);
    /// Called after every turn (invariant checks, traffic generators).
    std::function<void()> on_step;
    /// Called for every query we send, after it was recorded (forgery hooks).
    std::function<void(const sent_query&)> on_query;

    // ---- transport --------------------------------------------------------------------
    bool send(const endpoint& to, std::string_view payload) override;

    // ---- records ----------------------------------------------------------------------
    const std::vector<sent_query>& queries() const noexcept { return queries_; }
    const std::vector<sent_reply>& replies() const noexcept { return replies_; }
    /// Endpoints of node entries in replies delivered to us, in first-seen order.
    const std::vector<endpoint>& learned() const noexcept { return learned_; }
    /// Index in learned() of `ep`, or -1.
    long learned_index(const endpoint& ep) const;
    /// Our queries open now (sent, not answered, not timed out), by our own count.
    std::size_t in_flight() const noexcept { return in_flight_; }
    std::size_t max_in_flight() const noexcept { return max_in_flight_; }
    /// Highest number of open queries to one /24 (v4) or /64 (v6) ever seen.
    std::size_t max_in_flight_subnet() const noexcept { return max_subnet_; }
    std::size_t max_in_flight_subnet(const ip_address& a) const;
    std::uint64_t undeliverable() const noexcept { return undeliverable_; }
    std::uint64_t lost() const noexcept { return lost_; }
    time_point now() const noexcept { return clock_.now(); }

private:
    struct datagram {
        time_point due;
        std::uint64_t seq;
        endpoint from;
        endpoint to;
        std::string payload;
        bool operator>(const datagram& o) const noexcept { return due != o.due ? due > o.due : seq > o.seq; }
    };

    duration latency();
    bool dropped(double p);
    void schedule(const endpoint& from, const endpoint& to, std::string payload, duration delay);
    void deliver(const datagram& d);
    void deliver_to_us(const datagram& d);
    void answer(sim_node& n, const datagram& d);
    void close_query(std::size_t index, bool answered);
    void expire_queries();
    void collect_nodes(const sim_node& n, const id20& target, bool want4, bool want6, std::string& v4,
                       std::string& v6) const;
    const endpoint& our_endpoint_for(const endpoint& peer) const;

    manual_clock& clock_;
    network_options options_;
    std::mt19937_64 rng_;
    std::vector<sim_node> nodes_;
    std::unordered_map<endpoint, std::uint32_t, endpoint_hash> by_endpoint_;
    std::vector<stored_hash> hashes_;
    std::unordered_set<endpoint, endpoint_hash> bootstrap_;
    std::unordered_map<endpoint, std::vector<received>, endpoint_hash> inboxes_;

    engine::dht_service* service_ = nullptr;
    endpoint us_v4_;
    endpoint us_v6_;

    std::priority_queue<datagram, std::vector<datagram>, std::greater<>> queue_;
    std::uint64_t seq_ = 0;

    std::vector<sent_query> queries_;
    std::vector<sent_reply> replies_;
    std::map<std::pair<endpoint, std::string>, std::size_t> open_;
    std::deque<std::size_t> open_order_;
    std::size_t in_flight_ = 0;
    std::size_t max_in_flight_ = 0;
    std::unordered_map<subnet_key, std::size_t, subnet_key_hash> subnet_open_;
    std::unordered_map<subnet_key, std::size_t, subnet_key_hash> subnet_max_;
    std::size_t max_subnet_ = 0;
    std::vector<endpoint> learned_;
    std::unordered_map<endpoint, std::size_t, endpoint_hash> learned_index_;
    std::uint64_t undeliverable_ = 0;
    std::uint64_t lost_ = 0;
    std::size_t spread_v4_next_ = 0;
    std::size_t shared_v4_next_ = 0;
    std::size_t spread_v6_next_ = 0;

    // Scratch for parsing; reused. send() has its own: it runs inside service.handle().
    bencode::document doc_;
    krpc::message msg_;
    std::unique_ptr<parsed_packet> send_scratch_;
};

/// Bencoded queries for simulated clients (t is any short string).
std::string make_ping(std::string_view t, const id20& id);
std::string make_find_node(std::string_view t, const id20& id, const id20& target);
std::string make_get_peers(std::string_view t, const id20& id, const id20& info_hash);
std::string make_announce(std::string_view t, const id20& id, const id20& info_hash, std::uint16_t port,
                          std::string_view token, bool implied_port);
/// A response {id, nodes?} with transaction `t`, as a (possibly forged) reply.
std::string make_nodes_reply(std::string_view t, const id20& id, const std::vector<krpc::node_entry>& nodes);

/// Parsed view of one datagram, owning its bytes.
struct parsed_packet {
    parsed_packet() = default;
    // The message views point into `bytes`: never copied or moved.
    parsed_packet(const parsed_packet&) = delete;
    parsed_packet& operator=(const parsed_packet&) = delete;
    std::string bytes;
    bencode::document doc;
    krpc::message msg;
    bool ok = false;
};
/// Parses `payload` into `out`; false when it is not a valid KRPC message.
bool parse_packet(std::string_view payload, parsed_packet& out);

} // namespace dhtc::sim
