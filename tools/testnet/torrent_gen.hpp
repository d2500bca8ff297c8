// Generated torrents: info dicts of every kind a crawler meets (v1 single and multi-file,
// v2, hybrid with pad files, unicode names), from one metadata piece to more than 30.
// Everything is a pure function of (seed, index), so an info dict can be regenerated
// whenever a seeder serves it instead of being kept in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/id20.hpp"

namespace dhtc::testnet {

/// The raw bencoded info dict of torrent `index`. Piece hashes and roots are random bytes:
/// only the info dict matters to a metadata crawler.
std::string make_info_dict(std::uint64_t seed, std::size_t index);


} // namespace dhtc::testnet
