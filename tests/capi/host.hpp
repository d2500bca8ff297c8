// What the C ABI tests share: loopback options, a DHT client that announces peers, thread
// and fd counts, fixtures.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bencode/decoder.hpp"
#include "dhtcrawler.h"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

namespace dhtc::capi_test {

inline const char* loopback_options = R"({"port":0,"bind_v4":"127.0.0.1","allow_private_addresses":true,
  "crawl":{"bootstrap":{"sources":[]}},"metadata":{"timeout_secs":2,"gate_timeout_millis":2000,
  "transports":"tcp","encryption":"prefer_plaintext"}})"; // the fake peers speak plaintext TCP

inline std::string take(char* s) {
    std::string out = s ? s : "";
    dhtc_string_free(s);
    return out;
}

inline nlohmann::json stats_of(dhtc_crawler* c) {
    char* s = nullptr;
    REQUIRE(dhtc_crawler_stats(c, &s) == DHTC_OK);
    return nlohmann::json::parse(take(s));
}

inline std::uint16_t udp_port_of(dhtc_crawler* c) {
    const std::string ep = stats_of(c).at("endpoints").at(0);
    return static_cast<std::uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1)));
}

inline std::size_t entries_of(const char* dir) {
    std::size_t n = 0;
    if (DIR* d = opendir(dir)) {
        while (readdir(d)) ++n;
        closedir(d);
    }
    return n - 2; // . and ..
}

inline std::size_t fd_count() { return entries_of("/proc/self/fd") - 1; } // less the one opendir holds

inline std::size_t thread_count() { return entries_of("/proc/self/task"); }

// A DHT client on loopback that gets a token from the crawler and announces a peer to it.
struct announcer {
    int fd;
    explicit announcer() : fd(socket(AF_INET, SOCK_DGRAM, 0)) {
        timeval tv{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        sockaddr_in local{};
        local.sin_family = AF_INET;
        local.sin_addr.s_addr = htonl(0x7f000001);
        bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
    }
    ~announcer() { close(fd); }

    // Sends a query and returns the reply to it. The crawler may also query us (we are a
    // node to it, and loopback is allowed here): such datagrams are skipped.
    std::string ask(std::uint16_t port, const std::string& packet) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        to.sin_addr.s_addr = htonl(0x7f000001);
        sendto(fd, packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
        dhtc::bencode::document sent;
        REQUIRE(dhtc::bencode::decode(std::string_view(packet), sent));
        const std::string t(sent.root().find_string("t").as_string());
        for (int i = 0; i < 16; ++i) {
            char buf[1500];
            const ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) return {};
            const std::string reply(buf, static_cast<std::size_t>(n));
            dhtc::bencode::document doc;
            if (!dhtc::bencode::decode(std::string_view(reply), doc)) continue;
            const auto y = doc.root().find_string("y").as_string();
            if ((y == "r" || y == "e") && doc.root().find_string("t").as_string() == t) return reply;
        }
        return {};
    }

    // get_peers for a token, then announce_peer with it: whether the crawler answered both.
    bool try_announce(std::uint16_t crawler_port, const dhtc::id20& info_hash, std::uint16_t peer_port) {
        dhtc::id20 me;
        me.bytes.fill(0x42);
        std::string q;
        dhtc::krpc::encode_get_peers(q, {"gp", me, {}}, info_hash);
        const std::string reply = ask(crawler_port, q);
        if (reply.empty()) return false;
        dhtc::bencode::document doc;
        REQUIRE(dhtc::bencode::decode(std::string_view(reply), doc, dhtc::krpc::packet_limits));
        dhtc::krpc::message m;
        REQUIRE(dhtc::krpc::parse(doc.root(), m));
        REQUIRE(m.response.has_token);
        const std::string token(m.response.token);
        std::string a;
        dhtc::krpc::encode_announce_peer(a, {"ap", me, {}}, info_hash, peer_port, token, false);
        return !ask(crawler_port, a).empty();
    }

    void announce(std::uint16_t crawler_port, const dhtc::id20& info_hash, std::uint16_t peer_port) {
        REQUIRE(try_announce(crawler_port, info_hash, peer_port));
    }
};

inline std::string fixture(const char* name) {
    std::ifstream in(std::string(DHTC_FIXTURE_DIR) + "/info/" + name + ".info", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}


} // namespace dhtc::capi_test
