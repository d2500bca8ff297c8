// Writes the truth file: a JSON list, one entry per torrent, in the parser's JSON form plus
// `seeders` ("ip:port"), `announce_keys` (hex; a hybrid is announced under both of its
// hashes) and, in the final version, `first_served_at`. Written atomically (temp + rename).
#pragma once

#include <string>
#include <vector>

#include "testnet/catalog.hpp"

namespace dhtc::testnet {

/// `seeder_endpoints[s]` is seeder s's "ip:port". Returns false and sets `error` on failure.
bool write_truth(const std::string& path, const catalog& torrents, const std::vector<std::string>& seeder_endpoints,
                 bool with_first_served, std::string& error);

} // namespace dhtc::testnet
