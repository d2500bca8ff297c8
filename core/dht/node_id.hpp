// Node id arithmetic for the Kademlia metric (XOR distance, shared prefixes), id
// generation from a caller-supplied random source, and BEP-42 (ids bound to the IP).
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::dht {

using node_id = id20;

/// XOR distance between two ids; compare distances with operator<=> (big-endian order).
id20 distance(const id20& a, const id20& b) noexcept;

/// True when `a` is strictly closer to `target` than `b` is.
bool closer_to(const id20& target, const id20& a, const id20& b) noexcept;

/// Number of leading bits `a` and `b` share: 0..160 (160 when equal).
int common_prefix_bits(const id20& a, const id20& b) noexcept;

/// The first `prefix_bits` bits (clamped to 0..160) of `target`, the rest from `suffix`.
/// The sender-id trick: answering with an id next to the target makes the querier keep us
/// as a neighbour of that target while the suffix still carries our own bits.
id20 id_near(const id20& target, const id20& suffix, int prefix_bits) noexcept;

/// A random source: a callable returning unsigned integers. If it is a
/// UniformRandomBitGenerator (has min()/max(), e.g. std::mt19937 or std::mt19937_64) only
/// the bits its max() covers are used; otherwise every bit of the result type is.
template <class G>
concept random_source = requires(G& g) {
    { g() } -> std::unsigned_integral;
};

/// 20 random bytes drawn from `gen`. Deterministic for a seeded generator (tests).
template <random_source G>
id20 random_id(G& gen) {
    using result = std::remove_cvref_t<decltype(gen())>;
    std::size_t bytes_per_draw = sizeof(result);
    if constexpr (requires { G::min(); G::max(); }) {
        // A URBG like std::mt19937 returns 32 random bits in a 64-bit type on LP64.
        bytes_per_draw = static_cast<std::size_t>(std::bit_width(G::max()) / 8);
        if (bytes_per_draw == 0) bytes_per_draw = 1;
        if (bytes_per_draw > sizeof(result)) bytes_per_draw = sizeof(result);
    }
    id20 id;
    std::size_t i = 0;
    while (i < id20::size) {
        auto v = static_cast<std::uint64_t>(gen());
        for (std::size_t k = 0; k < bytes_per_draw && i < id20::size; ++k, ++i) {
            id.bytes[i] = static_cast<std::uint8_t>(v & 0xff);
            v >>= 8;
        }
    }
    return id;
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), table-driven in software.
std::uint32_t crc32c(std::string_view data) noexcept;

/// BEP-42 id for `ip`: the top 21 bits come from crc32c of the masked address with the
/// low 3 bits of `r` mixed in, byte 19 is `r`, everything else is taken from `random_rest`.
/// A v4-mapped IPv6 address (::ffff:a.b.c.d) is treated as the IPv4 address.
id20 bep42_id(const ip_address& ip, std::uint8_t r, const id20& random_rest) noexcept;

/// Same, with the random bytes drawn from `gen`.
template <random_source G>
id20 bep42_id(const ip_address& ip, std::uint8_t r, G& gen) {
    return bep42_id(ip, r, random_id(gen));
}

/// True when `id` satisfies BEP-42 for `ip` (top 21 bits match the crc for r = id[19]).
/// Does not consider exemptions: callers accept `bep42_exempt(ip) || bep42_valid(id, ip)`.
bool bep42_valid(const id20& id, const ip_address& ip) noexcept;

/// Addresses BEP-42 does not apply to: unspecified, loopback, private (RFC 1918), shared
/// (100.64/10), link-local, IPv6 unique-local and link-local; v4-mapped v6 by its v4 rule.
bool bep42_exempt(const ip_address& ip) noexcept;

} // namespace dhtc::dht
