// uTP against TCP: full metadata peer sessions against one real libtorrent seeder on
// loopback (tests/lt/lt_swarm.py, TCP and uTP both enabled), every transport x encryption
// in the same run at the same concurrency. Reports, as JSON lines per mode: fetches per
// second, verified fetches, the client thread's CPU time per fetch (libtorrent's is in its
// own process), and the p50/p95 session time. Never run by the tests; see
// docs/performance.md.
// All uTP sessions share one UDP port, so libtorrent sees them come from one endpoint and
// keeps one connection per torrent from it: the fetches go round-robin over 256 torrents so
// that concurrent sessions ask for different ones (as a crawl's jobs do).
//   dhtc-utp-cost [--fetches N] [--concurrency C] [--pieces P]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "util/hashing.hpp"
#include "bench_util.hpp"
#include "network_model.hpp"
#include "metadata/peer_session.hpp"
#include "streams/utp_stream.hpp"
#include "support/fake_peer.hpp"
#include "support/lt_swarm_setup.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
    std::size_t fetches = 1000;
    std::size_t concurrency = 16;
    std::size_t pieces = 2;
};

struct mode {
    const char* name;
    metadata::transport_policy transports;
    metadata::encryption_policy encryption;
};

struct seeder {
    endpoint peer;
    std::vector<id20> hashes;
};

nlohmann::json run(const settings& s, const mode& m, const seeder& sd) {
    asio::io_context io;
    const auto host = metadata::utp_host::create(io.get_executor(), ip_address::parse("127.0.0.1"));
    std::size_t started = 0, done = 0, ok = 0, utp = 0;
    std::vector<double> ms;
    ms.reserve(s.fetches);
    std::uint32_t id_seed = 0;
    std::size_t size = 0;
    std::map<std::string, std::size_t> failures; // by class, and the socket error behind it

    std::function<void()> launch = [&] {
        if (started >= s.fetches) return;
        const id20 key = sd.hashes[started % sd.hashes.size()];
        ++started;
        metadata::session_request req;
        req.info_hash = key;
        req.peer = sd.peer;
        req.peer_id.bytes.fill(0xa5);
        ++id_seed;
        std::memcpy(req.peer_id.bytes.data(), &id_seed, sizeof id_seed);
        req.deadline = clock_type::now() + 4s; // metadata.timeout_secs' default
        req.bind_address = ip_address::parse("127.0.0.1");
        req.encryption = m.encryption;
        req.transports = m.transports;
        req.utp = host;
        auto src = std::make_shared<test::simple_piece_source>();
        asio::co_spawn(io, metadata::run_peer_session(req, *src, 0),
                       [&, src, key](std::exception_ptr e, metadata::session_result r) {
                           ++done;
                           if (!e && r.ok() && metadata::sha1_id(src->bytes()) == key) {
                               ++ok;
                               size = src->size();
                           }
                           if (r.transport == api::stream_transport::utp) ++utp;
                           if (!r.ok())
                               ++failures[std::string(api::to_string(r.failure)) + "/" + r.net_error.message() + "/" +
                                          std::string(wire::to_string(r.error))];
                           ms.push_back(std::chrono::duration<double, std::milli>(r.elapsed).count());
                           launch();
                       });
    };
    const double cpu0 = bench::thread_cpu_seconds();
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < s.concurrency; ++i) launch();
    while (done < s.fetches && io.run_one_for(30s) > 0) {
    }
    const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    const double cpu = bench::thread_cpu_seconds() - cpu0;
    host->shutdown();
    std::sort(ms.begin(), ms.end());
    return {{"bench", "utp_cost"},
            {"network_model", bench::network_model()},
            {"mode", m.name},
            {"fetches", done},
            {"ok", ok},
            {"over_utp", utp},
            {"size", size},
            {"concurrency", s.concurrency},
            {"fetches_per_sec", static_cast<double>(done) / wall},
            {"client_cpu_ms_per_fetch", 1000.0 * cpu / static_cast<double>(std::max<std::size_t>(done, 1))},
            {"p50_ms", bench::quantile(ms, 0.5)},
            {"p95_ms", bench::quantile(ms, 0.95)},
            {"failures", failures},
            {"utp_resets_sent", host->mux_stats().resets_sent},
            {"utp_unknown", host->mux_stats().unknown_connection},
            {"utp_malformed", host->mux_stats().malformed}};
}

// Waits for the seeder's endpoint and torrents.
bool start_seeder(test::subprocess& swarm, seeder& sd) {
    const auto setup = test::read_lt_swarm_setup(swarm, 90s, [&](const nlohmann::json& ev) {
        const auto kind = ev.value("event", "");
        if (kind == "session") {
            if (auto ep = endpoint::parse(ev.at("tcp_endpoint").get<std::string>())) sd.peer = *ep;
        } else if (kind == "torrent") {
            if (auto h = id20::from_hex(ev.at("announce_hashes").at(0).get<std::string>())) sd.hashes.push_back(*h);
        }
    });
    if (!setup.failure.empty()) std::fprintf(stderr, "swarm failed: %s\n", setup.failure.c_str());
    return setup.ready && sd.peer.port != 0 && !sd.hashes.empty();
}

} // namespace

int main(int argc, char** argv) {
    settings s;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const std::size_t v = std::stoul(argv[i + 1]);
        if (a == "--fetches") s.fetches = v;
        else if (a == "--concurrency") s.concurrency = v;
        else if (a == "--pieces") s.pieces = v;
        else {
            std::fprintf(stderr, "usage: dhtc-utp-cost [--fetches N] [--concurrency C] [--pieces P]\n");
            return 2;
        }
    }
    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-utp-cost-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    const std::string pieces = std::to_string(s.pieces) + ":" + std::to_string(s.pieces);
    // The DHT bootstrap is a discard port on loopback: the seeder never needs the DHT here.
    test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap", "127.0.0.1:9", "--sessions", "1",
                            "--torrents-per-session", "256", "--kinds", "multi", "--piece-count-range", pieces,
                            "--duration", "900", "--announce-interval", "600", "--base-ip", "127.0.62",
                            "--workdir", workdir.string()});
    seeder sd;
    if (!start_seeder(swarm, sd)) return 1;
    const mode modes[] = {
        {"tcp_plaintext", metadata::transport_policy::tcp, metadata::encryption_policy::disable},
        {"utp_plaintext", metadata::transport_policy::utp, metadata::encryption_policy::disable},
        {"tcp_rc4", metadata::transport_policy::tcp, metadata::encryption_policy::require},
        {"utp_rc4", metadata::transport_policy::utp, metadata::encryption_policy::require},
    };
    for (const auto& m : modes) std::printf("%s\n", run(s, m, sd).dump().c_str());
    swarm.stop();
    std::filesystem::remove_all(workdir);
    return 0;
}
