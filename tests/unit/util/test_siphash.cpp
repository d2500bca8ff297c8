#include <doctest/doctest.h>

#include <string>

#include "util/siphash.hpp"

TEST_SUITE("siphash") {

// Reference vectors of SipHash-2-4 (key 00..0f, message 00..len-1).
TEST_CASE("matches the reference vectors") {
    const dhtc::siphash_key key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    std::string msg;
    CHECK(dhtc::siphash24(key, msg) == 0x726fdb47dd0e0e31ull);
    for (int i = 0; i < 15; ++i) msg.push_back(static_cast<char>(i));
    CHECK(dhtc::siphash24(key, msg) == 0xa129ca6149be45e5ull);
}

TEST_CASE("different keys give different hashes") {
    const std::string msg = "127.0.0.1";
    CHECK(dhtc::siphash24({1, 2}, msg) != dhtc::siphash24({1, 3}, msg));
}

} // TEST_SUITE
