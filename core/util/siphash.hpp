// SipHash-2-4: a fast keyed hash (Aumasson & Bernstein). Used where a value must be
// unpredictable to outsiders but cheap to compute per packet, e.g. get_peers tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace dhtc {

using siphash_key = std::array<std::uint64_t, 2>;

/// SipHash-2-4 of `data` under `key`. No allocation; constant work per 8 bytes.
std::uint64_t siphash24(const siphash_key& key, std::string_view data) noexcept;

} // namespace dhtc
