// The test network checked from the outside with real KRPC and the core's peer-wire code:
// answers to every query kind, tokens bound to our IP, announces that show up in get_peers
// and sample_infohashes, nodes that verify a querier with a ping, and metadata fetched
// from seeders that parses to exactly the truth file's entry. Also the truth file's
// first_served_at: set for what we fetched, and only for that. And the seeders' connection
// policies: each serves the core's own peer session over the transport and encryption it
// allows and refuses the ones it does not. And nodes that share an IP: each answers on its own
// port with its own id, tokens, peer store and blocker, lookups find what they store, and
// tables take several nodes of one IP unless --restrict-ips says one per IP.
#include <doctest/doctest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bencode/decoder.hpp"
#include "dht/node_id.hpp"
#include "krpc/encode.hpp"
#include "krpc/message.hpp"
#include "model/torrent_info.hpp"
#include "metadata/peer_session.hpp"
#include "metadata/torrent_json.hpp"
#include "streams/utp_stream.hpp"
#include "metadata/wire.hpp"
#include "support/fake_peer.hpp"
#include "support/subprocess.hpp"
#include "support/truth_form.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

int open_socket(int type, const endpoint* connect_to, std::uint32_t bind_ip = 0x7f000001) {
    const int fd = ::socket(AF_INET, type, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(bind_ip);
    if (type == SOCK_DGRAM) REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    if (connect_to) {
        a.sin_addr.s_addr = htonl(connect_to->address.to_v4_uint());
        a.sin_port = htons(connect_to->port);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    }
    return fd;
}

/// A KRPC client on 127.0.0.1 (or another loopback address) that matches replies to its
/// queries by transaction id and keeps the queries it receives (the nodes' verifying pings).
class krpc_client {
public:
    explicit krpc_client(std::uint32_t bind_ip = 0x7f000001) : fd_(open_socket(SOCK_DGRAM, nullptr, bind_ip)) {}
    ~krpc_client() { ::close(fd_); }
    id20 id = [] {
        id20 i;
        for (std::size_t k = 0; k < id20::size; ++k) i.bytes[k] = static_cast<std::uint8_t>(0x40 + k);
        return i;
    }();
    std::vector<std::pair<endpoint, std::string>> queries_received; // (from, method)

    /// Sends one query (encode writes it with our header) and returns the raw reply.
    template <class Encode>
    std::optional<std::string> ask(const endpoint& to, Encode encode) {
        const std::string t = "q" + std::to_string(next_t_++);
        std::string out;
        REQUIRE(encode(out, krpc::query_header{t, id, {}}));
        return exchange(to, out, t);
    }

    std::optional<std::string> exchange(const endpoint& to, const std::string& packet, const std::string& t) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(to.address.to_v4_uint());
        a.sin_port = htons(to.port);
        REQUIRE(::sendto(fd_, packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a) ==
                static_cast<ssize_t>(packet.size()));
        const auto deadline = std::chrono::steady_clock::now() + 3s;
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0) continue;
            char buf[1500];
            sockaddr_in from{};
            socklen_t len = sizeof from;
            const auto n = ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
            if (n <= 0) continue;
            std::string data(buf, static_cast<std::size_t>(n));
            bencode::document doc;
            krpc::message m;
            if (!bencode::decode(data, doc, krpc::packet_limits) || !krpc::parse(doc.root(), m)) continue;
            const endpoint src{ip_address::v4(ntohl(from.sin_addr.s_addr)), ntohs(from.sin_port)};
            if (m.type == krpc::message_type::query) {
                queries_received.emplace_back(src, std::string(m.query.name));
                // Answer like a real node, so it may keep us in its table.
                std::string reply;
                krpc::encode_ping_response(reply, krpc::reply_header{m.transaction, id, src, {}});
                ::sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
                continue;
            }
            if (m.transaction == t && src == to) return data;
        }
        return std::nullopt;
    }

private:
    int fd_;
    int next_t_ = 0;
};

struct parsed {
    std::string raw;
    bencode::document doc;
    krpc::message m;
};

std::unique_ptr<parsed> parse_reply(const std::optional<std::string>& raw) {
    REQUIRE(raw);
    auto p = std::make_unique<parsed>();
    p->raw = *raw;
    REQUIRE(bencode::decode(p->raw, p->doc, krpc::packet_limits));
    REQUIRE(krpc::parse(p->doc.root(), p->m));
    return p;
}

/// An iterative get_peers from the test: the values found and, per node that answered,
/// its token; the nodes closest to the hash first.
struct peers_found {
    std::set<std::string> values;
    std::vector<std::pair<id20, std::pair<endpoint, std::string>>> tokens; // (distance, (node, token))
};

peers_found find_peers(krpc_client& c, const endpoint& bootstrap, const id20& hash) {
    peers_found out;
    std::map<id20, endpoint> candidates; // by distance
    std::set<endpoint> asked;
    candidates.emplace(id20{}, bootstrap);
    for (int queries = 0; queries < 60;) {
        auto it = std::find_if(candidates.begin(), candidates.end(), [&](const auto& e) { return !asked.contains(e.second); });
        if (it == candidates.end() || std::distance(candidates.begin(), it) >= 8) break;
        const endpoint to = it->second;
        asked.insert(to);
        ++queries;
        const auto raw = c.ask(to, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_get_peers(o, h, hash); });
        if (!raw) continue;
        const auto p = parse_reply(raw);
        if (p->m.type != krpc::message_type::response) continue;
        for (const auto& v : p->m.response.values) out.values.insert(v.to_string());
        if (p->m.response.has_token)
            out.tokens.push_back({dht::distance(p->m.id, hash), {to, std::string(p->m.response.token)}});
        for (const auto& n : p->m.response.nodes) candidates.emplace(dht::distance(n.id, hash), n.ep);
    }
    std::sort(out.tokens.begin(), out.tokens.end());
    return out;
}

/// The nodes reachable from `bootstrap`: every node a find_node answer names, each asked in
/// turn (at most `max_queries`), with the id it answers with.
std::map<endpoint, id20> crawl_nodes(krpc_client& c, const endpoint& bootstrap, int max_queries) {
    std::map<endpoint, id20> answered;
    std::vector<endpoint> todo{bootstrap};
    std::set<endpoint> seen{bootstrap};
    for (std::size_t next = 0; next < todo.size() && static_cast<int>(next) < max_queries; ++next) {
        const auto to = todo[next];
        id20 target;
        for (std::size_t k = 0; k < id20::size; ++k) target.bytes[k] = static_cast<std::uint8_t>(next * 37 + k * 11);
        const auto raw = c.ask(to, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_find_node(o, h, target); });
        if (!raw) continue;
        const auto p = parse_reply(raw);
        if (p->m.type != krpc::message_type::response) continue;
        answered[to] = p->m.id;
        for (const auto& n : p->m.response.nodes)
            if (seen.insert(n.ep).second) todo.push_back(n.ep);
    }
    return answered;
}

/// The nodes a find_node for `target` at `node` names.
std::vector<krpc::node_entry> nodes_near(krpc_client& c, const endpoint& node, const id20& target) {
    const auto p = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_find_node(o, h, target); }));
    REQUIRE(p->m.type == krpc::message_type::response);
    return {p->m.response.nodes.begin(), p->m.response.nodes.end()}; // a view into p
}

/// An id sharing all but the last bits with `near`: it lands in near's deepest bucket.
id20 id_next_to(const id20& near, std::uint8_t flip) {
    id20 id = near;
    id.bytes[id20::size - 1] ^= flip;
    return id;
}

/// Two clients on 127.0.0.2 (distinct ports), with ids next to the node's, query `node`
/// and answer its verifying pings. Returns how many of the two its table then holds (read
/// by a find_node from `probe`, another address), and whether the second was pinged.
std::pair<int, bool> two_clients_on_one_ip(krpc_client& probe, const endpoint& node, const id20& node_id) {
    krpc_client first(0x7f000002), second(0x7f000002);
    first.id = id_next_to(node_id, 1);
    second.id = id_next_to(node_id, 2);
    for (auto* c : {&first, &second}) {
        // The first ping draws the verifying ping, the second answers it while it waits.
        for (int i = 0; i < 2; ++i)
            REQUIRE(c->ask(node, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); }));
    }
    int held = 0;
    for (const auto& n : nodes_near(probe, node, first.id))
        held += n.id == first.id || n.id == second.id ? 1 : 0;
    bool second_pinged = false;
    for (const auto& [from, method] : second.queries_received) second_pinged = second_pinged || (from == node && method == "ping");
    return {held, second_pinged};
}

/// Fetches a torrent's info dict from a seeder with the core's wire codec.
std::string fetch_metadata(const endpoint& seeder, const id20& key) {
    const int fd = open_socket(SOCK_STREAM, &seeder);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    id20 peer_id;
    peer_id.bytes.fill(0x33);
    std::string tx;
    REQUIRE(wire::build_handshake(tx, key, peer_id));
    REQUIRE(wire::build_ext_handshake(tx, wire::ext_handshake_options{}));
    REQUIRE(::send(fd, tx.data(), tx.size(), 0) == static_cast<ssize_t>(tx.size()));
    std::string rx;
    auto read_more = [&] {
        char buf[16384];
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        REQUIRE(n > 0);
        rx.append(buf, static_cast<std::size_t>(n));
    };
    while (rx.size() < wire::handshake_size) read_more();
    wire::handshake hs;
    REQUIRE(wire::parse_handshake(rx, hs) == wire::wire_error::none);
    REQUIRE(wire::check_handshake(hs, key, peer_id) == wire::wire_error::none);
    rx.erase(0, wire::handshake_size);

    bencode::document scratch;
    wire::metadata_buffer buffer;
    std::uint8_t peer_ut = 0;
    for (int messages = 0; messages < 200 && !buffer.complete(); ++messages) {
        wire::message_view m;
        auto st = wire::next_message(rx, wire::default_max_message, m);
        while (st == wire::frame_status::need_more) {
            read_more();
            st = wire::next_message(rx, wire::default_max_message, m);
        }
        REQUIRE(st != wire::frame_status::too_large);
        const std::string msg = rx.substr(0, m.consumed);
        rx.erase(0, m.consumed);
        if (st == wire::frame_status::keep_alive) continue;
        REQUIRE(wire::next_message(msg, wire::default_max_message, m) == wire::frame_status::message);
        if (m.id != wire::msg_extended) continue;
        wire::extended_view ext;
        REQUIRE(wire::parse_extended(m, ext) == wire::wire_error::none);
        if (ext.ext_id == wire::ext_handshake_id) {
            wire::ext_handshake eh;
            REQUIRE(wire::parse_ext_handshake(ext.payload, scratch, eh) == wire::wire_error::none);
            peer_ut = eh.ut_metadata;
            REQUIRE(buffer.reset(eh.metadata_size) == wire::wire_error::none);
            std::string requests;
            for (std::size_t p = 0; p < buffer.pieces(); ++p)
                REQUIRE(wire::build_metadata_request(requests, peer_ut, static_cast<std::uint32_t>(p)));
            REQUIRE(::send(fd, requests.data(), requests.size(), 0) == static_cast<ssize_t>(requests.size()));
            continue;
        }
        wire::ut_metadata_message um;
        REQUIRE(wire::parse_ut_metadata(ext.payload, scratch, um) == wire::wire_error::none);
        REQUIRE(wire::check_data(um, buffer.size(), wire::any_piece) == wire::wire_error::none);
        REQUIRE(buffer.store(static_cast<std::size_t>(um.piece), um.data) == wire::wire_error::none);
    }
    ::close(fd);
    REQUIRE(buffer.complete());
    return std::string(buffer.bytes());
}

/// Starts a testnet and waits for its BOOTSTRAP line.
std::optional<endpoint> wait_for_bootstrap(test::subprocess& net) {
    std::optional<endpoint> bootstrap;
    const auto ready_deadline = std::chrono::steady_clock::now() + 60s;
    while (!bootstrap && std::chrono::steady_clock::now() < ready_deadline) {
        const auto line = net.read_line(5s);
        if (line && line->rfind("BOOTSTRAP ", 0) == 0) bootstrap = endpoint::parse(line->substr(10));
        if (!line && !net.running()) break;
    }
    return bootstrap;
}

/// One fetch by the core's peer session (MSE initiator, uTP, fallbacks and all).
struct session_fetch {
    metadata::session_result result;
    std::string bytes; // the info dict when it succeeded
};

session_fetch fetch_by_session(const endpoint& seeder, const id20& key, metadata::encryption_policy enc,
                               metadata::transport_policy transports, std::chrono::milliseconds budget) {
    asio::io_context io;
    auto utp = metadata::utp_host::create(io.get_executor(), ip_address::parse("127.0.0.1"));
    metadata::session_request r;
    r.info_hash = key;
    r.peer = seeder;
    r.peer_id.bytes.fill(0x44);
    r.deadline = std::chrono::steady_clock::now() + budget;
    r.encryption = enc;
    r.transports = transports;
    r.utp = utp;
    test::simple_piece_source src;
    std::optional<metadata::session_result> out;
    asio::co_spawn(io, metadata::run_peer_session(r, src, 1), [&](std::exception_ptr e, metadata::session_result res) {
        if (!e) out = res;
        utp->shutdown(); // its socket's receive would keep the loop running
    });
    io.run_for(budget + 5s);
    REQUIRE(out.has_value());
    session_fetch f{*out, {}};
    if (out->ok()) f.bytes = std::string(src.bytes());
    return f;
}

} // namespace

TEST_CASE("testnet.selfcheck: real KRPC answers, tokens, samples, and metadata equal to the truth") {
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-selfcheck-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto truth_path = dir / "truth.json";
    test::subprocess net({DHTC_TESTNET_BIN, "--nodes", "200", "--seeders", "12", "--torrents", "30", "--seed", "11",
                          "--duration", "120", "--churn", "0", "--quiet", "--stop-on-stdin-eof", "--truth", truth_path.string()});
    const auto bootstrap = wait_for_bootstrap(net);
    REQUIRE_MESSAGE(bootstrap, "the testnet never printed BOOTSTRAP");
    nlohmann::json truth;
    {
        std::ifstream in(truth_path);
        truth = nlohmann::json::parse(in);
    }
    REQUIRE(truth.size() == 30);
    for (const auto& t : truth) CHECK_FALSE(t.contains("first_served_at")); // only in the final version

    krpc_client c;

    {
        // ping: our id back, and BEP-42's `ip` telling us how the node sees us.
        const auto p = parse_reply(c.ask(*bootstrap, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); }));
        CHECK(p->m.type == krpc::message_type::response);
        REQUIRE(p->m.ip);
        CHECK(p->m.ip->address == *ip_address::parse("127.0.0.1"));

        // find_node: 8 nodes, all on their own address inside the default range.
        const auto f = parse_reply(c.ask(*bootstrap, [&](std::string& o, const krpc::query_header& h) {
            return krpc::encode_find_node(o, h, c.id);
        }));
        CHECK(f->m.response.nodes.size() == 8);
        std::set<ip_address> addresses;
        for (const auto& n : f->m.response.nodes) {
            CHECK((n.ep.address.to_v4_uint() >> 22) == (0x7f400000u >> 22)); // 127.64.0.0/10
            addresses.insert(n.ep.address);
        }
        CHECK(addresses.size() == f->m.response.nodes.size());

        // An unknown method without a target: error 204, as libtorrent answers.
        const auto u = parse_reply(c.exchange(*bootstrap, "d1:ad2:id20:" + std::string(c.id.view()) + "e1:q6:frob_x1:t2:u11:y1:qe", "u1"));
        CHECK(u->m.type == krpc::message_type::error);
        CHECK(u->m.err.code == 204);
    }

    // Every torrent's seeders are found through get_peers (they announced before BOOTSTRAP).
    const auto& first = truth.at(0);
    const auto key = *id20::from_hex(first.at("announce_keys").at(0).get<std::string>());
    const auto found = find_peers(c, *bootstrap, key);
    for (const auto& s : first.at("seeders")) CHECK_MESSAGE(found.values.contains(s.get<std::string>()), s << " not found");
    REQUIRE(found.tokens.size() >= 2);

    // announce_peer: refused with a wrong token, stored with the right one, then visible
    // in get_peers and in sample_infohashes at that node.
    id20 ours;
    ours.bytes.fill(0xab);
    const auto& [node, token] = found.tokens.front().second;
    const auto bad = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) {
        return krpc::encode_announce_peer(o, h, ours, 4242, "nope", false);
    }));
    CHECK(bad->m.type == krpc::message_type::error);
    CHECK(bad->m.err.code == 203);
    const auto good = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) {
        return krpc::encode_announce_peer(o, h, ours, 4242, token, false);
    }));
    CHECK(good->m.type == krpc::message_type::response);
    const auto gp = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_get_peers(o, h, ours); }));
    std::set<std::string> values;
    for (const auto& v : gp->m.response.values) values.insert(v.to_string());
    CHECK(values.contains("127.0.0.1:4242"));
    const auto s = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) {
        return krpc::encode_sample_infohashes(o, h, ours);
    }));
    REQUIRE(s->m.response.has_samples);
    CHECK(s->m.response.interval == 60);
    CHECK(s->m.response.num >= 2); // ours and the torrent we looked up
    bool sampled = false;
    for (std::size_t i = 0; i < s->m.response.sample_count(); ++i) sampled = sampled || s->m.response.sample(i) == ours;
    CHECK_MESSAGE(sampled, "our announce is not among " << s->m.response.sample_count() << " samples (num " << s->m.response.num << ")");

    // The nodes we queried want us in their tables: they ping us first.
    bool pinged = false;
    for (const auto& [from, method] : c.queries_received) pinged = pinged || method == "ping";
    CHECK(pinged);

    // Metadata from seeders, compared with the truth: a few torrents, under every key.
    std::set<std::size_t> fetched;
    for (std::size_t i = 0; i < truth.size() && fetched.size() < 6; ++i) {
        const auto& t = truth[i];
        // The first three, then hybrids (fetched under both of their keys).
        if (fetched.size() >= 3 && t.at("announce_keys").size() < 2) continue;
        for (const auto& k : t.at("announce_keys")) {
            const auto key_i = *id20::from_hex(k.get<std::string>());
            const auto seeder = *endpoint::parse(t.at("seeders").at(0).get<std::string>());
            const std::string raw = fetch_metadata(seeder, key_i);
            metadata::torrent_info info;
            REQUIRE(metadata::parse_info(raw, key_i, info));
            CHECK(metadata::matches(info, key_i));
            auto expected = test::without_truth_extras(t);
            expected["info_hash"] = k;
            CHECK(metadata::to_json(info) == expected);
        }
        fetched.insert(i);
    }

    // Stopping rewrites the truth with first_served_at: set exactly for what we fetched.
    CHECK(net.stop(10000ms) == 0);
    CHECK(fetched.size() >= 4); // at least one hybrid among 30 torrents
    {
        std::ifstream in(truth_path);
        truth = nlohmann::json::parse(in);
    }
    for (std::size_t i = 0; i < truth.size(); ++i) {
        REQUIRE(truth[i].contains("first_served_at"));
        CHECK_MESSAGE(truth[i]["first_served_at"].is_null() == !fetched.contains(i), "torrent " << i);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("testnet.selfcheck: every connection policy serves what it allows and refuses the rest") {
    using metadata::encryption_policy;
    using metadata::transport_policy;
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-policies-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto truth_path = dir / "truth.json";
    // 12 seeders, equal shares: exactly two of each policy.
    test::subprocess net({DHTC_TESTNET_BIN, "--nodes", "40", "--seeders", "12", "--torrents", "36", "--seed", "12",
                          "--policy-mix", "plaintext=1,pe_rc4=1,pe_plain=1,utp=1,utp_pe=1,tcp_only=1", "--duration", "120",
                          "--churn", "0", "--quiet", "--stop-on-stdin-eof", "--truth", truth_path.string()});
    REQUIRE_MESSAGE(wait_for_bootstrap(net), "the testnet never printed BOOTSTRAP");
    nlohmann::json truth;
    {
        std::ifstream in(truth_path);
        truth = nlohmann::json::parse(in);
    }
    // A torrent and a seeder of it for every policy.
    std::map<std::string, std::pair<std::size_t, endpoint>> sample;
    std::map<std::string, int> seeders_of;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < truth.size(); ++i) {
        const auto& t = truth[i];
        REQUIRE(t.at("seeder_policies").size() == t.at("seeders").size());
        for (std::size_t k = 0; k < t.at("seeders").size(); ++k) {
            const auto policy = t["seeder_policies"][k].get<std::string>();
            const auto ep = t["seeders"][k].get<std::string>();
            if (seen.insert(ep).second) ++seeders_of[policy];
            sample.emplace(policy, std::pair{i, *endpoint::parse(ep)});
        }
    }
    const std::vector<std::string> policies{"plaintext", "pe_rc4", "pe_plain", "utp", "utp_pe", "tcp_only"};
    for (const auto& p : policies) {
        REQUIRE_MESSAGE(sample.contains(p), "no torrent on a " << p << " seeder");
        CHECK_MESSAGE(seeders_of[p] <= 2, p);
    }

    struct expectation {
        std::string policy;
        encryption_policy enc;
        transport_policy transports;
        bool served;
        api::stream_transport transport = api::stream_transport::tcp;
        api::stream_encryption encryption = api::stream_encryption::plaintext;
        bool used_mse = false;
    };
    using api::stream_encryption;
    using api::stream_transport;
    const std::vector<expectation> cases{
        {"plaintext", encryption_policy::disable, transport_policy::tcp, true},
        {"plaintext", encryption_policy::prefer_encrypted, transport_policy::tcp, true, stream_transport::tcp,
         stream_encryption::plaintext, true}, // MSE accepted, plaintext payload selected
        {"plaintext", encryption_policy::disable, transport_policy::utp, true, stream_transport::utp},
        {"pe_rc4", encryption_policy::require, transport_policy::utp, true, stream_transport::utp, stream_encryption::rc4, true},
        {"tcp_only", encryption_policy::disable, transport_policy::tcp, true},
        {"tcp_only", encryption_policy::disable, transport_policy::utp, false},
        {"pe_rc4", encryption_policy::require, transport_policy::tcp, true, stream_transport::tcp, stream_encryption::rc4, true},
        {"pe_rc4", encryption_policy::disable, transport_policy::tcp, false},
        {"pe_plain", encryption_policy::prefer_encrypted, transport_policy::tcp, true, stream_transport::tcp,
         stream_encryption::plaintext, true},
        {"pe_plain", encryption_policy::require, transport_policy::tcp, true, stream_transport::tcp, stream_encryption::rc4, true},
        {"pe_plain", encryption_policy::disable, transport_policy::tcp, false},
        {"utp", encryption_policy::disable, transport_policy::utp, true, stream_transport::utp},
        {"utp", encryption_policy::disable, transport_policy::tcp, false},
        {"utp_pe", encryption_policy::require, transport_policy::utp, true, stream_transport::utp, stream_encryption::rc4, true},
        {"utp_pe", encryption_policy::disable, transport_policy::utp, false},
        // What a crawler configured for everything does: fallbacks reach every policy.
        {"pe_rc4", encryption_policy::prefer_plaintext, transport_policy::both, true, stream_transport::tcp,
         stream_encryption::rc4, true},
        {"utp_pe", encryption_policy::prefer_plaintext, transport_policy::both, true, stream_transport::utp,
         stream_encryption::rc4, true},
        // Both modes closed over TCP: the uTP try goes back to MSE, which a PE-forcing seeder needs.
        {"utp_pe", encryption_policy::prefer_encrypted, transport_policy::both, true, stream_transport::utp,
         stream_encryption::rc4, true},
        // uTP first (the default): a seeder without uTP never answers the SYN, and TCP follows.
        {"tcp_only", encryption_policy::prefer_encrypted, transport_policy::utp_first, true, stream_transport::tcp,
         stream_encryption::plaintext, true},
        {"pe_plain", encryption_policy::prefer_encrypted, transport_policy::utp_first, true, stream_transport::utp,
         stream_encryption::plaintext, true},
        {"utp_pe", encryption_policy::prefer_encrypted, transport_policy::utp_first, true, stream_transport::utp,
         stream_encryption::rc4, true},
    };
    for (const auto& c : cases) {
        const auto& [index, seeder] = sample.at(c.policy);
        const auto& t = truth[index];
        const auto key_hex = t.at("announce_keys").at(0).get<std::string>();
        const auto key = *id20::from_hex(key_hex);
        INFO(c.policy << " seeder " << seeder.to_string() << ", encryption " << to_string(c.enc) << ", transports "
                      << to_string(c.transports));
        const auto f = fetch_by_session(seeder, key, c.enc, c.transports, c.served ? 8000ms : 3000ms);
        CHECK(f.result.ok() == c.served);
        if (!c.served || !f.result.ok()) continue;
        CHECK(f.result.transport == c.transport);
        CHECK(f.result.encryption == c.encryption);
        CHECK(f.result.used_mse == c.used_mse);
        metadata::torrent_info info;
        REQUIRE(metadata::parse_info(f.bytes, key, info));
        auto expected = test::without_truth_extras(t);
        expected["info_hash"] = key_hex;
        CHECK(metadata::to_json(info) == expected);
    }
    CHECK(net.stop(10000ms) == 0);
    std::filesystem::remove_all(dir);
}

namespace {

/// Starts a testnet whose nodes all share IPs (but node 0, the bootstrap), waits for
/// BOOTSTRAP and reads the truth file.
struct shared_ip_net {
    std::filesystem::path dir;
    std::unique_ptr<test::subprocess> process;
    endpoint bootstrap;
    nlohmann::json truth;

    shared_ip_net(const std::string& name, std::vector<std::string> extra) {
        dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-" + name + "-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        const auto truth_path = dir / "truth.json";
        std::vector<std::string> argv{DHTC_TESTNET_BIN, "--nodes", "40", "--seeders", "6", "--torrents", "12",
                                      "--shared-ip", "1", "--shared-ip-group", "3-4", "--duration", "120",
                                      "--churn", "0", "--quiet", "--stop-on-stdin-eof", "--truth", truth_path.string()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        process = std::make_unique<test::subprocess>(argv);
        const auto b = wait_for_bootstrap(*process);
        REQUIRE_MESSAGE(b, "the testnet never printed BOOTSTRAP");
        bootstrap = *b;
        std::ifstream in(truth_path);
        truth = nlohmann::json::parse(in);
    }
    ~shared_ip_net() {
        process->stop(10000ms);
        std::filesystem::remove_all(dir);
    }
};

/// Endpoints by IP, for the IPs that hold several nodes.
std::map<ip_address, std::vector<std::pair<endpoint, id20>>> shared_ips(const std::map<endpoint, id20>& nodes) {
    std::map<ip_address, std::vector<std::pair<endpoint, id20>>> by_ip;
    for (const auto& [ep, id] : nodes) by_ip[ep.address].emplace_back(ep, id);
    std::erase_if(by_ip, [](const auto& e) { return e.second.size() < 2; });
    return by_ip;
}

} // namespace

TEST_CASE("testnet.selfcheck: nodes sharing an IP answer on their own ports with their own ids, tokens, stores and blockers") {
    shared_ip_net net("shared-ip", {"--seed", "14", "--block-rate", "5"});
    krpc_client c;

    // The truth names who held each torrent's announces at BOOTSTRAP; here nearly every
    // node shares its IP, so they did.
    std::size_t shared_holders = 0;
    for (const auto& t : net.truth) {
        REQUIRE(t.contains("holders"));
        REQUIRE(t.contains("holders_shared_ip"));
        CHECK(t["holders_shared_ip"].size() <= t["holders"].size());
        shared_holders += t["holders_shared_ip"].size();
    }
    CHECK(shared_holders > 0);

    // Lookups find peers stored at shared-IP nodes: every torrent's seeders, and a shared
    // holder asked directly gives them.
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& t = net.truth.at(i);
        const auto key = *id20::from_hex(t.at("announce_keys").at(0).get<std::string>());
        const auto found = find_peers(c, net.bootstrap, key);
        for (const auto& s : t.at("seeders")) CHECK_MESSAGE(found.values.contains(s.get<std::string>()), s << " not found");
    }
    const nlohmann::json* held = nullptr;
    for (const auto& t : net.truth)
        if (!held && !t["holders_shared_ip"].empty() && t["announce_keys"].size() == 1) held = &t;
    REQUIRE(held);
    {
        const auto holder = *endpoint::parse((*held)["holders_shared_ip"][0].get<std::string>());
        const auto key = *id20::from_hex((*held)["announce_keys"][0].get<std::string>());
        const auto p = parse_reply(c.ask(holder, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_get_peers(o, h, key); }));
        REQUIRE(p->m.type == krpc::message_type::response);
        std::set<std::string> seeders;
        for (const auto& s : (*held)["seeders"]) seeders.insert(s.get<std::string>());
        bool gave_seeder = false;
        for (const auto& v : p->m.response.values) gave_seeder = gave_seeder || seeders.contains(v.to_string());
        CHECK_MESSAGE(gave_seeder, "the shared-IP holder " << holder.to_string() << " gave no seeder");
    }

    // Several nodes on one IP, each answering on its own port (exchange() takes only a
    // reply from the endpoint asked) with an id of its own, valid under BEP-42 for the IP.
    const auto nodes = crawl_nodes(c, net.bootstrap, 60);
    const auto groups = shared_ips(nodes);
    REQUIRE_MESSAGE(!groups.empty(), "no two nodes on one IP among " << nodes.size());
    const auto& [ip, members] = *groups.begin();
    std::set<id20> ids;
    std::set<std::uint16_t> ports;
    for (const auto& [ep, id] : members) {
        const auto p = parse_reply(c.ask(ep, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); }));
        REQUIRE(p->m.type == krpc::message_type::response);
        CHECK(p->m.id == id);
        CHECK(dht::bep42_valid(p->m.id, ip));
        ids.insert(p->m.id);
        ports.insert(ep.port);
    }
    CHECK(ids.size() == members.size());
    CHECK(ports.size() == members.size());
    const endpoint a = members[0].first, b = members[1].first;

    // Tokens of their own: b refuses a's token; peer stores of their own: what a stores,
    // b does not know.
    id20 ours;
    ours.bytes.fill(0xcd);
    auto token_of = [&](const endpoint& node) {
        const auto p = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_get_peers(o, h, ours); }));
        REQUIRE(p->m.response.has_token);
        return std::string(p->m.response.token);
    };
    const auto token_a = token_of(a), token_b = token_of(b);
    CHECK(token_a != token_b);
    auto announce = [&](const endpoint& node, const std::string& token) {
        return parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) {
            return krpc::encode_announce_peer(o, h, ours, 4343, token, false);
        }));
    };
    CHECK(announce(b, token_a)->m.err.code == 203);
    CHECK(announce(a, token_a)->m.type == krpc::message_type::response);
    auto stored = [&](const endpoint& node) {
        const auto p = parse_reply(c.ask(node, [&](std::string& o, const krpc::query_header& h) { return krpc::encode_get_peers(o, h, ours); }));
        for (const auto& v : p->m.response.values)
            if (v.to_string() == "127.0.0.1:4343") return true;
        return false;
    };
    CHECK(stored(a));
    CHECK_FALSE(stored(b));

    // Tables take several nodes of one IP by default (no --restrict-ips): both clients on
    // 127.0.0.2 are pinged and kept.
    {
        krpc_client probe(0x7f000003);
        const auto [kept, second_pinged] = two_clients_on_one_ip(probe, b, members[1].second);
        CHECK(kept == 2);
        CHECK(second_pinged);
    }

    // A blocker of its own: flooding a until it ignores us leaves b answering.
    int answered = 0;
    while (answered < 60 && c.ask(a, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); }))
        ++answered;
    CHECK(answered < 60); // 5 packets/s over 10 s: the 51st in a window is ignored
    CHECK(answered >= 30);
    CHECK(c.ask(b, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); }));
}

TEST_CASE("testnet.selfcheck: with --restrict-ips a table holds one node per IP and a lookup asks one node per IP") {
    shared_ip_net net("restrict-ips", {"--seed", "15", "--restrict-ips", "1"});
    krpc_client c;

    // No answer names two nodes of one IP: every table holds one per IP.
    const auto nodes = crawl_nodes(c, net.bootstrap, 60);
    CHECK(nodes.size() >= 10);
    for (const auto& [ep, id] : nodes) {
        std::set<ip_address> seen;
        for (const auto& n : nodes_near(c, ep, id)) CHECK_MESSAGE(seen.insert(n.ep.address).second, ep.to_string() << " names two nodes on " << n.ep.address.to_string());
    }
    // A torrent with one seeder and one key was announced by one lookup, which asked one
    // node per IP: its holders are on distinct IPs.
    for (const auto& t : net.truth) {
        if (t["seeders"].size() != 1 || t["announce_keys"].size() != 1) continue;
        std::set<ip_address> ips;
        for (const auto& h : t["holders"]) CHECK(ips.insert(endpoint::parse(h.get<std::string>())->address).second);
    }
    // Lookups still find the seeders in a network where every node but one shares an IP.
    const auto& first = net.truth.at(0);
    const auto found = find_peers(c, net.bootstrap, *id20::from_hex(first.at("announce_keys").at(0).get<std::string>()));
    for (const auto& s : first.at("seeders")) CHECK_MESSAGE(found.values.contains(s.get<std::string>()), s << " not found");

    // Of two clients on one IP the node verifies and keeps one; the second is not pinged.
    const auto bootstrap_id = nodes.at(net.bootstrap);
    krpc_client probe(0x7f000003);
    const auto [kept, second_pinged] = two_clients_on_one_ip(probe, net.bootstrap, bootstrap_id);
    CHECK(kept == 1);
    CHECK_FALSE(second_pinged);
}

TEST_CASE("testnet.selfcheck: under the WAN model a crawler's datagrams are lost each way at its rate, and fetches "
          "over TCP and uTP still equal the truth") {
    using metadata::encryption_policy;
    using metadata::transport_policy;
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-testnet-wan-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto truth_path = dir / "truth.json";
    // 20% loss each way: a query and its answer both cross with probability 0.64.
    test::subprocess net({DHTC_TESTNET_BIN, "--nodes", "8", "--seeders", "2", "--torrents", "4", "--seed", "13",
                          "--policy-mix", "plaintext=1,utp=1", "--churn", "0", "--wan-rtt", "20-40", "--wan-jitter", "10",
                          "--wan-loss", "0.2", "--duration", "120", "--quiet", "--stop-on-stdin-eof", "--truth",
                          truth_path.string()});
    const auto bootstrap = wait_for_bootstrap(net);
    REQUIRE_MESSAGE(bootstrap, "the testnet never printed BOOTSTRAP");
    nlohmann::json truth;
    {
        std::ifstream in(truth_path);
        truth = nlohmann::json::parse(in);
    }

    // 400 pings at once, each with a transaction id of its own; the answers counted, not timed
    // (a bounded wait long enough for every answer that can come).
    const int fd = open_socket(SOCK_DGRAM, nullptr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(bootstrap->address.to_v4_uint());
    to.sin_port = htons(bootstrap->port);
    id20 our_id;
    our_id.bytes.fill(0x51);
    const int pings = 400;
    for (int i = 0; i < pings; ++i) {
        std::string q;
        REQUIRE(krpc::encode_ping(q, krpc::query_header{"w" + std::to_string(i), our_id, {}}));
        REQUIRE(::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
                static_cast<ssize_t>(q.size()));
    }
    std::set<std::string> answered;
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        char buf[1500];
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) continue;
        bencode::document doc;
        krpc::message m;
        if (bencode::decode(std::string_view(buf, static_cast<std::size_t>(n)), doc, krpc::packet_limits) &&
            krpc::parse(doc.root(), m) && m.type == krpc::message_type::response)
            answered.insert(std::string(m.transaction));
    }
    ::close(fd);
    MESSAGE(answered.size() << " of " << pings << " pings answered (expected about 256)");
    // Binomial(400, 0.64): mean 256, standard deviation 9.6.
    CHECK(answered.size() > 208);
    CHECK(answered.size() < 304);

    // The seeders' TCP (wan_stream: delayed, reordered never, "lost" chunks late) and uTP (the
    // hub's delay line, real losses the core's uTP recovers) still carry exact metadata.
    std::map<std::string, std::pair<std::size_t, endpoint>> sample;
    for (std::size_t i = 0; i < truth.size(); ++i)
        for (std::size_t k = 0; k < truth[i].at("seeders").size(); ++k)
            sample.emplace(truth[i]["seeder_policies"][k].get<std::string>(),
                           std::pair{i, *endpoint::parse(truth[i]["seeders"][k].get<std::string>())});
    for (const auto& [policy, transports] : {std::pair{std::string("plaintext"), transport_policy::tcp},
                                             std::pair{std::string("utp"), transport_policy::utp}}) {
        REQUIRE(sample.contains(policy));
        const auto& [index, seeder] = sample.at(policy);
        const auto key_hex = truth[index].at("announce_keys").at(0).get<std::string>();
        const auto key = *id20::from_hex(key_hex);
        INFO(policy << " seeder " << seeder.to_string());
        const auto f = fetch_by_session(seeder, key, encryption_policy::disable, transports, 20000ms);
        REQUIRE(f.result.ok());
        metadata::torrent_info info;
        REQUIRE(metadata::parse_info(f.bytes, key, info));
        auto expected = test::without_truth_extras(truth[index]);
        expected["info_hash"] = key_hex;
        CHECK(metadata::to_json(info) == expected);
    }
    CHECK(net.stop(10000ms) == 0);
    std::filesystem::remove_all(dir);
}
