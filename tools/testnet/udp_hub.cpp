#include "testnet/udp_hub.hpp"

#include <asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>

#include "testnet/wan_model.hpp"

namespace dhtc::testnet {

udp_hub::udp_hub(asio::io_context& io, const std::vector<std::uint16_t>& ports, handler on_datagram)
    : io_(io), on_datagram_(std::move(on_datagram)), wan_timer_(io) {
    sockets_.reserve(ports.size());
    for (const auto port : ports) {
        auto& b = sockets_.emplace_back(bound_socket{asio::ip::udp::socket(io), 0});
        b.socket.open(asio::ip::udp::v4());
        const int fd = b.socket.native_handle();
        int one = 1;
        if (::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0)
            throw std::runtime_error(std::string("IP_PKTINFO: ") + std::strerror(errno));
        // Thousands of hosts share the main socket: big buffers absorb bursts (capped by
        // rmem_max). The others serve a node per shared address and need less.
        int bytes = sockets_.size() == 1 ? 8 << 20 : 1 << 20;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
        b.socket.bind(asio::ip::udp::endpoint(asio::ip::address_v4::any(), port));
        b.socket.non_blocking(true);
        b.port = b.socket.local_endpoint().port();
    }

    rx_data_.resize(batch);
    rx_from_.resize(batch);
    rx_control_.resize(batch);
    rx_iov_.resize(batch);
    rx_msg_.resize(batch);
    tx_.resize(tx_capacity);
    tx_msg_.resize(tx_capacity);
}

void udp_hub::start() {
    for (std::size_t slot = 0; slot < sockets_.size(); ++slot) wait_readable(slot);
}

void udp_hub::close() {
    if (closed_) return;
    flush();
    closed_ = true;
    wan_timer_.cancel();
    asio::error_code ec;
    for (auto& b : sockets_) b.socket.close(ec);
}

void udp_hub::wait_readable(std::size_t slot) {
    if (closed_) return;
    sockets_[slot].socket.async_wait(asio::ip::udp::socket::wait_read, [this, slot](const asio::error_code& ec) {
        if (ec || closed_) return;
        drain(slot);
        wait_readable(slot);
    });
}

void udp_hub::drain(std::size_t slot) {
    const int fd = sockets_[slot].socket.native_handle();
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
            d.to_port = sockets_[slot].port;
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
            receive(d);
        }
        flush();
        if (static_cast<std::size_t>(n) < batch) break;
    }
}

void udp_hub::apply_wan(wan::model& m, std::function<bool(std::uint32_t, std::uint16_t)> is_ours) {
    wan_ = &m;
    is_ours_ = std::move(is_ours);
}

void udp_hub::receive(const datagram& d) {
    if (!wan_ || is_ours_(d.from_ip, d.from_port)) {
        on_datagram_(d); // from one of ours: the model was applied when it was sent
        return;
    }
    cross_wan(true, d.from_ip, d.from_port, d.to_ip, d.to_port, d.bytes);
}

void udp_hub::send(std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip, std::uint16_t to_port,
                   std::string_view bytes) {
    if (closed_) return;
    if (!wan_) send_now(from_ip, from_port, to_ip, to_port, bytes);
    else cross_wan(false, from_ip, from_port, to_ip, to_port, bytes);
}

void udp_hub::cross_wan(bool inbound, std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip,
                        std::uint16_t to_port, std::string_view bytes) {
    const auto now = std::chrono::steady_clock::now();
    const auto v = wan_->datagram(from_ip, to_ip, now);
    if (v.lost) {
        ++wan_lost_;
        return;
    }
    if (delayed_bytes_ + bytes.size() > max_delayed_bytes) {
        ++wan_overflow_;
        return;
    }
    delayed_.push_back({now + v.delay, next_seq_++, inbound, from_ip, to_ip, from_port, to_port, std::string(bytes)});
    std::push_heap(delayed_.begin(), delayed_.end(), std::greater<>{});
    delayed_bytes_ += bytes.size();
    ++wan_delayed_;
    arm_wan_timer();
}

void udp_hub::arm_wan_timer() {
    if (closed_ || delayed_.empty()) return;
    const auto due = delayed_.front().due;
    if (due >= wan_timer_at_) return; // the timer already fires earlier
    wan_timer_at_ = due;
    wan_timer_.expires_at(due);
    wan_timer_.async_wait([this](const asio::error_code& ec) {
        if (ec || closed_) return; // re-armed earlier, or closed
        wan_timer_at_ = std::chrono::steady_clock::time_point::max();
        release_due();
    });
}

void udp_hub::release_due() {
    const auto now = std::chrono::steady_clock::now();
    // Bounded work per wake-up, as in drain(): the rest goes on at once after other handlers.
    for (int n = 0; n < 1024 && !closed_ && !delayed_.empty() && delayed_.front().due <= now; ++n) {
        std::pop_heap(delayed_.begin(), delayed_.end(), std::greater<>{});
        const delayed p = std::move(delayed_.back());
        delayed_.pop_back();
        delayed_bytes_ -= p.bytes.size();
        if (p.inbound) {
            datagram d;
            d.to_ip = p.to_ip;
            d.to_port = p.to_port;
            d.from_ip = p.from_ip;
            d.from_port = p.from_port;
            d.bytes = p.bytes;
            on_datagram_(d);
        } else {
            send_now(p.from_ip, p.from_port, p.to_ip, p.to_port, p.bytes);
        }
    }
    flush();
    arm_wan_timer();
}

void udp_hub::send_now(std::uint32_t from_ip, std::uint16_t from_port, std::uint32_t to_ip, std::uint16_t to_port,
                       std::string_view bytes) {
    std::size_t socket = 0;
    while (socket < sockets_.size() && sockets_[socket].port != from_port) ++socket;
    if (bytes.size() > max_datagram || socket == sockets_.size()) {
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
    s.socket = socket;
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
    if (sockets_.size() == 1) {
        send_batch(sockets_[0].socket.native_handle(), tx_msg_.data(), tx_count_);
    } else {
        // One sendmmsg per socket, each with that socket's datagrams in their order.
        for (std::size_t socket = 0; socket < sockets_.size(); ++socket) {
            tx_batch_.clear();
            for (std::size_t i = 0; i < tx_count_; ++i)
                if (tx_[i].socket == socket) tx_batch_.push_back(tx_msg_[i]);
            send_batch(sockets_[socket].socket.native_handle(), tx_batch_.data(), tx_batch_.size());
        }
    }
    tx_count_ = 0;
}

void udp_hub::send_batch(int fd, mmsghdr* msgs, std::size_t count) {
    std::size_t done = 0;
    while (done < count && !closed_) {
        const int n = ::sendmmsg(fd, msgs + done, static_cast<unsigned>(count - done), MSG_DONTWAIT);
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
}

} // namespace dhtc::testnet
