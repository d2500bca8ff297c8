#include "testnet/address_plan.hpp"

#include <charconv>

#include "model/address.hpp"

namespace dhtc::testnet {

std::optional<cidr> cidr::parse_loopback(std::string_view text) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const auto ip = ip_address::parse(text.substr(0, slash));
    int prefix = -1;
    const auto bits = text.substr(slash + 1);
    const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
    if (!ip || !ip->is_v4() || ec != std::errc{} || end != bits.data() + bits.size()) return std::nullopt;
    if (prefix < 8 || prefix > 24) return std::nullopt;
    cidr c;
    c.prefix = prefix;
    c.base = ip->to_v4_uint() & (~std::uint32_t{0} << (32 - prefix));
    if ((c.base >> 24) != 127) return std::nullopt;
    return c;
}

std::optional<address_plan> address_plan::make(const cidr& range, std::size_t count, std::string& error) {
    const std::uint32_t subnets = std::uint32_t{1} << (24 - range.prefix);
    // 127.0.0.0/24 holds 127.0.0.1, where crawlers and other tests bind: keep out of it.
    const std::uint32_t first_subnet = (range.base >> 8) == (0x7f000000u >> 8) ? 1 : 0;
    const std::uint32_t usable = subnets - first_subnet;
    if (usable == 0 || count > std::size_t{usable} * 254) {
        error = "range too small for " + std::to_string(count) + " hosts";
        return std::nullopt;
    }
    address_plan p;
    p.addresses_.reserve(count);
    for (std::size_t k = 0; k < count; ++k) {
        const auto subnet = first_subnet + static_cast<std::uint32_t>(k % usable);
        const auto host = 1 + static_cast<std::uint32_t>(k / usable);
        p.addresses_.push_back(range.base + (subnet << 8) + host);
    }
    return p;
}

std::string ipv4_to_string(std::uint32_t host_order) { return ip_address::v4(host_order).to_string(); }

} // namespace dhtc::testnet
