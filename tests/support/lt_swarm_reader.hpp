// Reading tests/lt/lt_swarm.py's JSON lines from a test: its setup (a "torrent" event per
// torrent, then "ready") and, while a test waits for its crawler, the rest of its output.
// Header-only: it uses doctest (lt_swarm_setup.hpp is the doctest-free part).
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>

#include "support/lt_swarm_setup.hpp"
#include "support/subprocess.hpp"

namespace dhtc::test {

/// Reads the swarm's lines until "ready" (true) or `limit` (false), calling `on_torrent`
/// with each "torrent" event; an "error" or "exit" event fails the test.
inline bool read_swarm_setup(subprocess& swarm, std::chrono::seconds limit,
                             const std::function<void(const nlohmann::json&)>& on_torrent) {
    const auto setup = read_lt_swarm_setup(swarm, limit, [&](const nlohmann::json& ev) {
        if (ev.value("event", "") == "torrent") on_torrent(ev);
    });
    if (!setup.failure.empty()) FAIL("swarm failed: " << setup.failure);
    return setup.ready;
}

} // namespace dhtc::test
