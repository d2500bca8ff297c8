// Routes uTP datagrams to connections keyed by (peer endpoint, our receive id), with a cap
// on live connections and on queued incoming ones; every datagram that goes nowhere is
// counted. Socket-free like connection: datagrams go out through a transport, time comes
// from a clock, and the owner feeds received datagrams and calls tick() at next_timer().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string_view>
#include <utility>

#include "utp/connection.hpp"

namespace dhtc::utp {

struct multiplexer_config {
    connection_config connection;
    /// Live connections at most (ours, accepted ones and those still closing).
    std::size_t max_connections = 1024;
    /// Accept incoming SYNs (tests and simulations; a crawler only connects out).
    bool accept_incoming = false;
    /// Accepted connections waiting for take_incoming() at most.
    std::size_t max_accept_queue = 16;
    /// Seeds connection ids and initial sequence numbers.
    std::uint64_t seed = 1;
};

/// Why datagrams went nowhere, and how many connections were made and refused.
struct multiplexer_stats {
    std::uint64_t datagrams_received = 0;
    std::uint64_t malformed = 0;          ///< parse_packet() refused it
    std::uint64_t unknown_connection = 0; ///< no connection with that id from that endpoint
    std::uint64_t syn_refused = 0;        ///< a SYN while not accepting, full, or queue full
    std::uint64_t connect_refused = 0;    ///< connect() at max_connections
    std::uint64_t resets_sent = 0;        ///< answers to packets for unknown connections
    std::uint64_t connections_opened = 0;
    std::uint64_t connections_closed = 0;
};

class multiplexer {
public:
    multiplexer(transport& out, const clock& clk, const multiplexer_config& cfg = {});

    /// A new outgoing connection, SYN sent; null at max_connections. The multiplexer
    /// keeps it until it is closed and the caller dropped its pointer.
    std::shared_ptr<connection> connect(const endpoint& peer);
    /// The next accepted incoming connection, or null.
    std::shared_ptr<connection> take_incoming();

    /// One received datagram; returns the connection it reached (null: none, or a new
    /// incoming one). That connection's acks go out at flush().
    connection* on_datagram(const endpoint& from, std::string_view datagram);
    /// Sends the acks the datagrams fed since the last flush made due.
    void flush();
    /// Runs every connection's due timers and forgets closed, released connections.
    void tick();
    time_point next_timer() const noexcept;

    std::size_t size() const noexcept { return connections_.size(); }
    const multiplexer_stats& stats() const noexcept { return stats_; }

private:
    using key = std::pair<endpoint, std::uint16_t>;

    std::uint16_t random16() { return static_cast<std::uint16_t>(rng_()); }
    void send_reset(const endpoint& to, const packet_view& p);
    void forget_finished();

    transport& out_;
    const clock& clock_;
    multiplexer_config cfg_;
    std::mt19937 rng_;
    std::map<key, std::shared_ptr<connection>> connections_;
    std::deque<std::shared_ptr<connection>> incoming_;
    std::deque<std::shared_ptr<connection>> touched_; ///< fed since the last flush (at most max_touched)
    multiplexer_stats stats_;
};

} // namespace dhtc::utp
