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

peer_failures::kind peer_failures::remembered_as(api::failure_class c) noexcept {
    using api::failure_class;
    switch (c) {
    case failure_class::connect_refused:
    case failure_class::connect_timeout:
    case failure_class::utp_timeout:
    case failure_class::timeout: return kind::unreachable;
    case failure_class::handshake_failed: return kind::refused;
    default: return kind::none;
    }
}

peer_failures::peer_failures(peer_failures_options o)
    : unreachable_({o.capacity, o.ttl, o.hash_seed}),
      refused_({o.capacity, o.refusal_ttl, o.hash_seed ? o.hash_seed ^ 0x726566 : 0}),
      first_timeouts_({o.first_timeout_ttl < o.ttl ? o.capacity : 0, o.first_timeout_ttl,
                       o.hash_seed ? o.hash_seed ^ 0x666972 : 0}),
      timeouts_seen_({first_timeouts_.enabled() ? o.capacity : 0, o.ttl, o.hash_seed ? o.hash_seed ^ 0x736565 : 0}),
      first_refusals_({o.first_timeout_ttl < o.refusal_ttl ? o.capacity : 0, o.first_timeout_ttl,
                       o.hash_seed ? o.hash_seed ^ 0x667266 : 0}),
      refusals_seen_({first_refusals_.enabled() ? o.capacity : 0, o.refusal_ttl,
                      o.hash_seed ? o.hash_seed ^ 0x727366 : 0}) {}

void peer_failures::record(const endpoint& ep, api::failure_class c, time_point now) {
    switch (remembered_as(c)) {
    case kind::unreachable:
        if (api::is_timeout(c) && first_timeouts_.enabled() && !timeouts_seen_.contains(ep, now)) {
            timeouts_seen_.insert(ep, now);
            first_timeouts_.insert(ep, now);
        } else {
            unreachable_.insert(ep, now);
        }
        break;
    case kind::refused:
        if (first_refusals_.enabled() && !refusals_seen_.contains(ep, now)) {
            refusals_seen_.insert(ep, now);
            first_refusals_.insert(ep, now);
        } else {
            refused_.insert(ep, now);
        }
        break;
    case kind::none: break;
    }
}

} // namespace dhtc::metadata
