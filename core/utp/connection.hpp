// One uTP (BEP-29) connection as a socket-free state machine: it sends datagrams through a
// transport, reads time from a clock, and is fed the datagrams the multiplexer routes to it.
// Reliability: 16-bit sequence and ack numbers, a bounded reorder buffer, selective acks,
// retransmission on timeout (RFC 6298 estimator, Karn's rule), after 3 duplicate acks
// or 3 packets selectively acked past a hole, and by a tail probe after ~2 RTTs. Congestion: LEDBAT (target queuing delay,
// measured from the peer's timestamp differences) after a slow start, within the peer's
// advertised window. The owner calls tick() at next_timer() and flush() after feeding a
// batch of datagrams (acks are coalesced per batch).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "model/address.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"
#include "utp/packet.hpp"

namespace dhtc::utp {

struct connection_config {
    /// Payload bytes per DATA packet (a 1500-byte path MTU minus IP, UDP and uTP headers).
    std::size_t max_payload = 1400;
    /// Receive side: in-order unread bytes plus out-of-order packets, and the window we
    /// advertise. Packets beyond it are dropped (and counted).
    std::size_t receive_buffer = 256 * 1024;
    /// Send side: bytes written and not yet acknowledged. write() accepts up to this.
    std::size_t send_buffer = 256 * 1024;
    /// Out-of-order packets held at most (each also charged to receive_buffer).
    std::size_t max_reorder_packets = 256;
    /// SYNs sent before a silent peer is given up (1 s, then doubling).
    unsigned syn_attempts = 3;
    /// Consecutive retransmission timeouts before the connection is declared dead.
    unsigned max_timeouts = 6;
    /// LEDBAT's target queuing delay.
    std::chrono::microseconds target_delay{100'000};
    std::chrono::milliseconds initial_rto{1000};
    std::chrono::milliseconds min_rto{500};
    std::chrono::milliseconds max_rto{16'000};
    /// A tail probe resends the oldest unacknowledged packet once when no ack came for
    /// max(2 x srtt, this) after the last send: a lost packet with nothing behind it to
    /// draw duplicate acks would otherwise wait for the (at least 500 ms) timeout.
    std::chrono::milliseconds tail_probe_floor{10};
    /// Nothing received for this long while connected: dead.
    std::chrono::seconds idle_timeout{60};
};

enum class conn_state : std::uint8_t {
    syn_sent,  ///< we sent a SYN and wait for its STATE
    connected, ///< data flows both ways
    closed,    ///< over; close_reason() says why
};

enum class close_reason : std::uint8_t {
    none,
    finished,     ///< our FIN was acknowledged (both directions done, or ours at least)
    refused,      ///< a RESET answered our SYN
    reset,        ///< a RESET after the connection was established
    timed_out,    ///< no answer to the SYNs, or too many retransmission timeouts, or idle
    aborted,      ///< we reset it ourselves
};
std::string_view to_string(close_reason r) noexcept;

/// Counters of one connection (for tests, logs and the multiplexer's totals).
struct connection_stats {
    std::uint64_t packets_sent = 0;
    std::uint64_t packets_received = 0;
    std::uint64_t retransmits = 0;         ///< every resent DATA, FIN or SYN
    std::uint64_t fast_retransmits = 0;    ///< resent after duplicate or selective acks
    std::uint64_t timeouts = 0;            ///< retransmission timer expiries
    std::uint64_t tail_probes = 0;         ///< packets resent by the tail probe
    std::uint64_t duplicates_received = 0; ///< DATA already received (in order or held)
    std::uint64_t dropped_window = 0;      ///< DATA beyond the receive buffer or reorder cap
    std::uint64_t bad_acks = 0;            ///< acks of sequence numbers never sent
};

class connection {
public:
    /// An outgoing connection; connect() sends the SYN. `recv_id` is the id the peer puts
    /// in its packets to us; `seq` our first sequence number.
    connection(transport& out, const clock& clk, const endpoint& peer, std::uint16_t recv_id, std::uint16_t seq,
               const connection_config& cfg);
    /// An incoming connection answering `syn` (its connection_id + 1 becomes our recv_id).
    static connection accept(transport& out, const clock& clk, const endpoint& peer, const packet_view& syn,
                             std::uint16_t seq, const connection_config& cfg);

    void connect();
    /// A datagram from the peer, already parsed and routed by connection id.
    void on_packet(const packet_view& p);
    /// Sends what the batch of on_packet() calls made due (acks, window updates).
    void flush();
    /// Runs expired timers (retransmission, SYN resend, idle).
    void tick();
    /// When tick() has work next (time_point::max() when none).
    time_point next_timer() const noexcept;

    /// Queues bytes to send; returns how many fit in the send buffer.
    std::size_t write(std::string_view bytes);
    /// Bytes the send buffer still takes.
    std::size_t writable() const noexcept;
    /// Moves up to `n` in-order received bytes to `dst`; returns the count.
    std::size_t read(char* dst, std::size_t n);
    std::size_t readable() const noexcept { return rx_.size() - rx_begin_; }
    /// The peer's FIN arrived and every byte before it was read.
    bool eof() const noexcept { return fin_received_ && readable() == 0; }

    /// Sends a FIN once everything written has been sent; the connection closes when it is
    /// acknowledged (or times out).
    void close();
    /// Sends a RESET and closes at once.
    void abort();

    conn_state state() const noexcept { return state_; }
    enum close_reason close_reason() const noexcept { return reason_; }
    const endpoint& peer() const noexcept { return peer_; }
    std::uint16_t recv_id() const noexcept { return recv_id_; }
    const connection_stats& stats() const noexcept { return stats_; }
    /// Smoothed round-trip time (zero before the first sample).
    std::chrono::microseconds srtt() const noexcept { return srtt_; }
    /// The retransmission timeout now (RFC 6298: srtt + 4 rttvar, within min_rto..max_rto).
    std::chrono::microseconds rto() const noexcept { return rto_; }
    std::size_t congestion_window() const noexcept { return static_cast<std::size_t>(cwnd_); }
    /// Bytes sent and not yet acknowledged (selectively acked ones excluded).
    std::size_t bytes_in_flight() const noexcept { return in_flight_; }

private:
    struct sent_packet {
        std::string payload;
        time_point sent_at{};
        std::uint8_t transmissions = 0;
        bool fin = false;
        bool acked = false;      ///< selectively acknowledged
        bool need_resend = false;
        bool fast_resent = false;
    };
    struct held_packet {
        std::string payload;
        bool fin = false;
    };

    std::uint32_t now_us() const noexcept;
    std::uint32_t receive_window() const noexcept;
    header make_header(packet_type type, std::uint16_t seq) const noexcept;
    void send_control(packet_type type);
    void send_data_packet(std::uint16_t seq, sent_packet& sp);
    void fill_sack(std::string& mask) const;
    void try_send();
    void handle_ack(const packet_view& p);
    void ack_one(sent_packet& sp, time_point now, std::size_t& bytes_acked);
    void on_congestion(std::size_t bytes_acked, std::uint32_t delay_us);
    void on_loss(bool timeout);
    void handle_data(const packet_view& p);
    void deliver_in_order();
    void arm_rto() noexcept;
    void arm_tail_probe() noexcept;
    void send_tail_probe();
    void finish(enum close_reason r) noexcept;
    std::size_t buffered_receive() const noexcept { return readable() + held_bytes_; }
    std::size_t send_buffered() const noexcept { return pending_.size() - pending_begin_ + unacked_bytes_; }

    transport& out_;
    const clock& clock_;
    endpoint peer_;
    connection_config cfg_;
    std::uint16_t recv_id_;
    std::uint16_t send_id_;
    conn_state state_ = conn_state::syn_sent;
    enum close_reason reason_ = close_reason::none;

    // Send side. outbuf_[i] is sequence number acked_seq_ + 1 + i.
    std::uint16_t seq_nr_;    ///< the next sequence number we assign
    std::uint16_t acked_seq_; ///< every packet up to this one is acknowledged
    std::deque<sent_packet> outbuf_;
    std::string pending_; ///< written, not yet packetised: [pending_begin_, size)
    std::size_t pending_begin_ = 0;
    std::size_t unacked_bytes_ = 0; ///< payload bytes in outbuf_ not yet acked
    std::size_t in_flight_ = 0;     ///< payload bytes sent, neither acked nor due for resend
    std::uint32_t peer_wnd_ = 0;
    double cwnd_;
    double ssthresh_;
    bool slow_start_ = true;
    unsigned dup_acks_ = 0;
    bool close_requested_ = false;
    bool fin_sent_ = false;

    // Delay and round-trip estimation.
    std::uint32_t base_delay_us_ = 0xffffffff;
    time_point base_delay_reset_{};
    std::chrono::microseconds srtt_{0};
    std::chrono::microseconds rttvar_{0};
    std::chrono::microseconds rto_;
    unsigned consecutive_timeouts_ = 0;
    time_point rto_deadline_ = time_point::max();
    time_point tail_probe_deadline_ = time_point::max();
    bool tail_probe_sent_ = false; ///< once per flight: until an ack moves acked_seq_
    unsigned syn_sent_count_ = 0;

    // Receive side.
    std::uint16_t ack_nr_ = 0;             ///< the last sequence number received in order
    std::map<std::uint16_t, held_packet> held_; ///< out of order, keyed by sequence number
    std::size_t held_bytes_ = 0;
    std::string rx_; ///< in order, unread: [rx_begin_, size)
    std::size_t rx_begin_ = 0;
    bool fin_received_ = false;
    std::uint32_t reply_micro_ = 0; ///< our measure of the peer's one-way delay, echoed back
    bool ack_due_ = false;
    bool window_was_closed_ = false; ///< the last window we advertised was below one packet
    bool probe_due_ = false;         ///< the peer's window is closed: send one packet anyway
    time_point last_received_{};

    connection_stats stats_;
};

} // namespace dhtc::utp
