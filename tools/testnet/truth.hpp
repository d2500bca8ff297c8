// Writes the truth file: a JSON list, one entry per torrent, in the parser's JSON form plus
// `seeders` ("ip:port"), `seeder_policies` (each seeder's connection policy), `seeder_behaviours`
// (how each misbehaves, or "none"), `announce_keys` (hex; a hybrid is announced under both of its
// hashes), from the moment every torrent was announced once `holders` and `holders_shared_ip`
// (the nodes storing it then, and those of them that share their IP), and, in the final
// version, `first_served_at`. Written atomically (temp + rename).
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

/// What the truth file says of one node.
struct node_view {
    std::string endpoint; ///< "ip:port"
    bool shared_ip = false; ///< other nodes use the same IP
};

/// `seeders[s]` describes seeder s, `nodes[n]` node n (read when the catalog has holders).
/// Returns false and sets `error` on failure.
bool write_truth(const std::string& path, const catalog& torrents, const std::vector<seeder_view>& seeders,
                 const std::vector<node_view>& nodes, bool with_first_served, std::string& error);

} // namespace dhtc::testnet
