#include "krpc/scrape_bloom.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "util/hashing.hpp"

namespace dhtc::krpc {

namespace {

constexpr int k = 2;

// The two bit positions of an address: the first four bytes of SHA-1(ip), little-endian
// pairs, modulo m (BEP-33's insertIP).
std::array<std::size_t, k> positions(const ip_address& ip) noexcept {
    const auto h = metadata::sha1(ip.bytes());
    return {(std::size_t{h[0]} | std::size_t{h[1]} << 8) % scrape_bloom::bits,
            (std::size_t{h[2]} | std::size_t{h[3]} << 8) % scrape_bloom::bits};
}

} // namespace

void scrape_bloom::insert(const ip_address& ip) noexcept {
    for (const auto i : positions(ip)) bytes_[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
}

bool scrape_bloom::contains(const ip_address& ip) const noexcept {
    const auto p = positions(ip);
    return std::all_of(p.begin(), p.end(), [&](std::size_t i) { return (bytes_[i / 8] >> (i % 8)) & 1u; });
}

bool scrape_bloom::merge(std::string_view wire) noexcept {
    if (wire.size() != size) return false;
    for (std::size_t i = 0; i < size; ++i) bytes_[i] |= static_cast<std::uint8_t>(wire[i]);
    return true;
}

void scrape_bloom::merge(const scrape_bloom& other) noexcept {
    for (std::size_t i = 0; i < size; ++i) bytes_[i] |= other.bytes_[i];
}

bool scrape_bloom::empty() const noexcept {
    return std::all_of(bytes_.begin(), bytes_.end(), [](std::uint8_t b) { return b == 0; });
}

double scrape_bloom::estimate() const noexcept {
    std::size_t ones = 0;
    for (const auto b : bytes_) ones += static_cast<std::size_t>(std::popcount(b));
    if (ones == 0) return 0.0;
    const double m = static_cast<double>(bits);
    const double zeros = static_cast<double>(std::clamp<std::size_t>(bits - ones, 1, bits - 1));
    return std::log(zeros / m) / (k * std::log1p(-1.0 / m));
}

} // namespace dhtc::krpc
