// Load generator of the KRPC responder benchmark: many loopback source addresses send a
// realistic mix of ping, find_node, get_peers and announce_peer (with the tokens the node
// handed out) to any UDP DHT node, keeping a window of queries in flight per source, and
// count the replies. Prints one JSON line at the end.
//   dhtc-krpc-load --target 127.0.0.1:PORT [--sources 256] [--seconds 10] [--window 8] [--echo-target 1]
//                  [--answer-queries 1]
// With --answer-queries 1 each source answers the queries the node sends it (an empty
// find_node reply), so a node that crawls its queriers fills its routing table with them.
// Sources are 127.1.x.y: loopback only, never anything else.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bencode/decoder.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"

using namespace dhtc;
using clk = std::chrono::steady_clock;

namespace {

struct source {
    int fd = -1;
    id20 id;
    std::string token;
    std::uint16_t next_t = 0;
    int outstanding = 0;
    clk::time_point last_reply{};
};

sockaddr_in to_sockaddr(const endpoint& ep) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_port = htons(ep.port);
    std::memcpy(&s.sin_addr, ep.address.raw().data(), 4);
    return s;
}

} // namespace

int main(int argc, char** argv) {
    std::string target_text;
    int nsources = 256;
    double seconds = 10;
    int window = 8;
    bool echo_target = false; // the target is a bare echo: what comes back is our query, counted as its reply
    bool answer_queries = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--target")) target_text = argv[i + 1];
        else if (!std::strcmp(argv[i], "--sources")) nsources = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--window")) window = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--echo-target")) echo_target = std::atoi(argv[i + 1]) != 0;
        else if (!std::strcmp(argv[i], "--answer-queries")) answer_queries = std::atoi(argv[i + 1]) != 0;
    }
    const auto target = endpoint::parse(target_text);
    if (!target || !target->address.is_v4() || (target->address.raw()[0] != 127)) {
        std::fprintf(stderr, "--target must be a 127.x.y.z:port endpoint\n");
        return 2;
    }
    const sockaddr_in dest = to_sockaddr(*target);
    std::mt19937_64 rng(12345);
    const int ep = epoll_create1(0);
    std::vector<source> sources(static_cast<std::size_t>(nsources));
    for (int i = 0; i < nsources; ++i) {
        auto& s = sources[static_cast<std::size_t>(i)];
        s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        const endpoint local{ip_address::v4({127, 1, static_cast<std::uint8_t>(i / 200), static_cast<std::uint8_t>(i % 200 + 1)}), 0};
        const sockaddr_in sa = to_sockaddr(local);
        if (bind(s.fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
            std::perror("bind");
            return 1;
        }
        for (auto& b : s.id.bytes) b = static_cast<std::uint8_t>(rng());
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = static_cast<std::uint32_t>(i);
        epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev);
    }

    std::uint64_t sent = 0, replies = 0, errors = 0, lost = 0, by_kind[4] = {0, 0, 0, 0};
    std::uint64_t queries_answered = 0;
    std::string packet;
    packet.reserve(512);
    bencode::document doc;
    krpc::message msg;
    char buf[2048];
    std::vector<epoll_event> events(256);
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    std::uniform_int_distribution<int> pick(0, 99);

    const auto fill = [&](source& s) {
        while (s.outstanding < window) {
            packet.clear();
            const char t[2] = {static_cast<char>(s.next_t >> 8), static_cast<char>(s.next_t & 0xff)};
            ++s.next_t;
            const krpc::query_header h{std::string_view(t, 2), s.id, "LT\x02\x00"};
            id20 target_id;
            for (auto& b : target_id.bytes) b = static_cast<std::uint8_t>(rng());
            // The mix: 20% ping, 30% find_node, 40% get_peers, 10% announce_peer.
            const int roll = pick(rng);
            int kind;
            if (roll < 20) kind = 0, krpc::encode_ping(packet, h);
            else if (roll < 50) kind = 1, krpc::encode_find_node(packet, h, target_id);
            else if (roll < 90 || s.token.empty()) kind = 2, krpc::encode_get_peers(packet, h, target_id);
            else kind = 3, krpc::encode_announce_peer(packet, h, target_id, 6881, s.token, true);
            if (sendto(s.fd, packet.data(), packet.size(), 0, reinterpret_cast<const sockaddr*>(&dest), sizeof dest) < 0)
                break;
            ++by_kind[kind];
            ++sent;
            ++s.outstanding;
        }
    };
    for (auto& s : sources) {
        s.last_reply = start;
        fill(s);
    }
    while (clk::now() < stop) {
        const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 10);
        for (int k = 0; k < n; ++k) {
            auto& s = sources[events[static_cast<std::size_t>(k)].data.u32];
            for (;;) {
                const ssize_t len = recv(s.fd, buf, sizeof buf, 0);
                if (len <= 0) break;
                bool parsed = false;
                if (bencode::decode(std::string_view(buf, static_cast<std::size_t>(len)), doc, krpc::packet_limits)) {
                    msg = krpc::message{};
                    parsed = static_cast<bool>(krpc::parse(doc.root(), msg));
                }
                if (parsed && msg.type == krpc::message_type::query && !echo_target) {
                    // The node crawling us: not one of our replies.
                    if (!answer_queries) continue;
                    packet.clear();
                    const krpc::reply_header h{msg.transaction, s.id, std::nullopt, "LT\x02\x00"};
                    if (krpc::encode_find_node_response(packet, h, {}, {}) &&
                        sendto(s.fd, packet.data(), packet.size(), 0, reinterpret_cast<const sockaddr*>(&dest),
                               sizeof dest) > 0)
                        ++queries_answered;
                    continue;
                }
                ++replies;
                --s.outstanding;
                s.last_reply = clk::now();
                if (parsed) {
                    if (msg.type == krpc::message_type::error) ++errors;
                    else if (msg.response.has_token) s.token.assign(msg.response.token);
                }
            }
            fill(s);
        }
        // A source whose replies stopped lost datagrams: forget them and resume.
        const auto now = clk::now();
        for (auto& s : sources) {
            if (s.outstanding > 0 && now - s.last_reply > std::chrono::milliseconds(200)) {
                lost += static_cast<std::uint64_t>(s.outstanding);
                s.outstanding = 0;
                s.last_reply = now;
                fill(s);
            }
        }
    }
    const double wall = std::chrono::duration<double>(clk::now() - start).count();
    std::printf("{\"bench\":\"krpc_load\",\"sources\":%d,\"window\":%d,\"sent\":%llu,\"replies\":%llu,"
                "\"error_replies\":%llu,\"lost\":%llu,\"ping\":%llu,\"find_node\":%llu,\"get_peers\":%llu,"
                "\"announce_peer\":%llu,\"queries_answered\":%llu,\"wall_seconds\":%.3f,\"replies_per_second\":%.0f}\n",
                nsources, window, static_cast<unsigned long long>(sent), static_cast<unsigned long long>(replies),
                static_cast<unsigned long long>(errors), static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(by_kind[0]), static_cast<unsigned long long>(by_kind[1]),
                static_cast<unsigned long long>(by_kind[2]), static_cast<unsigned long long>(by_kind[3]),
                static_cast<unsigned long long>(queries_answered), wall,
                static_cast<double>(replies) / wall);
    for (auto& s : sources) close(s.fd);
    close(ep);
    return 0;
}
