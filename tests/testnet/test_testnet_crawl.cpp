// Our crawler against the test network, with a fifth of the seeders misbehaving: every
// delivered torrent must equal its truth entry exactly (the parser's JSON form), come from
// one of its seeders, and be delivered once; most torrents must arrive within a generous cap.
// And against a mixed swarm (every connection policy in equal shares): all of it arrives.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "api/crawler.hpp"
#include "metadata/pipeline.hpp"
#include "metadata/torrent_json.hpp"
#include "support/subprocess.hpp"
#include "support/truth_form.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

constexpr int torrent_count = 50;

struct truth_index {
    nlohmann::json entries;
    std::map<std::string, std::size_t> by_key; // every announce key -> entry
};

truth_index load_truth(const std::filesystem::path& path) {
    truth_index t;
    std::ifstream in(path);
    t.entries = nlohmann::json::parse(in);
    for (std::size_t i = 0; i < t.entries.size(); ++i)
        for (const auto& k : t.entries[i].at("announce_keys")) t.by_key[k.get<std::string>()] = i;
    return t;
}

/// A truth entry as the crawler must deliver it when it found the torrent under `key`:
/// the parser's JSON form, whose info_hash is the key the metadata was found under.
nlohmann::json expected_form(nlohmann::json entry, const std::string& key) {
    entry = test::without_truth_extras(std::move(entry));
    entry["info_hash"] = key;
    return entry;
}

/// What one crawl of a test network delivered, and the network's truth.
struct crawl_result {
    truth_index truth;
    std::vector<api::delivery> delivered;
};

/// Runs a testnet with `testnet_args` (plus the common ones) and our crawler against it,
/// configured by `configure`, until `wanted` torrents arrived or `cap` passed; then waits
/// 2 s more, so that a duplicate delivery would show.
crawl_result run_crawl(const std::string& name, const std::vector<std::string>& testnet_args,
                   const std::function<void(api::crawler_options&)>& configure, std::size_t wanted,
                   std::chrono::seconds cap) {
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto truth_path = dir / "truth.json";
    std::vector<std::string> args{DHTC_TESTNET_BIN};
    args.insert(args.end(), testnet_args.begin(), testnet_args.end());
    for (const char* a : {"--quiet", "--stop-on-stdin-eof", "--truth"}) args.emplace_back(a);
    args.push_back(truth_path.string());
    test::subprocess net(args);
    std::string bootstrap;
    const auto ready_deadline = std::chrono::steady_clock::now() + 120s;
    while (bootstrap.empty() && std::chrono::steady_clock::now() < ready_deadline) {
        const auto line = net.read_line(5s);
        if (line && line->rfind("BOOTSTRAP ", 0) == 0) bootstrap = line->substr(10);
        if (!line && !net.running()) break;
    }
    REQUIRE_MESSAGE(!bootstrap.empty(), "the testnet never printed BOOTSTRAP");
    crawl_result out{load_truth(truth_path), {}};

    std::mutex m;
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        out.delivered.push_back(d);
        return true;
    });
    api::crawler_options o;
    o.dht.port = 0;
    o.dht.bind_v4 = "127.0.0.1";
    o.dht.crawl.allow_private_addresses = true;
    o.dht.crawl.bootstrap.sources = {bootstrap}; // the testnet only, never the real DHT
    o.metadata.bind_v4 = ip_address::parse("127.0.0.1");
    configure(o);
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    const auto deadline = std::chrono::steady_clock::now() + cap;
    while (std::chrono::steady_clock::now() < deadline) {
        {
            std::lock_guard l(m);
            if (out.delivered.size() >= wanted) break;
        }
        std::this_thread::sleep_for(500ms);
    }
    std::this_thread::sleep_for(2s); // a duplicate delivery would show up now
    crawler->close(std::nullopt);
    net.stop();
    std::filesystem::remove_all(dir);
    std::lock_guard l(m);
    return out;
}

/// Every delivery equals its truth entry, came from one of its seeders and arrived once.
/// Returns each delivery's truth index.
std::vector<std::size_t> check_deliveries(const crawl_result& r) {
    std::vector<std::size_t> indices;
    std::map<std::size_t, int> times;
    for (const auto& d : r.delivered) {
        const auto key = d.info.info_hash.hex();
        const auto it = r.truth.by_key.find(key);
        REQUIRE_MESSAGE(it != r.truth.by_key.end(), "delivered a torrent the testnet does not have: " << key);
        const auto& entry = r.truth.entries[it->second];
        ++times[it->second];
        indices.push_back(it->second);
        CHECK_MESSAGE(metadata::to_json(d.info) == expected_form(entry, key),
                      "delivered " << metadata::to_json(d.info).dump() << "\nexpected " << expected_form(entry, key).dump());
        bool from_a_seeder = false;
        for (const auto& s : entry.at("seeders")) from_a_seeder = from_a_seeder || s == d.peer.to_string();
        CHECK_MESSAGE(from_a_seeder, key << " came from " << d.peer.to_string() << ", not one of its seeders");
    }
    for (const auto& [index, n] : times) CHECK_MESSAGE(n == 1, "torrent " << index << " delivered " << n << " times");
    return indices;
}

} // namespace

TEST_CASE("testnet.crawl: the crawler delivers the testnet's torrents exactly as the truth file says") {
    const std::size_t wanted = torrent_count * 6 / 10; // a clear majority, with a cap far above what it takes
    const auto r = run_crawl("crawl",
                         {"--nodes", "300", "--seeders", "24", "--torrents", std::to_string(torrent_count), "--misbehave",
                          "0.2", "--seed", "7", "--duration", "240", "--reannounce", "60", "--churn", "0.05"},
                         [](api::crawler_options&) {}, wanted, 200s);
    MESSAGE("delivered " << r.delivered.size() << " of " << torrent_count);
    check_deliveries(r);
    CHECK(r.delivered.size() >= wanted);
}

TEST_CASE("testnet.crawl_mixed: with the default connection policy every seeder policy's torrents arrive") {
    // Equal shares of the six connection policies, no misbehaviour: everything must arrive.
    constexpr std::size_t torrents = 24;
    const auto r = run_crawl("crawl-mixed",
                         {"--nodes", "100", "--seeders", "12", "--torrents", std::to_string(torrents), "--seed", "9",
                          "--policy-mix", "plaintext=1,pe_rc4=1,pe_plain=1,utp=1,utp_pe=1,tcp_only=1", "--duration",
                          "150", "--churn", "0"},
                         [](api::crawler_options& o) {
                             const metadata::pipeline_options defaults; // uTP first, MSE preferred
                             o.metadata.transports = defaults.transports;
                             o.metadata.encryption = defaults.encryption;
                         },
                         torrents, 120s);
    MESSAGE("delivered " << r.delivered.size() << " of " << torrents);
    const auto indices = check_deliveries(r);
    CHECK(r.delivered.size() == torrents);
    // What served each one fits the policy of the seeder it came from.
    std::map<std::string, int> served_by;
    for (std::size_t i = 0; i < r.delivered.size(); ++i) {
        const auto& d = r.delivered[i];
        const auto& entry = r.truth.entries[indices[i]];
        std::string policy;
        for (std::size_t k = 0; k < entry.at("seeders").size(); ++k)
            if (entry["seeders"][k] == d.peer.to_string()) policy = entry["seeder_policies"][k];
        ++served_by[policy];
        // uTP first: every seeder with uTP is served over it, and only those without over TCP.
        CHECK_MESSAGE((d.transport == api::stream_transport::tcp) == (policy == "tcp_only"),
                      policy << " served over " << to_string(d.transport));
        if (policy == "pe_rc4" || policy == "utp_pe")
            CHECK_MESSAGE(d.encryption == api::stream_encryption::rc4, policy << " served " << to_string(d.encryption));
    }
    for (const auto& [policy, n] : served_by) MESSAGE(policy << ": " << n);
}
