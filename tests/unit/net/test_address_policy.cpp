#include <doctest/doctest.h>

#include <string>
#include <unordered_set>

#include "net/address_policy.hpp"

using namespace dhtc;

namespace {

ip_address ip(const char* text) {
    auto a = ip_address::parse(text);
    REQUIRE_MESSAGE(a, text);
    return *a;
}

endpoint ep(const char* text) {
    auto e = endpoint::parse(text);
    REQUIRE_MESSAGE(e, text);
    return *e;
}

struct class_case {
    const char* ip;
    address_class expected;
};

constexpr class_case class_cases[] = {
    // IPv4 public, including the edges of every special block
    {"1.1.1.1", address_class::global},
    {"8.8.8.8", address_class::global},
    {"9.255.255.255", address_class::global},
    {"11.0.0.0", address_class::global},
    {"100.63.255.255", address_class::global},
    {"100.128.0.0", address_class::global},
    {"126.255.255.255", address_class::global},
    {"128.0.0.0", address_class::global},
    {"169.253.255.255", address_class::global},
    {"169.255.0.0", address_class::global},
    {"172.15.255.255", address_class::global},
    {"172.32.0.0", address_class::global},
    {"192.0.1.0", address_class::global},
    {"192.0.3.0", address_class::global},
    {"192.88.99.1", address_class::global}, // 6to4 relay anycast: treated as public
    {"192.167.255.255", address_class::global},
    {"192.169.0.0", address_class::global},
    {"198.17.255.255", address_class::global},
    {"198.20.0.0", address_class::global},
    {"198.51.99.255", address_class::global},
    {"198.51.101.0", address_class::global},
    {"203.0.112.255", address_class::global},
    {"203.0.114.0", address_class::global},
    {"223.255.255.255", address_class::global},
    // private
    {"10.0.0.0", address_class::private_use},
    {"10.255.255.255", address_class::private_use},
    {"172.16.0.0", address_class::private_use},
    {"172.31.255.255", address_class::private_use},
    {"192.168.0.1", address_class::private_use},
    {"192.168.255.255", address_class::private_use},
    {"100.64.0.0", address_class::private_use},
    {"100.127.255.255", address_class::private_use},
    // loopback, link-local, multicast, unspecified, broadcast
    {"127.0.0.1", address_class::loopback},
    {"127.255.255.254", address_class::loopback},
    {"169.254.0.0", address_class::link_local},
    {"169.254.255.255", address_class::link_local},
    {"224.0.0.1", address_class::multicast},
    {"239.255.255.255", address_class::multicast},
    {"0.0.0.0", address_class::unspecified},
    {"0.1.2.3", address_class::unspecified},
    {"255.255.255.255", address_class::broadcast},
    // reserved / documentation / benchmarking
    {"240.0.0.0", address_class::reserved},
    {"255.255.255.254", address_class::reserved},
    {"192.0.0.8", address_class::reserved},
    {"192.0.2.1", address_class::reserved},
    {"198.51.100.7", address_class::reserved},
    {"203.0.113.255", address_class::reserved},
    {"198.18.0.0", address_class::reserved},
    {"198.19.255.255", address_class::reserved},
    // IPv6
    {"2001:4860:4860::8888", address_class::global},
    {"2a00:1450::1", address_class::global},
    {"2002:c000:0204::1", address_class::global}, // 6to4
    {"2001:0:4136:e378:8000:63bf:3fff:fdd2", address_class::global}, // Teredo
    {"3ffe::1", address_class::global},
    {"::", address_class::unspecified},
    {"::1", address_class::loopback},
    {"::2", address_class::reserved},
    {"fc00::1", address_class::private_use},
    {"fdff:ffff::1", address_class::private_use},
    {"fe80::1", address_class::link_local},
    {"febf:ffff::1", address_class::link_local},
    {"fec0::1", address_class::reserved}, // deprecated site-local
    {"ff02::1", address_class::multicast},
    {"ff0e::1", address_class::multicast},
    {"2001:db8::1", address_class::reserved},
    {"2001:db8:ffff::1", address_class::reserved},
    {"2001:db9::1", address_class::global},
    {"3fff::1", address_class::reserved},
    {"3fff:0fff::1", address_class::reserved},
    {"3fff:1000::1", address_class::global},
    {"100::1", address_class::reserved},          // discard-only
    {"64:ff9b::808:808", address_class::reserved}, // NAT64: not a node address
    {"::1.2.3.4", address_class::reserved},       // deprecated IPv4-compatible
    {"4000::1", address_class::reserved},         // outside 2000::/3
    {"1fff::1", address_class::reserved},
    // IPv4-mapped: by the embedded IPv4 address
    {"::ffff:8.8.8.8", address_class::global},
    {"::ffff:10.1.2.3", address_class::private_use},
    {"::ffff:127.0.0.1", address_class::loopback},
    {"::ffff:169.254.1.1", address_class::link_local},
    {"::ffff:224.0.0.1", address_class::multicast},
    {"::ffff:0.0.0.0", address_class::unspecified},
    {"::ffff:255.255.255.255", address_class::broadcast},
    {"::ffff:192.0.2.1", address_class::reserved},
};

} // namespace

TEST_SUITE("address_policy") {

TEST_CASE("classify: every special-purpose block and its edges") {
    for (const auto& c : class_cases) {
        INFO(c.ip);
        CHECK(classify(ip(c.ip)) == c.expected);
    }
}

TEST_CASE("to_string names the classes and verdicts") {
    CHECK(to_string(address_class::global) == "public");
    CHECK(to_string(address_class::private_use) == "private");
    CHECK(to_string(address_class::reserved) == "reserved");
    CHECK(to_string(admission_verdict::ok) == "ok");
    CHECK(to_string(admission_verdict::own) == "own");
    CHECK(to_string(admission_verdict::port_zero) == "port_zero");
    CHECK(to_string(admission_verdict::private_use) == "private");
    CHECK(to_string(admission_verdict::reserved) == "reserved");
    CHECK(to_string(static_cast<admission_verdict>(200)) == "unknown");
}

TEST_CASE("canonical form unmaps IPv4-mapped addresses only") {
    CHECK(is_v4_mapped(ip("::ffff:1.2.3.4")));
    CHECK_FALSE(is_v4_mapped(ip("1.2.3.4")));
    CHECK_FALSE(is_v4_mapped(ip("::1.2.3.4")));
    CHECK_FALSE(is_v4_mapped(ip("::fffe:1.2.3.4")));
    CHECK(canonical(ip("::ffff:1.2.3.4")) == ip("1.2.3.4"));
    CHECK(canonical(ip("2001:4860::1")) == ip("2001:4860::1"));
    CHECK(canonical(ep("[::ffff:1.2.3.4]:80")) == ep("1.2.3.4:80"));
}

TEST_CASE("default policy (private off): verdict per class, hostile node entries (part d #15)") {
    const address_policy p;
    CHECK(p.verdict(ep("1.2.3.4:6881")) == admission_verdict::ok);
    CHECK(p.admissible(ep("1.2.3.4:6881")));
    CHECK(p.verdict(ep("1.2.3.4:0")) == admission_verdict::port_zero);
    CHECK(p.verdict(ep("0.0.0.0:6881")) == admission_verdict::unspecified);
    CHECK(p.verdict(ep("255.255.255.255:6881")) == admission_verdict::broadcast);
    CHECK(p.verdict(ep("224.0.0.251:5353")) == admission_verdict::multicast);
    CHECK(p.verdict(ep("10.0.0.1:6881")) == admission_verdict::private_use);
    CHECK(p.verdict(ep("100.64.1.1:6881")) == admission_verdict::private_use);
    CHECK(p.verdict(ep("127.0.0.1:6881")) == admission_verdict::loopback);
    CHECK(p.verdict(ep("169.254.1.1:6881")) == admission_verdict::link_local);
    CHECK(p.verdict(ep("192.0.2.1:6881")) == admission_verdict::reserved);
    CHECK(p.verdict(ep("240.1.1.1:6881")) == admission_verdict::reserved);
    CHECK_FALSE(p.admissible(ep("10.0.0.1:6881")));
}

TEST_CASE("default policy: IPv6 variants") {
    const address_policy p;
    CHECK(p.verdict(ep("[2001:4860::1]:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[2001:4860::1]:0")) == admission_verdict::port_zero);
    CHECK(p.verdict(ep("[::]:6881")) == admission_verdict::unspecified);
    CHECK(p.verdict(ep("[::1]:6881")) == admission_verdict::loopback);
    CHECK(p.verdict(ep("[fd00::1]:6881")) == admission_verdict::private_use);
    CHECK(p.verdict(ep("[fe80::1]:6881")) == admission_verdict::link_local);
    CHECK(p.verdict(ep("[ff02::1]:6881")) == admission_verdict::multicast);
    CHECK(p.verdict(ep("[2001:db8::1]:6881")) == admission_verdict::reserved);
    CHECK(p.verdict(ep("[::ffff:8.8.8.8]:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[::ffff:192.168.1.1]:6881")) == admission_verdict::private_use);
    CHECK(p.verdict(ep("[::ffff:255.255.255.255]:6881")) == admission_verdict::broadcast);
}

TEST_CASE("allow_private admits private and loopback, nothing else") {
    const address_policy p(address_policy_options{.allow_private_addresses = true});
    CHECK(p.verdict(ep("10.0.0.1:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("192.168.1.1:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("127.0.0.2:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[::1]:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[fd12::1]:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("1.2.3.4:6881")) == admission_verdict::ok);
    // still refused
    CHECK(p.verdict(ep("127.0.0.1:0")) == admission_verdict::port_zero);
    CHECK(p.verdict(ep("169.254.1.1:6881")) == admission_verdict::link_local);
    CHECK(p.verdict(ep("[fe80::1]:6881")) == admission_verdict::link_local);
    CHECK(p.verdict(ep("224.0.0.1:6881")) == admission_verdict::multicast);
    CHECK(p.verdict(ep("0.0.0.0:6881")) == admission_verdict::unspecified);
    CHECK(p.verdict(ep("255.255.255.255:6881")) == admission_verdict::broadcast);
    CHECK(p.verdict(ep("192.0.2.1:6881")) == admission_verdict::reserved);
}

TEST_CASE("own endpoints and addresses are never admitted") {
    address_policy p(address_policy_options{.allow_private_addresses = true});
    REQUIRE(p.add_own_endpoint(ep("127.0.0.1:6881")));
    REQUIRE(p.add_own_address(ip("203.0.114.7")));
    REQUIRE(p.add_own_endpoint(ep("[2001:4860::5]:6881")));
    // exact endpoint: only that port
    CHECK(p.verdict(ep("127.0.0.1:6881")) == admission_verdict::own);
    CHECK(p.verdict(ep("127.0.0.1:6882")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[::ffff:127.0.0.1]:6881")) == admission_verdict::own); // mapped form too
    // whole address: every port, even 0 (own is reported first)
    CHECK(p.verdict(ep("203.0.114.7:1")) == admission_verdict::own);
    CHECK(p.verdict(ep("203.0.114.7:65535")) == admission_verdict::own);
    CHECK(p.verdict(ep("203.0.114.7:0")) == admission_verdict::own);
    CHECK(p.verdict(ep("203.0.114.8:1")) == admission_verdict::ok);
    CHECK(p.verdict(ep("[2001:4860::5]:6881")) == admission_verdict::own);
    CHECK(p.verdict(ep("[2001:4860::5]:6882")) == admission_verdict::ok);

    p.clear_own();
    CHECK(p.verdict(ep("127.0.0.1:6881")) == admission_verdict::ok);
    CHECK(p.verdict(ep("203.0.114.7:1")) == admission_verdict::ok);
}

TEST_CASE("own lists are bounded; repeats are stored once") {
    address_policy p;
    for (int i = 0; i < 3; ++i) CHECK(p.add_own_address(ip("1.1.1.1")));
    for (std::size_t i = 1; i < address_policy::max_own; ++i)
        CHECK(p.add_own_address(ip_address::v4(static_cast<std::uint32_t>(0x02000000u + i))));
    CHECK_FALSE(p.add_own_address(ip("9.9.9.9")));
    CHECK(p.add_own_address(ip("1.1.1.1"))); // present: still fine when full
    CHECK(p.verdict(ep("9.9.9.9:1")) == admission_verdict::ok);
    for (std::size_t i = 0; i < address_policy::max_own; ++i)
        CHECK(p.add_own_endpoint(endpoint{ip("1.1.1.2"), static_cast<std::uint16_t>(i + 1)}));
    CHECK_FALSE(p.add_own_endpoint(ep("1.1.1.2:999")));
}

TEST_CASE("subnet keys: /24 for IPv4, /64 for IPv6, no cross-family collisions") {
    CHECK(subnet_of(ip("1.2.3.4")) == subnet_of(ip("1.2.3.250")));
    CHECK_FALSE(subnet_of(ip("1.2.3.4")) == subnet_of(ip("1.2.4.4")));
    CHECK(subnet_of(ip("::ffff:1.2.3.9")) == subnet_of(ip("1.2.3.4")));
    CHECK(subnet_of(ip("2001:4860:1:2::1")) == subnet_of(ip("2001:4860:1:2:ffff:ffff:ffff:ffff")));
    CHECK_FALSE(subnet_of(ip("2001:4860:1:2::1")) == subnet_of(ip("2001:4860:1:3::1")));
    // An IPv4 key sits in reserved IPv6 space: check it against the obvious candidates.
    const auto k4 = subnet_of(ip("1.2.3.4"));
    CHECK_FALSE(k4 == subnet_of(ip("::1.2.3.4")));
    CHECK_FALSE(k4 == subnet_of(ip("0:0:0102:0300::")));
    CHECK_FALSE(k4 == subnet_of(ip("102:300::")));
    CHECK(classify(ip("0:1:1:203::")) == address_class::reserved); // where that key would live
    CHECK(k4 == subnet_of(ip("0:1:1:203::")));                     // the documented encoding

    std::unordered_set<std::size_t> hashes;
    for (std::uint32_t i = 0; i < 1000; ++i) hashes.insert(subnet_key_hash{}(subnet_of(ip_address::v4(i << 8))));
    CHECK(hashes.size() == 1000);
}

TEST_CASE("split_host_port: names, v4, bracketed v6, and every refusal") {
    struct good_case {
        const char* text;
        const char* host;
        std::uint16_t port;
        bool bracketed;
    };
    const good_case good[] = {
        {"router.example.com:6881", "router.example.com", 6881, false},
        {"1.2.3.4:0", "1.2.3.4", 0, false},
        {"a:65535", "a", 65535, false},
        {"[2001:db8::1]:1", "2001:db8::1", 1, true},
        {"[::ffff:1.2.3.4]:80", "::ffff:1.2.3.4", 80, true},
        {"[not checked]:7", "not checked", 7, true},
    };
    for (const auto& c : good) {
        CAPTURE(c.text);
        const host_port hp = split_host_port(c.text);
        REQUIRE(hp);
        CHECK(hp.host == c.host);
        CHECK(hp.port == c.port);
        CHECK(hp.bracketed == c.bracketed);
    }
    struct bad_case {
        const char* text;
        host_port_error error;
    };
    const bad_case bad[] = {
        {"", host_port_error::no_port},
        {"host", host_port_error::no_port},
        {"[::1]", host_port_error::no_port},
        {"[::1]6881", host_port_error::no_port},
        {"[::1:6881", host_port_error::unclosed_bracket},
        {"::1:6881", host_port_error::unbracketed_colon},
        {"2001:db8::1", host_port_error::unbracketed_colon},
        {":6881", host_port_error::empty_host},
        {"[]:6881", host_port_error::empty_host},
        {"host:", host_port_error::bad_port},
        {"host:65536", host_port_error::bad_port},
        {"host:+80", host_port_error::bad_port},
        {"host:-1", host_port_error::bad_port},
        {"host:12a", host_port_error::bad_port},
        {"host:000000080", host_port_error::bad_port},
        {"[::1]:", host_port_error::bad_port},
    };
    for (const auto& c : bad) {
        CAPTURE(c.text);
        const host_port hp = split_host_port(c.text);
        CHECK_FALSE(hp);
        CHECK(hp.error == c.error);
    }
    // On an error the host read so far is kept, for the caller's message.
    CHECK(split_host_port("[x]").host == "x");
    CHECK(split_host_port("[x]").bracketed);
}

TEST_CASE("endpoint::parse: what to_string writes, IPv6 exactly when bracketed") {
    for (const char* text : {"1.2.3.4:6881", "[2001:db8::1]:6881", "0.0.0.0:0", "[::]:65535"}) {
        CAPTURE(text);
        const auto e = endpoint::parse(text);
        REQUIRE(e);
        CHECK(e->to_string() == text);
    }
    for (const char* text : {"[1.2.3.4]:80", "::1:80", "host:80", "1.2.3.4", "1.2.3.4:65536", "[::1]:x", "1.2.3.4:0080x"}) {
        CAPTURE(text);
        CHECK_FALSE(endpoint::parse(text));
    }
}

} // TEST_SUITE
