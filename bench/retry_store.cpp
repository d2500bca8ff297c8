// The retry store at scale: N dormant hashes (1% of them due), then the time to lease a
// batch of due work, the process's RSS growth from opening the store and working on it,
// and the database bytes per hash. JSON lines on stdout; never run by the tests.
//
//   dhtc-retry-store --backend sqlite --path /tmp/retry-bench.sqlite [--hashes 1000000]
//   dhtc-retry-store --backend postgresql --conninfo postgresql://u:p@127.0.0.1/db [--hashes 1000000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include "retry/postgres_store.hpp"
#include "retry/scheduler.hpp"
#include "retry/sqlite_store.hpp"

using namespace dhtc;
using clk = std::chrono::steady_clock;

namespace {

std::uint64_t rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
}

double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

void emit(nlohmann::json j) { std::printf("%s\n", j.dump().c_str()), std::fflush(stdout); }

} // namespace

int main(int argc, char** argv) {
    std::string backend = "sqlite", path = "/tmp/dhtc-retry-bench.sqlite", conninfo;
    std::uint64_t hashes = 1'000'000;
    std::size_t batch = 64;
    bool reuse = false; // keep the database of a previous run (populating a server takes minutes)
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--backend") backend = v;
        else if (k == "--path") path = v;
        else if (k == "--conninfo") conninfo = v;
        else if (k == "--hashes") hashes = std::stoull(v);
        else if (k == "--batch") batch = std::stoull(v);
        else if (k == "--reuse") reuse = v == "yes";
        else {
            std::fprintf(stderr, "unknown argument %s\n", k.c_str());
            return 2;
        }
    }
    const auto open = [&]() -> std::unique_ptr<retry::backend> {
        if (backend == "sqlite") return retry::open_sqlite(path);
        return retry::open_postgres(conninfo);
    };
    try {
        if (backend == "sqlite" && !reuse)
            for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
        const auto now = retry::scheduler::now();
        // Populate: dormant rows as failures leave them, due over the next 30 days, 1% due now.
        if (!reuse) {
            auto db = open();
            std::mt19937_64 rng(42);
            const auto t = clk::now();
            retry::retry_row r;
            r.state = retry::hash_state::dormant;
            for (std::uint64_t i = 0; i < hashes;) {
                db->begin();
                for (std::uint64_t k = 0; k < 10'000 && i < hashes; ++k, ++i) {
                    for (auto& b : r.info_hash.bytes) b = static_cast<std::uint8_t>(rng());
                    r.next_retry_at = (i % 100 == 0) ? now - 10 : now + 60 + static_cast<std::int64_t>(rng() % 2'592'000);
                    r.first_seen = now - 86'400;
                    r.last_seen = now - 3'600;
                    r.observations = 1 + static_cast<std::uint32_t>(rng() % 5);
                    r.attempts = 1 + static_cast<std::uint32_t>(rng() % 4);
                    r.failure_counts = 0;
                    r.recent_failures = 0;
                    for (std::uint32_t a = 0; a < r.attempts; ++a) r.add_failure(api::failure_class::no_peers);
                    db->insert(r);
                }
                db->commit();
            }
            emit({{"bench", "retry_store"}, {"backend", backend}, {"phase", "populate"}, {"hashes", hashes},
                  {"seconds", ms_since(t) / 1000.0}});
        }
        if (backend == "postgresql") {
            // What autovacuum does after a bulk load; the planner needs the statistics.
            PGconn* c = PQconnectdb(conninfo.c_str());
            PQclear(PQexec(c, "ANALYZE retry_hashes"));
            PQfinish(c);
        }
        // A fresh process view: open the store and work on it the way the store thread does.
        const auto rss_before = rss_kib();
        retry::store s(open(), retry::policy_options{}, "bench", 300);
        // Per batch: the query that finds, locks and leases due work, and the whole
        // transaction (with its commit, an fsync unless the server is told otherwise).
        std::vector<double> lease_ms, query_ms;
        std::size_t leased = 0;
        for (int i = 0; i < 100; ++i) {
            const auto t = clk::now();
            s.begin();
            const auto q = clk::now();
            leased += s.lease_due(batch, now).size();
            query_ms.push_back(ms_since(q));
            s.commit();
            lease_ms.push_back(ms_since(t));
        }
        const auto tc = clk::now();
        const auto counts = s.counts();
        const double counts_ms = ms_since(tc);
        // Claims of unknown and known hashes, as announces bring them.
        const auto tcl = clk::now();
        std::mt19937_64 rng(7);
        s.begin();
        for (int i = 0; i < 1000; ++i) {
            id20 h;
            for (auto& b : h.bytes) b = static_cast<std::uint8_t>(rng());
            s.claim(h, {}, now);
        }
        s.commit();
        const double claim_ms = ms_since(tcl) / 1000.0;
        const auto rss_after = rss_kib();
        std::sort(lease_ms.begin(), lease_ms.end());
        std::sort(query_ms.begin(), query_ms.end());
        std::uint64_t total = 0;
        for (const auto n : counts.by_state) total += n;
        emit({{"bench", "retry_store"},
              {"backend", backend},
              {"hashes", total},
              {"batch", batch},
              {"leased", leased},
              {"lease_batch_ms_p50", lease_ms[lease_ms.size() / 2]},
              {"lease_batch_ms_p99", lease_ms[lease_ms.size() * 99 / 100]},
              {"lease_batch_ms_max", lease_ms.back()},
              {"lease_query_ms_p50", query_ms[query_ms.size() / 2]},
              {"lease_query_ms_p99", query_ms[query_ms.size() * 99 / 100]},
              {"claim_ms_mean", claim_ms},
              {"counts_ms", counts_ms},
              {"rss_growth_kib", rss_after > rss_before ? rss_after - rss_before : 0},
              {"database_bytes", counts.database_bytes},
              {"bytes_per_hash", total ? static_cast<double>(counts.database_bytes) / static_cast<double>(total) : 0.0},
              {"targets", {{"lease_batch_ms", 10}, {"rss_growth_kib", 5 * 1024}, {"bytes_per_hash", 300}}}});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dhtc-retry-store: %s\n", e.what());
        return 1;
    }
    return 0;
}
