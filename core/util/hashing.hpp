// SHA-1 and SHA-256 of byte spans, for info hashes (v1 = SHA-1, v2 = SHA-256) and for
// verifying fetched metadata. OpenSSL's one-shot EVP_Digest; no deprecated APIs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "util/id20.hpp"

namespace dhtc::metadata {

using sha1_digest = std::array<std::uint8_t, 20>;
using sha256_digest = std::array<std::uint8_t, 32>;

/// SHA-1 of `data`. Thread-safe. On an internal OpenSSL failure (allocation) the result
/// is all zeros, which no caller can mistake for a real hash of metadata (see is_zero()).
sha1_digest sha1(std::span<const std::uint8_t> data) noexcept;
sha1_digest sha1(std::string_view data) noexcept;

/// SHA-256 of `data`. Same failure rule as sha1().
sha256_digest sha256(std::span<const std::uint8_t> data) noexcept;
sha256_digest sha256(std::string_view data) noexcept;

/// The v1 info hash of `data` as an id20.
id20 sha1_id(std::string_view data) noexcept;
/// The v2 info hash of `data` truncated to 20 bytes: the key a v2 torrent has in the DHT
/// and in the peer-wire handshake.
id20 sha256_id(std::string_view data) noexcept;

/// A digest as an id20 (the whole SHA-1; the first 20 bytes of a SHA-256).
id20 to_id20(const sha1_digest& d) noexcept;
id20 truncate_to_id20(const sha256_digest& d) noexcept;

/// True when every byte is zero: the failure value of sha1()/sha256().
template <std::size_t N>
bool is_zero(const std::array<std::uint8_t, N>& d) noexcept {
    for (auto b : d)
        if (b) return false;
    return true;
}

} // namespace dhtc::metadata
