// Writes the truth file: a JSON list, one entry per torrent, in the parser's JSON form plus
// `seeders` ("ip:port"), `seeder_policies` (each seeder's connection policy), `seeder_behaviours`
// (how each misbehaves, or "none"), `announce_keys` (hex; a hybrid is announced under both of its
// hashes) and, in the final version, `first_served_at`. Written atomically (temp + rename).
#pragma once

#include <string>
#include <vector>

#include "testnet/catalog.hpp"

namespace dhtc::testnet {

/// What the truth file says of one seeder.
struct seeder_view {
    std::string endpoint; ///< "ip:port"
    std::string policy;   ///< its connection policy (seeder.hpp)
    std::string behaviour; ///< "none" or how it misbehaves (seeder.hpp)
};

/// `seeders[s]` describes seeder s. Returns false and sets `error` on failure.
bool write_truth(const std::string& path, const catalog& torrents, const std::vector<seeder_view>& seeders,
                 bool with_first_served, std::string& error);

} // namespace dhtc::testnet
