#include "sim/sim_network.hpp"

#include <algorithm>
#include <array>

#include "dht/node_id.hpp"
#include "krpc/encode.hpp"

namespace dhtc::sim {

namespace {

constexpr std::string_view sim_version = "SM01";

ip_address v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return ip_address::v4(std::array<std::uint8_t, 4>{a, b, c, d});
}

kind kind_of(const krpc::message& m) {
    if (m.type == krpc::message_type::response) return kind::response;
    if (m.type == krpc::message_type::error) return kind::error;
    switch (m.query.kind) {
    case krpc::method::ping: return kind::ping;
    case krpc::method::find_node: return kind::find_node;
    case krpc::method::get_peers: return kind::get_peers;
    case krpc::method::announce_peer: return kind::announce_peer;
    case krpc::method::sample_infohashes: return kind::sample_infohashes;
    case krpc::method::unknown:
    case krpc::method::none: break;
    }
    return kind::other_query;
}

bool is_query(kind k) { return k != kind::response && k != kind::error && k != kind::unparsable; }

} // namespace

std::string_view to_string(kind k) noexcept {
    switch (k) {
    case kind::ping: return "ping";
    case kind::find_node: return "find_node";
    case kind::get_peers: return "get_peers";
    case kind::announce_peer: return "announce_peer";
    case kind::sample_infohashes: return "sample_infohashes";
    case kind::other_query: return "other_query";
    case kind::response: return "response";
    case kind::error: return "error";
    case kind::unparsable: return "unparsable";
    }
    return "?";
}

bool parse_packet(std::string_view payload, parsed_packet& out) {
    out.bytes.assign(payload);
    out.msg = krpc::message{};
    out.ok = bencode::decode(std::string_view(out.bytes), out.doc, krpc::packet_limits) &&
             static_cast<bool>(krpc::parse(out.doc.root(), out.msg));
    return out.ok;
}

sim_network::sim_network(manual_clock& clock, network_options options)
    : clock_(clock), options_(options), rng_(options.seed), send_scratch_(std::make_unique<parsed_packet>()) {}

sim_network::~sim_network() = default;

id20 sim_network::random_id() { return dht::random_id(rng_); }

duration sim_network::latency() {
    const auto lo = options_.latency_min.count();
    const auto hi = std::max(options_.latency_max.count(), lo);
    return duration{std::uniform_int_distribution<duration::rep>(lo, hi)(rng_)};
}

bool sim_network::dropped(double p) {
    if (p <= 0) return false;
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

// ---- population -----------------------------------------------------------------------

std::uint32_t sim_network::add_node(const endpoint& ep, const id20& id) {
    const auto i = static_cast<std::uint32_t>(nodes_.size());
    sim_node n;
    n.id = id;
    n.ep = ep;
    nodes_.push_back(std::move(n));
    by_endpoint_[ep] = i;
    return i;
}

std::vector<std::uint32_t> sim_network::add_spread_v4(std::size_t n, std::uint8_t first_octet,
                                                      std::size_t per_subnet) {
    std::vector<std::uint32_t> out;
    per_subnet = std::clamp<std::size_t>(per_subnet, 1, 250);
    for (std::size_t i = 0; i < n; ++i) {
        // Subnets are numbered from where the last call stopped, so calls never collide.
        const std::size_t subnet = spread_v4_next_ / per_subnet;
        const std::size_t host = spread_v4_next_ % per_subnet;
        ++spread_v4_next_;
        const auto a = static_cast<std::uint8_t>(subnet / 250 % 250 + 1);
        const auto b = static_cast<std::uint8_t>(subnet % 250 + 1);
        out.push_back(add_node({v4(first_octet, a, b, static_cast<std::uint8_t>(host + 2)), 6881}));
    }
    return out;
}

std::vector<std::uint32_t> sim_network::add_shared_ip_v4(std::size_t n, std::size_t group_min, std::size_t group_max,
                                                         std::uint8_t first_octet) {
    std::vector<std::uint32_t> out;
    group_min = std::clamp<std::size_t>(group_min, 1, 1000);
    group_max = std::clamp<std::size_t>(group_max, group_min, 1000);
    std::size_t size = group_min;
    while (out.size() < n) {
        const std::size_t group = shared_v4_next_++;
        const auto a = static_cast<std::uint8_t>(group / 250 % 250 + 1);
        const auto b = static_cast<std::uint8_t>(group % 250 + 1);
        for (std::size_t k = 0; k < size && out.size() < n; ++k)
            out.push_back(add_node({v4(first_octet, a, b, 1), static_cast<std::uint16_t>(6881 + k)}));
        size = size == group_max ? group_min : size + 1;
    }
    return out;
}

std::vector<std::uint32_t> sim_network::add_spread_v6(std::size_t n, std::size_t per_subnet) {
    std::vector<std::uint32_t> out;
    per_subnet = std::max<std::size_t>(per_subnet, 1);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t subnet = spread_v6_next_ / per_subnet;
        const std::size_t host = spread_v6_next_ % per_subnet;
        ++spread_v6_next_;
        std::array<std::uint8_t, 16> b{};
        b[0] = 0x2a;
        b[1] = 0x00;
        b[2] = static_cast<std::uint8_t>(subnet >> 16);
        b[3] = static_cast<std::uint8_t>(subnet >> 8);
        b[4] = static_cast<std::uint8_t>(subnet);
        b[14] = static_cast<std::uint8_t>((host + 1) >> 8);
        b[15] = static_cast<std::uint8_t>(host + 1);
        out.push_back(add_node({ip_address::v6(b), 6881}));
    }
    return out;
}

std::vector<std::uint32_t> sim_network::add_in_subnet_v4(std::size_t n, const ip_address& base) {
    std::vector<std::uint32_t> out;
    const auto b = base.raw();
    for (std::size_t i = 0; i < n; ++i) {
        const auto host = static_cast<std::uint8_t>(i % 254 + 1);
        const auto port = static_cast<std::uint16_t>(6881 + i / 254);
        out.push_back(add_node({v4(b[0], b[1], b[2], host), port}));
    }
    return out;
}

std::vector<std::uint32_t> sim_network::add_in_subnet_v6(std::size_t n, const ip_address& base) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < n; ++i) {
        auto b = base.raw();
        b[14] = static_cast<std::uint8_t>((i + 1) >> 8);
        b[15] = static_cast<std::uint8_t>(i + 1);
        out.push_back(add_node({ip_address::v6(b), 6881}));
    }
    return out;
}

void sim_network::wire(std::size_t random_k, std::size_t close_k) {
    const std::size_t n = nodes_.size();
    if (n < 2) return;
    std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(n - 1));
    std::vector<std::uint32_t> order(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto& known = nodes_[i].known;
        std::unordered_set<std::uint32_t> have(known.begin(), known.end());
        const std::size_t goal = std::min(have.size() + random_k, n - 1);
        while (have.size() < goal) {
            const auto j = pick(rng_);
            if (j != i && have.insert(j).second) known.push_back(j);
        }
        if (close_k > 0) {
            for (std::size_t j = 0; j < n; ++j) order[j] = static_cast<std::uint32_t>(j);
            const id20& self = nodes_[i].id;
            const std::size_t k = std::min(close_k + 1, n);
            std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                              [&](std::uint32_t a, std::uint32_t b) {
                                  return dht::closer_to(self, nodes_[a].id, nodes_[b].id);
                              });
            for (std::size_t j = 0; j < k; ++j)
                if (order[j] != i && std::find(known.begin(), known.end(), order[j]) == known.end())
                    known.push_back(order[j]);
        }
    }
}

std::uint32_t sim_network::store_hash(const id20& hash, std::vector<endpoint> peers, std::size_t replicas) {
    const auto h = static_cast<std::uint32_t>(hashes_.size());
    hashes_.push_back({hash, std::move(peers)});
    std::vector<std::uint32_t> order(nodes_.size());
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = static_cast<std::uint32_t>(j);
    const std::size_t k = std::min(replicas, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) { return dht::closer_to(hash, nodes_[a].id, nodes_[b].id); });
    for (std::size_t j = 0; j < k; ++j) nodes_[order[j]].stored.push_back(h);
    return h;
}

std::optional<std::uint32_t> sim_network::find(const endpoint& ep) const {
    const auto it = by_endpoint_.find(ep);
    if (it == by_endpoint_.end()) return std::nullopt;
    return it->second;
}

void sim_network::attach(engine::dht_service& service, const endpoint& us_v4, const endpoint& us_v6) {
    service_ = &service;
    us_v4_ = us_v4;
    us_v6_ = us_v6;
}

const endpoint& sim_network::our_endpoint_for(const endpoint& peer) const {
    return peer.address.is_v6() ? us_v6_ : us_v4_;
}

// ---- delivery -------------------------------------------------------------------------

void sim_network::schedule(const endpoint& from, const endpoint& to, std::string payload, duration delay) {
    queue_.push(datagram{clock_.now() + delay, seq_++, from, to, std::move(payload)});
}

void sim_network::client_send(const endpoint& from, std::string payload, duration delay) {
    schedule(from, our_endpoint_for(from), std::move(payload), delay);
}

bool sim_network::send(const endpoint& to, std::string_view payload) {
    const auto now = clock_.now();
    parsed_packet& p = *send_scratch_;
    parse_packet(payload, p);
    const kind k = p.ok ? kind_of(p.msg) : kind::unparsable;
    const endpoint& from = our_endpoint_for(to);
    if (is_query(k)) {
        sent_query q;
        q.at = now;
        q.to = to;
        q.size = payload.size();
        q.k = k;
        q.bootstrap = bootstrap_.contains(to);
        q.t.assign(p.msg.transaction);
        q.target = p.msg.query.has_info_hash ? p.msg.query.info_hash : p.msg.query.target;
        const std::size_t index = queries_.size();
        queries_.push_back(q);
        open_[{to, q.t}] = index;
        open_order_.push_back(index);
        ++in_flight_;
        max_in_flight_ = std::max(max_in_flight_, in_flight_);
        const subnet_key s = subnet_of(to.address);
        const std::size_t now_open = ++subnet_open_[s];
        auto& m = subnet_max_[s];
        m = std::max(m, now_open);
        max_subnet_ = std::max(max_subnet_, now_open);
        if (on_query) on_query(queries_.back());
    } else {
        replies_.push_back(sent_reply{now, to, payload.size(), k});
    }
    if (inboxes_.contains(to)) {
        // Clients are test probes: lossless.
        schedule(from, to, std::string(payload), latency());
    } else if (!dropped(options_.loss)) {
        schedule(from, to, std::string(payload), latency());
    } else {
        ++lost_;
    }
    return true;
}

void sim_network::close_query(std::size_t index, bool answered) {
    sent_query& q = queries_[index];
    if (!q.open) return;
    q.open = false;
    q.answered = answered;
    q.closed_at = clock_.now();
    open_.erase({q.to, q.t});
    --in_flight_;
    const subnet_key s = subnet_of(q.to.address);
    if (--subnet_open_[s] == 0) subnet_open_.erase(s);
}

void sim_network::expire_queries() {
    const auto now = clock_.now();
    while (!open_order_.empty()) {
        const std::size_t i = open_order_.front();
        if (queries_[i].open) {
            if (now - queries_[i].at < options_.query_timeout) return;
            close_query(i, false);
        }
        open_order_.pop_front();
    }
}

void sim_network::deliver(const datagram& d) {
    if (d.to == us_v4_ || d.to == us_v6_) {
        deliver_to_us(d);
        return;
    }
    if (const auto it = inboxes_.find(d.to); it != inboxes_.end()) {
        it->second.push_back(received{clock_.now(), d.payload});
        return;
    }
    const auto n = find(d.to);
    if (!n) {
        ++undeliverable_;
        return;
    }
    answer(nodes_[*n], d);
}

void sim_network::deliver_to_us(const datagram& d) {
    if (!service_) return;
    // Bookkeeping first (the payload is parsed on a copy: handle() gets the original).
    if (bencode::decode(std::string_view(d.payload), doc_, krpc::packet_limits)) {
        msg_ = krpc::message{};
        if (krpc::parse(doc_.root(), msg_) && msg_.type != krpc::message_type::query) {
            if (const auto it = open_.find({d.from, std::string(msg_.transaction)}); it != open_.end())
                close_query(it->second, true);
            const auto note = [&](const krpc::compact_nodes& list) {
                for (const auto& e : list)
                    if (learned_index_.emplace(e.ep, learned_.size()).second) learned_.push_back(e.ep);
            };
            if (msg_.response.has_nodes) note(msg_.response.nodes);
            if (msg_.response.has_nodes6) note(msg_.response.nodes6);
        }
    }
    service_->handle(d.from, d.payload);
}

void sim_network::collect_nodes(const sim_node& n, const id20& target, bool want4, bool want6, std::string& v4s,
                                std::string& v6s) const {
    std::vector<std::uint32_t> cand;
    cand.reserve(n.known.size());
    for (const auto j : n.known) {
        const bool is6 = nodes_[j].ep.address.is_v6();
        if ((is6 && want6) || (!is6 && want4)) cand.push_back(j);
    }
    const std::size_t k = std::min(options_.reply_nodes * ((want4 && want6) ? 2 : 1), cand.size());
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(k), cand.end(),
                      [&](std::uint32_t a, std::uint32_t b) { return dht::closer_to(target, nodes_[a].id, nodes_[b].id); });
    for (std::size_t j = 0; j < k; ++j) {
        const auto& o = nodes_[cand[j]];
        krpc::append_compact_node(o.ep.address.is_v6() ? v6s : v4s, o.id, o.ep);
    }
    for (const auto& e : n.extra) {
        const bool is6 = e.ep.address.is_v6();
        if ((is6 && want6) || (!is6 && want4)) krpc::append_compact_node(is6 ? v6s : v4s, e.id, e.ep);
    }
}

void sim_network::answer(sim_node& n, const datagram& d) {
    ++n.queries;
    const auto now = clock_.now();
    if (!bencode::decode(std::string_view(d.payload), doc_, krpc::packet_limits)) return;
    msg_ = krpc::message{};
    if (!krpc::parse(doc_.root(), msg_) || msg_.type != krpc::message_type::query) return;
    switch (msg_.query.kind) {
    case krpc::method::sample_infohashes: n.sampled_at.push_back(now); break;
    case krpc::method::find_node: n.find_node_at.push_back(now); break;
    case krpc::method::get_peers: n.get_peers_at.push_back(now); break;
    default: break;
    }
    if (n.silent) return;
    // One dropped datagram, exactly where a test wants it (options_.loss drops at random).
    std::uint32_t* lose = msg_.query.kind == krpc::method::sample_infohashes ? &n.lose_samples
                          : msg_.query.kind == krpc::method::get_peers       ? &n.lose_get_peers
                                                                             : nullptr;
    if (lose && *lose > 0) {
        --*lose;
        return;
    }
    if (n.error_code != 0) {
        std::string err;
        krpc::encode_error(err, msg_.transaction, n.error_code, "Too Many Requests");
        schedule(n.ep, d.from, std::move(err), latency() + n.extra_latency);
        return;
    }

    const krpc::reply_header h{msg_.transaction, n.reply_id.value_or(n.id), d.from, sim_version};
    const bool v6 = d.from.address.is_v6();
    const bool want4 = msg_.query.has_want ? krpc::has(msg_.query.wants, krpc::want::n4) : !v6;
    const bool want6 = msg_.query.has_want ? krpc::has(msg_.query.wants, krpc::want::n6) : v6;
    std::string out, nodes4, nodes6;
    switch (msg_.query.kind) {
    case krpc::method::ping:
    case krpc::method::announce_peer: krpc::encode_ping_response(out, h); break;
    case krpc::method::find_node:
        collect_nodes(n, msg_.query.target, want4, want6, nodes4, nodes6);
        krpc::encode_find_node_response(out, h, nodes4, nodes6);
        break;
    case krpc::method::get_peers: {
        collect_nodes(n, msg_.query.info_hash, want4, want6, nodes4, nodes6);
        std::vector<endpoint> values;
        for (const auto s : n.stored)
            if (hashes_[s].hash == msg_.query.info_hash) values = hashes_[s].peers;
        const std::string token = "tk" + std::to_string(n.id.bytes[0]);
        krpc::encode_get_peers_response(out, h, token, values, nodes4, nodes6);
        break;
    }
    case krpc::method::sample_infohashes:
        collect_nodes(n, msg_.query.target, want4, want6, nodes4, nodes6);
        if (n.bep51) {
            std::vector<id20> samples;
            for (const auto s : n.stored) {
                if (samples.size() == 20) break;
                samples.push_back(hashes_[s].hash);
            }
            krpc::encode_sample_infohashes_response(out, h, n.interval, static_cast<std::int64_t>(n.stored.size()),
                                                    samples, nodes4, nodes6);
        } else {
            // What libtorrent does with a method it does not know that names a target.
            krpc::encode_find_node_response(out, h, nodes4, nodes6);
        }
        break;
    case krpc::method::unknown:
    case krpc::method::none: return;
    }
    if (out.empty() || dropped(options_.loss)) {
        if (!out.empty()) ++lost_;
        return;
    }
    schedule(n.ep, d.from, std::move(out), latency() + n.extra_latency);
}

// ---- time -----------------------------------------------------------------------------

void sim_network::step(duration s) {
    clock_.advance(s);
    const auto now = clock_.now();
    // A node answering with zero latency schedules for `now`: keep draining until nothing
    // due is left.
    while (!queue_.empty() && queue_.top().due <= now) {
        datagram d = queue_.top();
        queue_.pop();
        deliver(d);
    }
    expire_queries();
    if (service_) service_->turn();
    if (on_step) on_step();
}

void sim_network::run_for(duration total, duration s) {
    const auto end = clock_.now() + total;
    while (clock_.now() + s <= end) step(s);
}

// ---- records --------------------------------------------------------------------------

long sim_network::learned_index(const endpoint& ep) const {
    const auto it = learned_index_.find(ep);
    return it == learned_index_.end() ? -1 : static_cast<long>(it->second);
}

std::size_t sim_network::max_in_flight_subnet(const ip_address& a) const {
    const auto it = subnet_max_.find(subnet_of(a));
    return it == subnet_max_.end() ? 0 : it->second;
}

// ---- packets --------------------------------------------------------------------------

std::string make_ping(std::string_view t, const id20& id) {
    std::string out;
    krpc::encode_ping(out, krpc::query_header{t, id, {}});
    return out;
}

std::string make_find_node(std::string_view t, const id20& id, const id20& target) {
    std::string out;
    krpc::encode_find_node(out, krpc::query_header{t, id, {}}, target);
    return out;
}

std::string make_get_peers(std::string_view t, const id20& id, const id20& info_hash) {
    std::string out;
    krpc::encode_get_peers(out, krpc::query_header{t, id, {}}, info_hash);
    return out;
}

std::string make_announce(std::string_view t, const id20& id, const id20& info_hash, std::uint16_t port,
                          std::string_view token, bool implied_port) {
    std::string out;
    krpc::encode_announce_peer(out, krpc::query_header{t, id, {}}, info_hash, port, token, implied_port);
    return out;
}

std::string make_nodes_reply(std::string_view t, const id20& id, const std::vector<krpc::node_entry>& nodes) {
    std::string v4s, v6s, out;
    for (const auto& e : nodes) krpc::append_compact_node(e.ep.address.is_v6() ? v6s : v4s, e.id, e.ep);
    krpc::encode_find_node_response(out, krpc::reply_header{t, id, std::nullopt, {}}, v4s, v6s);
    return out;
}

} // namespace dhtc::sim
