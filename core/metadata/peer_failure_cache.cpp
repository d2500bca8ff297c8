#include "metadata/peer_failure_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "net/address_policy.hpp"

namespace dhtc::metadata {

namespace {
constexpr std::chrono::seconds max_ttl{24 * 3600};
} // namespace

peer_failure_cache::peer_failure_cache(peer_failure_cache_options options)
    : base({.capacity = options.ttl.count() <= 0 ? 0 : std::min<std::size_t>(options.capacity, (std::size_t{1} << 24) - 2),
            .ttl = std::clamp(options.ttl, std::chrono::seconds{0}, max_ttl),
            .repeat = expiring_repeat::keep,
            .hash_seed = options.hash_seed}) {}

ring_keys::peer_key peer_failure_cache::key_of(const endpoint& ep) noexcept {
    const endpoint c = canonical(ep);
    ring_keys::peer_key k{};
    std::memcpy(k.b, c.address.raw().data(), 16);
    k.b[16] = static_cast<std::uint8_t>(c.port >> 8);
    k.b[17] = static_cast<std::uint8_t>(c.port & 0xff);
    k.b[18] = c.address.is_v6() ? 1 : 0;
    return k;
}

std::uint64_t ring_keys::peer_key_hash::operator()(const siphash_key& k, const peer_key& p) const noexcept {
    return siphash24(k, std::string_view(reinterpret_cast<const char*>(p.b), sizeof p.b));
}

} // namespace dhtc::metadata
