#include "net/address_policy.hpp"

namespace dhtc {

namespace {

// True when the top `bits` bits of `v` equal those of `prefix`.
constexpr bool in_v4(std::uint32_t v, std::uint32_t prefix, int bits) noexcept {
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    return (v & mask) == (prefix & mask);
}

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) noexcept {
    return std::uint32_t{a} << 24 | std::uint32_t{b} << 16 | std::uint32_t{c} << 8 | std::uint32_t{d};
}

address_class classify_v4(std::uint32_t a) noexcept {
    // Most specific first where ranges nest (255.255.255.255 inside 240/4).
    if (a == 0xffffffffu) return address_class::broadcast;
    if (in_v4(a, v4(0, 0, 0, 0), 8)) return address_class::unspecified;
    if (in_v4(a, v4(127, 0, 0, 0), 8)) return address_class::loopback;
    if (in_v4(a, v4(10, 0, 0, 0), 8) || in_v4(a, v4(172, 16, 0, 0), 12) || in_v4(a, v4(192, 168, 0, 0), 16) ||
        in_v4(a, v4(100, 64, 0, 0), 10))
        return address_class::private_use;
    if (in_v4(a, v4(169, 254, 0, 0), 16)) return address_class::link_local;
    if (in_v4(a, v4(224, 0, 0, 0), 4)) return address_class::multicast;
    if (in_v4(a, v4(240, 0, 0, 0), 4) || in_v4(a, v4(192, 0, 0, 0), 24) || in_v4(a, v4(192, 0, 2, 0), 24) ||
        in_v4(a, v4(198, 51, 100, 0), 24) || in_v4(a, v4(203, 0, 113, 0), 24) || in_v4(a, v4(198, 18, 0, 0), 15))
        return address_class::reserved;
    return address_class::global;
}

address_class classify_v6(const std::array<std::uint8_t, 16>& b) noexcept {
    bool zero_to_14 = true;
    for (int i = 0; i < 15; ++i) zero_to_14 = zero_to_14 && b[i] == 0;
    if (zero_to_14 && b[15] == 0) return address_class::unspecified;
    if (zero_to_14 && b[15] == 1) return address_class::loopback;
    if (b[0] == 0xff) return address_class::multicast;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return address_class::link_local;
    if ((b[0] & 0xfe) == 0xfc) return address_class::private_use;
    // Only 2000::/3 is allocated for global unicast; everything else left here (0::/8 with
    // the IPv4-compatible and NAT64 forms, 100::/64 discard, fec0::/10 site-local, the
    // unassigned blocks) never belongs to a reachable DHT node.
    if ((b[0] & 0xe0) != 0x20) return address_class::reserved;
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return address_class::reserved; // 2001:db8::/32
    if (b[0] == 0x3f && b[1] == 0xff && (b[2] & 0xf0) == 0x00) return address_class::reserved;        // 3fff::/20
    return address_class::global;
}

} // namespace

std::string_view to_string(address_class c) noexcept {
    switch (c) {
    case address_class::global: return "public";
    case address_class::private_use: return "private";
    case address_class::loopback: return "loopback";
    case address_class::link_local: return "link_local";
    case address_class::multicast: return "multicast";
    case address_class::unspecified: return "unspecified";
    case address_class::broadcast: return "broadcast";
    case address_class::reserved: return "reserved";
    }
    return "unknown";
}

std::string_view to_string(admission_verdict v) noexcept {
    switch (v) {
    case admission_verdict::ok: return "ok";
    case admission_verdict::own: return "own";
    case admission_verdict::port_zero: return "port_zero";
    case admission_verdict::private_use: return "private";
    case admission_verdict::loopback: return "loopback";
    case admission_verdict::link_local: return "link_local";
    case admission_verdict::multicast: return "multicast";
    case admission_verdict::unspecified: return "unspecified";
    case admission_verdict::broadcast: return "broadcast";
    case admission_verdict::reserved: return "reserved";
    }
    return "unknown";
}

bool is_v4_mapped(const ip_address& a) noexcept {
    if (!a.is_v6()) return false;
    const auto& b = a.raw();
    for (int i = 0; i < 10; ++i)
        if (b[i] != 0) return false;
    return b[10] == 0xff && b[11] == 0xff;
}

ip_address canonical(const ip_address& a) noexcept {
    if (!is_v4_mapped(a)) return a;
    const auto& b = a.raw();
    return ip_address::v4(std::array<std::uint8_t, 4>{b[12], b[13], b[14], b[15]});
}

endpoint canonical(const endpoint& ep) noexcept { return endpoint{canonical(ep.address), ep.port}; }

address_class classify(const ip_address& a) noexcept {
    const ip_address c = canonical(a);
    return c.is_v4() ? classify_v4(c.to_v4_uint()) : classify_v6(c.raw());
}

bool address_policy::add_own_address(const ip_address& a) noexcept {
    const ip_address c = canonical(a);
    for (std::size_t i = 0; i < own_address_count_; ++i)
        if (own_addresses_[i] == c) return true;
    if (own_address_count_ == max_own) return false;
    own_addresses_[own_address_count_++] = c;
    return true;
}

bool address_policy::add_own_endpoint(const endpoint& ep) noexcept {
    const endpoint c = canonical(ep);
    for (std::size_t i = 0; i < own_endpoint_count_; ++i)
        if (own_endpoints_[i] == c) return true;
    if (own_endpoint_count_ == max_own) return false;
    own_endpoints_[own_endpoint_count_++] = c;
    return true;
}

void address_policy::clear_own() noexcept {
    own_address_count_ = 0;
    own_endpoint_count_ = 0;
}

admission_verdict address_policy::verdict(const endpoint& ep) const noexcept {
    const endpoint c = canonical(ep);
    for (std::size_t i = 0; i < own_endpoint_count_; ++i)
        if (own_endpoints_[i] == c) return admission_verdict::own;
    for (std::size_t i = 0; i < own_address_count_; ++i)
        if (own_addresses_[i] == c.address) return admission_verdict::own;
    if (c.port == 0) return admission_verdict::port_zero;
    switch (classify(c.address)) {
    case address_class::global: return admission_verdict::ok;
    case address_class::private_use:
        return options_.allow_private_addresses ? admission_verdict::ok : admission_verdict::private_use;
    case address_class::loopback:
        return options_.allow_private_addresses ? admission_verdict::ok : admission_verdict::loopback;
    case address_class::link_local: return admission_verdict::link_local;
    case address_class::multicast: return admission_verdict::multicast;
    case address_class::unspecified: return admission_verdict::unspecified;
    case address_class::broadcast: return admission_verdict::broadcast;
    case address_class::reserved: return admission_verdict::reserved;
    }
    return admission_verdict::reserved;
}

subnet_key subnet_of(const ip_address& a) noexcept {
    const ip_address c = canonical(a);
    if (c.is_v4()) return subnet_key{std::uint64_t{1} << 32 | (c.to_v4_uint() >> 8)};
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | c.raw()[i];
    return subnet_key{v};
}

} // namespace dhtc
