// Starting tests/lt/lt_swarm.py and reading its output, without doctest, so that tests
// (through lt_swarm_reader.hpp) and benchmarks share it: the seeder policies of issue 16 as
// swarm arguments, the read loop that collects the setup until "ready", and the loop that
// keeps the swarm's output drained while a crawler works.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/subprocess.hpp"

namespace dhtc::test {

/// libtorrent with TCP off both ways: uTP only. It still accepts a TCP connection, and
/// closes it before the handshake.
inline const std::vector<std::string> lt_utp_only_args{"--set", "enable_incoming_tcp=false", "--set",
                                                       "enable_outgoing_tcp=false"};

/// A seeder policy: how the swarm's sessions accept peers.
struct lt_seeder_policy {
    std::string name;
    std::vector<std::string> swarm_args;
};

/// The five seeder policies issue 16 measures against, in its order.
inline std::vector<lt_seeder_policy> lt_seeder_policies() {
    std::vector<std::string> utp_pe = lt_utp_only_args;
    utp_pe.insert(utp_pe.end(), {"--encryption", "forced_rc4"});
    return {
        {"plaintext_tcp", {}},                            // libtorrent's default: plaintext or PE, TCP and uTP
        {"pe_forced_rc4", {"--encryption", "forced_rc4"}}, // PE forced, RC4 only
        {"pe_forced_both", {"--encryption", "forced_both"}}, // PE forced, plaintext payload allowed
        {"utp_only", lt_utp_only_args},
        {"utp_only_pe_forced", utp_pe},
    };
}

/// How reading a swarm's setup ended.
struct lt_swarm_setup {
    bool ready = false;
    std::string failure; ///< the "error" or "exit" line that ended it early (empty: it timed out)
};

/// Reads the swarm's lines until "ready" or `limit`, calling `on_event` with every other
/// event before it ("session", "torrent", and runtime events); an "error" or "exit" event
/// ends it early.
inline lt_swarm_setup read_lt_swarm_setup(subprocess& swarm, std::chrono::seconds limit,
                                          const std::function<void(const nlohmann::json&)>& on_event) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto line = swarm.read_line(5s);
        if (!line) continue;
        const auto ev = nlohmann::json::parse(*line, nullptr, false);
        if (ev.is_discarded()) continue;
        const auto kind = ev.value("event", "");
        if (kind == "ready") return {true, {}};
        if (kind == "error" || kind == "exit") return {false, *line};
        on_event(ev);
    }
    return {false, {}};
}

/// Keeps the swarms' output drained (handing each event to `on_event`, with the index of its
/// swarm, when given) until `done()` or `limit`, then waits two seconds more: a duplicate
/// delivery would show up by then.
inline void wait_for_crawler(const std::vector<subprocess*>& swarms, std::chrono::seconds limit,
                             const std::function<bool()>& done,
                             const std::function<void(std::size_t, const nlohmann::json&)>& on_event = {}) {
    using namespace std::chrono_literals;
    const auto drain = [&] {
        for (std::size_t i = 0; i < swarms.size(); ++i)
            while (const auto line = swarms[i]->read_line(0ms)) {
                if (!on_event) continue;
                const auto ev = nlohmann::json::parse(*line, nullptr, false);
                if (!ev.is_discarded()) on_event(i, ev);
            }
    };
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline && !done()) {
        drain();
        std::this_thread::sleep_for(500ms);
    }
    std::this_thread::sleep_for(2s);
    drain();
}

inline void wait_for_crawler(subprocess& swarm, std::chrono::seconds limit, const std::function<bool()>& done) {
    wait_for_crawler(std::vector<subprocess*>{&swarm}, limit, done);
}

} // namespace dhtc::test
