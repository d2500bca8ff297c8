// The seeders: each holds some of the catalog's torrents, announces them the way clients do
// (a get_peers lookup towards the key, then announce_peer with the token to the closest
// nodes that gave one, again every --reannounce seconds with jitter) and serves their
// metadata: BEP-3 handshake, BEP-10 extension handshake, BEP-9 data or reject. Each has a
// connection policy (TCP or uTP only; MSE/PE allowed, required with RC4, or required with
// a plaintext payload allowed), and a share of them misbehaves so that a crawler's failure
// paths get exercised.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "streams/byte_stream.hpp"
#include "testnet/catalog.hpp"
#include "testnet/network.hpp"
#include "testnet/utp_port.hpp"

namespace dhtc::testnet {

struct peer_connection;

/// How a seeder takes connections, as libtorrent's settings would make it.
enum class connection_policy : std::uint8_t {
    // The first three take TCP and uTP (on the DHT port), as libtorrent does by default.
    plaintext, ///< a plaintext handshake or MSE (either payload), as libtorrent's pe_enabled
    pe_rc4,    ///< MSE required with RC4 (pe_forced, rc4 only): a plaintext handshake is closed
    pe_plain,  ///< MSE required, a plaintext payload allowed after it (pe_forced, both)
    utp,       ///< uTP only (incoming TCP closed at once); plaintext or MSE
    utp_pe,    ///< uTP only, MSE required with RC4
    tcp_only,  ///< TCP only (uTP disabled, or its UDP port firewalled); plaintext or MSE
};
inline constexpr std::size_t policy_count = 6;
std::string_view to_string(connection_policy p) noexcept;
/// "plaintext=1,pe_rc4=1,..." (weights >= 0, at least one positive; unnamed ones are 0).
std::optional<std::array<double, policy_count>> parse_policy_mix(std::string_view s);

enum class misbehaviour : std::uint8_t {
    none,
    slow,        ///< correct data, each piece a second late
    stall,       ///< serves about half of the pieces, then goes silent
    reject,      ///< rejects every request
    wrong_bytes, ///< serves corrupted metadata (the hash check fails)
    refuse,      ///< closes every connection as soon as it is accepted
};
std::string_view to_string(misbehaviour m) noexcept;

struct seeder_options {
    std::size_t count = 0;
    double misbehave = 0.0;
    seconds reannounce = 900;
    std::uint64_t seed = 1;
    /// Relative shares of the connection policies (default: every seeder plaintext).
    std::array<double, policy_count> policy_mix{1, 0, 0, 0, 0, 0};
    std::size_t max_connections = 4000;
    /// Per uTP seeder: live uTP connections and accepted ones not yet served.
    std::size_t max_utp_connections = 256;
    std::size_t max_utp_accept_queue = 32;
    std::chrono::seconds idle_timeout{20};
    std::chrono::seconds connection_lifetime{120};
};

struct seeder_stats {
    std::uint64_t connections = 0;
    std::uint64_t refused = 0;
    std::uint64_t over_capacity = 0;
    std::uint64_t bad_handshakes = 0;
    std::uint64_t unknown_hash = 0;
    std::uint64_t pieces_served = 0;
    std::uint64_t rejects_sent = 0;
    std::uint64_t full_transfers = 0;
    std::uint64_t protocol_errors = 0;
    std::uint64_t announce_rounds = 0;
    std::uint64_t tcp_refused_utp_only = 0; ///< TCP connections a uTP-only seeder closed at once
    std::uint64_t plaintext_refused = 0;    ///< plaintext handshakes an MSE-only seeder closed
    std::uint64_t mse_handshakes = 0;
    std::uint64_t mse_failures = 0;
    std::uint64_t utp_connections = 0;
    std::uint64_t utp_refused = 0;          ///< SYNs a uTP seeder's multiplexer refused (full)
    /// Per connection_policy: seeders, connections served, full correct transfers.
    std::array<std::uint64_t, policy_count> seeders_by_policy{};
    std::array<std::uint64_t, policy_count> connections_by_policy{};
    std::array<std::uint64_t, policy_count> full_transfers_by_policy{};
};

class seeder_set {
public:
    /// Places `o.count` seeders on ips, gives each torrent 1..3 of them and registers each
    /// seeder's DHT client with `net`. `ips` must hold o.count addresses.
    seeder_set(asio::io_context& io, network& net, catalog& torrents, const seeder_options& o,
               const std::vector<std::uint32_t>& ips);

    /// Opens the TCP listener on 0.0.0.0:port (the DHT port, so "ip:port" is the same for
    /// both). Throws on failure.
    void listen(std::uint16_t port);
    /// Starts announcing; `first_round_done` runs when every torrent was announced once.
    void start(std::function<void()> first_round_done);
    void stop();

    std::string endpoint_of(std::size_t s) const;
    std::size_t size() const noexcept { return seeders_.size(); }
    misbehaviour mode(std::size_t s) const { return seeders_[s].mode; }
    connection_policy policy(std::size_t s) const { return seeders_[s].policy; }
    const seeder_stats& stats() const noexcept;
    std::size_t open_connections() const noexcept { return open_; }

private:
    struct seeder {
        std::uint32_t ip;
        std::size_t client_host;
        misbehaviour mode;
        id20 peer_id;
        std::vector<std::uint32_t> torrents; // sorted
        connection_policy policy = connection_policy::plaintext;
        std::shared_ptr<utp_port> utp;       // every policy but tcp_only
    };
    struct job {
        std::chrono::steady_clock::time_point due;
        std::uint32_t seeder;
        std::uint32_t torrent;
        std::uint8_t key;
        bool first;
        bool operator>(const job& o) const noexcept { return due > o.due; }
    };

    void assign_policies();
    void accept();
    /// Closes a connection the seeder will not serve: at once, or under the WAN model when
    /// the close would reach the peer.
    void close_refused(asio::ip::tcp::socket s, std::uint32_t seeder_ip, std::uint32_t peer_ip);
    bool on_utp_datagram(const datagram& d);
    void start_session(std::unique_ptr<metadata::byte_stream> stream, std::size_t seeder_index, std::uint32_t peer_ip);
    asio::awaitable<void> serve(std::shared_ptr<peer_connection> conn, std::size_t seeder_index, std::uint32_t peer_ip);
    void tick();
    void run_job(const job& j);
    std::chrono::steady_clock::duration next_interval();

    asio::io_context& io_;
    network& net_;
    catalog& torrents_;
    seeder_options opt_;
    rng rng_;
    std::vector<seeder> seeders_;
    std::unordered_map<std::uint32_t, std::uint32_t> by_ip_;
    asio::ip::tcp::acceptor acceptor_;
    asio::steady_timer timer_;
    std::uint16_t port_ = 0;
    bool stopped_ = false;
    std::size_t open_ = 0;
    std::uint64_t next_live_ = 0;
    std::unordered_map<std::uint64_t, std::weak_ptr<peer_connection>> live_; // to close them at stop()

    std::priority_queue<job, std::vector<job>, std::greater<>> jobs_;
    std::size_t first_round_left_ = 0;
    std::function<void()> first_round_done_;
    mutable seeder_stats stats_;
};

} // namespace dhtc::testnet
