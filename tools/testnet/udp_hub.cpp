#include "testnet/udp_hub.hpp"

#include <asio/post.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>

namespace dhtc::testnet {

udp_hub::udp_hub(asio::io_context& io, std::uint16_t port, handler on_datagram)
    : io_(io), socket_(io), on_datagram_(std::move(on_datagram)) {
    socket_.open(asio::ip::udp::v4());
    const int fd = socket_.native_handle();
    int one = 1;
    if (::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0)
        throw std::runtime_error(std::string("IP_PKTINFO: ") + std::strerror(errno));
    // Thousands of hosts share this socket: big buffers absorb bursts (capped by rmem_max).
    int bytes = 8 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    socket_.bind(asio::ip::udp::endpoint(asio::ip::address_v4::any(), port));
    socket_.non_blocking(true);
    port_ = socket_.local_endpoint().port();

    rx_data_.resize(batch);
    rx_from_.resize(batch);
    rx_control_.resize(batch);
    rx_iov_.resize(batch);
    rx_msg_.resize(batch);
    tx_.resize(tx_capacity);
    tx_msg_.resize(tx_capacity);
}

void udp_hub::start() { wait_readable(); }

void udp_hub::close() {
    if (closed_) return;
    flush();
    closed_ = true;
    asio::error_code ec;
    socket_.close(ec);
}

void udp_hub::wait_readable() {
    if (closed_) return;
    socket_.async_wait(asio::ip::udp::socket::wait_read, [this](const asio::error_code& ec) {
        if (ec || closed_) return;
        drain();
        wait_readable();
    });
}

void udp_hub::drain() {
    const int fd = socket_.native_handle();
    // Bounded work per wake-up so timers and TCP get their turn.
    for (int round = 0; round < 16 && !closed_; ++round) {
        for (std::size_t i = 0; i < batch; ++i) {
            rx_iov_[i] = {rx_data_[i].data(), rx_data_[i].size()};
            auto& h = rx_msg_[i].msg_hdr;
            h = {};
            h.msg_name = &rx_from_[i];
            h.msg_namelen = sizeof(sockaddr_in);
            h.msg_iov = &rx_iov_[i];
            h.msg_iovlen = 1;
            h.msg_control = rx_control_[i].data();
            h.msg_controllen = rx_control_[i].size();
            rx_msg_[i].msg_len = 0;
        }
        const int n = ::recvmmsg(fd, rx_msg_.data(), batch, MSG_DONTWAIT, nullptr);
        if (n <= 0) break;
        for (int i = 0; i < n; ++i) {
            const auto& h = rx_msg_[static_cast<std::size_t>(i)].msg_hdr;
            if (h.msg_flags & MSG_TRUNC) continue; // longer than any KRPC message
            datagram d;
            for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                    in_pktinfo info;
                    std::memcpy(&info, CMSG_DATA(c), sizeof info);
                    d.to_ip = ntohl(info.ipi_addr.s_addr);
                }
            }
            if (d.to_ip == 0) continue;
            const auto& from = rx_from_[static_cast<std::size_t>(i)];
            d.from_ip = ntohl(from.sin_addr.s_addr);
            d.from_port = ntohs(from.sin_port);
            d.bytes = {rx_data_[static_cast<std::size_t>(i)].data(), rx_msg_[static_cast<std::size_t>(i)].msg_len};
            ++received_;
            on_datagram_(d);
        }
        flush();
        if (static_cast<std::size_t>(n) < batch) break;
    }
}

void udp_hub::send(std::uint32_t from_ip, std::uint32_t to_ip, std::uint16_t to_port, std::string_view bytes) {
    if (closed_) return;
    if (bytes.size() > max_datagram) {
        ++send_dropped_;
        return;
    }
    if (tx_count_ == tx_.size()) flush();
    if (tx_count_ == tx_.size()) {
        ++send_dropped_;
        return;
    }
    auto& s = tx_[tx_count_];
    std::memcpy(s.data.data(), bytes.data(), bytes.size());
    s.size = bytes.size();
    s.to = {};
    s.to.sin_family = AF_INET;
    s.to.sin_addr.s_addr = htonl(to_ip);
    s.to.sin_port = htons(to_port);
    s.iov = {s.data.data(), s.size};
    auto* c = reinterpret_cast<cmsghdr*>(s.control.data());
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
    in_pktinfo info{};
    info.ipi_spec_dst.s_addr = htonl(from_ip);
    std::memcpy(CMSG_DATA(c), &info, sizeof info);
    auto& h = tx_msg_[tx_count_].msg_hdr;
    h = {};
    h.msg_name = &s.to;
    h.msg_namelen = sizeof s.to;
    h.msg_iov = &s.iov;
    h.msg_iovlen = 1;
    h.msg_control = s.control.data();
    h.msg_controllen = s.control.size();
    ++tx_count_;
    if (!flush_posted_) {
        flush_posted_ = true;
        asio::post(io_, [this] {
            flush_posted_ = false;
            flush();
        });
    }
}

void udp_hub::flush() {
    const int fd = socket_.native_handle();
    std::size_t done = 0;
    while (done < tx_count_ && !closed_) {
        const int n = ::sendmmsg(fd, tx_msg_.data() + done, static_cast<unsigned>(tx_count_ - done), MSG_DONTWAIT);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            sent_ += static_cast<std::uint64_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        // A full send buffer or an unreachable destination: this datagram is lost, as on
        // a real network; the rest still go.
        ++send_dropped_;
        ++done;
    }
    tx_count_ = 0;
}

} // namespace dhtc::testnet
