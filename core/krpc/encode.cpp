#include "krpc/encode.hpp"

#include <type_traits>

#include "bencode/encoder.hpp"

namespace dhtc::krpc {

namespace {

// samples are written straight from the caller's id array as one string.
static_assert(sizeof(id20) == id20::size && std::is_trivially_copyable_v<id20>);

using bencode::writer;

bool valid_transaction(std::string_view t) noexcept { return !t.empty() && t.size() <= max_transaction_size; }

bool valid_nodes(std::string_view nodes, ip_family f) noexcept { return nodes.size() % compact_node_size(f) == 0; }

// Runs `body` against a writer on `out`; any failure (writer misuse or bad_alloc) rolls
// `out` back to its previous size, which never allocates.
template <class Body>
bool emit(std::string& out, Body&& body) noexcept {
    const std::size_t old = out.size();
    try {
        writer w(out);
        body(w);
        if (w.complete()) return true;
    } catch (...) {
    }
    out.resize(old);
    return false;
}

void write_want(writer& w, want wants) {
    if (wants == want::none) return;
    w.key("want").begin_list();
    if (has(wants, want::n4)) w.string("n4");
    if (has(wants, want::n6)) w.string("n6");
    w.end();
}

// A query is {a: {...}, q, t, v?, y: q}: `a` sorts first, so the caller writes its
// arguments between these two.
void begin_query(writer& w, const query_header& h) {
    w.begin_dict().key("a").begin_dict().entry("id", h.id.view());
}

void end_query(writer& w, const query_header& h, std::string_view name) {
    w.end();
    w.entry("q", name).entry("t", h.transaction);
    if (!h.version.empty()) w.entry("v", h.version);
    w.entry("y", std::string_view("q")).end();
}

// A reply is {ip?, r: {...}, t, v?, y: r}.
void begin_reply(writer& w, const reply_header& h) {
    w.begin_dict();
    if (h.requester) w.entry("ip", to_compact(*h.requester).view());
    w.key("r").begin_dict().entry("id", h.id.view());
}

void end_reply(writer& w, const reply_header& h) {
    w.end();
    w.entry("t", h.transaction);
    if (!h.version.empty()) w.entry("v", h.version);
    w.entry("y", std::string_view("r")).end();
}

void write_nodes(writer& w, std::string_view nodes, std::string_view nodes6, bool with_nodes6) {
    w.entry("nodes", nodes);
    if (with_nodes6 || !nodes6.empty()) w.entry("nodes6", nodes6);
}

} // namespace

bool encode_ping(std::string& out, const query_header& h) noexcept {
    if (!valid_transaction(h.transaction)) return false;
    return emit(out, [&](writer& w) {
        begin_query(w, h);
        end_query(w, h, "ping");
    });
}

bool encode_find_node(std::string& out, const query_header& h, const id20& target, want wants) noexcept {
    if (!valid_transaction(h.transaction)) return false;
    return emit(out, [&](writer& w) {
        begin_query(w, h);
        w.entry("target", target.view());
        write_want(w, wants);
        end_query(w, h, "find_node");
    });
}

bool encode_get_peers(std::string& out, const query_header& h, const id20& info_hash, want wants,
                      bool scrape) noexcept {
    if (!valid_transaction(h.transaction)) return false;
    return emit(out, [&](writer& w) {
        begin_query(w, h);
        w.entry("info_hash", info_hash.view());
        if (scrape) w.entry("scrape", std::int64_t{1});
        write_want(w, wants);
        end_query(w, h, "get_peers");
    });
}

bool encode_announce_peer(std::string& out, const query_header& h, const id20& info_hash, std::uint16_t port,
                          std::string_view token, bool implied_port, bool seed) noexcept {
    if (!valid_transaction(h.transaction) || token.size() > max_token_size || (port == 0 && !implied_port))
        return false;
    return emit(out, [&](writer& w) {
        begin_query(w, h);
        if (implied_port) w.entry("implied_port", std::int64_t{1});
        w.entry("info_hash", info_hash.view());
        w.entry("port", std::int64_t{port});
        if (seed) w.entry("seed", std::int64_t{1});
        w.entry("token", token);
        end_query(w, h, "announce_peer");
    });
}

bool encode_sample_infohashes(std::string& out, const query_header& h, const id20& target, want wants) noexcept {
    if (!valid_transaction(h.transaction)) return false;
    return emit(out, [&](writer& w) {
        begin_query(w, h);
        w.entry("target", target.view());
        write_want(w, wants);
        end_query(w, h, "sample_infohashes");
    });
}

bool encode_ping_response(std::string& out, const reply_header& h) noexcept {
    if (!valid_transaction(h.transaction)) return false;
    return emit(out, [&](writer& w) {
        begin_reply(w, h);
        end_reply(w, h);
    });
}

bool encode_find_node_response(std::string& out, const reply_header& h, std::string_view nodes,
                               std::string_view nodes6, bool with_nodes6) noexcept {
    if (!valid_transaction(h.transaction) || !valid_nodes(nodes, ip_family::v4) || !valid_nodes(nodes6, ip_family::v6))
        return false;
    return emit(out, [&](writer& w) {
        begin_reply(w, h);
        write_nodes(w, nodes, nodes6, with_nodes6);
        end_reply(w, h);
    });
}

bool encode_get_peers_response(std::string& out, const reply_header& h, std::string_view token,
                               std::span<const endpoint> values, std::string_view nodes,
                               std::string_view nodes6, bool with_nodes6) noexcept {
    if (!valid_transaction(h.transaction) || token.size() > max_token_size || !valid_nodes(nodes, ip_family::v4) ||
        !valid_nodes(nodes6, ip_family::v6))
        return false;
    return emit(out, [&](writer& w) {
        begin_reply(w, h);
        write_nodes(w, nodes, nodes6, with_nodes6);
        w.entry("token", token);
        if (!values.empty()) {
            w.key("values").begin_list();
            for (const auto& ep : values) w.string(to_compact(ep).view());
            w.end();
        }
        end_reply(w, h);
    });
}

bool encode_sample_infohashes_response(std::string& out, const reply_header& h, std::int64_t interval,
                                       std::int64_t num, std::span<const id20> samples, std::string_view nodes,
                                       std::string_view nodes6, bool with_nodes6) noexcept {
    if (!valid_transaction(h.transaction) || interval < 0 || interval > max_sample_interval || num < 0 ||
        !valid_nodes(nodes, ip_family::v4) || !valid_nodes(nodes6, ip_family::v6))
        return false;
    const std::string_view sample_bytes(reinterpret_cast<const char*>(samples.data()), samples.size() * id20::size);
    return emit(out, [&](writer& w) {
        begin_reply(w, h);
        w.entry("interval", interval);
        write_nodes(w, nodes, nodes6, with_nodes6);
        w.entry("num", num);
        w.entry("samples", sample_bytes);
        end_reply(w, h);
    });
}

bool encode_error(std::string& out, std::string_view transaction, std::int64_t code, std::string_view message,
                  const std::optional<endpoint>& requester, std::string_view version) noexcept {
    if (!valid_transaction(transaction)) return false;
    return emit(out, [&](writer& w) {
        w.begin_dict();
        w.key("e").begin_list().integer(code).string(message).end();
        if (requester) w.entry("ip", to_compact(*requester).view());
        w.entry("t", transaction);
        if (!version.empty()) w.entry("v", version);
        w.entry("y", std::string_view("e")).end();
    });
}

} // namespace dhtc::krpc
