// Metadata throughput: the real metadata pipeline fetching torrents from the loopback test
// network's seeders, fed directly with (info hash, seeder) pairs from its truth file so the
// DHT side plays no part. Offers hashes at a fixed rate and reports, as JSON lines:
// fetches completed per second, CPU time of this process per fetch, and the p50/p95/p99 of
// the time from offer to verified delivery. Never run by the tests; see
// bench/metadata_throughput.sh and docs/performance.md. The report names the network it ran
// over ("network_model", from DHTC_NETWORK_MODEL: see bench/network_model.hpp).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/delivery.hpp"
#include "metadata/pipeline.hpp"
#include "bench_util.hpp"
#include "network_model.hpp"

using namespace dhtc;
using clock_type = std::chrono::steady_clock;

namespace {

using bench::cpu_seconds;

struct settings {
    std::string truth;
    double rate = 500;            // hashes offered per second
    std::size_t count = 0;        // 0: every torrent of the truth file
    std::size_t workers = 256;
    unsigned max_seconds = 120;
    std::uint16_t dht_rtt_ms = 0; // the round trip each hash event says the DHT measured (0: unknown)
};

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: dhtc-metadata-throughput --truth FILE [--rate PER_SEC] [--count N] "
                 "[--workers N] [--max-seconds S] [--dht-rtt-ms MS]\n");
    std::exit(2);
}

settings parse_args(int argc, char** argv) {
    settings s;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage();
        const std::string v = argv[++i];
        if (a == "--truth") s.truth = v;
        else if (a == "--rate") s.rate = std::stod(v);
        else if (a == "--count") s.count = std::stoul(v);
        else if (a == "--workers") s.workers = std::stoul(v);
        else if (a == "--max-seconds") s.max_seconds = static_cast<unsigned>(std::stoul(v));
        else if (a == "--dht-rtt-ms") s.dht_rtt_ms = static_cast<std::uint16_t>(std::min(65535ul, std::stoul(v)));
        else usage();
    }
    if (s.truth.empty() || s.rate <= 0) usage();
    return s;
}

struct target {
    id20 info_hash;
    endpoint seeder;
};

// Every torrent of the truth file with its first seeder.
std::vector<target> read_truth(const std::string& path, std::size_t limit) {
    std::ifstream in(path);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        std::exit(1);
    }
    const auto doc = nlohmann::json::parse(in);
    std::vector<target> out;
    for (const auto& t : doc) {
        const auto hash = id20::from_hex(t.at("info_hash").get<std::string>());
        if (!hash || t.at("seeders").empty()) continue;
        const auto peer = endpoint::parse(t.at("seeders").at(0).get<std::string>());
        if (!peer) continue;
        out.push_back({*hash, *peer});
        if (limit != 0 && out.size() == limit) break;
    }
    return out;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// What the application side sees: offer times in, delivery latencies and outcomes out.
struct recorder {
    std::mutex m;
    std::condition_variable changed;
    std::unordered_map<id20, clock_type::time_point, id20_hash> offered_at;
    std::vector<double> latency_ms;
    std::size_t completions = 0;
    std::size_t accepted = 0;

    api::event_handlers callbacks() {
        api::event_handlers cb;
        cb.torrent = api::yes_no([this](const api::delivery& d) {
            const auto now = clock_type::now();
            std::lock_guard l(m);
            if (auto it = offered_at.find(d.info.info_hash); it != offered_at.end())
                latency_ms.push_back(std::chrono::duration<double, std::milli>(now - it->second).count());
            return true;
        });
        cb.completion = [this](const api::completion& c) {
            std::lock_guard l(m);
            ++completions;
            if (c.result == api::outcome::accepted) ++accepted;
            changed.notify_all();
        };
        return cb;
    }
};

} // namespace

int main(int argc, char** argv) {
    const settings s = parse_args(argc, argv);
    const auto targets = read_truth(s.truth, s.count);
    if (targets.empty()) {
        std::fprintf(stderr, "no torrent with a seeder in %s\n", s.truth.c_str());
        return 1;
    }

    metadata::pipeline_options o;
    o.max_worker_count = s.workers;
    o.hash_queue_capacity = std::max<std::size_t>(o.hash_queue_capacity, targets.size());
    o.bind_v4 = ip_address::parse("127.0.0.1");
    // Plaintext over TCP, as the figures in docs/performance.md were measured (the transport
    // x encryption costs are dhtc-mse-cost's and dhtc-utp-cost's).
    o.encryption = metadata::encryption_policy::prefer_plaintext;
    o.transports = metadata::transport_policy::tcp;
    recorder rec;
    api::event_delivery delivery(api::delivery_options{2 * s.workers + 64, 1024});
    delivery.configure(rec.callbacks(), false);
    steady_clock_source clock;
    metadata::pipeline pipe(o, delivery, clock);
    delivery.start();
    pipe.start();

    const auto interval = std::chrono::duration<double>(1.0 / s.rate);
    const auto started = clock_type::now();
    const double cpu_before = cpu_seconds();
    std::size_t offered = 0;
    std::size_t refused = 0;
    for (const auto& t : targets) {
        std::this_thread::sleep_until(started + std::chrono::duration_cast<clock_type::duration>(interval * offered));
        const auto now = clock_type::now();
        {
            std::lock_guard l(rec.m);
            rec.offered_at.emplace(t.info_hash, now);
        }
        const bool ok = pipe.ingress().try_push(
            api::hash_event{t.info_hash, t.seeder, t.seeder, api::hash_source::announce, now, api::peer_rtt{s.dht_rtt_ms}});
        ++offered;
        if (!ok) ++refused;
    }
    {
        std::unique_lock l(rec.m);
        rec.changed.wait_until(l, started + std::chrono::seconds(s.max_seconds),
                               [&] { return rec.completions + refused >= offered; });
    }
    const double wall = std::chrono::duration<double>(clock_type::now() - started).count();
    const double cpu = cpu_seconds() - cpu_before;
    pipe.stop();
    delivery.close_input();
    delivery.finish();
    delivery.join(std::nullopt);

    std::lock_guard l(rec.m);
    const nlohmann::json result = {
        {"bench", "metadata_throughput"},
        {"offered", offered},
        {"refused_by_ingress", refused},
        {"offer_rate", s.rate},
        {"workers", s.workers},
        {"completions", rec.completions},
        {"accepted", rec.accepted},
        {"wall_seconds", wall},
        {"fetches_per_second", static_cast<double>(rec.accepted) / wall},
        {"cpu_ms_per_fetch", rec.accepted ? 1000.0 * cpu / static_cast<double>(rec.accepted) : 0.0},
        {"latency_ms_p50", percentile(rec.latency_ms, 0.50)},
        {"latency_ms_p95", percentile(rec.latency_ms, 0.95)},
        {"latency_ms_p99", percentile(rec.latency_ms, 0.99)},
        {"bytes_fetched", pipe.counters().bytes_fetched.load()},
        {"dht_rtt_ms", s.dht_rtt_ms},
        {"deadline_extensions", pipe.counters().deadline_extensions.load()},
        {"deadline_extension_saves", pipe.counters().deadline_extension_saves.load()},
        {"dht_rtt_extensions", pipe.counters().dht_rtt_extensions.load()},
        {"dht_rtt_saves", pipe.counters().dht_rtt_saves.load()},
        {"success_share", offered ? static_cast<double>(rec.accepted) / static_cast<double>(offered) : 0.0},
        {"network_model", bench::network_model()},
    };
    std::printf("%s\n", result.dump().c_str());
    return 0;
}
