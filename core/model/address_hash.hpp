// Keyed hashes of addresses and endpoints for the tables that a peer's packets fill (slot
// indexes, expiring sets): keyed with SipHash so a peer cannot choose colliding entries.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "model/address.hpp"
#include "util/siphash.hpp"

namespace dhtc {
namespace detail {

/// Keyed hash of an address (use the canonical form: equal nodes must hash equal).
inline std::uint64_t hash_address(const siphash_key& key, const ip_address& a) noexcept {
    char buf[17];
    const auto b = a.bytes();
    std::memcpy(buf, b.data(), b.size());
    buf[b.size()] = a.is_v6() ? '6' : '4';
    return siphash24(key, std::string_view(buf, b.size() + 1));
}

/// Keyed hash of an endpoint (address, port, family).
inline std::uint64_t hash_endpoint(const siphash_key& key, const ip_address& a, std::uint16_t port) noexcept {
    char buf[19];
    const auto b = a.bytes();
    std::memcpy(buf, b.data(), b.size());
    buf[b.size()] = static_cast<char>(port >> 8);
    buf[b.size() + 1] = static_cast<char>(port & 0xff);
    buf[b.size() + 2] = a.is_v6() ? '6' : '4';
    return siphash24(key, std::string_view(buf, b.size() + 3));
}

} // namespace detail

/// Hashes an endpoint in its canonical form with detail::hash_endpoint.
struct expiring_endpoint_hash {
    std::uint64_t operator()(const siphash_key& k, const endpoint& ep) const noexcept {
        return detail::hash_endpoint(k, ep.address, ep.port);
    }
};

} // namespace dhtc
