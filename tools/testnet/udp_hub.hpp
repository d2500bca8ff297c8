// The UDP sockets that speak for every simulated host, each bound to the wildcard address
// on a port of its own: IP_PKTINFO on receive says which loopback address a datagram was
// sent to, and on send sets the source address of the reply. A host is an (address, port)
// pair: most hosts use the first (main) port; nodes that share an address use one port
// each (see ip_groups). Datagrams move in recvmmsg/sendmmsg batches.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

namespace dhtc::testnet {

namespace wan {
class model;
}

/// One received datagram. Addresses in host byte order.
struct datagram {
    std::uint32_t to_ip = 0;   ///< the simulated host it was sent to
    std::uint16_t to_port = 0; ///< and the port (the socket it arrived on)
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

    /// Binds 0.0.0.0 on each of `ports` (0 = any free port) with IP_PKTINFO; the first is
    /// the main port. Throws on failure.
    udp_hub(asio::io_context& io, const std::vector<std::uint16_t>& ports, handler on_datagram);

    /// The port of socket `slot` (0: the main port).
    std::uint16_t port(std::size_t slot = 0) const noexcept { return sockets_[slot].port; }
    std::size_t port_count() const noexcept { return sockets_.size(); }
    void start();
    void close();

    /// Puts every datagram through the WAN model: a datagram from one of our hosts
    /// (`is_ours`) is judged when sent, one from elsewhere (a crawler) when received, so each
    /// crosses one link once; a lost one is dropped, the others wait out their delay here.
    /// `m` must outlive the hub.
    void apply_wan(wan::model& m, std::function<bool(std::uint32_t ip, std::uint16_t port)> is_ours);

    /// Queues a datagram from from_ip:from_port (a simulated host; from_port one of ours)
    /// to to_ip:to_port. Sent at the next flush, which is posted automatically.
    void send(std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip, std::uint16_t to_port,
              std::string_view bytes);
    void flush();

    std::uint64_t received() const noexcept { return received_; }
    std::uint64_t sent() const noexcept { return sent_; }
    std::uint64_t send_dropped() const noexcept { return send_dropped_; }
    /// WAN model: datagrams it lost, those it delayed, and those dropped because the delay
    /// line held max_delayed_bytes already.
    std::uint64_t wan_lost() const noexcept { return wan_lost_; }
    std::uint64_t wan_delayed() const noexcept { return wan_delayed_; }
    std::uint64_t wan_overflow() const noexcept { return wan_overflow_; }
    /// Bytes the delay line may hold (at 350 ms, 64 MiB is ~180 MB/s of traffic).
    static constexpr std::size_t max_delayed_bytes = 64u << 20;

private:
    struct bound_socket {
        asio::ip::udp::socket socket;
        std::uint16_t port = 0;
    };
    void wait_readable(std::size_t slot);
    void drain(std::size_t slot);
    void send_batch(int fd, mmsghdr* msgs, std::size_t count);
    /// send() without the WAN model.
    void send_now(std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip, std::uint16_t to_port,
                  std::string_view bytes);
    /// A received datagram to the handler now, or later under the WAN model.
    void receive(const datagram& d);

    // The WAN model's delay line: a min-heap by (due, seq) of datagrams waiting to be
    // received (inbound) or sent, and the timer for the first of them.
    struct delayed {
        std::chrono::steady_clock::time_point due;
        std::uint64_t seq;
        bool inbound;
        std::uint32_t from_ip, to_ip;
        std::uint16_t from_port, to_port;
        std::string bytes;
        bool operator>(const delayed& o) const noexcept { return due != o.due ? due > o.due : seq > o.seq; }
    };
    /// One datagram across the WAN model: lost, or into the delay line.
    void cross_wan(bool inbound, std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip,
                   std::uint16_t to_port, std::string_view bytes);
    void release_due();
    void arm_wan_timer();

    struct tx_slot {
        std::array<char, max_datagram> data;
        std::size_t size = 0;
        std::size_t socket = 0; ///< index in sockets_
        sockaddr_in to{};
        alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(in_pktinfo))> control{};
        iovec iov{};
    };

    asio::io_context& io_;
    std::vector<bound_socket> sockets_;
    handler on_datagram_;
    bool closed_ = false;
    bool flush_posted_ = false;

    std::vector<std::array<char, max_datagram>> rx_data_;
    std::vector<sockaddr_in> rx_from_;
    std::vector<std::array<char, CMSG_SPACE(sizeof(in_pktinfo)) + 64>> rx_control_;
    std::vector<iovec> rx_iov_;
    std::vector<mmsghdr> rx_msg_;

    std::vector<tx_slot> tx_;
    std::vector<mmsghdr> tx_msg_;
    std::vector<mmsghdr> tx_batch_; // one socket's share of tx_msg_ when there are several
    std::size_t tx_count_ = 0;

    wan::model* wan_ = nullptr;
    std::function<bool(std::uint32_t, std::uint16_t)> is_ours_;
    std::vector<delayed> delayed_;
    std::size_t delayed_bytes_ = 0;
    std::uint64_t next_seq_ = 0;
    asio::steady_timer wan_timer_;
    std::chrono::steady_clock::time_point wan_timer_at_ = std::chrono::steady_clock::time_point::max();
    std::uint64_t wan_lost_ = 0;
    std::uint64_t wan_delayed_ = 0;
    std::uint64_t wan_overflow_ = 0;

    std::uint64_t received_ = 0;
    std::uint64_t sent_ = 0;
    std::uint64_t send_dropped_ = 0;
};

} // namespace dhtc::testnet
