#pragma once
// The test network's truth entry (tools/testnet/README.md) without the fields the testnet adds:
// what remains is the parser's JSON form of the torrent, which a correct crawler delivers.

#include <nlohmann/json.hpp>

namespace dhtc::test {

inline nlohmann::json without_truth_extras(nlohmann::json entry) {
    for (const char* extra : {"seeders", "seeder_policies", "seeder_behaviours", "announce_keys", "first_served_at",
                              "holders", "holders_shared_ip"})
        entry.erase(extra);
    return entry;
}

} // namespace dhtc::test
