// The DHT engine on real sockets: IPv4, IPv6 and dual stack on loopback, port 0, bind
// errors reported at create, replies over the family a query came in on.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "bencode/decoder.hpp"
#include "engine/dht_engine.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

using namespace dhtc;

namespace {

engine::dht_engine_options loopback(engine::netmode mode) {
    engine::dht_engine_options o;
    o.port = 0;
    o.mode = mode;
    o.bind_v4 = "127.0.0.1";
    o.bind_v6 = "::1";
    o.crawl.bootstrap.sources.clear();
    return o;
}

// Sends a ping to `to` from a fresh socket of its family; returns the parsed reply's `ip`.
std::optional<endpoint> ping(const endpoint& to) {
    const bool v6 = to.address.is_v6();
    const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_storage ss{};
    socklen_t len;
    if (v6) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(to.port);
        std::memcpy(&s6->sin6_addr, to.address.raw().data(), 16);
        len = sizeof(sockaddr_in6);
    } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_port = htons(to.port);
        std::memcpy(&s4->sin_addr, to.address.raw().data(), 4);
        len = sizeof(sockaddr_in);
    }
    id20 me;
    me.bytes.fill(7);
    std::string q;
    krpc::encode_ping(q, {"pp", me, {}});
    sendto(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&ss), len);
    char buf[1500];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    close(fd);
    if (n <= 0) return std::nullopt;
    bencode::document doc;
    if (!bencode::decode(std::string_view(buf, static_cast<std::size_t>(n)), doc, krpc::packet_limits)) return std::nullopt;
    krpc::message m;
    if (!krpc::parse(doc.root(), m) || m.type != krpc::message_type::response) return std::nullopt;
    return m.ip;
}

} // namespace

TEST_SUITE("dht_engine") {

TEST_CASE("each netmode binds its sockets, reports the bound ports and answers over each family") {
    crawl::null_sink sink;
    std::string error;
    SUBCASE("ipv4") {
        auto e = engine::dht_engine::create(loopback(engine::netmode::ipv4), sink, error);
        REQUIRE_MESSAGE(e, error);
        e->start();
        const auto eps = e->local_endpoints();
        REQUIRE(eps.size() == 1);
        CHECK(eps[0].address.is_v4());
        CHECK(eps[0].port != 0);
        const auto ip = ping(eps[0]);
        REQUIRE(ip);
        CHECK(ip->address == *ip_address::parse("127.0.0.1"));
        e->stop();
    }
    SUBCASE("ipv6") {
        auto e = engine::dht_engine::create(loopback(engine::netmode::ipv6), sink, error);
        REQUIRE_MESSAGE(e, error);
        e->start();
        const auto eps = e->local_endpoints();
        REQUIRE(eps.size() == 1);
        CHECK(eps[0].address.is_v6());
        const auto ip = ping(eps[0]);
        REQUIRE(ip);
        CHECK(ip->address == *ip_address::parse("::1"));
        e->stop();
    }
    SUBCASE("dual stack") {
        auto e = engine::dht_engine::create(loopback(engine::netmode::dual), sink, error);
        REQUIRE_MESSAGE(e, error);
        e->start();
        const auto eps = e->local_endpoints();
        REQUIRE(eps.size() == 2);
        CHECK(ping(eps[0]));
        CHECK(ping(eps[1]));
        CHECK(e->udp_counters(false)->rx_packets.load() == 1);
        CHECK(e->udp_counters(true)->rx_packets.load() == 1);
        e->stop();
        e->stop(); // idempotent
    }
}

TEST_CASE("a port in use and a bad bind address fail at create with a message") {
    crawl::null_sink sink;
    std::string error;
    auto first = engine::dht_engine::create(loopback(engine::netmode::ipv4), sink, error);
    REQUIRE(first);
    auto o = loopback(engine::netmode::ipv4);
    o.port = first->local_endpoints()[0].port;
    CHECK_FALSE(engine::dht_engine::create(o, sink, error));
    CHECK(error.find("cannot bind") != std::string::npos);
    o.port = 0;
    o.bind_v4 = "not-an-address";
    CHECK_FALSE(engine::dht_engine::create(o, sink, error));
    CHECK(error.find("invalid bind address") != std::string::npos);
}

TEST_CASE("a stopped engine that was never started closes cleanly") {
    crawl::null_sink sink;
    std::string error;
    auto e = engine::dht_engine::create(loopback(engine::netmode::dual), sink, error);
    REQUIRE(e);
    e->stop();
}

} // TEST_SUITE
