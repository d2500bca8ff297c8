// BEP-33 against real libtorrent: a DHT of libtorrent sessions (tests/lt/lt_scrape_swarm.py)
// with a torrent of known swarm, S seeders and L leechers on distinct addresses, announcing
// to the nodes closest to its hash. Our engine, their bootstrap, scrapes the hash: the
// merged BFsd/BFpe filters must estimate S and L.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/dht_engine.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

struct scrape_sink final : crawl::crawl_sink {
    std::mutex m;
    std::vector<api::scrape_event> scrapes;
    void on_hash(const api::hash_event&) override {}
    void on_observation(const crawl::observation&) override {}
    void on_scrape(const api::scrape_event& e) override {
        std::lock_guard l(m);
        scrapes.push_back(e);
    }
    double metadata_pressure() const override { return 0.0; }
};

constexpr int seeders = 6;
constexpr int leechers = 4;

bool in_range(std::uint64_t estimate, int truth) { return std::abs(static_cast<double>(estimate) - truth) <= 1.0; }

} // namespace

TEST_SUITE("integration") {

TEST_CASE("a scrape of a libtorrent swarm estimates its seeders and leechers") {
    scrape_sink sink;
    engine::dht_engine_options o;
    o.port = 0;
    o.bind_v4 = "127.0.0.1";
    o.crawl.allow_private_addresses = true;
    o.crawl.bootstrap.sources.clear(); // never the real DHT
    std::string error;
    auto engine = engine::dht_engine::create(o, sink, error);
    REQUIRE_MESSAGE(engine, error);
    engine->start();
    const auto ours = engine->local_endpoints().at(0);

    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-lt-scrape-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    const std::string script = std::filesystem::path(DHTC_LT_SWARM).parent_path() / "lt_scrape_swarm.py";
    test::subprocess swarm({"/usr/bin/python3", script, "--bootstrap", ours.to_string(), "--seeders",
                            std::to_string(seeders), "--leechers", std::to_string(leechers), "--nodes", "8",
                            "--duration", "170", "--workdir", workdir.string()});

    std::optional<id20> hash;
    const auto setup_deadline = std::chrono::steady_clock::now() + 60s;
    while (!hash && std::chrono::steady_clock::now() < setup_deadline) {
        const auto line = swarm.read_line(5s);
        if (!line) continue;
        const auto ev = nlohmann::json::parse(*line, nullptr, false);
        if (ev.is_discarded()) continue;
        if (ev.value("event", "") == "ready") hash = id20::from_hex(ev.at("info_hash").get<std::string>());
        if (ev.value("event", "") == "exit") FAIL("swarm ended: " << *line);
    }
    REQUIRE(hash);

    // Announces land within seconds and repeat every 10 s; scrape every 5 s until an
    // answer is right or time runs out (the last answer is what is checked).
    std::optional<api::scrape_event> last;
    std::size_t answers = 0;
    const auto deadline = std::chrono::steady_clock::now() + 100s;
    auto next_request = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        if (std::chrono::steady_clock::now() >= next_request) {
            CHECK(engine->request_scrape(*hash));
            next_request = std::chrono::steady_clock::now() + 5s;
        }
        {
            std::lock_guard l(sink.m);
            for (const auto& e : sink.scrapes) {
                CHECK(e.info_hash == *hash);
                last = e;
                ++answers;
                MESSAGE("scrape: " << e.seeders << " seeders, " << e.leechers << " leechers, " << e.responders
                                   << " responders of " << e.queried << " queried");
            }
            sink.scrapes.clear();
        }
        if (last && last->responders > 0 && in_range(last->seeders, seeders) && in_range(last->leechers, leechers))
            break;
        while (swarm.read_line(0ms)) {
        }
        std::this_thread::sleep_for(250ms);
    }
    swarm.stop();
    engine->stop();
    std::filesystem::remove_all(workdir);

    REQUIRE_MESSAGE(last, "no scrape answered");
    CHECK(answers >= 1);
    CHECK(last->responders >= 1);
    CHECK(last->queried >= last->responders);
    CHECK_MESSAGE(in_range(last->seeders, seeders), "seeders estimated " << last->seeders << ", truth " << seeders);
    CHECK_MESSAGE(in_range(last->leechers, leechers), "leechers estimated " << last->leechers << ", truth " << leechers);
}

} // TEST_SUITE
