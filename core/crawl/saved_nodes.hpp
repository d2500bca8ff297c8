// The routing state a crawler keeps across restarts: a bounded, versioned list of nodes that
// answered us (the responsive ring), saved periodically and at shutdown into the retry store
// or a state file, and queried first at the next start, before any bootstrap source.
//
// The encoding is ours and small: "DHTCRT1\n", the save time (unix seconds, 8 bytes big
// endian), the count (4 bytes), then per node a family byte (4 or 6), the 20-byte id, the
// address and the port. decode() is hostile-input safe: a file or a row another program
// wrote is refused as a whole, never half read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "krpc/compact.hpp"

namespace dhtc::crawl {

/// Most nodes one saved state holds.
inline constexpr std::size_t max_saved_nodes = 2048;

struct saved_nodes {
    std::int64_t saved_at = 0; ///< unix seconds
    std::vector<krpc::node_entry> nodes;
};

std::string encode(const saved_nodes& s);
/// Nothing when `bytes` is not a saved state of ours (foreign, truncated, too many nodes).
std::optional<saved_nodes> decode_saved_nodes(std::string_view bytes);

/// Reads a state file: nothing (and `why` says so) when it is missing, unreadable, larger
/// than a state can be, or not ours.
std::optional<saved_nodes> read_state_file(const std::string& path, std::string& why);
/// Writes a state file atomically (a temporary file renamed over it); false and `why`.
bool write_state_file(const std::string& path, const saved_nodes& s, std::string& why);

} // namespace dhtc::crawl
