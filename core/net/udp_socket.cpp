#include "net/udp_socket.hpp"

#include <asio/ip/v6_only.hpp>
#include <asio/post.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace dhtc::net {

namespace {

constexpr int socket_buffer_bytes = 4 << 20;

socklen_t to_sockaddr(const endpoint& ep, sockaddr_storage& ss) noexcept {
    std::memset(&ss, 0, sizeof ss);
    if (ep.address.is_v6()) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(ep.port);
        std::memcpy(&s6->sin6_addr, ep.address.raw().data(), 16);
        return sizeof(sockaddr_in6);
    }
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(ep.port);
    std::memcpy(&s4->sin_addr, ep.address.raw().data(), 4);
    return sizeof(sockaddr_in);
}

endpoint from_sockaddr(const sockaddr_storage& ss) noexcept {
    if (ss.ss_family == AF_INET6) {
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&ss);
        std::array<std::uint8_t, 16> b;
        std::memcpy(b.data(), &s6->sin6_addr, 16);
        return {ip_address::v6(b), ntohs(s6->sin6_port)};
    }
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(&ss);
    std::array<std::uint8_t, 4> b;
    std::memcpy(b.data(), &s4->sin_addr, 4);
    return {ip_address::v4(b), ntohs(s4->sin_port)};
}

} // namespace

struct udp_socket::impl {
    explicit impl(asio::io_context& io) : sock(io) {}

    asio::ip::udp::socket sock;

    // Receive side: one extra byte per buffer, so an over-long datagram is visible as such.
    std::array<std::array<char, max_datagram + 1>, batch> rx_buf;
    std::array<iovec, batch> rx_iov;
    std::array<sockaddr_storage, batch> rx_addr;
    std::array<mmsghdr, batch> rx_msg;
    std::array<datagram, batch> rx_out;

    // Send side: a ring of fixed slots.
    struct slot {
        std::array<char, max_datagram> data;
        std::size_t len;
        sockaddr_storage addr;
        socklen_t addr_len;
    };
    std::vector<slot> tx = std::vector<slot>(send_queue);
    std::size_t tx_head = 0; // oldest queued
    std::size_t tx_count = 0;
    std::array<iovec, batch> tx_iov;
    std::array<mmsghdr, batch> tx_msg;
};

asio::ip::udp::endpoint to_asio(const endpoint& ep) {
    if (ep.address.is_v6()) {
        asio::ip::address_v6::bytes_type b;
        std::memcpy(b.data(), ep.address.raw().data(), 16);
        return {asio::ip::address_v6(b), ep.port};
    }
    return {asio::ip::address_v4(ep.address.to_v4_uint()), ep.port};
}

endpoint from_asio(const asio::ip::udp::endpoint& ep) {
    const auto a = ep.address();
    if (a.is_v6()) return {ip_address::v6(a.to_v6().to_bytes()), ep.port()};
    return {ip_address::v4(a.to_v4().to_uint()), ep.port()};
}

std::unique_ptr<udp_socket> udp_socket::open(asio::io_context& io, const endpoint& bind, std::error_code& ec) {
    auto p = std::make_unique<impl>(io);
    const auto local = to_asio(bind);
    p->sock.open(local.protocol(), ec);
    if (ec) return nullptr;
    if (bind.address.is_v6()) {
        p->sock.set_option(asio::ip::v6_only(true), ec);
        if (ec) return nullptr;
    }
    // Bursts of queries arrive faster than one thread reads them at times; a larger kernel
    // buffer absorbs them instead of dropping. Best effort: the kernel caps it at rmem_max.
    std::error_code ignored;
    p->sock.set_option(asio::socket_base::receive_buffer_size(socket_buffer_bytes), ignored);
    p->sock.set_option(asio::socket_base::send_buffer_size(socket_buffer_bytes), ignored);
    p->sock.bind(local, ec);
    if (ec) return nullptr;
    p->sock.non_blocking(true, ec);
    if (ec) return nullptr;
    const auto bound = p->sock.local_endpoint(ec);
    if (ec) return nullptr;
    return std::unique_ptr<udp_socket>(new udp_socket(std::move(p), from_asio(bound)));
}

udp_socket::udp_socket(std::unique_ptr<impl> p, const endpoint& local) : impl_(std::move(p)), local_(local) {
    for (std::size_t i = 0; i < batch; ++i) {
        impl_->rx_iov[i] = {impl_->rx_buf[i].data(), impl_->rx_buf[i].size()};
    }
}

udp_socket::~udp_socket() { close(); }

void udp_socket::start(receive_handler handler) {
    handler_ = std::move(handler);
    // Datagrams may be waiting already: read before waiting (the next edge may never come).
    yield_then_receive();
}

void udp_socket::wait_readable() {
    if (closed_) return;
    counters_.rx_waits.fetch_add(1, std::memory_order_relaxed);
    impl_->sock.async_wait(asio::ip::udp::socket::wait_read, [this](const std::error_code& ec) {
        if (ec || closed_) return; // ec first: after close() *this may be gone
        receive();
    });
}

void udp_socket::yield_then_receive() {
    if (closed_) return;
    asio::post(impl_->sock.get_executor(), [this, alive = std::weak_ptr<char>(alive_)] {
        if (!alive.expired() && !closed_) receive();
    });
}

// The strongest echo blocks in recvmmsg(MSG_WAITFORONE) and answers with one sendmmsg per
// batch: two system calls per batch. The thread here also serves timers and maybe a second
// socket, so it cannot block in recvmmsg; instead it waits for readability only when the
// socket is known to be empty: recvmmsg(MSG_DONTWAIT) returns fewer than `batch` datagrams
// only when the socket ran dry (or failed), so a short batch ends the drain without the
// extra call that would see EAGAIN, and a full one is followed by another read, not by a
// poll. A wait costs one epoll_wait beyond the echo's calls, once per wake-up, not per
// batch. After max_rounds full batches other handlers get their turn (a post, no wait).
void udp_socket::receive() {
    constexpr int max_rounds = 8;
    auto& m = *impl_;
    const int fd = m.sock.native_handle();
    for (int round = 0; round < max_rounds; ++round) {
        if (closed_) return;
        for (std::size_t i = 0; i < batch; ++i) {
            std::memset(&m.rx_msg[i].msg_hdr, 0, sizeof(msghdr));
            m.rx_msg[i].msg_hdr.msg_name = &m.rx_addr[i];
            m.rx_msg[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
            m.rx_msg[i].msg_hdr.msg_iov = &m.rx_iov[i];
            m.rx_msg[i].msg_hdr.msg_iovlen = 1;
        }
        // MSG_TRUNC: msg_len is the datagram's real length even when it did not fit the
        // buffer, so the byte counter is honest about a flood of 64 KiB datagrams.
        const int n = ::recvmmsg(fd, m.rx_msg.data(), batch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
        counters_.rx_calls.fetch_add(1, std::memory_order_relaxed);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break; // empty
        if (n <= 0) continue; // EINTR, or a one-shot error (the datagrams behind it still wait)
        std::size_t kept = 0;
        std::uint64_t bytes = 0;
        for (int i = 0; i < n; ++i) {
            const std::size_t len = m.rx_msg[i].msg_len;
            bytes += len;
            const bool truncated = (m.rx_msg[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || len > max_datagram + 1;
            if (len > max_datagram || truncated) {
                counters_.rx_oversize.fetch_add(1, std::memory_order_relaxed);
                if (truncated) counters_.rx_truncated.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            m.rx_out[kept++] = {from_sockaddr(m.rx_addr[i]), std::string_view(m.rx_buf[i].data(), len)};
        }
        counters_.rx_packets.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        counters_.rx_bytes.fetch_add(bytes, std::memory_order_relaxed);
        if (kept && handler_) handler_(std::span<const datagram>(m.rx_out.data(), kept));
        flush();
        if (static_cast<std::size_t>(n) < batch) break; // the socket ran dry
        if (round + 1 == max_rounds) {
            counters_.rx_yields.fetch_add(1, std::memory_order_relaxed);
            yield_then_receive();
            return;
        }
    }
    wait_readable();
}

bool udp_socket::send(const endpoint& to, std::string_view payload) {
    auto& m = *impl_;
    if (closed_ || payload.size() > max_datagram || to.address.is_v6() != is_v6()) {
        counters_.tx_dropped.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    if (m.tx_count == m.tx.size()) flush();
    if (m.tx_count == m.tx.size()) {
        counters_.tx_dropped.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    auto& s = m.tx[(m.tx_head + m.tx_count) % m.tx.size()];
    std::memcpy(s.data.data(), payload.data(), payload.size());
    s.len = payload.size();
    s.addr_len = to_sockaddr(to, s.addr);
    ++m.tx_count;
    return true;
}

void udp_socket::flush() {
    auto& m = *impl_;
    const int fd = m.sock.native_handle();
    while (m.tx_count > 0 && !closed_) {
        // The ring may wrap: send the contiguous run starting at the head.
        const std::size_t run = std::min({m.tx_count, batch, m.tx.size() - m.tx_head});
        for (std::size_t i = 0; i < run; ++i) {
            auto& s = m.tx[m.tx_head + i];
            m.tx_iov[i] = {s.data.data(), s.len};
            std::memset(&m.tx_msg[i].msg_hdr, 0, sizeof(msghdr));
            m.tx_msg[i].msg_hdr.msg_name = &s.addr;
            m.tx_msg[i].msg_hdr.msg_namelen = s.addr_len;
            m.tx_msg[i].msg_hdr.msg_iov = &m.tx_iov[i];
            m.tx_msg[i].msg_hdr.msg_iovlen = 1;
        }
        const int n = ::sendmmsg(fd, m.tx_msg.data(), static_cast<unsigned>(run), MSG_DONTWAIT);
        counters_.tx_calls.fetch_add(1, std::memory_order_relaxed);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
                arm_send_retry();
                return;
            }
            // The first datagram was refused (e.g. unreachable destination): drop it alone.
            counters_.tx_errors.fetch_add(1, std::memory_order_relaxed);
            m.tx_head = (m.tx_head + 1) % m.tx.size();
            --m.tx_count;
            continue;
        }
        std::uint64_t bytes = 0;
        for (int i = 0; i < n; ++i) bytes += m.tx[m.tx_head + static_cast<std::size_t>(i)].len;
        counters_.tx_packets.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        counters_.tx_bytes.fetch_add(bytes, std::memory_order_relaxed);
        m.tx_head = (m.tx_head + static_cast<std::size_t>(n)) % m.tx.size();
        m.tx_count -= static_cast<std::size_t>(n);
    }
}

void udp_socket::arm_send_retry() {
    if (send_retry_armed_ || closed_) return;
    send_retry_armed_ = true;
    impl_->sock.async_wait(asio::ip::udp::socket::wait_write, [this](const std::error_code& ec) {
        if (ec) return; // cancelled by close(): the socket may already be gone
        send_retry_armed_ = false;
        if (!closed_) flush();
    });
}

void udp_socket::close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    impl_->sock.cancel(ignored);
    impl_->sock.close(ignored);
}

} // namespace dhtc::net
