#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>

#include "dht/node_id.hpp"

using namespace dhtc;
using namespace dhtc::dht;

namespace {

id20 hex_id(const char* h) {
    auto id = id20::from_hex(h);
    REQUIRE(id);
    return *id;
}

ip_address ip(const char* text) {
    auto a = ip_address::parse(text);
    REQUIRE(a);
    return *a;
}

id20 with_byte(std::size_t i, std::uint8_t b) {
    id20 id;
    id.bytes[i] = b;
    return id;
}

struct bep42_vector {
    const char* ip;
    std::uint8_t r;
    const char* id;
};

// BEP-42's table: only the first 21 bits and the last byte are determined by (ip, r).
constexpr bep42_vector bep42_vectors[] = {
    {"124.31.75.21", 1, "5fbfbff10c5d6a4ec8a88e4c6ab4c28b95eee401"},
    {"21.75.31.124", 86, "5a3ce9c14e7a08645677bbd1cfe7d8f956d53256"},
    {"65.23.51.170", 22, "a5d43220bc8f112a3d426c84764f8c2a1150e616"},
    {"84.124.73.14", 65, "1b0321dd1bb1fe518101ceef99462b947a01ff41"},
    {"43.213.53.83", 90, "e56f6cbf5b7c4be0237986d5243b87aa6d51305a"},
};

} // namespace

TEST_SUITE("node_id") {

TEST_CASE("xor distance and closer_to") {
    const id20 a = hex_id("0000000000000000000000000000000000000001");
    const id20 b = hex_id("8000000000000000000000000000000000000000");
    const id20 t = hex_id("0000000000000000000000000000000000000000");
    CHECK(distance(a, a).is_zero());
    CHECK(distance(a, b) == hex_id("8000000000000000000000000000000000000001"));
    CHECK(distance(a, b) == distance(b, a));
    CHECK(closer_to(t, a, b));
    CHECK_FALSE(closer_to(t, b, a));
    CHECK_FALSE(closer_to(t, a, a)); // strict
    // Agrees with comparing distances as big-endian numbers.
    std::mt19937_64 rng(7);
    for (int i = 0; i < 200; ++i) {
        const id20 x = random_id(rng), y = random_id(rng), z = random_id(rng);
        CHECK(closer_to(x, y, z) == (distance(x, y) < distance(x, z)));
    }
}

TEST_CASE("common prefix length covers 0..160") {
    const id20 zero;
    CHECK(common_prefix_bits(zero, zero) == 160);
    CHECK(common_prefix_bits(zero, with_byte(0, 0x80)) == 0);
    CHECK(common_prefix_bits(zero, with_byte(0, 0x01)) == 7);
    CHECK(common_prefix_bits(zero, with_byte(1, 0x40)) == 9);
    CHECK(common_prefix_bits(zero, with_byte(19, 0x01)) == 159);
    CHECK(common_prefix_bits(with_byte(5, 0xff), with_byte(5, 0xf7)) == 44);
}

TEST_CASE("random ids are deterministic for a seeded source and use all bytes") {
    std::mt19937_64 a(42), b(42);
    const id20 x = random_id(a);
    CHECK(x == random_id(b));
    CHECK_FALSE(x == random_id(a));

    // A 32-bit URBG in a wider result type must not leave zero bytes behind.
    std::mt19937 narrow(1);
    int zero_bytes = 0;
    for (int i = 0; i < 50; ++i)
        for (auto byte : random_id(narrow).bytes) zero_bytes += byte == 0;
    CHECK(zero_bytes < 20); // ~4 expected from 1000 uniform bytes; 500 if half were zero

    // A plain callable works too.
    std::uint64_t state = 0;
    auto counter = [&state]() -> std::uint64_t { return ++state; };
    const id20 c = random_id(counter);
    CHECK(c.bytes[0] == 1);
    CHECK(c.bytes[8] == 2);
    CHECK(c.bytes[16] == 3);
}

TEST_CASE("id_near keeps the target prefix and our suffix") {
    const id20 target = hex_id("ffffffffffffffffffffffffffffffffffffffff");
    const id20 own;
    CHECK(id_near(target, own, 0) == own);
    CHECK(id_near(target, own, 160) == target);
    CHECK(id_near(target, own, 500) == target);
    CHECK(id_near(target, own, -3) == own);
    const id20 n = id_near(target, own, 13);
    CHECK(common_prefix_bits(n, target) == 13);
    CHECK(n == hex_id("fff8000000000000000000000000000000000000"));

    std::mt19937_64 rng(3);
    for (int bits = 0; bits <= 160; bits += 7) {
        const id20 t = random_id(rng), s = random_id(rng);
        const id20 m = id_near(t, s, bits);
        CHECK(common_prefix_bits(m, t) >= bits);
        // Everything after the prefix is the suffix's.
        for (int i = bits; i < 160; ++i) {
            const auto bit = [&](const id20& v) { return (v.bytes[i / 8] >> (7 - i % 8)) & 1; };
            REQUIRE(bit(m) == bit(s));
        }
    }
}

TEST_CASE("crc32c check value") {
    CHECK(crc32c("123456789") == 0xe3069283u);
    CHECK(crc32c("") == 0u);
}

TEST_CASE("BEP-42 test vectors") {
    for (const auto& v : bep42_vectors) {
        CAPTURE(v.ip);
        const id20 expected = hex_id(v.id);
        const ip_address addr = ip(v.ip);
        // The vector itself validates.
        CHECK(bep42_valid(expected, addr));
        // Generating with the vector's remaining bytes reproduces it exactly.
        const id20 generated = bep42_id(addr, v.r, expected);
        CHECK(generated == expected);
        // Whatever the random bytes, the first 21 bits and the last byte are fixed.
        std::mt19937_64 rng(v.r);
        const id20 other = bep42_id(addr, v.r, rng);
        CHECK(other.bytes[0] == expected.bytes[0]);
        CHECK(other.bytes[1] == expected.bytes[1]);
        CHECK((other.bytes[2] & 0xf8) == (expected.bytes[2] & 0xf8));
        CHECK(other.bytes[19] == v.r);
        CHECK(bep42_valid(other, addr));
    }
}

TEST_CASE("BEP-42 rejects ids not derived from the address") {
    const id20 good = hex_id("5fbfbff10c5d6a4ec8a88e4c6ab4c28b95eee401");
    CHECK_FALSE(bep42_valid(good, ip("124.31.75.22"))); // different address
    id20 bad = good;
    bad.bytes[2] ^= 0x08; // the 21st bit
    CHECK_FALSE(bep42_valid(bad, ip("124.31.75.21")));
    bad = good;
    bad.bytes[2] ^= 0x04; // below the checked bits
    CHECK(bep42_valid(bad, ip("124.31.75.21")));
    bad = good;
    bad.bytes[19] = 2; // a different r changes the crc
    CHECK_FALSE(bep42_valid(bad, ip("124.31.75.21")));
    // Masked-out address bits do not matter: 124 & 0x03 == 0 == 128 & 0x03.
    CHECK(bep42_valid(good, ip("0.31.75.21")));
}

TEST_CASE("BEP-42 for IPv6 and v4-mapped addresses") {
    std::mt19937_64 rng(11);
    const ip_address v6 = ip("2001:db8:1234:5678:9abc::1");
    for (std::uint8_t r : {0, 5, 200}) {
        const id20 id = bep42_id(v6, r, rng);
        CHECK(bep42_valid(id, v6));
        CHECK(id.bytes[19] == r);
        // Only the first 8 bytes of the address are used.
        CHECK(bep42_valid(id, ip("2001:db8:1234:5678:ffff::2")));
        CHECK_FALSE(bep42_valid(id, ip("2001:db8:1234:5679::1")));
    }
    const id20 v4 = hex_id("5fbfbff10c5d6a4ec8a88e4c6ab4c28b95eee401");
    CHECK(bep42_valid(v4, ip("::ffff:124.31.75.21")));
}

TEST_CASE("BEP-42 exemptions") {
    for (const char* a : {"127.0.0.1", "127.9.8.7", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                          "169.254.3.4", "100.64.0.1", "0.0.0.0", "::1", "::", "fe80::1", "fd00::5", "fc00::1",
                          "::ffff:192.168.0.1"}) {
        CAPTURE(a);
        CHECK(bep42_exempt(ip(a)));
    }
    for (const char* a : {"8.8.8.8", "172.32.0.1", "172.15.0.1", "100.128.0.1", "192.169.0.1", "2001:db8::1",
                          "::ffff:8.8.8.8", "fec0::1"}) {
        CAPTURE(a);
        CHECK_FALSE(bep42_exempt(ip(a)));
    }
}

} // TEST_SUITE
