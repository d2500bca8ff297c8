// A 160-bit identifier: DHT node ids, info hashes, lookup targets and peer ids.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace dhtc {

struct id20 {
    static constexpr std::size_t size = 20;
    std::array<std::uint8_t, size> bytes{};

    /// Exactly 20 raw bytes, or nothing.
    static std::optional<id20> from_bytes(std::string_view raw) noexcept {
        if (raw.size() != size) return std::nullopt;
        id20 id;
        std::memcpy(id.bytes.data(), raw.data(), size);
        return id;
    }
    /// Exactly 40 hex digits (either case), or nothing.
    static std::optional<id20> from_hex(std::string_view hex) noexcept;

    std::string_view view() const noexcept { return {reinterpret_cast<const char*>(bytes.data()), size}; }
    std::string hex() const;
    bool is_zero() const noexcept {
        for (auto b : bytes)
            if (b) return false;
        return true;
    }

    auto operator<=>(const id20&) const = default;
};

/// Lower-case hex of arbitrary bytes.
std::string to_hex(std::string_view bytes);

struct id20_hash {
    std::size_t operator()(const id20& id) const noexcept {
        // Ids are uniformly distributed (hashes), so any 8 bytes make a good hash.
        std::size_t h;
        std::memcpy(&h, id.bytes.data(), sizeof h);
        return h;
    }
};

} // namespace dhtc
