// dhtc-wanlink: a user-space delay-and-loss link on a TUN device, for real programs (real
// libtorrent, the crawler under test) where no netem qdisc exists. Every IPv4 packet the
// kernel routes into the device is read, judged by the test network's WAN model (an RTT per
// pair of addresses, jitter, loss each way; tools/testnet/wan_model) and, when its time
// comes, sent again to its destination through a raw socket carrying a firewall mark, so the
// kernel delivers it as if it came from the other end of a wide-area path. The mark lets the
// routing send it on its way (to the local addresses, through lo) instead of back into the
// device: a socket bound to lo (libtorrent binds its sockets to their device) would not take
// a packet that arrived on the TUN device. Which packets cross the link is the routing's
// business: see tests/wan/wan_netns.sh, which routes 127.0.0.0/8 through it inside a
// private network namespace. Prints "READY <device>" on stdout once the device exists, and a JSON line of
// counts when it stops (SIGTERM, SIGINT, --duration, or stdin closed with
// --stop-on-stdin-eof). See README.md beside this file.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "testnet/wan_model.hpp"

namespace {

using namespace dhtc::testnet;
using wan::clock;

constexpr const char* usage = R"(usage: dhtc-wanlink --dev NAME [options]
A delay-and-loss link on a TUN device (needs CAP_NET_ADMIN): IPv4 packets routed into NAME go
on to their destination after half their pair's RTT plus jitter (sent with --mark), or never
(loss). Prints
"READY NAME" when the device exists (configure it then), and one JSON line of counts at the end.

  --dev NAME           the TUN device to create (at most 15 characters)
{wan options}
  --seed K             the RTTs and draws derive from K (default 1)
  --mark N             the firewall mark of the packets it sends on (default 119 = 0x77):
                       route packets with it past the link, or they come back to it
  --duration S         stop after S seconds (default 3600)
  --stop-on-stdin-eof  also stop when stdin reaches end of file
  --help               this text
Packets between one address and itself, and anything not IPv4, pass at once.
)";

struct settings {
    std::string dev;
    wan::options model = wan::options::libtorrent_like(1);
    unsigned duration = 3600;
    std::uint32_t mark = 0x77;
    bool stop_on_stdin_eof = false;
};

template <class T>
bool parse_uint(std::string_view s, T& out) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && p == s.data() + s.size();
}

std::optional<settings> parse_args(int argc, char** argv) {
    settings s;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(wan::usage_with_options(usage, "--").c_str(), stdout);
            std::exit(0);
        }
        if (a == "--stop-on-stdin-eof") {
            s.stop_on_stdin_eof = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "missing value for %s\n", argv[i]);
            return std::nullopt;
        }
        const std::string_view v = argv[++i];
        bool ok = true;
        if (a == "--dev") {
            s.dev = v;
            ok = !v.empty() && v.size() < IFNAMSIZ;
        } else if (a == "--seed") ok = parse_uint(v, s.model.seed);
        else if (a == "--duration") ok = parse_uint(v, s.duration) && s.duration > 0;
        else if (a == "--mark") ok = parse_uint(v, s.mark) && s.mark != 0;
        else if (const auto r = a.rfind("--", 0) == 0 ? wan::parse_option(a.substr(2), v, s.model)
                                                       : wan::parse_result::not_an_option;
                 r != wan::parse_result::not_an_option)
            ok = r == wan::parse_result::ok;
        else {
            std::fprintf(stderr, "unknown option %s (see --help)\n", argv[i - 1]);
            return std::nullopt;
        }
        if (!ok) {
            std::fprintf(stderr, "bad value for %s: %s\n", argv[i - 1], argv[i]);
            return std::nullopt;
        }
    }
    if (s.dev.empty()) {
        std::fprintf(stderr, "--dev is required (see --help)\n");
        return std::nullopt;
    }
    if (const auto problem = wan::finish_options(s.model); !problem.empty()) {
        std::fprintf(stderr, "%s\n", problem.c_str());
        return std::nullopt;
    }
    return s;
}

volatile std::sig_atomic_t stop_signal = 0;
extern "C" void on_signal(int sig) { stop_signal = sig; }

/// A packet waiting out its delay; a min-heap by (due, seq) keeps each direction's order.
struct held {
    clock::time_point due;
    std::uint64_t seq;
    std::uint32_t to; // its destination
    std::string bytes;
    bool operator>(const held& o) const noexcept { return due != o.due ? due > o.due : seq > o.seq; }
};

struct counts {
    std::uint64_t packets = 0, lost = 0, delivered = 0, passed = 0, overflow = 0, write_errors = 0;
};

constexpr std::size_t max_held_bytes = 64u << 20;

int open_tun(const std::string& name) {
    const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/// The socket the link sends judged packets on: raw, the IP header as read (IPPROTO_RAW
/// implies IP_HDRINCL), marked so the routing sends them on rather than back to the link.
int open_sender(std::uint32_t mark) {
    const int fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
    if (fd < 0) return -1;
    if (::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

std::uint32_t ipv4_at(const std::string& p, std::size_t at) {
    return std::uint32_t{static_cast<std::uint8_t>(p[at])} << 24 | std::uint32_t{static_cast<std::uint8_t>(p[at + 1])} << 16 |
           std::uint32_t{static_cast<std::uint8_t>(p[at + 2])} << 8 | std::uint32_t{static_cast<std::uint8_t>(p[at + 3])};
}

} // namespace

int main(int argc, char** argv) {
    const auto s = parse_args(argc, argv);
    if (!s) return 2;
    // Never outlive the script that set the namespace up.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::signal(SIGPIPE, SIG_IGN);

    const int fd = open_tun(s->dev);
    if (fd < 0) {
        std::fprintf(stderr, "dhtc-wanlink: cannot create TUN device %s: %s\n", s->dev.c_str(), std::strerror(errno));
        return 1;
    }
    const int sender = open_sender(s->mark);
    if (sender < 0) {
        std::fprintf(stderr, "dhtc-wanlink: cannot open a marked raw socket: %s\n", std::strerror(errno));
        return 1;
    }
    // On to the packet's destination (an IPv4 packet), or back into the device (anything else).
    const auto send_on = [&](const std::string& p, std::uint32_t to) {
        if (to == 0) return ::write(fd, p.data(), p.size()) >= 0;
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        dst.sin_addr.s_addr = htonl(to);
        return ::sendto(sender, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) >= 0;
    };
    std::printf("READY %s\n", s->dev.c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "dhtc-wanlink: %s: network model: %s\n", s->dev.c_str(), s->model.to_json().c_str());

    wan::model model(s->model);
    std::priority_queue<held, std::vector<held>, std::greater<>> line;
    std::size_t held_bytes = 0;
    std::uint64_t seq = 0;
    counts n;
    std::string buf(65536, '\0');
    const auto end = clock::now() + std::chrono::seconds(s->duration);
    bool stdin_open = s->stop_on_stdin_eof;

    while (stop_signal == 0 && clock::now() < end) {
        auto now = clock::now();
        // Out: every packet whose time has come, in order.
        while (!line.empty() && line.top().due <= now) {
            const auto& p = line.top();
            if (send_on(p.bytes, p.to)) ++n.delivered;
            else ++n.write_errors;
            held_bytes -= p.bytes.size();
            line.pop();
        }
        int timeout_ms = 100;
        if (!line.empty()) {
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(line.top().due - now).count();
            timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, 100));
        }
        std::array<pollfd, 2> fds{pollfd{fd, POLLIN, 0}, pollfd{STDIN_FILENO, POLLIN, 0}};
        const int r = ::poll(fds.data(), stdin_open ? 2 : 1, timeout_ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            std::perror("dhtc-wanlink: poll");
            break;
        }
        if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP))) {
            char c[256];
            if (::read(STDIN_FILENO, c, sizeof c) <= 0) break;
        }
        if (!(fds[0].revents & POLLIN)) continue;
        // In: everything the kernel routed to us, judged one by one.
        now = clock::now();
        for (int burst = 0; burst < 256; ++burst) {
            const ssize_t got = ::read(fd, buf.data(), buf.size());
            if (got <= 0) break;
            std::string packet(buf.data(), static_cast<std::size_t>(got));
            const bool ipv4 = got >= 20 && (static_cast<std::uint8_t>(packet[0]) >> 4) == 4;
            const std::uint32_t from = ipv4 ? ipv4_at(packet, 12) : 0, to = ipv4 ? ipv4_at(packet, 16) : 0;
            if (!ipv4 || from == to) {
                // Not a path between two hosts: on at once.
                if (send_on(packet, to)) ++n.passed;
                continue;
            }
            ++n.packets;
            const auto v = model.datagram(from, to, now);
            if (v.lost) {
                ++n.lost;
                continue;
            }
            if (held_bytes + packet.size() > max_held_bytes) {
                ++n.overflow;
                continue;
            }
            held_bytes += packet.size();
            line.push({now + v.delay, seq++, to, std::move(packet)});
        }
    }
    ::close(sender);
    ::close(fd);
    std::printf("{\"wanlink\":\"%s\",\"packets\":%llu,\"lost\":%llu,\"delivered\":%llu,\"passed\":%llu,\"overflow\":%llu,"
                "\"write_errors\":%llu,\"still_held\":%zu,\"lost_share\":%.5f,\"network_model\":%s}\n",
                s->dev.c_str(), static_cast<unsigned long long>(n.packets), static_cast<unsigned long long>(n.lost),
                static_cast<unsigned long long>(n.delivered), static_cast<unsigned long long>(n.passed),
                static_cast<unsigned long long>(n.overflow), static_cast<unsigned long long>(n.write_errors),
                line.size(), n.packets ? static_cast<double>(n.lost) / static_cast<double>(n.packets) : 0.0,
                s->model.to_json().c_str());
    return 0;
}
