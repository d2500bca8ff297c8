// The node under the KRPC responder benchmark: our DHT engine on one UDP port with every
// response budget raised out of the way and no bootstrap. It runs for --seconds (or until
// it has answered --queries), then prints one JSON line: replies sent and the CPU time the
// whole process used, so replies per CPU-second can be compared with other nodes.
//   dhtc-bench-node [--port 0] [--seconds 20] [--queries N] [--query-loopback 1]
// --query-loopback 1 lets the node query the loopback addresses that query it (the address
// policy refuses them otherwise): with dhtc-krpc-load --answer-queries 1 its routing table
// fills with the load generator's sources, so find_node and get_peers answers carry nodes.
// --echo 1 runs the reference instead: a bare batched UDP echo (recvmmsg/sendmmsg, 32 per
// call) that sends every datagram back unchanged, the kernel's cost per packet with no
// user-space work, measured the same way (bench/krpc_responder.sh with DHTC_COMPARE=1 runs
// both in one sitting and prints the ratio).
// The first line printed is {"listening":"127.0.0.1:PORT"} for the load generator.
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

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

// The reference responder: every datagram back to its sender, 32 per system call.
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
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    std::printf("{\"listening\":\"127.0.0.1:%u\"}\n", ntohs(a.sin_port));
    std::fflush(stdout);
    constexpr int batch = 32;
    static char bufs[batch][1500];
    sockaddr_in from[batch];
    iovec iov[batch];
    mmsghdr msgs[batch];
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t replies = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds)) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        for (int i = 0; i < batch; ++i) {
            iov[i] = {bufs[i], sizeof bufs[i]};
            msgs[i].msg_hdr = {};
            msgs[i].msg_hdr.msg_name = &from[i];
            msgs[i].msg_hdr.msg_namelen = sizeof from[i];
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int n = ::recvmmsg(fd, msgs, batch, MSG_DONTWAIT, nullptr);
        if (n <= 0) continue;
        for (int i = 0; i < n; ++i) iov[i].iov_len = msgs[i].msg_len;
        const int sent = ::sendmmsg(fd, msgs, static_cast<unsigned>(n), MSG_DONTWAIT);
        if (sent > 0) replies += static_cast<std::uint64_t>(sent);
    }
    const double cpu = cpu_seconds() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"bench\":\"udp_echo_node\",\"replies\":%llu,\"cpu_seconds\":%.3f,\"wall_seconds\":%.3f,"
                "\"replies_per_cpu_second\":%.0f}\n",
                static_cast<unsigned long long>(replies), cpu, wall, cpu > 0 ? static_cast<double>(replies) / cpu : 0.0);
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
    const auto t0 = std::chrono::steady_clock::now();
    e->start();
    const auto& nc = e->service().node_counters();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds)) {
        if (queries && nc.replies_sent.load() >= queries) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    e->stop();
    const double cpu = cpu_seconds() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto replies = nc.replies_sent.load();
    const auto* udp = e->udp_counters(false);
    std::printf("{\"bench\":\"krpc_responder_node\",\"replies\":%llu,\"queries\":%llu,\"cpu_seconds\":%.3f,"
                "\"wall_seconds\":%.3f,\"replies_per_cpu_second\":%.0f,\"rx_packets\":%llu,\"tx_dropped\":%llu,"
                "\"routing_table_nodes\":%llu}\n",
                static_cast<unsigned long long>(replies), static_cast<unsigned long long>(nc.rx_queries.load()), cpu,
                wall, cpu > 0 ? static_cast<double>(replies) / cpu : 0.0,
                static_cast<unsigned long long>(udp->rx_packets.load()),
                static_cast<unsigned long long>(udp->tx_dropped.load()),
                static_cast<unsigned long long>(e->service().crawl_stats().responsive_size.load()));
    return 0;
}
