// What a spent destination budget costs (issue 28): a crawler whose only destinations sit
// behind one IP, all of them over its per-IP and per-node budgets most of the time, against
// the same crawler idle (its bootstrap never answers), alternating in one sitting.
//
// The destinations: `--ports` UDP sockets on 127.0.5.1 (a NAT or seedbox host), every one a
// node that answers ping, find_node, get_peers and sample_infohashes with 8 random others of
// them, so the crawler's pool stays full of nodes on that one IP. The crawler runs with its
// default budgets.
//
// Prints one JSON line per phase (CPU seconds per wall second of the crawler, i.e. the process
// minus the fake host's thread; queries sent; parkings), then a summary with the busy crawler's
// CPU above the idle one's, in percent of one core (target: under 2).
// Never run by the tests; see docs/performance.md.
//   dhtc-over-budget [--ports N] [--seconds S] [--rounds R]
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/crawler.hpp"
#include "bench_util.hpp"
#include "bencode/decoder.hpp"
#include "krpc/compact.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "support/loopback_crawler.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::uint64_t load(const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// Many DHT nodes behind one address, one socket (port) each, served by one thread.
class shared_host {
public:
    shared_host(const char* ip, std::size_t ports) : address_(*ip_address::parse(ip)) {
        for (std::size_t i = 0; i < ports; ++i) {
            const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            std::memcpy(&a.sin_addr.s_addr, address_.raw().data(), 4);
            if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
                if (fd >= 0) ::close(fd);
                continue;
            }
            socklen_t len = sizeof a;
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
            fds_.push_back({fd, POLLIN, 0});
            nodes_.push_back({bench::id_of(i), endpoint{address_, ntohs(a.sin_port)}});
        }
    }
    ~shared_host() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        for (const auto& p : fds_) ::close(p.fd);
    }
    endpoint first() const { return nodes_.at(0).ep; }
    void start() { thread_ = std::thread([this] { run(); }); }
    /// CPU seconds its thread used so far (updated once per poll, at most 50 ms stale).
    double cpu_seconds() const noexcept { return cpu_.load(); }
    std::uint64_t queries() const noexcept { return queries_.load(); }

private:
    void run() {
        std::mt19937_64 rng(5);
        bencode::document doc;
        krpc::message msg;
        std::string nodes, out;
        char buf[1500];
        const double cpu0 = bench::thread_cpu_seconds();
        while (!stop_) {
            cpu_ = bench::thread_cpu_seconds() - cpu0; // read across the measured window
            if (::poll(fds_.data(), fds_.size(), 50) <= 0) continue;
            for (std::size_t i = 0; i < fds_.size(); ++i) {
                if (!(fds_[i].revents & POLLIN)) continue;
                sockaddr_in from{};
                socklen_t len = sizeof from;
                const ssize_t n =
                    ::recvfrom(fds_[i].fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
                if (n <= 0 || !bencode::decode(std::string_view(buf, static_cast<std::size_t>(n)), doc, krpc::packet_limits))
                    continue;
                msg = krpc::message{};
                if (!krpc::parse(doc.root(), msg) || msg.type != krpc::message_type::query) continue;
                ++queries_;
                nodes.clear();
                for (int k = 0; k < 8; ++k) {
                    const auto& e = nodes_[rng() % nodes_.size()];
                    krpc::append_compact_node(nodes, e.id, e.ep);
                }
                out.clear();
                const krpc::reply_header h{msg.transaction, nodes_[i].id, std::nullopt, {}};
                if (msg.query.kind == krpc::method::ping) krpc::encode_ping_response(out, h);
                else if (msg.query.kind == krpc::method::get_peers)
                    krpc::encode_get_peers_response(out, h, "tk", {}, nodes, {});
                else krpc::encode_find_node_response(out, h, nodes, {});
                ::sendto(fds_[i].fd, out.data(), out.size(), 0, reinterpret_cast<const sockaddr*>(&from), len);
            }
        }
    }

    ip_address address_;
    std::vector<pollfd> fds_;
    std::vector<krpc::node_entry> nodes_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<double> cpu_{0};
    std::atomic<std::uint64_t> queries_{0};
};

struct phase {
    double cpu_per_second = 0;
    std::uint64_t queries = 0;
    std::uint64_t deferred = 0;
    std::uint64_t parked = 0;
};

// One crawler for `seconds`: with a host behind one IP to crawl, or idle. Its first seconds
// (start, bootstrap) are left out of the measure.
phase run_phase(bool busy, std::size_t ports, double seconds) {
    std::unique_ptr<shared_host> host;
    std::optional<endpoint> bootstrap = endpoint{*ip_address::parse("127.0.6.1"), 9}; // nobody answers
    if (busy) {
        host = std::make_unique<shared_host>("127.0.5.1", ports);
        bootstrap = host->first();
        host->start();
    }
    auto o = test::loopback_crawler(bootstrap);
    std::string error;
    auto crawler = api::crawler::create(o, api::event_handlers{}, error);
    if (!crawler) throw std::runtime_error(error);
    crawler->start();
    std::this_thread::sleep_for(3s);
    const auto& cs = crawler->dht().service().crawl_stats();
    const auto host_cpu = [&] { return host ? host->cpu_seconds() : 0.0; };
    const double cpu0 = bench::cpu_seconds() - host_cpu();
    const std::uint64_t sent0 = load(cs.queries_find_node) + load(cs.queries_ping) + load(cs.queries_sample);
    const std::uint64_t deferred0 = load(cs.deferred_destination);
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    phase p;
    const double cpu = bench::cpu_seconds() - host_cpu() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.queries = load(cs.queries_find_node) + load(cs.queries_ping) + load(cs.queries_sample) - sent0;
    p.deferred = load(cs.deferred_destination) - deferred0;
    p.parked = load(cs.parked_size);
    crawler->close(std::nullopt);
    p.cpu_per_second = cpu / wall;
    return p;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t ports = 512;
    double seconds = 30;
    int rounds = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--ports") ports = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--seconds") seconds = std::strtod(argv[i + 1], nullptr);
        else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: dhtc-over-budget [--ports N] [--seconds S] [--rounds R]\n");
            return 2;
        }
    }
    double idle_sum = 0, busy_sum = 0;
    for (int r = 0; r < rounds; ++r)
        for (const bool busy : {false, true}) {
            const phase p = run_phase(busy, ports, seconds);
            (busy ? busy_sum : idle_sum) += p.cpu_per_second;
            nlohmann::json j;
            j["bench"] = "over_budget";
            j["phase"] = busy ? "over_budget" : "idle";
            j["round"] = r;
            j["seconds"] = seconds;
            j["cpu_per_wall_second"] = p.cpu_per_second;
            j["queries_sent"] = p.queries;
            j["queries_per_second"] = static_cast<double>(p.queries) / seconds;
            j["deferred_destination"] = p.deferred;
            j["parked_at_end"] = p.parked;
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
        }
    nlohmann::json s;
    s["bench"] = "over_budget";
    s["phase"] = "summary";
    s["ports_on_one_ip"] = ports;
    s["idle_cpu_percent"] = 100 * idle_sum / rounds;
    s["over_budget_cpu_percent"] = 100 * busy_sum / rounds;
    s["above_idle_percent_of_a_core"] = 100 * (busy_sum - idle_sum) / rounds;
    s["target_percent"] = 2;
    std::printf("%s\n", s.dump().c_str());
    return 0;
}
