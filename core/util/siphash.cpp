#include "util/siphash.hpp"

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

std::uint64_t load_le64(const unsigned char* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
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
    unsigned char tail[8] = {};
    std::memcpy(tail, p + whole, n - whole);
    const std::uint64_t b = (static_cast<std::uint64_t>(n) << 56) | load_le64(tail);
    s.v3 ^= b;
    s.round();
    s.round();
    s.v0 ^= b;
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

} // namespace dhtc
