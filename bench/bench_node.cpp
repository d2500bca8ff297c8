// The node under the KRPC responder benchmark: our DHT engine on one UDP port with every
// response budget raised out of the way and no bootstrap. It runs for --seconds (or until
// it has answered --queries), then prints one JSON line: replies sent, the CPU time the
// whole process used, and the system calls and wake-ups behind them, so replies per
// CPU-second can be compared with other nodes.
//   dhtc-bench-node [--port 0] [--seconds 20] [--queries N] [--query-loopback 1] [--echo 1]
// --query-loopback 1 lets the node query the loopback addresses that query it (the address
// policy refuses them otherwise): with dhtc-krpc-load --answer-queries 1 its routing table
// fills with the load generator's sources, so find_node and get_peers answers carry nodes.
// --echo 1 runs the reference instead: the strongest bare UDP echo we know, which sends every
// datagram back unchanged (the kernel's cost per packet with no user-space work), measured
// the same way (bench/krpc_responder.sh with DHTC_COMPARE=1 alternates both in one sitting
// and prints the ratios).
// Wake-ups are the process's context switches (getrusage): voluntary ones are the blocking
// waits that returned, involuntary ones preemptions. System calls are counted where they
// are made: the echo's recvmmsg and sendmmsg; our socket's recvmmsg, sendmmsg and waits for
// readability (one epoll_wait each) and yields (one epoll_wait(0) each). Asio's timers add
// about 100 epoll_wait and timerfd_settime calls a second (the 10 ms actor turn): not counted.
// The first line printed is {"listening":"127.0.0.1:PORT"} for the load generator.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "engine/dht_engine.hpp"
#include "bench_util.hpp"

using namespace dhtc;

namespace {

using bench::cpu_seconds;

struct wakeups {
    long voluntary = 0;
    long involuntary = 0;
};
wakeups context_switches() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return {u.ru_nvcsw, u.ru_nivcsw};
}

double per(std::uint64_t n, std::uint64_t replies) {
    return replies ? static_cast<double>(n) / static_cast<double>(replies) : 0.0;
}

// The figures every responder prints, in the same shape.
void print_result(const char* name, std::uint64_t replies, std::uint64_t packets, double cpu, double wall,
                  std::uint64_t syscalls, const wakeups& w, const std::string& extra) {
    std::printf("{\"bench\":\"%s\",\"replies\":%llu,\"rx_packets\":%llu,\"cpu_seconds\":%.3f,\"wall_seconds\":%.3f,"
                "\"replies_per_cpu_second\":%.0f,\"syscalls_per_reply\":%.4f,\"voluntary_switches_per_reply\":%.4f,"
                "\"involuntary_switches_per_reply\":%.4f,\"replies_per_wakeup\":%.2f%s}\n",
                name, static_cast<unsigned long long>(replies), static_cast<unsigned long long>(packets), cpu, wall,
                cpu > 0 ? static_cast<double>(replies) / cpu : 0.0, per(syscalls, replies),
                per(static_cast<std::uint64_t>(w.voluntary), replies),
                per(static_cast<std::uint64_t>(w.involuntary), replies),
                w.voluntary > 0 ? static_cast<double>(replies) / static_cast<double>(w.voluntary) : 0.0, extra.c_str());
}

// The reference responder, the strongest echo we know: one loop that blocks in
// recvmmsg(MSG_WAITFORONE) (it wakes for the first datagram, then takes whatever else is
// queued, up to 32, without waiting again) and sends the batch back with one sendmmsg. Two
// system calls per batch: no poll before it, no clock read in the loop. A stopper thread ends
// it by a flag; the 100 ms receive timeout lets an idle loop see the flag.
int run_echo(int port, double seconds) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        std::perror("echo bind");
        return 1;
    }
    const int buffer = 4 << 20; // what our socket asks for too
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    const timeval idle{0, 100'000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    std::printf("{\"listening\":\"127.0.0.1:%u\"}\n", ntohs(a.sin_port));
    std::fflush(stdout);
    constexpr int batch = 32;
    static char bufs[batch][1500];
    sockaddr_in from[batch];
    iovec iov[batch];
    mmsghdr msgs[batch];
    for (int i = 0; i < batch; ++i) {
        msgs[i].msg_hdr = {};
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    std::atomic<bool> stop{false};
    const double cpu0 = cpu_seconds();
    const wakeups w0 = context_switches();
    const auto t0 = std::chrono::steady_clock::now();
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        stop.store(true, std::memory_order_relaxed);
    });
    std::uint64_t replies = 0, packets = 0, calls = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < batch; ++i) {
            iov[i] = {bufs[i], sizeof bufs[i]};
            msgs[i].msg_hdr.msg_namelen = sizeof from[i];
        }
        const int n = ::recvmmsg(fd, msgs, batch, MSG_WAITFORONE, nullptr);
        ++calls;
        if (n <= 0) continue; // the idle timeout (or EINTR): look at the flag
        packets += static_cast<std::uint64_t>(n);
        for (int i = 0; i < n; ++i) iov[i].iov_len = msgs[i].msg_len;
        const int sent = ::sendmmsg(fd, msgs, static_cast<unsigned>(n), MSG_DONTWAIT);
        ++calls;
        if (sent > 0) replies += static_cast<std::uint64_t>(sent);
    }
    const double cpu = cpu_seconds() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const wakeups w1 = context_switches();
    stopper.join();
    print_result("udp_echo_node", replies, packets, cpu, wall, calls,
                 {w1.voluntary - w0.voluntary, w1.involuntary - w0.involuntary}, "");
    ::close(fd);
    return 0;
}
} // namespace

int main(int argc, char** argv) {
    int port = 0;
    double seconds = 20;
    std::uint64_t queries = 0;
    bool query_loopback = false;
    bool echo = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--port")) port = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--queries")) queries = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--query-loopback")) query_loopback = std::atoi(argv[i + 1]) != 0;
        else if (!std::strcmp(argv[i], "--echo")) echo = std::atoi(argv[i + 1]) != 0;
    }
    if (echo) return run_echo(port, seconds);
    engine::dht_engine_options o;
    o.port = static_cast<std::uint16_t>(port);
    o.bind_v4 = "127.0.0.1";
    o.crawl.bootstrap.sources.clear();
    o.crawl.allow_private_addresses = query_loopback;
    auto& rl = o.crawl.rate_limit;
    rl.max_response_rate_per_sec = 1e9;
    rl.max_response_bytes_per_sec = 1e12;
    rl.max_response_rate_per_source = 1e9;
    rl.max_packets_per_destination_per_sec = 1e9; // the budgets still run; they just never refuse
    rl.destination_burst = 1e9;
    rl.max_packets_per_ip_per_sec = 1e9;
    rl.ip_burst = 1e9;
    crawl::null_sink sink;
    std::string error;
    auto e = engine::dht_engine::create(o, sink, error);
    if (!e) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 1;
    }
    std::printf("{\"listening\":\"%s\"}\n", e->local_endpoints()[0].to_string().c_str());
    std::fflush(stdout);
    const double cpu0 = cpu_seconds();
    const wakeups w0 = context_switches();
    const auto t0 = std::chrono::steady_clock::now();
    e->start();
    const auto& nc = e->service().node_counters();
    if (!queries) {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); // one wake-up, not one per poll
    } else {
        while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds)) {
            if (nc.replies_sent.load() >= queries) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    e->stop();
    const double cpu = cpu_seconds() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const wakeups w1 = context_switches();
    const auto replies = nc.replies_sent.load();
    const auto& udp = *e->udp_counters(false);
    const auto load = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
    const std::uint64_t syscalls = load(udp.rx_calls) + load(udp.tx_calls) + load(udp.rx_waits) + load(udp.rx_yields);
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  ",\"queries\":%llu,\"tx_dropped\":%llu,\"routing_table_nodes\":%llu,\"recvmmsg_calls\":%llu,"
                  "\"sendmmsg_calls\":%llu,\"readiness_waits\":%llu,\"yields\":%llu",
                  static_cast<unsigned long long>(nc.rx_queries.load()), static_cast<unsigned long long>(load(udp.tx_dropped)),
                  static_cast<unsigned long long>(e->service().crawl_stats().responsive_size.load()),
                  static_cast<unsigned long long>(load(udp.rx_calls)), static_cast<unsigned long long>(load(udp.tx_calls)),
                  static_cast<unsigned long long>(load(udp.rx_waits)), static_cast<unsigned long long>(load(udp.rx_yields)));
    print_result("krpc_responder_node", replies, load(udp.rx_packets), cpu, wall, syscalls,
                 {w1.voluntary - w0.voluntary, w1.involuntary - w0.involuntary}, extra);
    return 0;
}
