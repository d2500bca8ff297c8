// Interop with real libtorrent: sessions on their own loopback addresses seed v1, v2-only,
// hybrid (with pad files), multi-file and unicode-named torrents and announce through our
// crawler as their only bootstrap. Every torrent must be delivered exactly once, verified,
// with the name, file list and sizes libtorrent reports (mapped to our form: padding files
// left out, multi-file paths without their leading torrent-name element).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "api/crawler.hpp"
#include "support/lt_swarm_reader.hpp"
#include "support/loopback_crawler.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

struct expected_torrent {
    std::string name;
    std::vector<std::pair<std::string, std::uint64_t>> files; // sorted by path
    std::uint64_t total = 0;
    std::vector<std::string> keys; // every key it is announced under
};

expected_torrent from_swarm(const nlohmann::json& ev) {
    expected_torrent t;
    t.name = ev.at("name");
    nlohmann::json full = ev;
    if (ev.value("files_truncated", false)) {
        std::ifstream in(ev.at("json_file").get<std::string>());
        full = nlohmann::json::parse(in);
    }
    const std::string prefix = t.name + "/";
    for (const auto& f : full.at("files")) {
        if (f.value("pad", false)) continue;
        std::string path = f.at("path");
        if (path.rfind(prefix, 0) == 0) path.erase(0, prefix.size());
        const std::uint64_t size = f.at("size");
        t.files.emplace_back(path, size);
        t.total += size;
    }
    std::sort(t.files.begin(), t.files.end());
    for (const auto& k : ev.at("announce_hashes")) t.keys.push_back(k);
    return t;
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("libtorrent seeders: every torrent delivered once, verified, matching libtorrent") {
    std::mutex m;
    std::vector<api::delivery> delivered;
    std::vector<api::completion> completions;
    api::event_handlers cb;
    cb.torrent = api::yes_no([&](const api::delivery& d) {
        std::lock_guard l(m);
        delivered.push_back(d);
        return true;
    });
    cb.completion = [&](const api::completion& c) {
        std::lock_guard l(m);
        completions.push_back(c);
    };

    auto o = test::loopback_crawler();
    std::string error;
    auto crawler = api::crawler::create(o, cb, error);
    REQUIRE_MESSAGE(crawler, error);
    crawler->start();

    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-lt-metadata-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap",
                            crawler->dht().local_endpoints().at(0).to_string(), "--sessions", "3",
                            "--torrents-per-session", "2", "--kinds", "v1,v2,hybrid,multi,unicode",
                            "--piece-count-range", "1:31", "--duration", "150", "--announce-interval", "10",
                            "--base-ip", "127.0.40", "--workdir", workdir.string()});

    std::map<std::string, expected_torrent> expected; // by the first announce key
    REQUIRE(test::read_swarm_setup(swarm, 90s, [&](const nlohmann::json& ev) {
        auto t = from_swarm(ev);
        expected.emplace(t.keys.at(0), std::move(t));
    }));
    REQUIRE(expected.size() == 6);

    test::wait_for_crawler(swarm, 100s, [&] {
        std::lock_guard l(m);
        return delivered.size() >= expected.size();
    });
    swarm.stop();
    crawler->close(std::nullopt);
    std::filesystem::remove_all(workdir);

    std::lock_guard l(m);
    MESSAGE("delivered " << delivered.size() << " of " << expected.size() << ", completions " << completions.size());
    std::map<std::string, int> times_delivered;
    for (const auto& d : delivered) {
        // Find the torrent by any of its keys (a hybrid may be fetched under either).
        const expected_torrent* e = nullptr;
        std::string first_key;
        for (const auto& [k, t] : expected)
            for (const auto& key : t.keys)
                if (key == d.info.info_hash.hex()) e = &t, first_key = k;
        REQUIRE_MESSAGE(e, "delivered an unexpected torrent " << d.info.info_hash.hex());
        ++times_delivered[first_key];
        CHECK(d.info.name == e->name);
        CHECK(d.info.total_size == e->total);
        std::vector<std::pair<std::string, std::uint64_t>> files;
        for (const auto& f : d.info.files) files.emplace_back(f.path, f.size);
        std::sort(files.begin(), files.end());
        CHECK_MESSAGE(files == e->files, "file list differs for " << e->name);
    }
    const auto once = std::count_if(expected.begin(), expected.end(), [&](const auto& e) { return times_delivered[e.first] == 1; });
    MESSAGE("arrived once: " << once << " of " << expected.size() << " (metadata)"); // tests/wan/run_lt_wan.sh counts it
    for (const auto& [key, t] : expected) CHECK_MESSAGE(times_delivered[key] == 1, t.name << " delivered " << times_delivered[key] << " times");
    for (const auto& c : completions)
        CHECK_MESSAGE(c.result != api::outcome::fetch_failed,
                      "round for " << c.info_hash.hex() << " failed: " << api::to_string(c.failure));
}

} // TEST_SUITE
