#include "util/siphash.hpp"

#include <bit>
#include <cstring>

namespace dhtc {

namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) noexcept { return (x << b) | (x >> (64 - b)); }

struct state {
    std::uint64_t v0, v1, v2, v3;
    void round() noexcept {
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
    }
};

// One load rather than eight byte steps: this runs for every packet (tokens, per-source
// budgets), mostly on 5- to 17-byte inputs.
std::uint64_t load_le64(const unsigned char* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
}

// The last 0..7 bytes, little-endian, without a variable-length memcpy call.
std::uint64_t load_le_tail(const unsigned char* p, std::size_t n) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = n; i > 0; --i) v = v << 8 | p[i - 1];
    return v;
}

} // namespace

std::uint64_t siphash24(const siphash_key& key, std::string_view data) noexcept {
    state s{key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull, key[0] ^ 0x6c7967656e657261ull,
            key[1] ^ 0x7465646279746573ull};
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const std::size_t n = data.size();
    const std::size_t whole = n & ~std::size_t{7};
    for (std::size_t i = 0; i < whole; i += 8) {
        const std::uint64_t m = load_le64(p + i);
        s.v3 ^= m;
        s.round();
        s.round();
        s.v0 ^= m;
    }
    const std::uint64_t b = (static_cast<std::uint64_t>(n) << 56) | load_le_tail(p + whole, n - whole);
    s.v3 ^= b;
    s.round();
    s.round();
    s.v0 ^= b;
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

} // namespace dhtc
