#include "dht/node_id.hpp"

#include <array>

namespace dhtc::dht {

id20 distance(const id20& a, const id20& b) noexcept {
    id20 d;
    for (std::size_t i = 0; i < id20::size; ++i) d.bytes[i] = static_cast<std::uint8_t>(a.bytes[i] ^ b.bytes[i]);
    return d;
}

bool closer_to(const id20& target, const id20& a, const id20& b) noexcept {
    // The first byte where the distances differ decides; no need to build both distances.
    for (std::size_t i = 0; i < id20::size; ++i) {
        const auto da = static_cast<std::uint8_t>(a.bytes[i] ^ target.bytes[i]);
        const auto db = static_cast<std::uint8_t>(b.bytes[i] ^ target.bytes[i]);
        if (da != db) return da < db;
    }
    return false;
}

int common_prefix_bits(const id20& a, const id20& b) noexcept {
    for (std::size_t i = 0; i < id20::size; ++i) {
        const auto x = static_cast<std::uint8_t>(a.bytes[i] ^ b.bytes[i]);
        if (x) return static_cast<int>(i * 8) + std::countl_zero(x);
    }
    return static_cast<int>(id20::size * 8);
}

id20 id_near(const id20& target, const id20& suffix, int prefix_bits) noexcept {
    if (prefix_bits < 0) prefix_bits = 0;
    if (prefix_bits > 160) prefix_bits = 160;
    id20 out = suffix;
    const auto whole = static_cast<std::size_t>(prefix_bits / 8);
    for (std::size_t i = 0; i < whole; ++i) out.bytes[i] = target.bytes[i];
    if (const int rest = prefix_bits % 8; rest != 0) {
        const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
        out.bytes[whole] = static_cast<std::uint8_t>((target.bytes[whole] & mask) | (suffix.bytes[whole] & ~mask));
    }
    return out;
}

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        t[i] = c;
    }
    return t;
}

constexpr auto crc32c_table = make_crc32c_table();

bool is_v4_mapped(const ip_address& ip) noexcept {
    if (!ip.is_v6()) return false;
    const auto& b = ip.raw();
    for (int i = 0; i < 10; ++i)
        if (b[i] != 0) return false;
    return b[10] == 0xff && b[11] == 0xff;
}

ip_address unmap(const ip_address& ip) noexcept {
    if (!is_v4_mapped(ip)) return ip;
    const auto& b = ip.raw();
    return ip_address::v4(std::array<std::uint8_t, 4>{b[12], b[13], b[14], b[15]});
}

// The 21 checked bits of a BEP-42 id for this address and r, as the first three bytes
// (the low 3 bits of the third are not part of the check and come back zero).
std::array<std::uint8_t, 3> bep42_prefix(const ip_address& ip, std::uint8_t r) noexcept {
    static constexpr std::uint8_t v4_mask[4] = {0x03, 0x0f, 0x3f, 0xff};
    static constexpr std::uint8_t v6_mask[8] = {0x01, 0x03, 0x07, 0x0f, 0x1f, 0x3f, 0x7f, 0xff};
    const ip_address a = unmap(ip);
    char buf[8];
    const std::size_t n = a.is_v6() ? 8 : 4;
    const std::uint8_t* mask = a.is_v6() ? v6_mask : v4_mask;
    for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<char>(a.raw()[i] & mask[i]);
    buf[0] = static_cast<char>(static_cast<std::uint8_t>(buf[0]) | ((r & 0x7) << 5));
    const std::uint32_t crc = crc32c(std::string_view(buf, n));
    return {static_cast<std::uint8_t>(crc >> 24), static_cast<std::uint8_t>(crc >> 16),
            static_cast<std::uint8_t>((crc >> 8) & 0xf8)};
}

} // namespace

std::uint32_t crc32c(std::string_view data) noexcept {
    std::uint32_t c = 0xffffffffu;
    for (unsigned char b : data) c = crc32c_table[(c ^ b) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

id20 bep42_id(const ip_address& ip, std::uint8_t r, const id20& random_rest) noexcept {
    const auto p = bep42_prefix(ip, r);
    id20 id = random_rest;
    id.bytes[0] = p[0];
    id.bytes[1] = p[1];
    id.bytes[2] = static_cast<std::uint8_t>(p[2] | (random_rest.bytes[2] & 0x07));
    id.bytes[19] = r;
    return id;
}

bool bep42_valid(const id20& id, const ip_address& ip) noexcept {
    const auto p = bep42_prefix(ip, id.bytes[19]);
    return id.bytes[0] == p[0] && id.bytes[1] == p[1] && (id.bytes[2] & 0xf8) == p[2];
}

bool bep42_exempt(const ip_address& ip) noexcept {
    const ip_address a = unmap(ip);
    const auto& b = a.raw();
    if (a.is_v4()) {
        return b[0] == 0                                  // "this network"
               || b[0] == 10                              // RFC 1918
               || (b[0] == 100 && (b[1] & 0xc0) == 64)    // shared address space (CGN)
               || b[0] == 127                             // loopback
               || (b[0] == 169 && b[1] == 254)            // link-local
               || (b[0] == 172 && (b[1] & 0xf0) == 16)    // RFC 1918
               || (b[0] == 192 && b[1] == 168);           // RFC 1918
    }
    bool zero_to_14 = true;
    for (int i = 0; i < 15; ++i)
        if (b[i] != 0) zero_to_14 = false;
    if (zero_to_14 && (b[15] == 0 || b[15] == 1)) return true; // :: and ::1
    if ((b[0] & 0xfe) == 0xfc) return true;                     // unique local fc00::/7
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return true;     // link-local fe80::/10
    return false;
}

} // namespace dhtc::dht
