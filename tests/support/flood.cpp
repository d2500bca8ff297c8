#include "support/flood.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bencode/decoder.hpp"
#include "krpc/compact.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

namespace dhtc::test {

namespace {

using clock_type = std::chrono::steady_clock;

sockaddr_in to_sockaddr(const endpoint& e) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr.s_addr, e.address.raw().data(), 4);
    a.sin_port = htons(e.port);
    return a;
}

int udp_socket(const endpoint& bind_to, bool pktinfo) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    const int one = 1, big = 8 << 20;
    if (pktinfo) ::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    const sockaddr_in a = to_sockaddr(bind_to);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        ::close(fd);
        throw std::runtime_error(std::string("bind: ") + std::strerror(e));
    }
    return fd;
}

double thread_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

id20 random_id(std::mt19937_64& rng) {
    id20 id;
    for (auto& b : id.bytes) b = static_cast<std::uint8_t>(rng());
    return id;
}

// One datagram of the mix.
std::string flood_payload(const flood_options& o, std::mt19937_64& rng) {
    const unsigned roll = static_cast<unsigned>(rng() % 100);
    std::string out;
    unsigned edge = o.garbage_percent;
    if (roll < edge) {
        out.resize(20 + rng() % 200);
        for (auto& c : out) c = static_cast<char>(rng());
        return out;
    }
    if (roll < (edge += o.huge_length_percent)) return "d1:ad2:id99999999999:" + std::string(40, 'x');
    if (roll < (edge += o.deep_nesting_percent)) return std::string(1200, 'l');
    if (roll < (edge += o.jumbo_percent)) return "d1:ad2:id20:" + std::string(20, 'j') + "e1:q4:ping1:t2:aa1:y1:q" +
                                                 std::string(65'000, 'e');
    const char t[2] = {static_cast<char>(rng()), static_cast<char>(rng())};
    const krpc::query_header h{std::string_view(t, 2), random_id(rng), {}};
    switch (rng() % 3) {
    case 0: krpc::encode_ping(out, h); break;
    case 1: krpc::encode_find_node(out, h, random_id(rng)); break;
    default: krpc::encode_get_peers(out, h, random_id(rng)); break;
    }
    return out;
}

// Sends `bytes` to `to` from `from_ip` (network byte order).
bool send_from(int fd, std::uint32_t from_ip, const sockaddr_in& to, std::string_view bytes) {
    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo))] = {};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_in*>(&to);
    m.msg_namelen = sizeof to;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    auto* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
    in_pktinfo info{};
    info.ipi_spec_dst.s_addr = from_ip;
    std::memcpy(CMSG_DATA(c), &info, sizeof info);
    return ::sendmsg(fd, &m, 0) >= 0;
}

// Sends `bytes` to `to` from `ip`:`port` (host order) through a socket of its own, closed at
// once: the next datagram comes from another port.
bool send_from_port(std::uint32_t ip, std::uint16_t port, const sockaddr_in& to, std::string_view bytes) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in from = to_sockaddr(endpoint{ip_address::v4(ip), port});
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) == 0 &&
                    ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) >= 0;
    ::close(fd);
    return ok;
}

} // namespace

udp_flooder::udp_flooder(flood_options o) : options_(o) {
    fd_ = udp_socket(endpoint{ip_address::v4(0u), 0}, true);
}

udp_flooder::~udp_flooder() {
    stop();
    join();
    if (fd_ >= 0) ::close(fd_);
}

void udp_flooder::start() { thread_ = std::thread([this] { run(); }); }

void udp_flooder::join() {
    if (thread_.joinable()) thread_.join();
}

void udp_flooder::run() {
    std::mt19937_64 rng(options_.seed);
    const sockaddr_in to = to_sockaddr(options_.target);
    std::vector<char> rx(70'000);
    const auto drain = [&] {
        for (;;) {
            const ssize_t n = ::recv(fd_, rx.data(), rx.size(), MSG_DONTWAIT | MSG_TRUNC);
            if (n < 0) return;
            counters_.received.fetch_add(1, std::memory_order_relaxed);
            counters_.received_bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        }
    };
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < options_.datagrams && !stop_; ++i) {
        // Paced: datagram i leaves at i / rate seconds.
        const auto due = t0 + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double>(static_cast<double>(i) / options_.rate_per_sec));
        while (clock_type::now() < due && !stop_) {
            drain();
            pollfd p{fd_, POLLIN, 0};
            ::poll(&p, 1, 1);
        }
        const std::string payload = flood_payload(options_, rng);
        const std::uint32_t source = options_.first_source + static_cast<std::uint32_t>(i % options_.sources);
        const bool sent = options_.source_ports > 0
                              ? send_from_port(options_.first_source,
                                               static_cast<std::uint16_t>(1024 + i % options_.source_ports), to, payload)
                              : send_from(fd_, htonl(source), to, payload);
        if (!sent) {
            counters_.send_errors.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        counters_.sent.fetch_add(1, std::memory_order_relaxed);
        counters_.sent_bytes.fetch_add(payload.size(), std::memory_order_relaxed);
        if (i % 64 == 0) drain();
    }
    // The answers still in flight.
    const auto end = clock_type::now() + std::chrono::milliseconds(300);
    while (clock_type::now() < end) {
        drain();
        pollfd p{fd_, POLLIN, 0};
        ::poll(&p, 1, 10);
    }
    cpu_seconds_ = thread_cpu_seconds() - cpu0;
}

friend_node::friend_node(const ip_address& address, std::uint64_t seed) : seed_(seed) {
    // A wildcard socket: it also answers for the nodes it names (127.200/16 on its port).
    fd_ = udp_socket(endpoint{ip_address::v4(0u), 0}, true);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    local_ = endpoint{address, ntohs(a.sin_port)};
    std::mt19937_64 rng(seed);
    id_ = random_id(rng);
}

friend_node::~friend_node() {
    stop();
    if (fd_ >= 0) ::close(fd_);
}

void friend_node::start(const endpoint& crawler) {
    crawler_ = crawler;
    thread_ = std::thread([this] { run(); });
}

void friend_node::stop() noexcept {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

void friend_node::run() {
    std::mt19937_64 rng(seed_ ^ 0x66);
    const sockaddr_in crawler = to_sockaddr(crawler_);
    std::uint32_t own_ip;
    std::memcpy(&own_ip, local_.address.raw().data(), 4);
    std::vector<char> rx(2048);
    bencode::document doc;
    krpc::message msg;
    auto next_ping = clock_type::now();
    std::uint16_t ping_no = 0;
    std::string out;
    while (!stop_) {
        if (pinging_ && clock_type::now() >= next_ping) {
            next_ping += std::chrono::seconds(1);
            const char t[4] = {'f', 'r', static_cast<char>(ping_no >> 8), static_cast<char>(ping_no)};
            ++ping_no;
            out.clear();
            krpc::encode_ping(out, krpc::query_header{std::string_view(t, 4), id_, {}});
            send_from(fd_, own_ip, crawler, out);
            pings_sent_.fetch_add(1);
        }
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10) <= 0) continue;
        sockaddr_in from{};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo))] = {};
        iovec iov{rx.data(), rx.size()};
        msghdr m{};
        m.msg_name = &from;
        m.msg_namelen = sizeof from;
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof control;
        const ssize_t n = ::recvmsg(fd_, &m, MSG_DONTWAIT);
        if (n <= 0) continue;
        std::uint32_t to_ip = own_ip; // the address the datagram was sent to: we answer from it
        for (auto* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                in_pktinfo info;
                std::memcpy(&info, CMSG_DATA(c), sizeof info);
                to_ip = info.ipi_addr.s_addr;
            }
        const std::string_view bytes(rx.data(), static_cast<std::size_t>(n));
        if (!bencode::decode(bytes, doc, krpc::packet_limits)) continue;
        msg = krpc::message{};
        if (!krpc::parse(doc.root(), msg)) continue;
        if (msg.type == krpc::message_type::response) {
            if (msg.transaction.size() == 4 && msg.transaction.substr(0, 2) == "fr") pings_answered_.fetch_add(1);
            continue;
        }
        if (msg.type != krpc::message_type::query) continue;
        queries_.fetch_add(1);
        endpoint requester{ip_address::v4(ntohl(from.sin_addr.s_addr)), ntohs(from.sin_port)};
        id20 answering_id = id_;
        if (to_ip != own_ip) std::memcpy(answering_id.bytes.data(), &to_ip, 4); // a stable id per named node
        const krpc::reply_header h{msg.transaction, answering_id, requester, {}};
        out.clear();
        if (msg.query.kind == krpc::method::ping) {
            krpc::encode_ping_response(out, h);
        } else {
            // Eight more nodes on 127.200/16, which this socket answers for too: the crawler's
            // pool fills from answers, as on the real DHT.
            std::string nodes;
            for (int k = 0; k < 8; ++k) {
                const auto r = static_cast<std::uint32_t>(rng());
                krpc::append_compact_node(nodes, random_id(rng),
                                          endpoint{ip_address::v4(0x7fc80000u | (r & 0xffffu)), local_.port});
            }
            krpc::encode_find_node_response(out, h, nodes, {});
        }
        send_from(fd_, to_ip, from, out);
    }
}

} // namespace dhtc::test
