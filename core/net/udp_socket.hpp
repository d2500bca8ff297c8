// A UDP socket that receives and sends in batches (recvmmsg/sendmmsg on the native handle)
// with fixed, preallocated buffers: the per-packet path makes no heap allocation.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>

#include "model/address.hpp"

namespace dhtc::net {

/// One received datagram; the payload is valid only during the receive handler call.
struct datagram {
    endpoint from;
    std::string_view payload;
};

/// Traffic counters; relaxed atomics, readable from any thread.
struct udp_counters {
    std::atomic<std::uint64_t> rx_packets{0};
    std::atomic<std::uint64_t> rx_bytes{0};      ///< the datagrams' real lengths (MSG_TRUNC), dropped ones included
    std::atomic<std::uint64_t> rx_oversize{0};   ///< longer than max_datagram: dropped unread
    std::atomic<std::uint64_t> rx_truncated{0};  ///< longer than the receive buffer (a subset of rx_oversize)
    std::atomic<std::uint64_t> tx_packets{0};
    std::atomic<std::uint64_t> tx_bytes{0};
    std::atomic<std::uint64_t> tx_dropped{0};    ///< send queue full or socket refused
    std::atomic<std::uint64_t> tx_errors{0};     ///< the kernel refused a datagram (unreachable...)
    // System calls of the hot path, so a benchmark can put them beside the packets.
    std::atomic<std::uint64_t> rx_calls{0};      ///< recvmmsg calls
    std::atomic<std::uint64_t> tx_calls{0};      ///< sendmmsg calls
    std::atomic<std::uint64_t> rx_waits{0};      ///< the socket was found empty: waited for readability
    std::atomic<std::uint64_t> rx_yields{0};     ///< still not empty after a bounded drain: other work went first
};

class udp_socket {
public:
    static constexpr std::size_t max_datagram = 1500; ///< larger datagrams are dropped (protocol.md d.20)
    static constexpr std::size_t batch = 32;          ///< datagrams per recvmmsg/sendmmsg call
    static constexpr std::size_t send_queue = 256;    ///< queued outgoing datagrams before drops

    using receive_handler = std::function<void(std::span<const datagram>)>;

    /// Opens and binds a socket on `io`. Port 0 binds any free port. An IPv6 bind address
    /// makes a v6-only socket (dual stack uses two sockets). Errors come back in `ec`.
    static std::unique_ptr<udp_socket> open(asio::io_context& io, const endpoint& bind, std::error_code& ec);

    ~udp_socket();
    udp_socket(const udp_socket&) = delete;
    udp_socket& operator=(const udp_socket&) = delete;

    /// The bound address and port (the real port when bound to 0).
    endpoint local_endpoint() const noexcept { return local_; }
    bool is_v6() const noexcept { return local_.address.is_v6(); }

    /// Starts the receive loop; `handler` runs on the io_context's thread, once per batch.
    /// Queued sends are flushed after each batch. The loop reads until the socket is empty
    /// and only then waits for readability (see receive()).
    void start(receive_handler handler);

    /// Queues a datagram (copied). Returns false, and counts a drop, when the queue is full
    /// even after trying to flush it. Call only from the io_context's thread.
    bool send(const endpoint& to, std::string_view payload);
    /// Sends everything queued that the kernel accepts now.
    void flush();
    /// Stops receiving and closes the socket. Idempotent. Call from the io_context's thread
    /// (or after it has stopped).
    void close();

    const udp_counters& counters() const noexcept { return counters_; }

private:
    struct impl;
    explicit udp_socket(std::unique_ptr<impl> p, const endpoint& local);
    void receive();
    void wait_readable();
    void yield_then_receive();
    void arm_send_retry();

    std::unique_ptr<impl> impl_;
    endpoint local_;
    udp_counters counters_;
    receive_handler handler_;
    bool closed_ = false;
    std::shared_ptr<char> alive_ = std::make_shared<char>(); // a posted receive() checks it: *this may be gone
    bool send_retry_armed_ = false;
};

/// Conversions between our endpoint and Asio's (for the few places that need both).
asio::ip::udp::endpoint to_asio(const endpoint& ep);
endpoint from_asio(const asio::ip::udp::endpoint& ep);

} // namespace dhtc::net
