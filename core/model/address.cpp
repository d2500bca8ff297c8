#include "model/address.hpp"

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

host_port split_host_port(std::string_view text) noexcept {
    host_port r;
    std::string_view port_text;
    if (!text.empty() && text.front() == '[') {
        r.bracketed = true;
        const auto close = text.find(']');
        if (close == std::string_view::npos) {
            r.error = host_port_error::unclosed_bracket;
            return r;
        }
        r.host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') {
            r.error = host_port_error::no_port;
            return r;
        }
        port_text = text.substr(close + 2);
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            r.error = host_port_error::no_port;
            return r;
        }
        r.host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
        if (r.host.find(':') != std::string_view::npos) {
            r.error = host_port_error::unbracketed_colon;
            return r;
        }
    }
    if (r.host.empty()) {
        r.error = host_port_error::empty_host;
        return r;
    }
    // Digits only: from_chars alone would take "000000080".
    unsigned port = 0;
    const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                        port_text.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits) std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (!digits || port > 65535) {
        r.error = host_port_error::bad_port;
        return r;
    }
    r.port = static_cast<std::uint16_t>(port);
    return r;
}

std::optional<endpoint> endpoint::parse(std::string_view text) noexcept {
    const host_port hp = split_host_port(text);
    if (!hp) return std::nullopt;
    auto addr = ip_address::parse(hp.host);
    // IPv6 exactly when bracketed ("[1.2.3.4]:1" is refused like "::1:1").
    if (!addr || addr->is_v6() != hp.bracketed) return std::nullopt;
    return endpoint{*addr, hp.port};
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
