// Reading tests/lt/lt_swarm.py's JSON lines from a test: its setup (a "torrent" event per
// torrent, then "ready") and, while a test waits for its crawler, the rest of its output.
// Header-only: it uses doctest.
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "support/subprocess.hpp"

namespace dhtc::test {

/// Reads the swarm's lines until "ready" (true) or `limit` (false), calling `on_torrent`
/// with each "torrent" event; an "error" or "exit" event fails the test.
inline bool read_swarm_setup(subprocess& swarm, std::chrono::seconds limit,
                             const std::function<void(const nlohmann::json&)>& on_torrent) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto line = swarm.read_line(5s);
        if (!line) continue;
        const auto ev = nlohmann::json::parse(*line, nullptr, false);
        if (ev.is_discarded()) continue;
        const auto kind = ev.value("event", "");
        if (kind == "torrent") on_torrent(ev);
        else if (kind == "ready") return true;
        else if (kind == "error" || kind == "exit") FAIL("swarm failed: " << *line);
    }
    return false;
}

/// Keeps the swarm's output drained until `done()` or `limit`, then waits two seconds more:
/// a duplicate delivery would show up by then.
inline void wait_for_crawler(subprocess& swarm, std::chrono::seconds limit, const std::function<bool()>& done) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline && !done()) {
        while (swarm.read_line(0ms)) {
        }
        std::this_thread::sleep_for(500ms);
    }
    std::this_thread::sleep_for(2s);
}

} // namespace dhtc::test
