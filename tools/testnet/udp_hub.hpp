// One UDP socket, bound to the wildcard address, that speaks for every simulated host:
// IP_PKTINFO on receive says which loopback address a datagram was sent to, and on send
// sets the source address of the reply. Datagrams move in recvmmsg/sendmmsg batches.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

namespace dhtc::testnet {

/// One received datagram. Addresses in host byte order.
struct datagram {
    std::uint32_t to_ip = 0;   ///< the simulated host it was sent to
    std::uint32_t from_ip = 0;
    std::uint16_t from_port = 0;
    std::string_view bytes;    ///< valid during the handler call only
};

class udp_hub {
public:
    static constexpr std::size_t batch = 64;
    static constexpr std::size_t max_datagram = 1500;
    /// Outgoing datagrams held between flushes; beyond it, a flush happens at once.
    static constexpr std::size_t tx_capacity = 1024;

    using handler = std::function<void(const datagram&)>;

    /// Binds 0.0.0.0:port (0 = any free port) with IP_PKTINFO. Throws on failure.
    udp_hub(asio::io_context& io, std::uint16_t port, handler on_datagram);

    std::uint16_t port() const noexcept { return port_; }
    void start();
    void close();

    /// Queues a datagram from `from_ip` (a simulated host) to to_ip:to_port. Sent at the
    /// next flush, which is posted automatically.
    void send(std::uint32_t from_ip, std::uint32_t to_ip, std::uint16_t to_port, std::string_view bytes);
    void flush();

    std::uint64_t received() const noexcept { return received_; }
    std::uint64_t sent() const noexcept { return sent_; }
    std::uint64_t send_dropped() const noexcept { return send_dropped_; }

private:
    void wait_readable();
    void drain();

    struct tx_slot {
        std::array<char, max_datagram> data;
        std::size_t size = 0;
        sockaddr_in to{};
        alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(in_pktinfo))> control{};
        iovec iov{};
    };

    asio::io_context& io_;
    asio::ip::udp::socket socket_;
    handler on_datagram_;
    std::uint16_t port_ = 0;
    bool closed_ = false;
    bool flush_posted_ = false;

    std::vector<std::array<char, max_datagram>> rx_data_;
    std::vector<sockaddr_in> rx_from_;
    std::vector<std::array<char, CMSG_SPACE(sizeof(in_pktinfo)) + 64>> rx_control_;
    std::vector<iovec> rx_iov_;
    std::vector<mmsghdr> rx_msg_;

    std::vector<tx_slot> tx_;
    std::vector<mmsghdr> tx_msg_;
    std::size_t tx_count_ = 0;

    std::uint64_t received_ = 0;
    std::uint64_t sent_ = 0;
    std::uint64_t send_dropped_ = 0;
};

} // namespace dhtc::testnet
