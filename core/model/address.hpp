// IP addresses and endpoints as plain values, independent of any socket library, so the
// codecs, the crawl logic and the fuzzers never need Asio.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dhtc {

class ip_address {
public:
    ip_address() = default;

    static ip_address v4(std::array<std::uint8_t, 4> b) noexcept;
    static ip_address v4(std::uint32_t host_order) noexcept;
    static ip_address v6(const std::array<std::uint8_t, 16>& b) noexcept;
    /// 4 or 16 raw network-order bytes, or nothing.
    static std::optional<ip_address> from_bytes(std::string_view raw) noexcept;
    /// Dotted quad or RFC 4291 text (no zone ids), or nothing.
    static std::optional<ip_address> parse(std::string_view text) noexcept;

    bool is_v4() const noexcept { return !v6_; }
    bool is_v6() const noexcept { return v6_; }
    /// 4 or 16 network-order bytes.
    std::string_view bytes() const noexcept {
        return {reinterpret_cast<const char*>(b_.data()), v6_ ? std::size_t{16} : std::size_t{4}};
    }
    const std::array<std::uint8_t, 16>& raw() const noexcept { return b_; }
    std::uint32_t to_v4_uint() const noexcept; ///< host order; 0 for v6

    std::string to_string() const;

    auto operator<=>(const ip_address&) const = default;

private:
    std::array<std::uint8_t, 16> b_{}; // v4 uses the first 4 bytes
    bool v6_ = false;
};

struct endpoint {
    ip_address address;
    std::uint16_t port = 0;

    /// "1.2.3.4:6881", or "[::1]:6881" for IPv6.
    std::string to_string() const;
    /// Parses the form to_string() produces; nothing on anything else.
    static std::optional<endpoint> parse(std::string_view text) noexcept;

    auto operator<=>(const endpoint&) const = default;
};

/// Why split_host_port() refused a text.
enum class host_port_error : std::uint8_t {
    none,
    unclosed_bracket,  ///< "[" without "]"
    no_port,           ///< no ":" (or nothing but "]" after the brackets, or "]x")
    unbracketed_colon, ///< "::1:80": an IPv6 literal must be in brackets
    empty_host,        ///< ":80" or "[]:80"
    bad_port,          ///< not 1 to 5 decimal digits up to 65535 (0 is a port here)
};

/// "host:port" or "[v6 literal]:port", split. `host` is a view into the text, without the
/// brackets; on an error, `host` and `bracketed` hold what was read before it (so a caller
/// can still say "[x] is not an IPv6 address" for "[x]"). The host itself is not checked:
/// it may be a name, an address, or (in brackets) anything but "]".
struct host_port {
    std::string_view host;
    std::uint16_t port = 0;
    bool bracketed = false;
    host_port_error error = host_port_error::none;

    explicit operator bool() const noexcept { return error == host_port_error::none; }
};

/// The one host:port splitter (endpoint::parse, the bootstrap resolver and the options check).
host_port split_host_port(std::string_view text) noexcept;

struct endpoint_hash {
    std::size_t operator()(const endpoint& e) const noexcept;
};

} // namespace dhtc
