// Our crawler against the test network, with a fifth of the seeders misbehaving: every
// delivered torrent must equal its truth entry exactly (the parser's JSON form), come from
// one of its seeders, and be delivered once; most torrents must arrive within a generous cap.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "api/crawler.hpp"
#include "metadata/torrent_json.hpp"
#include "support/subprocess.hpp"

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
    entry.erase("seeders");
    entry.erase("seeder_policies");
    entry.erase("announce_keys");
    entry.erase("first_served_at");
    entry["info_hash"] = key;
    return entry;
}

} // namespace

TEST_CASE("testnet.crawl: the crawler delivers the testnet's torrents exactly as the truth file says") {
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-crawl-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto truth_path = dir / "truth.json";
    test::subprocess net({DHTC_TESTNET_BIN, "--nodes", "300", "--seeders", "24", "--torrents",
                          std::to_string(torrent_count), "--misbehave", "0.2", "--seed", "7", "--duration", "240",
                          "--reannounce", "60", "--churn", "0.05", "--quiet", "--stop-on-stdin-eof", "--truth", truth_path.string()});
    std::string bootstrap;
    const auto ready_deadline = std::chrono::steady_clock::now() + 120s;
    while (bootstrap.empty() && std::chrono::steady_clock::now() < ready_deadline) {
        const auto line = net.read_line(5s);
        if (line && line->rfind("BOOTSTRAP ", 0) == 0) bootstrap = line->substr(10);
        if (!line && !net.running()) break;
    }
    REQUIRE_MESSAGE(!bootstrap.empty(), "the testnet never printed BOOTSTRAP");
    const auto truth = load_truth(truth_path);
    REQUIRE(truth.entries.size() == torrent_count);

    std::mutex m;
    std::vector<api::delivery> delivered;
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        delivered.push_back(d);
        return true;
    });
    api::crawler_options o;
    o.dht.port = 0;
    o.dht.bind_v4 = "127.0.0.1";
    o.dht.crawl.allow_private_addresses = true;
    o.dht.crawl.bootstrap.sources = {bootstrap}; // the testnet only, never the real DHT
    o.metadata.bind_v4 = ip_address::parse("127.0.0.1");
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    // Wait for a clear majority, with a cap far above what it normally takes.
    const std::size_t wanted = torrent_count * 6 / 10;
    const auto deadline = std::chrono::steady_clock::now() + 200s;
    while (std::chrono::steady_clock::now() < deadline) {
        {
            std::lock_guard l(m);
            if (delivered.size() >= wanted) break;
        }
        std::this_thread::sleep_for(500ms);
    }
    std::this_thread::sleep_for(2s); // a duplicate delivery would show up now
    crawler->close(std::nullopt);
    net.stop();
    std::filesystem::remove_all(dir);

    std::lock_guard l(m);
    MESSAGE("delivered " << delivered.size() << " of " << torrent_count);
    std::map<std::size_t, int> times;
    for (const auto& d : delivered) {
        const auto key = d.info.info_hash.hex();
        const auto it = truth.by_key.find(key);
        REQUIRE_MESSAGE(it != truth.by_key.end(), "delivered a torrent the testnet does not have: " << key);
        const auto& entry = truth.entries[it->second];
        ++times[it->second];
        CHECK_MESSAGE(metadata::to_json(d.info) == expected_form(entry, key),
                      "delivered " << metadata::to_json(d.info).dump() << "\nexpected " << expected_form(entry, key).dump());
        bool from_a_seeder = false;
        for (const auto& s : entry.at("seeders")) from_a_seeder = from_a_seeder || s == d.peer.to_string();
        CHECK_MESSAGE(from_a_seeder, key << " came from " << d.peer.to_string() << ", not one of its seeders");
    }
    for (const auto& [index, n] : times) CHECK_MESSAGE(n == 1, "torrent " << index << " delivered " << n << " times");
    CHECK(delivered.size() >= wanted);
}
