#include "testnet/network.hpp"

#include <algorithm>
#include <cstring>

#include "dht/node_id.hpp"
#include "krpc/encode.hpp"
#include "testnet/utp_port.hpp"

namespace dhtc::testnet {

namespace {

constexpr int alpha = 3;           // queries in flight per lookup
constexpr int max_queries = 48;    // per lookup
constexpr std::size_t max_candidates = 32;
constexpr std::size_t max_known = 64;
constexpr std::size_t max_waiting_lookups = 200000;
constexpr auto tick_period = std::chrono::milliseconds(100);
constexpr auto churn_period = std::chrono::seconds(30);
constexpr seconds mean_away = 300;

std::uint64_t verify_key(std::uint32_t host, std::uint32_t ip, std::uint16_t port) {
    return (std::uint64_t{host} << 48) ^ (std::uint64_t{ip} << 16) ^ port;
}

} // namespace

network::network(asio::io_context& io, const network_options& o)
    : io_(io), opt_(o), rng_(o.seed, 0x6e6574), tokens_(o.seed), timer_(io), started_(std::chrono::steady_clock::now()) {
    std::vector<std::uint16_t> ports{o.port};
    ports.insert(ports.end(), o.extra_ports.begin(), o.extra_ports.end());
    hub_ = std::make_unique<udp_hub>(io, ports, [this](const datagram& d) { on_datagram(d); });
    if (o.wan.enabled) {
        wan_ = std::make_unique<wan::model>(o.wan);
        hub_->apply_wan(*wan_, [this](std::uint32_t ip, std::uint16_t port) {
            return by_endpoint_.count(endpoint_key(ip, port)) != 0;
        });
    }
}

network::~network() = default;

seconds network::now() const noexcept {
    return static_cast<seconds>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count());
}

std::size_t network::add_host(std::uint32_t ip, std::uint16_t port, bool node) {
    const auto id = dht::bep42_id(ip_address::v4(ip), static_cast<std::uint8_t>(rng_() & 0xff), rng_);
    const auto index = hosts_.size();
    hosts_.push_back({ip, port, id, node ? static_cast<std::int32_t>(nodes_.size()) : -1, {}});
    by_endpoint_[endpoint_key(ip, port)] = static_cast<std::uint32_t>(index);
    return index;
}

std::size_t network::add_node(std::uint32_t ip, std::size_t port_slot) {
    const auto index = add_host(ip, hub_->port(port_slot), true);
    const auto& h = hosts_[index];
    node_host_.push_back(static_cast<std::uint32_t>(index));
    nodes_.emplace_back(h.id, h.ip, h.port, opt_.node.restrict_ips);
    nodes_.back().behind_nat = opt_.nat > 0 && rng_.chance(opt_.nat);
    return index;
}

std::size_t network::add_client(std::uint32_t ip) { return add_host(ip, hub_->port(), false); }

std::size_t network::shared_ip_nodes() const noexcept {
    return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const dht_node& n) { return n.shared_ip; }));
}

std::size_t network::online_nodes() const noexcept {
    return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const dht_node& n) { return n.online; }));
}

contact network::contact_of(std::size_t node) const {
    return contact{nodes_[node].id(), nodes_[node].ip(), nodes_[node].port()};
}

void network::seed_tables() {
    if (nodes_.empty()) return;
    for (auto& h : hosts_) {
        std::vector<contact> start{contact_of(0)};
        for (int i = 0; i < 8; ++i) start.push_back(contact_of(rng_.below(nodes_.size())));
        for (const auto& c : start) {
            if (c.ip == h.ip && c.port == h.port) continue;
            if (h.node >= 0) nodes_[static_cast<std::size_t>(h.node)].table().insert(c, 0);
            else h.known.push_back(c);
        }
    }
}

void network::replace_node(std::uint32_t index) {
    auto& h = hosts_[node_host_[index]];
    const bool nat = nodes_[index].behind_nat;
    const bool online = nodes_[index].online;
    const bool shared_ip = nodes_[index].shared_ip;
    h.id = dht::bep42_id(ip_address::v4(h.ip), static_cast<std::uint8_t>(rng_() & 0xff), rng_);
    nodes_[index] = dht_node(h.id, h.ip, h.port, opt_.node.restrict_ips);
    nodes_[index].behind_nat = nat;
    nodes_[index].online = online;
    nodes_[index].shared_ip = shared_ip;
    nodes_[index].table().insert(contact_of(0), now());
    for (int i = 0; i < 8; ++i) {
        const auto other = rng_.below(nodes_.size());
        if (other != index) nodes_[index].table().insert(contact_of(other), now());
    }
    ++stats_.replaced;
    if (online) lookup(node_host_[index], h.id, false, {});
}

void network::start() {
    std::unordered_map<std::uint32_t, std::uint32_t> nodes_per_ip;
    for (const auto& n : nodes_) ++nodes_per_ip[n.ip()];
    for (auto& n : nodes_) n.shared_ip = nodes_per_ip[n.ip()] > 1;
    hub_->start();
    schedule(std::chrono::minutes(5), event_kind::rotate_tokens, 0);
    schedule(std::chrono::minutes(1), event_kind::expire_peers, 0);
    if (opt_.churn > 0) schedule(churn_period, event_kind::churn, 0);
    if (opt_.replace_per_hour > 0) schedule(churn_period, event_kind::replace, 0);
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
        // Spread the first refreshes over one period so they do not come in waves.
        schedule(std::chrono::seconds(opt_.refresh / 2 + rng_.below(opt_.refresh + 1)), event_kind::refresh, i);
    }
    tick();
}

void network::bootstrap(std::function<void()> done) {
    bootstrap_done_ = std::move(done);
    bootstrap_left_ = nodes_.size();
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
        lookup(node_host_[i], nodes_[i].id(), false, [this](const std::vector<lookup_reply>&) {
            if (--bootstrap_left_ == 0 && bootstrap_done_) {
                auto cb = std::move(bootstrap_done_);
                cb();
            }
        });
    }
    if (nodes_.empty() && bootstrap_done_) bootstrap_done_();
}

void network::stop() {
    stopped_ = true;
    timer_.cancel();
    hub_->close();
}

// ---- receive path ---------------------------------------------------------------------------

void network::on_datagram(const datagram& d) {
    if (stream_handler_ && looks_like_utp(d.bytes)) {
        if (!stream_handler_(d)) ++stats_.unknown_destination;
        return;
    }
    const auto it = by_endpoint_.find(endpoint_key(d.to_ip, d.to_port));
    if (it == by_endpoint_.end()) {
        ++stats_.unknown_destination;
        return;
    }
    host& h = hosts_[it->second];
    if (h.node >= 0 && !nodes_[static_cast<std::size_t>(h.node)].online) {
        ++stats_.to_offline;
        return;
    }
    if (h.node >= 0 && opt_.block_rate > 0) {
        auto& n = nodes_[static_cast<std::size_t>(h.node)];
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        const auto v = n.blocker(d.from_ip, t, opt_.block_rate, opt_.block_timeout);
        if (v != block_verdict::pass) {
            const bool fresh = v == block_verdict::newly_blocked;
            ++stats_.blocked;
            stats_.blocks += fresh ? 1 : 0;
            if (n.shared_ip) {
                ++stats_.blocked_shared_ip;
                stats_.blocks_shared_ip += fresh ? 1 : 0;
            }
            return;
        }
    }
    if (!bencode::decode(d.bytes, doc_, krpc::packet_limits)) {
        ++stats_.malformed;
        return;
    }
    krpc::message m;
    const auto r = krpc::parse(doc_.root(), m);
    if (!r) {
        ++stats_.malformed;
        // A node answers a malformed query it can echo with 203, as libtorrent does.
        if (h.node >= 0 && r.query_method != krpc::method::none && !m.transaction.empty()) {
            out_.clear();
            krpc::encode_error(out_, m.transaction, krpc::error_protocol, krpc::to_string(r.code),
                               endpoint{ip_address::v4(d.from_ip), d.from_port}, client_version);
            send(h, d.from_ip, d.from_port);
        }
        return;
    }
    if (m.type == krpc::message_type::query) on_query(h, m, d);
    else on_reply(h, m, d);
}

void network::on_query(host& h, const krpc::message& m, const datagram& d) {
    if (h.node < 0) return; // a client behind NAT: queries never reach it
    auto& n = nodes_[static_cast<std::size_t>(h.node)];
    if (n.behind_nat) {
        ++stats_.to_nat;
        return;
    }
    out_.clear();
    n.answer(m, d.from_ip, d.from_port, tokens_, opt_.node, now(), rng_, stats_.nodes, out_);
    if (!out_.empty()) send(h, d.from_ip, d.from_port);
    maybe_verify(h, m, d);
}

void network::maybe_verify(host& h, const krpc::message& m, const datagram& d) {
    // A querier is a candidate for the table; like real nodes we ping it first and insert
    // it only when it answers, so only nodes that answer queries get in.
    if (m.read_only || m.id == h.id) return;
    auto& table = nodes_[static_cast<std::size_t>(h.node)].table();
    const contact c{m.id, d.from_ip, d.from_port};
    if (table.contains(m.id) || !table.has_room_for(c)) return;
    const auto key = verify_key(static_cast<std::uint32_t>(&h - hosts_.data()), d.from_ip, d.from_port);
    if (verifying_.contains(key)) return;
    const bool sent = send_query(static_cast<std::uint32_t>(&h - hosts_.data()), tx_kind::verify_ping, 0, c,
                                 [](std::string& out, const krpc::query_header& q) { return krpc::encode_ping(out, q); });
    if (sent) {
        verifying_.insert(key);
        ++stats_.verify_pings;
    }
}

void network::learn(host& h, const contact& c) {
    if (h.node >= 0) {
        if (nodes_[static_cast<std::size_t>(h.node)].table().insert(c, now())) ++stats_.learned;
        return;
    }
    for (auto& k : h.known) {
        if (k.id == c.id) return;
    }
    if (h.known.size() < max_known) h.known.push_back(c);
    else h.known[rng_.below(max_known)] = c;
}

void network::on_reply(host& h, const krpc::message& m, const datagram& d) {
    if (m.transaction.size() != 4) return;
    std::uint32_t tid;
    std::memcpy(&tid, m.transaction.data(), 4);
    const auto it = tx_.find(tid);
    if (it == tx_.end()) return;
    const pending_tx tx = it->second;
    // Only the node we asked may answer, and only to the host that asked.
    if (tx.to_ip != d.from_ip || tx.to_port != d.from_port || &hosts_[tx.host] != &h) return;
    tx_.erase(it);
    const bool ok = m.type == krpc::message_type::response;
    const contact from{m.id, d.from_ip, d.from_port};
    switch (tx.kind) {
    case tx_kind::verify_ping:
        verifying_.erase(verify_key(tx.host, tx.to_ip, tx.to_port));
        if (ok) learn(h, from);
        return;
    case tx_kind::announce:
        if (ok) ++stats_.announces_acked;
        return;
    case tx_kind::lookup: break;
    }
    const auto lit = lookups_.find(tx.lookup);
    if (lit == lookups_.end()) return;
    auto& l = lit->second;
    --l.inflight;
    for (auto& c : l.cands) {
        if (c.ip != d.from_ip || c.port != d.from_port) continue;
        if (!ok) {
            c.state = 3;
            break;
        }
        c.state = 2;
        c.id = m.id;
        c.dist = dht::distance(m.id, l.target);
        if (m.response.has_token) c.token.assign(m.response.token);
        break;
    }
    if (ok) {
        learn(h, from);
        for (const auto& e : m.response.nodes) {
            if (e.ep.address.is_v4()) add_candidate(l, e.id, e.ep.address.to_v4_uint(), e.ep.port);
        }
    }
    step(tx.lookup);
}

// ---- sending and lookups ----------------------------------------------------------------------

bool network::send_query(std::uint32_t host_index, tx_kind kind, std::uint32_t lookup, const contact& to,
                         const std::function<bool(std::string&, const krpc::query_header&)>& encode) {
    if (tx_.size() >= max_transactions) {
        ++stats_.tx_dropped;
        return false;
    }
    std::uint32_t tid = next_tid_++;
    if (tid == 0) tid = next_tid_++;
    char t[4];
    std::memcpy(t, &tid, 4);
    out_.clear();
    const krpc::query_header q{std::string_view(t, 4), hosts_[host_index].id, client_version};
    if (!encode(out_, q)) return false;
    tx_[tid] = pending_tx{host_index, lookup, to.ip, to.port, kind, to.id};
    tx_order_.emplace_back(std::chrono::steady_clock::now() + tx_timeout, tid);
    send(hosts_[host_index], to.ip, to.port);
    return true;
}

void network::add_candidate(lookup_state& l, const id20& id, std::uint32_t ip, std::uint16_t port) {
    const host& self = hosts_[l.host];
    if ((ip == self.ip && port == self.port) || port == 0) return;
    // restrict_ips: one node per address in a lookup (libtorrent's dht_restrict_search_ips).
    const bool one_per_ip = opt_.node.restrict_ips;
    for (const auto& c : l.cands) {
        if (c.id == id || (c.ip == ip && (c.port == port || one_per_ip))) return;
    }
    candidate c{id, dht::distance(id, l.target), ip, port, 0, {}};
    auto pos = std::lower_bound(l.cands.begin(), l.cands.end(), c.dist,
                                [](const candidate& a, const id20& d) { return a.dist < d; });
    if (l.cands.size() >= max_candidates) {
        if (pos == l.cands.end()) return;
        l.cands.pop_back();
    }
    l.cands.insert(pos, std::move(c));
}

void network::lookup(std::size_t host_index, const id20& target, bool get_peers, lookup_done done) {
    if (stopped_) return;
    if (lookups_.size() >= opt_.max_lookups) {
        if (waiting_lookups_.size() >= max_waiting_lookups) return;
        waiting_lookups_.push_back([this, host_index, target, get_peers, d = std::move(done)]() mutable {
            lookup(host_index, target, get_peers, std::move(d));
        });
        return;
    }
    const auto id = next_lookup_++;
    auto& l = lookups_[id];
    l.host = static_cast<std::uint32_t>(host_index);
    l.target = target;
    l.get_peers = get_peers;
    l.done = std::move(done);
    host& h = hosts_[host_index];
    if (h.node >= 0) {
        std::vector<krpc::node_entry> start;
        nodes_[static_cast<std::size_t>(h.node)].table().closest(target, 16, start);
        for (const auto& e : start) add_candidate(l, e.id, e.ep.address.to_v4_uint(), e.ep.port);
    } else {
        for (const auto& c : h.known) add_candidate(l, c.id, c.ip, c.port);
    }
    step(id);
}

void network::step(std::uint32_t lookup_id) {
    const auto it = lookups_.find(lookup_id);
    if (it == lookups_.end()) return;
    auto& l = it->second;
    std::size_t replied = 0;
    for (auto& c : l.cands) {
        if (l.inflight >= alpha || replied >= routing_table::k) break;
        if (c.state == 2) ++replied;
        if (c.state != 0) continue;
        if (l.queries >= max_queries) break;
        const contact to{c.id, c.ip, c.port};
        const auto target = l.target;
        const bool gp = l.get_peers;
        const bool sent = send_query(l.host, tx_kind::lookup, lookup_id, to,
                                     [&](std::string& out, const krpc::query_header& q) {
                                         return gp ? krpc::encode_get_peers(out, q, target)
                                                   : krpc::encode_find_node(out, q, target);
                                     });
        c.state = sent ? 1 : 3;
        if (sent) {
            ++l.inflight;
            ++l.queries;
        }
    }
    if (l.inflight > 0) return;
    std::vector<lookup_reply> closest;
    for (const auto& c : l.cands) {
        if (c.state == 2 && closest.size() < routing_table::k) closest.push_back({{c.id, c.ip, c.port}, c.token});
    }
    auto done = std::move(l.done);
    lookups_.erase(it);
    ++stats_.lookups_done;
    if (done) done(closest);
    while (!waiting_lookups_.empty() && lookups_.size() < opt_.max_lookups && !stopped_) {
        auto next = std::move(waiting_lookups_.front());
        waiting_lookups_.pop_front();
        next();
    }
}

void network::announce(std::size_t host_index, const lookup_reply& to, const id20& info_hash, std::uint16_t port) {
    const auto token = to.token;
    const bool sent = send_query(static_cast<std::uint32_t>(host_index), tx_kind::announce, 0, to.node,
                                 [&](std::string& out, const krpc::query_header& q) {
                                     return krpc::encode_announce_peer(out, q, info_hash, port, token, false, true);
                                 });
    if (sent) ++stats_.announces_sent;
}

// ---- time -------------------------------------------------------------------------------------

void network::schedule(std::chrono::steady_clock::duration in, event_kind kind, std::uint32_t index) {
    events_.push({std::chrono::steady_clock::now() + in, kind, index});
}

void network::tick() {
    if (stopped_) return;
    sweep_timeouts();
    const auto now_tp = std::chrono::steady_clock::now();
    // Bounded per tick so a burst of due events cannot starve the socket.
    for (int n = 0; n < 2000 && !events_.empty() && events_.top().due <= now_tp; ++n) {
        const event e = events_.top();
        events_.pop();
        run_event(e);
    }
    timer_.expires_after(tick_period);
    timer_.async_wait([this](const asio::error_code& ec) {
        if (!ec) tick();
    });
}

void network::sweep_timeouts() {
    const auto now_tp = std::chrono::steady_clock::now();
    while (!tx_order_.empty() && tx_order_.front().first <= now_tp) {
        const auto tid = tx_order_.front().second;
        tx_order_.pop_front();
        const auto it = tx_.find(tid);
        if (it == tx_.end()) continue; // answered
        const pending_tx tx = it->second;
        tx_.erase(it);
        ++stats_.timeouts;
        host& h = hosts_[tx.host];
        if (h.node >= 0 && tx.kind != tx_kind::verify_ping)
            nodes_[static_cast<std::size_t>(h.node)].table().failed(tx.to_id);
        if (tx.kind == tx_kind::verify_ping) verifying_.erase(verify_key(tx.host, tx.to_ip, tx.to_port));
        if (tx.kind != tx_kind::lookup) continue;
        const auto lit = lookups_.find(tx.lookup);
        if (lit == lookups_.end()) continue;
        --lit->second.inflight;
        for (auto& c : lit->second.cands) {
            if (c.ip == tx.to_ip && c.port == tx.to_port) c.state = 3;
        }
        step(tx.lookup);
    }
}

void network::run_event(const event& e) {
    switch (e.kind) {
    case event_kind::refresh: {
        auto& n = nodes_[e.index];
        if (n.online) {
            id20 target;
            for (auto& b : target.bytes) b = static_cast<std::uint8_t>(rng_());
            lookup(node_host_[e.index], target, false, {});
        }
        const auto jitter = rng_.below(opt_.refresh / 2 + 1);
        schedule(std::chrono::seconds(opt_.refresh * 3 / 4 + jitter), event_kind::refresh, e.index);
        return;
    }
    case event_kind::churn: {
        // Each period, enough nodes leave that about opt_.churn of them are away on
        // average; each comes back after a random absence. Node 0 (the bootstrap) stays.
        const double leave_share = opt_.churn * std::chrono::duration<double>(churn_period).count() / mean_away;
        const auto count = static_cast<std::size_t>(leave_share * static_cast<double>(nodes_.size()) + 0.5);
        for (std::size_t i = 0; i < count && nodes_.size() > 1; ++i) {
            const auto idx = static_cast<std::uint32_t>(1 + rng_.below(nodes_.size() - 1));
            if (!nodes_[idx].online) continue;
            nodes_[idx].online = false;
            schedule(std::chrono::seconds(mean_away / 3 + rng_.below(mean_away * 4 / 3)), event_kind::come_back, idx);
        }
        schedule(churn_period, event_kind::churn, 0);
        return;
    }
    case event_kind::replace: {
        // The hourly churn of the real DHT: sessions end and others start. A replaced node
        // comes back at once under a new id, with only its saved contacts and none of the
        // announces it stored, so what a crawler learned of it goes stale.
        const double share = opt_.replace_per_hour * std::chrono::duration<double>(churn_period).count() / 3600.0;
        carry_replacements_ += share * static_cast<double>(nodes_.size() - 1);
        for (; carry_replacements_ >= 1.0 && nodes_.size() > 1; carry_replacements_ -= 1.0)
            replace_node(static_cast<std::uint32_t>(1 + rng_.below(nodes_.size() - 1)));
        schedule(churn_period, event_kind::replace, 0);
        return;
    }
    case event_kind::come_back:
        nodes_[e.index].online = true;
        lookup(node_host_[e.index], nodes_[e.index].id(), false, {});
        return;
    case event_kind::rotate_tokens:
        tokens_.rotate();
        schedule(std::chrono::minutes(5), event_kind::rotate_tokens, 0);
        return;
    case event_kind::expire_peers: {
        const auto t = now();
        for (auto& n : nodes_) n.store().expire(t);
        schedule(std::chrono::minutes(1), event_kind::expire_peers, 0);
        return;
    }
    }
}

} // namespace dhtc::testnet
