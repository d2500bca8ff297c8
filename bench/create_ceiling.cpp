// What dhtc_crawler_create costs when every capacity option is at its ceiling: RSS and
// wall time of the create call, each option alone (to name the culprit) and all at once.
// Each measurement runs in its own forked child (freed memory malloc keeps cannot hide
// anything) and prints one JSON line. Nothing is started: create binds a loopback port and
// builds the tables, no packet is sent (bootstrap points at a loopback address).
// Exits 1 when the all-at-once case misses 100 MB or 100 ms.
//   build/release/bench/dhtc-create-ceiling
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "dhtcrawler.h"

namespace {

constexpr unsigned long long queue_max = 1ull << 24;
constexpr unsigned long long table_max = (1ull << 24) - 2;
constexpr unsigned long long ring_max = (1ull << 24) - 1;
constexpr double target_mb = 100.0;
constexpr double target_ms = 100.0;

// Every capacity option and its ceiling (docs/options.md), as a nested JSON fragment.
const std::vector<std::pair<std::string, std::string>> ceilings = {
    {"hash_queue_capacity", "\"hash_queue_capacity\": " + std::to_string(queue_max)},
    {"observation_queue_capacity", "\"observation_queue_capacity\": " + std::to_string(queue_max)},
    {"metadata.max_queue_size", "\"metadata\": {\"max_queue_size\": " + std::to_string(table_max) + "}"},
    {"metadata.peer_failure_cache_capacity",
     "\"metadata\": {\"peer_failure_cache_capacity\": " + std::to_string(table_max) + "}"},
    {"metadata.delivered_filter.capacity",
     "\"metadata\": {\"delivered_filter\": {\"capacity\": " + std::to_string(table_max) + "}}"},
    {"metadata.max_worker_count", "\"metadata\": {\"max_worker_count\": 65535}"},
    {"crawl.pool.capacity", "\"crawl\": {\"pool\": {\"capacity\": " + std::to_string(table_max) + "}}"},
    {"crawl.pool.responsive_capacity",
     "\"crawl\": {\"pool\": {\"responsive_capacity\": " + std::to_string(ring_max) + "}}"},
    {"crawl.rate_limit.max_in_flight", "\"crawl\": {\"rate_limit\": {\"max_in_flight\": 65535}}"},
    {"crawl.scheduler.priority_event_channel_capacity",
     "\"crawl\": {\"scheduler\": {\"priority_event_channel_capacity\": " + std::to_string(queue_max) + "}}"},
    {"crawl.scheduler.discovery_event_channel_capacity",
     "\"crawl\": {\"scheduler\": {\"discovery_event_channel_capacity\": " + std::to_string(queue_max) + "}}"},
    {"crawl.scheduler.event_batch_limit",
     "\"crawl\": {\"scheduler\": {\"event_batch_limit\": " + std::to_string(queue_max) + "}}"},
    {"crawl.scheduler.node_batch_limit",
     "\"crawl\": {\"scheduler\": {\"node_batch_limit\": " + std::to_string(queue_max) + "}}"},
    {"crawl.scheduler.routing_snapshot_size",
     "\"crawl\": {\"scheduler\": {\"routing_snapshot_size\": " + std::to_string(queue_max) + "}}"},
    {"crawl.bep51.lookup_queue_capacity",
     "\"crawl\": {\"bep51\": {\"lookup_queue_capacity\": " + std::to_string(queue_max) + "}}"},
    {"crawl.bep51.store_capacity", "\"crawl\": {\"bep51\": {\"store_capacity\": " + std::to_string(queue_max) + "}}"},
    {"crawl.bep51.max_concurrent_lookups", "\"crawl\": {\"bep51\": {\"max_concurrent_lookups\": 65535}}"},
    {"retry.queue_capacity", "\"retry\": {\"queue_capacity\": " + std::to_string(queue_max) + "}"},
};

const std::string common =
    "\"port\": 0, \"bind_v4\": \"127.0.0.1\", \"allow_private_addresses\": true";
const std::string bootstrap = "\"sources\": [\"127.0.0.1:9\"]";

// Merges fragments by hand: each names its own top-level section, so group by section.
std::string document(const std::vector<std::string>& fragments) {
    // Collect "section": {...} bodies; the crawl section always carries the bootstrap.
    std::string top, metadata, crawl_pool, crawl_rate, crawl_sched, crawl_bep51, retry, filter;
    auto body = [](const std::string& f, const std::string& open) {
        const auto at = f.find(open);
        std::string b = f.substr(at + open.size());
        while (!b.empty() && b.back() == '}') b.pop_back();
        return b;
    };
    auto add = [](std::string& to, const std::string& what) { to += (to.empty() ? "" : ", ") + what; };
    for (const auto& f : fragments) {
        if (f.rfind("\"metadata\": {\"delivered_filter\": {", 0) == 0) add(filter, body(f, "{\"delivered_filter\": {"));
        else if (f.rfind("\"metadata\": {", 0) == 0) add(metadata, body(f, "\"metadata\": {"));
        else if (f.rfind("\"crawl\": {\"pool\": {", 0) == 0) add(crawl_pool, body(f, "{\"pool\": {"));
        else if (f.rfind("\"crawl\": {\"rate_limit\": {", 0) == 0) add(crawl_rate, body(f, "{\"rate_limit\": {"));
        else if (f.rfind("\"crawl\": {\"scheduler\": {", 0) == 0) add(crawl_sched, body(f, "{\"scheduler\": {"));
        else if (f.rfind("\"crawl\": {\"bep51\": {", 0) == 0) add(crawl_bep51, body(f, "{\"bep51\": {"));
        else if (f.rfind("\"retry\": {", 0) == 0) add(retry, body(f, "\"retry\": {"));
        else add(top, f);
    }
    if (!filter.empty()) add(metadata, "\"delivered_filter\": {" + filter + "}");
    std::string crawl = "\"bootstrap\": {" + bootstrap + "}";
    if (!crawl_pool.empty()) crawl += ", \"pool\": {" + crawl_pool + "}";
    if (!crawl_rate.empty()) crawl += ", \"rate_limit\": {" + crawl_rate + "}";
    if (!crawl_sched.empty()) crawl += ", \"scheduler\": {" + crawl_sched + "}";
    if (!crawl_bep51.empty()) crawl += ", \"bep51\": {" + crawl_bep51 + "}";
    std::string doc = "{" + common + ", \"crawl\": {" + crawl + "}";
    if (!top.empty()) doc += ", " + top;
    if (!metadata.empty()) doc += ", \"metadata\": {" + metadata + "}";
    if (!retry.empty()) doc += ", \"retry\": {" + retry + "}";
    return doc + "}";
}

struct figure {
    double rss_mb = 0;
    double ms = 0;
    int rc = 0;
};

// In a child: create, measure, destroy; the figures come back through a pipe.
figure measure(const std::string& doc) {
    int fd[2];
    if (::pipe(fd) != 0) return {0, 0, -1};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fd[0]);
        figure f;
        const std::size_t before = dhtc::bench::rss_bytes();
        const auto t0 = std::chrono::steady_clock::now();
        dhtc_crawler* c = nullptr;
        f.rc = dhtc_crawler_create(doc.c_str(), &c);
        const auto t1 = std::chrono::steady_clock::now();
        f.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        f.rss_mb = static_cast<double>(dhtc::bench::rss_bytes() - before) / (1024.0 * 1024.0);
        if (c) dhtc_crawler_destroy(c);
        (void)!::write(fd[1], &f, sizeof f);
        ::_exit(0);
    }
    ::close(fd[1]);
    figure f{0, 0, -1};
    if (::read(fd[0], &f, sizeof f) != static_cast<ssize_t>(sizeof f)) f.rc = -2;
    ::close(fd[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    return f;
}

void print(const std::string& name, const figure& f) {
    std::printf("{\"case\": \"%s\", \"rc\": %d, \"rss_delta_mb\": %.1f, \"create_ms\": %.1f}\n", name.c_str(), f.rc,
                f.rss_mb, f.ms);
    std::fflush(stdout);
}

} // namespace

// Arguments: option names to measure alone (default: every one), then the all-at-once case
// unless --no-all (at the ceilings of today's main that case held 8.9 GB for 33 s).
int main(int argc, char** argv) {
    std::vector<std::string> only;
    bool with_all = true;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--no-all") with_all = false;
        else only.emplace_back(argv[i]);
    }
    print("defaults", measure(document({})));
    std::vector<std::string> all;
    for (const auto& [name, fragment] : ceilings) {
        all.push_back(fragment);
        bool wanted = only.empty();
        for (const auto& o : only) wanted = wanted || o == name;
        if (wanted) print(name, measure(document({fragment})));
    }
    if (!with_all) return 0;
    const figure f = measure(document(all));
    print("all_at_ceiling", f);
    const bool ok = f.rc == 0 && f.rss_mb <= target_mb && f.ms <= target_ms;
    std::printf("{\"targets\": {\"rss_mb\": %.0f, \"create_ms\": %.0f}, \"met\": %s}\n", target_mb, target_ms,
                ok ? "true" : "false");
    return ok ? 0 : 1;
}
