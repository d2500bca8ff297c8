#include "krpc/message.hpp"

#include <cstring>

namespace dhtc::krpc {

std::string_view to_string(method m) noexcept {
    switch (m) {
    case method::none: return "none";
    case method::ping: return "ping";
    case method::find_node: return "find_node";
    case method::get_peers: return "get_peers";
    case method::announce_peer: return "announce_peer";
    case method::sample_infohashes: return "sample_infohashes";
    case method::unknown: return "unknown";
    }
    return "unknown";
}

std::string_view to_string(error e) noexcept {
    switch (e) {
    case error::none: return "none";
    case error::not_a_dict: return "not_a_dict";
    case error::missing_transaction: return "missing_transaction";
    case error::bad_transaction: return "bad_transaction";
    case error::missing_type: return "missing_type";
    case error::bad_type: return "bad_type";
    case error::missing_method: return "missing_method";
    case error::bad_method: return "bad_method";
    case error::missing_args: return "missing_args";
    case error::bad_args: return "bad_args";
    case error::missing_id: return "missing_id";
    case error::bad_id: return "bad_id";
    case error::missing_target: return "missing_target";
    case error::bad_target: return "bad_target";
    case error::missing_info_hash: return "missing_info_hash";
    case error::bad_info_hash: return "bad_info_hash";
    case error::missing_port: return "missing_port";
    case error::bad_port: return "bad_port";
    case error::bad_implied_port: return "bad_implied_port";
    case error::missing_token: return "missing_token";
    case error::bad_token: return "bad_token";
    case error::bad_nodes: return "bad_nodes";
    case error::bad_nodes6: return "bad_nodes6";
    case error::bad_values: return "bad_values";
    case error::missing_error: return "missing_error";
    case error::bad_error: return "bad_error";
    case error::bad_want: return "bad_want";
    case error::bad_ip: return "bad_ip";
    case error::bad_ro: return "bad_ro";
    case error::bad_samples: return "bad_samples";
    case error::bad_interval: return "bad_interval";
    case error::bad_num: return "bad_num";
    }
    return "unknown";
}

id20 response_args::sample(std::size_t i) const noexcept {
    id20 id;
    if (i < sample_count()) std::memcpy(id.bytes.data(), samples.data() + i * id20::size, id20::size);
    return id;
}

namespace {

// Every key the parser looks at, top level and inside `a`/`r`, so each dict is walked
// once with a switch instead of one linear find() per field.
enum class key : std::uint8_t {
    other,
    a, e, q, r, t, v, y,
    id, ip, ro, bs,
    num,
    port, want, seed, bf_seeds, bf_peers,
    nodes, token,
    target, nodes6, values, noseed, scrape,
    samples,
    interval,
    info_hash,
    implied_port,
};

key classify(std::string_view k) noexcept {
    switch (k.size()) {
    case 1:
        switch (k[0]) {
        case 'a': return key::a;
        case 'e': return key::e;
        case 'q': return key::q;
        case 'r': return key::r;
        case 't': return key::t;
        case 'v': return key::v;
        case 'y': return key::y;
        default: return key::other;
        }
    case 2:
        if (k == "id") return key::id;
        if (k == "ip") return key::ip;
        if (k == "ro") return key::ro;
        if (k == "bs") return key::bs;
        return key::other;
    case 3: return k == "num" ? key::num : key::other;
    case 4:
        if (k == "port") return key::port;
        if (k == "want") return key::want;
        if (k == "seed") return key::seed;
        if (k == "BFsd") return key::bf_seeds;
        if (k == "BFpe") return key::bf_peers;
        return key::other;
    case 5:
        if (k == "nodes") return key::nodes;
        if (k == "token") return key::token;
        return key::other;
    case 6:
        if (k == "target") return key::target;
        if (k == "nodes6") return key::nodes6;
        if (k == "values") return key::values;
        if (k == "noseed") return key::noseed;
        if (k == "scrape") return key::scrape;
        return key::other;
    case 7: return k == "samples" ? key::samples : key::other;
    case 8: return k == "interval" ? key::interval : key::other;
    case 9: return k == "info_hash" ? key::info_hash : key::other;
    case 12: return k == "implied_port" ? key::implied_port : key::other;
    default: return key::other;
    }
}

bool read_id(const bencode::value& v, id20& out) noexcept {
    if (!v.is_string()) return false;
    const auto s = v.as_string();
    if (s.size() != id20::size) return false;
    std::memcpy(out.bytes.data(), s.data(), id20::size);
    return true;
}

// BEP-32: unknown strings are ignored (future families); anything but strings is malformed.
bool read_want(const bencode::value& v, want& out) noexcept {
    if (!v.is_list()) return false;
    want w = want::none;
    for (auto e : v) {
        if (!e.val.is_string()) return false;
        const auto s = e.val.as_string();
        if (s == "n4") w = w | want::n4;
        else if (s == "n6") w = w | want::n6;
    }
    out = w;
    return true;
}

bool flag(const bencode::value& v) noexcept { return v.is_integer() && v.as_integer() != 0; }

class parser {
public:
    explicit parser(message& out) noexcept : out_(out) {}

    parse_result run(const bencode::value& root) noexcept;

private:
    parse_result fail(error e, const bencode::value& at) const noexcept {
        return {e, out_.query.kind, at.offset()};
    }
    parse_result parse_query(const bencode::value& root, const bencode::value& a) noexcept;
    parse_result parse_response(const bencode::value& root, const bencode::value& r) noexcept;
    parse_result parse_error(const bencode::value& root, const bencode::value& e) noexcept;

    message& out_;
};

parse_result parser::run(const bencode::value& root) noexcept {
    if (!root.is_dict()) return fail(error::not_a_dict, root);

    bencode::value a, e, q, r, t, v, y, ip, ro;
    for (auto ent : root) {
        switch (classify(ent.key)) {
        case key::a: a = ent.val; break;
        case key::e: e = ent.val; break;
        case key::q: q = ent.val; break;
        case key::r: r = ent.val; break;
        case key::t: t = ent.val; break;
        case key::v: v = ent.val; break;
        case key::y: y = ent.val; break;
        case key::ip: ip = ent.val; break;
        case key::ro: ro = ent.val; break;
        default: break;
        }
    }

    if (!t) return fail(error::missing_transaction, root);
    const auto tid = t.as_string();
    if (!t.is_string() || tid.empty() || tid.size() > max_transaction_size) return fail(error::bad_transaction, t);
    out_.transaction = tid;

    if (!y) return fail(error::missing_type, root);
    const auto ty = y.as_string();
    if (!y.is_string() || ty.size() != 1) return fail(error::bad_type, y);
    switch (ty[0]) {
    case 'q': out_.type = message_type::query; break;
    case 'r': out_.type = message_type::response; break;
    case 'e': out_.type = message_type::error; break;
    default: return fail(error::bad_type, y);
    }

    if (out_.type == message_type::query) {
        if (!q) return fail(error::missing_method, root);
        const auto name = q.as_string();
        if (!q.is_string() || name.empty() || name.size() > max_method_size) return fail(error::bad_method, q);
        out_.query.name = name;
        out_.query.kind = classify_method(name);
    }

    // `v` is informational only: a non-string one is ignored rather than costing the message.
    if (v.is_string()) out_.version = v.as_string();

    if (ip) {
        auto ep = parse_compact_endpoint(ip.as_string());
        if (!ip.is_string() || !ep) return fail(error::bad_ip, ip);
        out_.ip = *ep;
    }
    if (ro) {
        if (!ro.is_integer()) return fail(error::bad_ro, ro);
        out_.read_only = ro.as_integer() != 0;
    }

    switch (out_.type) {
    case message_type::query: return parse_query(root, a);
    case message_type::response: return parse_response(root, r);
    case message_type::error: return parse_error(root, e);
    }
    return fail(error::bad_type, y);
}

parse_result parser::parse_query(const bencode::value& root, const bencode::value& a) noexcept {
    if (!a) return fail(error::missing_args, root);
    if (!a.is_dict()) return fail(error::bad_args, a);

    query_args& qa = out_.query;
    const method m = qa.kind;
    const bool is_unknown = m == method::unknown;
    const bool uses_target = m == method::find_node || m == method::sample_infohashes;
    const bool uses_info_hash = m == method::get_peers || m == method::announce_peer;
    const bool is_announce = m == method::announce_peer;
    const bool uses_want = uses_target || m == method::get_peers;

    bool has_id = false;
    bool has_port = false;
    bool has_token = false;
    std::int64_t port = 0;
    bencode::value port_at;

    for (auto ent : a) {
        const bencode::value& val = ent.val;
        switch (classify(ent.key)) {
        case key::id:
            if (!read_id(val, out_.id)) return fail(error::bad_id, val);
            has_id = true;
            break;
        case key::target:
            if (uses_target) {
                if (!read_id(val, qa.target)) return fail(error::bad_target, val);
                qa.has_target = true;
            } else if (is_unknown) {
                // Forward compatibility: answer like find_node only when it is a real target.
                qa.has_target = read_id(val, qa.target);
            }
            break;
        case key::info_hash:
            if (uses_info_hash) {
                if (!read_id(val, qa.info_hash)) return fail(error::bad_info_hash, val);
                qa.has_info_hash = true;
            } else if (is_unknown) {
                qa.has_info_hash = read_id(val, qa.info_hash);
            }
            break;
        case key::port:
            if (is_announce) {
                if (!val.is_integer()) return fail(error::bad_port, val);
                port = val.as_integer();
                port_at = val;
                has_port = true;
            }
            break;
        case key::implied_port:
            if (is_announce) {
                if (!val.is_integer()) return fail(error::bad_implied_port, val);
                qa.implied_port = val.as_integer() != 0;
            }
            break;
        case key::token:
            if (is_announce) {
                if (!val.is_string() || val.as_string().size() > max_token_size) return fail(error::bad_token, val);
                qa.token = val.as_string();
                has_token = true;
            }
            break;
        case key::want:
            if (uses_want) {
                if (!read_want(val, qa.wants)) return fail(error::bad_want, val);
                qa.has_want = true;
            } else if (is_unknown) {
                qa.has_want = read_want(val, qa.wants);
            }
            break;
        case key::seed: qa.seed = flag(val); break;
        case key::noseed: qa.noseed = flag(val); break;
        case key::scrape: qa.scrape = flag(val); break;
        case key::bs: qa.bootstrap = flag(val); break;
        default: break;
        }
    }

    if (!has_id) return fail(error::missing_id, a);
    if (uses_target && !qa.has_target) return fail(error::missing_target, a);
    if (uses_info_hash && !qa.has_info_hash) return fail(error::missing_info_hash, a);
    if (is_announce) {
        if (!has_port) return fail(error::missing_port, a);
        if (!has_token) return fail(error::missing_token, a);
        // With implied_port the UDP source port is used, so `port` (often 0) does not matter.
        if (!qa.implied_port) {
            if (port < 1 || port > 65535) return fail(error::bad_port, port_at);
            qa.port = static_cast<std::uint16_t>(port);
        }
    }
    return {error::none, m, 0};
}

parse_result parser::parse_response(const bencode::value& root, const bencode::value& r) noexcept {
    if (!r) return fail(error::missing_args, root);
    if (!r.is_dict()) return fail(error::bad_args, r);

    response_args& ra = out_.response;
    bool has_id = false;
    for (auto ent : r) {
        const bencode::value& val = ent.val;
        switch (classify(ent.key)) {
        case key::id:
            if (!read_id(val, out_.id)) return fail(error::bad_id, val);
            has_id = true;
            break;
        case key::nodes: {
            auto n = compact_nodes::from(val.as_string(), ip_family::v4);
            if (!val.is_string() || !n) return fail(error::bad_nodes, val);
            ra.nodes = *n;
            ra.has_nodes = true;
            break;
        }
        case key::nodes6: {
            auto n = compact_nodes::from(val.as_string(), ip_family::v6);
            if (!val.is_string() || !n) return fail(error::bad_nodes6, val);
            ra.nodes6 = *n;
            ra.has_nodes6 = true;
            break;
        }
        case key::values: {
            auto vals = compact_values::from(val);
            if (!vals) return fail(error::bad_values, val);
            ra.values = *vals;
            ra.has_values = true;
            break;
        }
        case key::token:
            if (!val.is_string() || val.as_string().size() > max_token_size) return fail(error::bad_token, val);
            ra.token = val.as_string();
            ra.has_token = true;
            break;
        case key::samples:
            if (!val.is_string() || val.as_string().size() % id20::size != 0) return fail(error::bad_samples, val);
            ra.samples = val.as_string();
            ra.has_samples = true;
            break;
        case key::interval:
            if (!val.is_integer() || val.as_integer() < 0 || val.as_integer() > max_sample_interval)
                return fail(error::bad_interval, val);
            ra.interval = val.as_integer();
            ra.has_interval = true;
            break;
        case key::num:
            if (!val.is_integer() || val.as_integer() < 0) return fail(error::bad_num, val);
            ra.num = val.as_integer();
            ra.has_num = true;
            break;
        // BEP-33: a filter of any other shape is ignored, not fatal; the reply's nodes and
        // values still count.
        case key::bf_seeds:
            if (val.is_string() && val.as_string().size() == scrape_filter_size) ra.seeds_filter = val.as_string();
            break;
        case key::bf_peers:
            if (val.is_string() && val.as_string().size() == scrape_filter_size) ra.peers_filter = val.as_string();
            break;
        default: break;
        }
    }
    if (!has_id) return fail(error::missing_id, r);
    return {};
}

parse_result parser::parse_error(const bencode::value& root, const bencode::value& e) noexcept {
    if (!e) return fail(error::missing_error, root);
    if (!e.is_list() || e.size() < 2) return fail(error::bad_error, e);
    auto it = e.begin();
    const bencode::value code = (*it).val;
    ++it;
    const bencode::value msg = (*it).val;
    if (!code.is_integer() || !msg.is_string()) return fail(error::bad_error, e);
    out_.err.code = code.as_integer();
    out_.err.message = msg.as_string();
    return {};
}

} // namespace

parse_result parse(const bencode::value& root, message& out) noexcept {
    out = message{};
    return parser(out).run(root);
}

method classify_method(std::string_view q) noexcept {
    if (q == "ping") return method::ping;
    if (q == "find_node") return method::find_node;
    if (q == "get_peers") return method::get_peers;
    if (q == "announce_peer") return method::announce_peer;
    if (q == "sample_infohashes") return method::sample_infohashes;
    return method::unknown;
}

} // namespace dhtc::krpc
