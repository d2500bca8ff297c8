// The network a benchmark ran over, for its JSON lines: what the script that started it put in
// DHTC_NETWORK_MODEL (bench/discovery.sh and bench/metadata_throughput.sh: the test network's
// "network model" line; tests/wan/wan_netns.sh: the TUN link's model). Null when nobody said.
#pragma once

#include <cstdlib>

#include <nlohmann/json.hpp>

namespace dhtc::bench {

inline nlohmann::json network_model() {
    const char* v = std::getenv("DHTC_NETWORK_MODEL");
    if (!v || !*v) return nullptr;
    auto j = nlohmann::json::parse(v, nullptr, false);
    return j.is_discarded() ? nlohmann::json(v) : j;
}

} // namespace dhtc::bench
