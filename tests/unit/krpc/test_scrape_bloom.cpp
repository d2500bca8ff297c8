// BEP-33's bloom filter against the BEP's test vector, its estimate, and the wire checks.
#include <doctest/doctest.h>

#include <string>

#include "krpc/scrape_bloom.hpp"

using dhtc::ip_address;
using dhtc::krpc::scrape_bloom;

namespace {

std::string unhex(std::string_view hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return out;
}

ip_address v4(unsigned a, unsigned b, unsigned c, unsigned d) {
    const char raw[4] = {static_cast<char>(a), static_cast<char>(b), static_cast<char>(c), static_cast<char>(d)};
    return *ip_address::from_bytes(std::string_view(raw, 4));
}

ip_address v6_2001_db8(unsigned low) { // 2001:DB8::low
    char raw[16] = {0x20, 0x01, 0x0d, static_cast<char>(0xb8)};
    raw[14] = static_cast<char>(low >> 8);
    raw[15] = static_cast<char>(low & 0xff);
    return *ip_address::from_bytes(std::string_view(raw, 16));
}

// BEP-33's test vector: 192.0.2.0-192.0.2.255 and 2001:DB8::-2001:DB8::3E7 inserted.
constexpr std::string_view bep_vector =
    "F6C3F5EAA07FFD91BDE89F777F26FB2BFF37BDB8FB2BBAA2FD3DDDE7BACFFF75EE7CCBAE"
    "FE5EEDB1FBFAFF67F6ABFF5E43DDBCA3FD9B9FFDF4FFD3E9DFF12D1BDF59DB53DBE9FA5B"
    "7FF3B8FDFCDE1AFB8BEDD7BE2F3EE71EBBBFE93BCDEEFE148246C2BC5DBFF7E7EFDCF24F"
    "D8DC7ADFFD8FFFDFDDFFF7A4BBEEDF5CB95CE81FC7FCFF1FF4FFFFDFE5F7FDCBB7FD79B3"
    "FA1FC77BFE07FFF905B7B7FFC7FEFEFFE0B8370BB0CD3F5B7F2BD93FEB4386CFDD6F7FD5"
    "BFAF2E9EBFFFFEECD67ADBF7C67F17EFD5D75EBA6FFEBA7FFF47A91EB1BFBB53E8ABFB57"
    "62ABE8FF237279BFEFBFEEF5FFC5FEBFDFE5ADFFADFEE1FB737FFFFBFD9F6AEFFEEE76B6"
    "FD8F72EF";

} // namespace

TEST_SUITE("scrape_bloom") {

TEST_CASE("BEP-33 test vector: 1256 addresses give the BEP's filter and an estimate of 1224.93") {
    scrape_bloom bf;
    for (unsigned i = 0; i < 256; ++i) bf.insert(v4(192, 0, 2, i));
    for (unsigned i = 0; i <= 0x3e7; ++i) bf.insert(v6_2001_db8(i));
    CHECK(bf.wire() == unhex(bep_vector));
    CHECK(bf.estimate() == doctest::Approx(1224.9308).epsilon(1e-6));
    CHECK(bf.contains(v4(192, 0, 2, 7)));
    CHECK(bf.contains(v6_2001_db8(0x3e7)));
}

TEST_CASE("estimates of small sets, unions and the extremes") {
    scrape_bloom empty;
    CHECK(empty.empty());
    CHECK(empty.estimate() == 0.0);

    scrape_bloom one;
    one.insert(v4(10, 0, 0, 1));
    CHECK(one.estimate() == doctest::Approx(1.0).epsilon(0.01));
    one.insert(v4(10, 0, 0, 1)); // an address counts once
    CHECK(one.estimate() == doctest::Approx(1.0).epsilon(0.01));

    // Two nodes that each store part of a swarm (overlapping): the union counts each once.
    scrape_bloom a, b;
    for (unsigned i = 0; i < 30; ++i) a.insert(v4(10, 1, 0, i));
    for (unsigned i = 20; i < 50; ++i) b.insert(v4(10, 1, 0, i));
    scrape_bloom u;
    CHECK(u.merge(a.wire()));
    u.merge(b);
    CHECK(u.estimate() == doctest::Approx(50).epsilon(0.1));

    std::string full(scrape_bloom::size, static_cast<char>(0xff));
    scrape_bloom saturated;
    CHECK(saturated.merge(full));
    CHECK(saturated.estimate() > 7000.0); // finite: one zero bit is assumed
}

TEST_CASE("a filter of the wrong size is not merged") {
    scrape_bloom bf;
    CHECK_FALSE(bf.merge(std::string(255, '\xff')));
    CHECK_FALSE(bf.merge(std::string(257, '\xff')));
    CHECK_FALSE(bf.merge(""));
    CHECK(bf.empty());
}

} // TEST_SUITE
