#include "util/id20.hpp"

namespace dhtc {

namespace {
int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
} // namespace

std::optional<id20> id20::from_hex(std::string_view hex) noexcept {
    if (hex.size() != 2 * size) return std::nullopt;
    id20 id;
    for (std::size_t i = 0; i < size; ++i) {
        const int hi = hex_digit(hex[2 * i]);
        const int lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        id.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return id;
}

std::string id20::hex() const { return to_hex(view()); }

std::string to_hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(bytes.size() * 2, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const auto b = static_cast<std::uint8_t>(bytes[i]);
        out[2 * i] = digits[b >> 4];
        out[2 * i + 1] = digits[b & 0xf];
    }
    return out;
}

} // namespace dhtc
