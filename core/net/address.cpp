#include "net/address.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace dhtc {

ip_address ip_address::v4(std::array<std::uint8_t, 4> b) noexcept {
    ip_address a;
    std::memcpy(a.b_.data(), b.data(), 4);
    return a;
}

ip_address ip_address::v4(std::uint32_t host_order) noexcept {
    return v4({static_cast<std::uint8_t>(host_order >> 24), static_cast<std::uint8_t>(host_order >> 16),
               static_cast<std::uint8_t>(host_order >> 8), static_cast<std::uint8_t>(host_order)});
}

ip_address ip_address::v6(const std::array<std::uint8_t, 16>& b) noexcept {
    ip_address a;
    a.b_ = b;
    a.v6_ = true;
    return a;
}

std::optional<ip_address> ip_address::from_bytes(std::string_view raw) noexcept {
    ip_address a;
    if (raw.size() == 4) {
        std::memcpy(a.b_.data(), raw.data(), 4);
        return a;
    }
    if (raw.size() == 16) {
        std::memcpy(a.b_.data(), raw.data(), 16);
        a.v6_ = true;
        return a;
    }
    return std::nullopt;
}

std::optional<ip_address> ip_address::parse(std::string_view text) noexcept {
    char buf[INET6_ADDRSTRLEN + 1];
    if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    ip_address a;
    if (inet_pton(AF_INET, buf, a.b_.data()) == 1) return a;
    if (inet_pton(AF_INET6, buf, a.b_.data()) == 1) {
        a.v6_ = true;
        return a;
    }
    return std::nullopt;
}

std::uint32_t ip_address::to_v4_uint() const noexcept {
    if (v6_) return 0;
    return std::uint32_t{b_[0]} << 24 | std::uint32_t{b_[1]} << 16 | std::uint32_t{b_[2]} << 8 | b_[3];
}

std::string ip_address::to_string() const {
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(v6_ ? AF_INET6 : AF_INET, b_.data(), buf, sizeof buf)) return {};
    return buf;
}

std::string endpoint::to_string() const {
    std::string s = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    s += ':';
    s += std::to_string(port);
    return s;
}

std::optional<endpoint> endpoint::parse(std::string_view text) noexcept {
    std::string_view host;
    std::string_view port_text;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
        host = text.substr(1, close - 1);
        port_text = text.substr(close + 2);
        auto a = ip_address::parse(host);
        if (!a || !a->is_v6()) return std::nullopt;
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos) return std::nullopt;
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
    }
    auto addr = ip_address::parse(host);
    if (!addr) return std::nullopt;
    if (addr->is_v6() && text.front() != '[') return std::nullopt;
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port_text.empty() || port > 65535)
        return std::nullopt;
    return endpoint{*addr, static_cast<std::uint16_t>(port)};
}

std::size_t endpoint_hash::operator()(const endpoint& e) const noexcept {
    // FNV-1a over the address bytes and port: cheap, no allocation.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : e.address.bytes()) h = (h ^ c) * 1099511628211ull;
    h = (h ^ (e.port & 0xff)) * 1099511628211ull;
    h = (h ^ (e.port >> 8)) * 1099511628211ull;
    return static_cast<std::size_t>(h ^ (e.address.is_v6() ? 0x9e3779b97f4a7c15ull : 0));
}

} // namespace dhtc
