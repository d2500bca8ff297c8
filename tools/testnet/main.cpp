// dhtcrawler-testnet: a loopback BitTorrent DHT with seeders, for crawling without the
// internet. Prints "BOOTSTRAP ip:port" on stdout when ready; logs go to stderr.
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/signal_set.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <array>
#include <functional>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <sys/resource.h>

#include "testnet/address_plan.hpp"
#include "testnet/catalog.hpp"
#include "testnet/ip_groups.hpp"
#include "testnet/network.hpp"
#include "testnet/seeder.hpp"
#include "testnet/truth.hpp"

using namespace dhtc::testnet;

namespace {

struct options {
    std::size_t nodes = 1000;
    std::size_t seeders = 100;
    std::size_t torrents = 1000;
    std::string range = "127.64.0.0/10";
    std::uint64_t seed = 1;
    std::uint64_t duration = 600;
    std::string truth;
    double misbehave = 0.0;
    std::array<double, policy_count> policy_mix{1, 0, 0, 0, 0, 0};
    std::uint16_t port = 0;
    std::uint32_t reannounce = 900;
    double churn = 0.1;
    double replace_per_hour = 0;
    std::uint32_t refresh = 300;
    std::int64_t sample_interval = 60;
    std::size_t max_lookups = 256;
    double block_rate = 0;
    unsigned block_timeout = 300;
    double nat = 0;
    ip_group_options shared_ip;
    bool restrict_ips = false;
    wan::options wan;
    bool quiet = false;
    bool stop_on_stdin_eof = false;
};

constexpr const char* usage = R"(usage: dhtcrawler-testnet [options]
A loopback BitTorrent DHT: N nodes and S seeders holding M generated torrents, each host on
its own 127.x.y.z address. Prints "BOOTSTRAP ip:port" on stdout when ready; logs to stderr.
Stops after --duration seconds, or on SIGINT/SIGTERM, writing the truth file.

  --nodes N            DHT nodes (default 1000)
  --seeders S          seeders (default 100)
  --torrents M         torrents, each on 1..3 seeders (default 1000)
  --range CIDR         loopback range for all hosts, /8../24 inside 127/8 (default 127.64.0.0/10)
  --seed K             everything generated derives from K (default 1)
  --duration SECONDS   run time (default 600)
  --truth FILE         JSON list of the torrents (parser JSON form + seeders + announce_keys),
                       rewritten at the end with first_served_at (default: none)
  --misbehave F        share of seeders that misbehave: slow, stall, reject, wrong bytes,
                       refuse connections (default 0)
  --policy-mix LIST    relative shares of the seeders' connection policies, e.g.
                       plaintext=1,pe_rc4=1,pe_plain=1,utp=1,utp_pe=1 (exact shares, shuffled
                       by --seed): plaintext (plaintext or MSE), pe_rc4 (MSE with RC4
                       required), pe_plain (MSE required, plaintext payload allowed), each
                       over TCP and uTP (on the DHT port); utp (uTP only), utp_pe (uTP only,
                       MSE with RC4 required); tcp_only (TCP only, plaintext or MSE).
                       Independent of --misbehave (default plaintext=1)
  --port P             UDP port of every node and TCP port of every seeder (default: any free)
  --reannounce SECONDS seeders re-announce every SECONDS +-20% (default 900)
  --churn F            average share of nodes away at any time (default 0.1; 0 = none)
  --replace-per-hour F share of nodes replaced each hour by a new node (new id, empty
                       store) at the same address: the real DHT's hourly churn (default 0)
  --refresh SECONDS    mean interval of each node's refresh lookup (default 300)
  --sample-interval S  BEP-51 interval the nodes ask for (default 60)
  --max-lookups N      lookups in flight at once (default 256)
  --block-rate R       libtorrent's per-IP blocker in every node: an IP sending a node more
                       than R packets/s averaged over 10 s is ignored by it (libtorrent: 5;
                       default 0 = off); ignored packets are counted (blocked=)
  --block-timeout S    how long a blocked IP is ignored (libtorrent: 300; default 300)
  --nat F              share of nodes behind NAT: they query, but queries to them never
                       arrive, so they never answer and are never in tables (default 0)
  --shared-ip F        share of nodes in groups that share one IP, each node on its own UDP
                       port with its own id, table, peer store, tokens and blocker, like
                       libtorrent sessions behind one NAT or on one host (default 0)
  --shared-ip-group MIN-MAX
                       size of those groups, uniform in MIN..MAX, 2..64 (default 2-16)
  --restrict-ips 0|1   libtorrent's dht_restrict_routing_ips and dht_restrict_search_ips,
                       per IP: a node's table holds one node per IP, a lookup asks one node
                       per IP (default 0)
  --wan 0|1            the WAN model between every two hosts, the crawler included: a
                       round-trip time per pair of IPs, jitter, loss each way, on KRPC, uTP
                       and (on the seeders' side) TCP (default 0; each --wan-* option below
                       turns it on; the defaults are the libtorrent-like ones)
{wan options}
  --libtorrent-like    --block-rate 5 --sample-interval 21600 --nat 0.2 --replace-per-hour 0.2
                       --shared-ip 0.1 --restrict-ips 1 --wan 1: the real DHT where it matters
                       to a crawler (samples are 20 hashes, as always); options after it
                       override (--wan 0: no WAN model)
  --quiet              no periodic statistics on stderr
  --stop-on-stdin-eof  also stop when stdin reaches end of file (for a parent that
                       holds a pipe open and closes it to say "stop")
  --help               this text
)";

template <class T>
bool parse_number(std::string_view s, T& out) {
    if constexpr (std::is_floating_point_v<T>) {
        char* end = nullptr;
        const std::string copy(s);
        out = static_cast<T>(std::strtod(copy.c_str(), &end));
        return end && *end == '\0' && !copy.empty();
    } else {
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        return ec == std::errc{} && p == s.data() + s.size();
    }
}

std::optional<options> parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(wan::usage_with_options(usage, "--wan-").c_str(), stdout);
            std::exit(0);
        }
        if (a == "--quiet") {
            o.quiet = true;
            continue;
        }
        if (a == "--stop-on-stdin-eof") {
            o.stop_on_stdin_eof = true;
            continue;
        }
        if (a == "--libtorrent-like") {
            o.block_rate = 5;
            o.sample_interval = 21600;
            o.nat = 0.2;
            o.replace_per_hour = 0.2;
            o.shared_ip.share = 0.1; // a guess: see README.md, "Behaving like the real DHT"
            o.restrict_ips = true;
            o.wan.enabled = true; // the defaults: see README.md, "The WAN model"
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "missing value for %s\n", argv[i]);
            return std::nullopt;
        }
        const std::string_view v = argv[++i];
        bool ok = true;
        if (a == "--nodes") ok = parse_number(v, o.nodes);
        else if (a == "--seeders") ok = parse_number(v, o.seeders);
        else if (a == "--torrents") ok = parse_number(v, o.torrents);
        else if (a == "--range") o.range = v;
        else if (a == "--seed") ok = parse_number(v, o.seed);
        else if (a == "--duration") ok = parse_number(v, o.duration);
        else if (a == "--truth") o.truth = v;
        else if (a == "--misbehave") ok = parse_number(v, o.misbehave) && o.misbehave >= 0 && o.misbehave <= 1;
        else if (a == "--policy-mix") {
            const auto mix = parse_policy_mix(v);
            ok = mix.has_value();
            if (ok) o.policy_mix = *mix;
        }
        else if (a == "--port") ok = parse_number(v, o.port);
        else if (a == "--reannounce") ok = parse_number(v, o.reannounce) && o.reannounce > 0;
        else if (a == "--churn") ok = parse_number(v, o.churn) && o.churn >= 0 && o.churn < 1;
        else if (a == "--replace-per-hour") ok = parse_number(v, o.replace_per_hour) && o.replace_per_hour >= 0 && o.replace_per_hour <= 1;
        else if (a == "--refresh") ok = parse_number(v, o.refresh) && o.refresh > 0;
        else if (a == "--sample-interval") ok = parse_number(v, o.sample_interval) && o.sample_interval >= 0 && o.sample_interval <= 21600;
        else if (a == "--max-lookups") ok = parse_number(v, o.max_lookups) && o.max_lookups > 0;
        else if (a == "--block-rate") ok = parse_number(v, o.block_rate) && o.block_rate >= 0;
        else if (a == "--block-timeout") ok = parse_number(v, o.block_timeout);
        else if (a == "--nat") ok = parse_number(v, o.nat) && o.nat >= 0 && o.nat < 1;
        else if (a == "--shared-ip") ok = parse_number(v, o.shared_ip.share) && o.shared_ip.share >= 0 && o.shared_ip.share <= 1;
        else if (a == "--shared-ip-group") ok = o.shared_ip.parse_sizes(v);
        else if (a == "--restrict-ips") {
            ok = v == "0" || v == "1";
            o.restrict_ips = v == "1";
        }
        else if (a == "--wan") {
            ok = v == "0" || v == "1";
            o.wan.enabled = v == "1";
        }
        else if (a.rfind("--wan-", 0) == 0) {
            o.wan.enabled = true;
            const auto r = wan::parse_option(a.substr(6), v, o.wan);
            if (r == wan::parse_result::not_an_option) {
                std::fprintf(stderr, "unknown option %s (see --help)\n", argv[i - 1]);
                return std::nullopt;
            }
            ok = r == wan::parse_result::ok;
        }
        else {
            std::fprintf(stderr, "unknown option %s (see --help)\n", argv[i - 1]);
            return std::nullopt;
        }
        if (!ok) {
            std::fprintf(stderr, "bad value for %s: %s\n", argv[i - 1], argv[i]);
            return std::nullopt;
        }
    }
    if (o.nodes == 0) {
        std::fprintf(stderr, "--nodes must be at least 1\n");
        return std::nullopt;
    }
    o.wan.seed = o.seed;
    if (const auto problem = wan::finish_options(o.wan); !problem.empty()) {
        std::fprintf(stderr, "WAN model: %s\n", problem.c_str());
        return std::nullopt;
    }
    if (o.torrents > 0 && o.seeders == 0) {
        std::fprintf(stderr, "--torrents needs at least one seeder\n");
        return std::nullopt;
    }
    return o;
}

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long max_rss_kib() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/// A port free for UDP and for TCP on 0.0.0.0 (the nodes and the seeders share the number).
/// The probe sockets are closed before the real ones bind; the window is tiny.
std::uint16_t pick_port(asio::io_context& io) {
    for (int attempt = 0; attempt < 20; ++attempt) {
        asio::ip::udp::socket udp(io);
        udp.open(asio::ip::udp::v4());
        udp.bind(asio::ip::udp::endpoint(asio::ip::address_v4::any(), 0));
        const auto port = udp.local_endpoint().port();
        asio::ip::tcp::acceptor tcp(io);
        asio::error_code ec;
        tcp.open(asio::ip::tcp::v4(), ec);
        if (!ec) tcp.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
        if (!ec) tcp.bind(asio::ip::tcp::endpoint(asio::ip::address_v4::any(), port), ec);
        if (!ec) return port;
    }
    throw std::runtime_error("no port free for both UDP and TCP");
}

int run(const options& o) {
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    const auto range = cidr::parse_loopback(o.range);
    if (!range) {
        std::fprintf(stderr, "--range must be a CIDR inside 127.0.0.0/8 with a prefix of 8..24: %s\n", o.range.c_str());
        return 2;
    }
    std::string error;
    auto group_options = o.shared_ip;
    group_options.seed = o.seed;
    const ip_groups groups(o.nodes, group_options);
    // The nodes' addresses first (a group has one), then one per seeder.
    const auto plan = address_plan::make(*range, groups.addresses() + o.seeders, error);
    if (!plan) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 2;
    }

    catalog torrents(o.seed, o.torrents);
    std::fprintf(stderr, "testnet: %zu torrents generated in %.1f s\n", torrents.size(), elapsed());

    asio::io_context io(1);
    network_options no;
    no.port = o.port != 0 ? o.port : pick_port(io);
    // One more UDP port per port slot a group uses: --port's successors, or free ones.
    for (std::size_t slot = 1; slot < groups.port_slots(); ++slot) {
        if (o.port != 0 && std::size_t{o.port} + slot > 65535) {
            std::fprintf(stderr, "--port %u leaves no room for the %zu ports shared IPs use\n", o.port, groups.port_slots());
            return 2;
        }
        no.extra_ports.push_back(o.port != 0 ? static_cast<std::uint16_t>(o.port + slot) : 0);
    }
    no.seed = o.seed;
    no.churn = o.churn;
    no.replace_per_hour = o.replace_per_hour;
    no.refresh = o.refresh;
    no.max_lookups = o.max_lookups;
    no.block_rate = o.block_rate;
    no.block_timeout = o.block_timeout;
    no.nat = o.nat;
    no.node.sample_interval = o.sample_interval;
    no.node.restrict_ips = o.restrict_ips;
    no.node.peer_ttl = std::max<seconds>(1800, 2 * o.reannounce + 60);
    no.wan = o.wan;
    network net(io, no);
    // Benchmarks copy this line into their reports (bench/discovery.sh and the others).
    std::fprintf(stderr, "testnet: network model: %s\n", o.wan.to_json().c_str());
    std::vector<node_view> node_views;
    for (std::size_t i = 0; i < o.nodes; ++i) {
        net.add_node(plan->address(groups.address_of(i)), groups.port_slot(i));
        node_views.push_back({ipv4_to_string(net.node(i).ip()) + ":" + std::to_string(net.node(i).port()), groups.shared(i)});
    }
    if (groups.groups() > 0)
        std::fprintf(stderr, "testnet: %zu of %zu nodes share %zu IPs (groups of %zu..%zu, %zu UDP ports)\n",
                     groups.shared_nodes(), o.nodes, groups.groups(), o.shared_ip.min_size, o.shared_ip.max_size,
                     groups.port_slots());

    seeder_options so;
    so.count = o.seeders;
    so.misbehave = o.misbehave;
    so.reannounce = o.reannounce;
    so.seed = o.seed;
    so.policy_mix = o.policy_mix;
    std::vector<std::uint32_t> seeder_ips;
    for (std::size_t s = 0; s < o.seeders; ++s) seeder_ips.push_back(plan->address(groups.addresses() + s));
    seeder_set seeders(io, net, torrents, so, seeder_ips);
    try {
        seeders.listen(net.port());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "testnet: cannot listen on TCP port %u: %s (choose another --port)\n", net.port(), e.what());
        return 1;
    }
    net.seed_tables();

    std::vector<seeder_view> seeder_views;
    for (std::size_t s = 0; s < seeders.size(); ++s)
        seeder_views.push_back({seeders.endpoint_of(s), std::string(to_string(seeders.policy(s))),
                                std::string(to_string(seeders.mode(s)))});
    if (!o.truth.empty() && !write_truth(o.truth, torrents, seeder_views, node_views, false, error)) {
        std::fprintf(stderr, "testnet: %s\n", error.c_str());
        return 1;
    }

    bool stopping = false;
    asio::posix::stream_descriptor stdin_watch(io);
    std::array<char, 256> stdin_buf{};
    asio::steady_timer stats_timer(io);
    asio::steady_timer end_timer(io);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    auto shutdown = [&](const char* why) {
        if (stopping) return;
        stopping = true;
        std::fprintf(stderr, "testnet: stopping (%s) after %.1f s\n", why, elapsed());
        stats_timer.cancel();
        end_timer.cancel();
        signals.cancel();
        if (stdin_watch.is_open()) {
            asio::error_code ignored;
            stdin_watch.close(ignored);
        }
        seeders.stop();
        net.stop();
    };
    signals.async_wait([&](const asio::error_code& ec, int sig) {
        if (!ec) shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
    });
    std::function<void()> watch_stdin = [&] {
        stdin_watch.async_read_some(asio::buffer(stdin_buf), [&](const asio::error_code& ec, std::size_t) {
            if (ec) shutdown("stdin closed");
            else watch_stdin();
        });
    };
    if (o.stop_on_stdin_eof) {
        stdin_watch.assign(::dup(STDIN_FILENO));
        watch_stdin();
    }
    end_timer.expires_after(std::chrono::seconds(o.duration));
    end_timer.async_wait([&](const asio::error_code& ec) {
        if (!ec) shutdown("duration reached");
    });

    const std::string bootstrap = ipv4_to_string(plan->address(0)) + ":" + std::to_string(net.port());
    net.start();
    net.bootstrap([&] {
        std::fprintf(stderr, "testnet: %zu nodes bootstrapped in %.1f s, announcing\n", net.node_count(), elapsed());
        seeders.start([&] {
            std::fprintf(stderr, "testnet: every torrent announced once at %.1f s\n", elapsed());
            // Who holds what now, so a crawler's figures can be split by it.
            for (std::size_t i = 0; i < net.node_count(); ++i)
                for (const auto& key : net.node(i).store().hashes()) torrents.add_holder(key, static_cast<std::uint32_t>(i));
            torrents.holders_recorded();
            if (!o.truth.empty() && !write_truth(o.truth, torrents, seeder_views, node_views, false, error))
                std::fprintf(stderr, "testnet: %s\n", error.c_str());
            std::printf("BOOTSTRAP %s\n", bootstrap.c_str());
            std::fflush(stdout);
        });
    });

    std::function<void()> report = [&] {
        if (o.quiet || stopping) return;
        stats_timer.expires_after(std::chrono::seconds(10));
        stats_timer.async_wait([&](const asio::error_code& ec) {
            if (ec) return;
            const auto& s = net.stats();
            const auto& ss = seeders.stats();
            const std::size_t served = torrents.served_count();
            std::fprintf(stderr,
                         "testnet: t=%.0fs cpu=%.1fs rss=%ldKiB udp rx=%llu tx=%llu drop=%llu | online=%zu queries=%llu "
                         "stored=%llu lookups=%llu active=%zu timeouts=%llu learned=%llu | tcp conn=%llu open=%zu "
                         "pieces=%llu full=%llu served_torrents=%zu | wan lost=%llu delayed=%llu\n",
                         elapsed(), cpu_seconds(), max_rss_kib(), static_cast<unsigned long long>(net.hub().received()),
                         static_cast<unsigned long long>(net.hub().sent()),
                         static_cast<unsigned long long>(net.hub().send_dropped()), net.online_nodes(),
                         static_cast<unsigned long long>(s.nodes.queries),
                         static_cast<unsigned long long>(s.nodes.announces_stored),
                         static_cast<unsigned long long>(s.lookups_done), net.lookups_active(),
                         static_cast<unsigned long long>(s.timeouts), static_cast<unsigned long long>(s.learned),
                         static_cast<unsigned long long>(ss.connections), seeders.open_connections(),
                         static_cast<unsigned long long>(ss.pieces_served),
                         static_cast<unsigned long long>(ss.full_transfers), served,
                         static_cast<unsigned long long>(net.hub().wan_lost()),
                         static_cast<unsigned long long>(net.hub().wan_delayed()));
            report();
        });
    };
    report();

    io.run();
    // Let the closed sockets' handlers and the connection coroutines finish.
    io.restart();
    io.run_for(std::chrono::seconds(3));

    std::size_t served = 0;
    for (std::size_t i = 0; i < torrents.size(); ++i) served += torrents.at(i).first_served_at ? 1 : 0;
    // Per policy: seeders/connections/full transfers, e.g. "utp=2/14/9".
    std::string by_policy;
    const auto& ss = seeders.stats();
    for (std::size_t p = 0; p < policy_count; ++p) {
        if (ss.seeders_by_policy[p] == 0) continue;
        by_policy += ' ';
        by_policy += to_string(static_cast<connection_policy>(p));
        by_policy += '=' + std::to_string(ss.seeders_by_policy[p]) + '/' + std::to_string(ss.connections_by_policy[p]) +
                     '/' + std::to_string(ss.full_transfers_by_policy[p]);
    }
    std::fprintf(stderr,
                 "testnet: done: cpu=%.1fs max_rss=%ldKiB, %zu of %zu torrents served in full, blocked=%llu blocks=%llu "
                 "blocked_shared_ip=%llu blocks_shared_ip=%llu shared_ip_nodes=%zu "
                 "to_nat=%llu replaced=%llu | policies (seeders/connections/full):%s mse=%llu mse_failed=%llu plaintext_refused=%llu "
                 "tcp_refused_utp_only=%llu utp_conn=%llu utp_refused=%llu | wan: udp_lost=%llu udp_delayed=%llu "
                 "udp_overflow=%llu judged=%llu lost=%llu link_evictions=%llu\n",
                 cpu_seconds(), max_rss_kib(), served, torrents.size(),
                 static_cast<unsigned long long>(net.stats().blocked), static_cast<unsigned long long>(net.stats().blocks),
                 static_cast<unsigned long long>(net.stats().blocked_shared_ip),
                 static_cast<unsigned long long>(net.stats().blocks_shared_ip), net.shared_ip_nodes(),
                 static_cast<unsigned long long>(net.stats().to_nat),
                 static_cast<unsigned long long>(net.stats().replaced), by_policy.c_str(),
                 static_cast<unsigned long long>(ss.mse_handshakes), static_cast<unsigned long long>(ss.mse_failures),
                 static_cast<unsigned long long>(ss.plaintext_refused),
                 static_cast<unsigned long long>(ss.tcp_refused_utp_only),
                 static_cast<unsigned long long>(ss.utp_connections), static_cast<unsigned long long>(ss.utp_refused),
                 static_cast<unsigned long long>(net.hub().wan_lost()),
                 static_cast<unsigned long long>(net.hub().wan_delayed()),
                 static_cast<unsigned long long>(net.hub().wan_overflow()),
                 static_cast<unsigned long long>(net.wan() ? net.wan()->counters().packets : 0),
                 static_cast<unsigned long long>(net.wan() ? net.wan()->counters().lost : 0),
                 static_cast<unsigned long long>(net.wan() ? net.wan()->counters().link_evictions : 0));
    if (!o.truth.empty() && !write_truth(o.truth, torrents, seeder_views, node_views, true, error)) {
        std::fprintf(stderr, "testnet: %s\n", error.c_str());
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const auto o = parse_args(argc, argv);
    if (!o) return 2;
    try {
        return run(*o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "testnet: fatal: %s\n", e.what());
        return 1;
    }
}
