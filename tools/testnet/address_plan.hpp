// Where every simulated host lives: one loopback address each inside --range, spread
// across as many /24s as the range holds, so per-IP and per-subnet logic in a crawler
// sees many distinct networks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dhtc::testnet {

/// An IPv4 prefix such as 127.64.0.0/10, in host byte order.
struct cidr {
    std::uint32_t base = 0;
    int prefix = 0;
    /// Parses "a.b.c.d/n"; nothing unless it is inside 127.0.0.0/8 with n in 8..24.
    static std::optional<cidr> parse_loopback(std::string_view text);
};

/// Assigns hosts 0..count-1 an address each: host k goes to /24 number k mod (number of
/// /24s), host byte 1 + k / (number of /24s). Never .0 or .255, never 127.0.0.0/24.
class address_plan {
public:
    /// Empty optional when the range cannot hold `count` hosts.
    static std::optional<address_plan> make(const cidr& range, std::size_t count, std::string& error);

    std::uint32_t address(std::size_t host) const noexcept { return addresses_[host]; }
    std::size_t size() const noexcept { return addresses_.size(); }

private:
    std::vector<std::uint32_t> addresses_;
};

std::string ipv4_to_string(std::uint32_t host_order);

} // namespace dhtc::testnet
