#include "testnet/node.hpp"

#include <algorithm>
#include <cstring>

#include "dht/node_id.hpp"
#include "krpc/encode.hpp"

namespace dhtc::testnet {

namespace {

endpoint to_endpoint(std::uint32_t ip, std::uint16_t port) { return {ip_address::v4(ip), port}; }

} // namespace

// ---- routing table --------------------------------------------------------------------

std::uint8_t routing_table::bucket_of(const id20& id) const noexcept {
    return static_cast<std::uint8_t>(std::min(dht::common_prefix_bits(own_, id), 159));
}

routing_table::address_check routing_table::check_address(const contact& c) const noexcept {
    if (!one_per_ip_) return address_check::free;
    for (const auto& e : entries_) {
        if (e.ip != c.ip || e.id == c.id) continue;
        return e.port == c.port ? address_check::same_endpoint : address_check::taken;
    }
    return address_check::free;
}

bool routing_table::insert(const contact& c, seconds now) {
    if (c.id == own_) return false;
    for (auto& e : entries_) {
        if (e.id == c.id) {
            e.ip = c.ip;
            e.port = c.port;
            e.fails = 0;
            e.last_seen = now;
            return true;
        }
    }
    switch (check_address(c)) {
    case address_check::free: break;
    case address_check::taken: return false;
    case address_check::same_endpoint:
        // The node at that endpoint answered under a new id (a restarted session): as
        // libtorrent does for a verified node, the old entry goes.
        std::erase_if(entries_, [&](const entry& e) { return e.ip == c.ip && e.port == c.port; });
        break;
    }
    const auto b = bucket_of(c.id);
    std::size_t in_bucket = 0;
    entry* worst = nullptr;
    for (auto& e : entries_) {
        if (e.bucket != b) continue;
        ++in_bucket;
        if (e.fails > 0 && (!worst || e.fails > worst->fails)) worst = &e;
    }
    const entry fresh{c.id, c.ip, c.port, b, 0, now};
    if (in_bucket < k) {
        entries_.push_back(fresh);
        return true;
    }
    if (worst) {
        *worst = fresh;
        return true;
    }
    return false;
}

bool routing_table::contains(const id20& id) const noexcept {
    return std::any_of(entries_.begin(), entries_.end(), [&](const entry& e) { return e.id == id; });
}

bool routing_table::has_room_for(const contact& c) const noexcept {
    if (c.id == own_) return false;
    const auto address = check_address(c);
    if (address == address_check::taken) return false;
    if (address == address_check::same_endpoint) return true;
    const auto b = bucket_of(c.id);
    std::size_t in_bucket = 0;
    for (const auto& e : entries_) {
        if (e.bucket != b) continue;
        if (e.fails > 0) return true;
        ++in_bucket;
    }
    return in_bucket < k;
}

void routing_table::failed(const id20& id) noexcept {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].id != id) continue;
        if (++entries_[i].fails >= max_fails) {
            entries_[i] = entries_.back();
            entries_.pop_back();
        }
        return;
    }
}

void routing_table::closest(const id20& target, std::size_t n, std::vector<krpc::node_entry>& out) const {
    out.clear();
    struct ranked {
        id20 dist;
        const entry* e;
    };
    std::vector<ranked> r;
    r.reserve(entries_.size());
    for (const auto& e : entries_) r.push_back({dht::distance(e.id, target), &e});
    n = std::min(n, r.size());
    std::partial_sort(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(n), r.end(),
                      [](const ranked& a, const ranked& b) { return a.dist < b.dist; });
    for (std::size_t i = 0; i < n; ++i) out.push_back({r[i].e->id, to_endpoint(r[i].e->ip, r[i].e->port)});
}

contact routing_table::pick(rng& r) const noexcept {
    const auto& e = entries_[r.below(entries_.size())];
    return {e.id, e.ip, e.port};
}

// ---- peer store -----------------------------------------------------------------------

void peer_store::put(const id20& hash, std::uint32_t ip, std::uint16_t port, seconds expires) {
    auto it = peers_.find(hash);
    if (it == peers_.end()) {
        if (peers_.size() >= max_hashes) {
            ++dropped_;
            return;
        }
        it = peers_.emplace(hash, std::vector<peer>{}).first;
        keys_.push_back(hash);
    }
    auto& list = it->second;
    for (auto& p : list) {
        if (p.ip == ip && p.port == port) {
            p.expires = expires;
            return;
        }
    }
    if (list.size() >= max_peers_per_hash) {
        ++dropped_;
        return;
    }
    list.push_back({ip, port, expires});
}

void peer_store::get(const id20& hash, seconds now, std::size_t max, std::vector<endpoint>& out) {
    out.clear();
    const auto it = peers_.find(hash);
    if (it == peers_.end()) return;
    for (const auto& p : it->second) {
        if (out.size() >= max) break;
        if (p.expires > now) out.push_back(to_endpoint(p.ip, p.port));
    }
}

void peer_store::sample(rng& r, std::size_t max, std::vector<id20>& out) const {
    out.clear();
    if (keys_.size() <= max) {
        out = keys_;
        return;
    }
    // A random window: distinct by construction and cheap.
    const std::size_t start = r.below(keys_.size());
    for (std::size_t i = 0; i < max; ++i) out.push_back(keys_[(start + i) % keys_.size()]);
}

void peer_store::expire(seconds now) {
    for (auto it = peers_.begin(); it != peers_.end();) {
        auto& list = it->second;
        std::erase_if(list, [&](const peer& p) { return p.expires <= now; });
        it = list.empty() ? peers_.erase(it) : std::next(it);
    }
    if (keys_.size() != peers_.size()) {
        keys_.clear();
        for (const auto& [hash, list] : peers_) keys_.push_back(hash);
    }
}

// ---- tokens -----------------------------------------------------------------------------

token_keys::token_keys(std::uint64_t seed) : gen_(seed, 0x70c3e5) {
    rotate();
    rotate();
}

void token_keys::rotate() {
    previous_ = current_;
    current_ = {gen_(), gen_()};
}

std::uint32_t token_keys::hash(const siphash_key& key, std::uint32_t node_ip, std::uint16_t node_port,
                               std::uint32_t querier_ip) noexcept {
    char buf[10];
    std::memcpy(buf, &node_ip, 4);
    std::memcpy(buf + 4, &querier_ip, 4);
    std::memcpy(buf + 8, &node_port, 2);
    return static_cast<std::uint32_t>(siphash24(key, std::string_view(buf, sizeof buf)));
}

std::uint32_t token_keys::make(std::uint32_t node_ip, std::uint16_t node_port, std::uint32_t querier_ip) const noexcept {
    return hash(current_, node_ip, node_port, querier_ip);
}

bool token_keys::valid(std::uint32_t node_ip, std::uint16_t node_port, std::uint32_t querier_ip,
                       std::string_view token) const noexcept {
    if (token.size() != 4) return false;
    std::uint32_t t;
    std::memcpy(&t, token.data(), 4);
    return t == hash(current_, node_ip, node_port, querier_ip) || t == hash(previous_, node_ip, node_port, querier_ip);
}

// ---- answers ------------------------------------------------------------------------------

std::string dht_node::closest_nodes(const id20& target) const {
    std::vector<krpc::node_entry> nodes;
    table_.closest(target, routing_table::k, nodes);
    std::string compact;
    krpc::append_compact_nodes(compact, nodes, krpc::ip_family::v4);
    return compact;
}

void dht_node::answer(const krpc::message& q, std::uint32_t from_ip, std::uint16_t from_port, const token_keys& tokens,
                      const node_settings& settings, seconds now, rng& r, node_stats& stats, std::string& out) {
    ++stats.queries;
    const endpoint requester = to_endpoint(from_ip, from_port);
    const krpc::reply_header h{q.transaction, id_, requester, client_version};
    const auto& a = q.query;
    switch (a.kind) {
    case krpc::method::ping:
        krpc::encode_ping_response(out, h);
        return;
    case krpc::method::find_node:
        krpc::encode_find_node_response(out, h, closest_nodes(a.target), {});
        return;
    case krpc::method::get_peers: {
        const std::uint32_t t = tokens.make(ip_, port_, from_ip);
        const std::string_view token(reinterpret_cast<const char*>(&t), sizeof t);
        std::vector<endpoint> values;
        store_.get(a.info_hash, now, 50, values);
        // Like libtorrent: nodes always, values as well when we have peers.
        krpc::encode_get_peers_response(out, h, token, values, closest_nodes(a.info_hash), {});
        return;
    }
    case krpc::method::announce_peer: {
        if (!tokens.valid(ip_, port_, from_ip, a.token)) {
            ++stats.bad_tokens;
            ++stats.errors_sent;
            krpc::encode_error(out, q.transaction, krpc::error_protocol, "invalid token", requester, client_version);
            return;
        }
        const std::uint16_t port = a.implied_port ? from_port : a.port;
        store_.put(a.info_hash, from_ip, port, now + settings.peer_ttl);
        ++stats.announces_stored;
        krpc::encode_announce_response(out, h);
        return;
    }
    case krpc::method::sample_infohashes: {
        std::vector<id20> samples;
        store_.sample(r, 20, samples);
        krpc::encode_sample_infohashes_response(out, h, settings.sample_interval,
                                                static_cast<std::int64_t>(store_.size()), samples,
                                                closest_nodes(a.target), {});
        return;
    }
    case krpc::method::unknown:
    case krpc::method::none:
        // libtorrent answers an unknown query that carries a target or info_hash like a
        // find_node (forward compatibility, BEP-5), anything else with 204.
        if (a.has_target || a.has_info_hash) {
            krpc::encode_find_node_response(out, h, closest_nodes(a.has_target ? a.target : a.info_hash), {});
        } else {
            ++stats.errors_sent;
            krpc::encode_error(out, q.transaction, krpc::error_method_unknown, "unknown message", requester,
                               client_version);
        }
        return;
    }
}

} // namespace dhtc::testnet

namespace dhtc::testnet {

block_verdict dht_node::blocker(std::uint32_t ip, double now, double rate, seconds timeout) {
    constexpr double window = 10;
    auto it = std::find_if(senders_.begin(), senders_.end(), [ip](const sender& s) { return s.ip == ip; });
    if (it == senders_.end()) {
        if (senders_.size() == max_senders) {
            // Forget the IP whose window started longest ago (and is not blocked, if any).
            auto victim = std::min_element(senders_.begin(), senders_.end(), [now](const sender& a, const sender& b) {
                const bool ab = a.blocked_until > now, bb = b.blocked_until > now;
                return ab != bb ? !ab : a.window_start < b.window_start;
            });
            *victim = sender{ip, now, 0, 0};
            it = victim;
        } else {
            senders_.push_back(sender{ip, now, 0, 0});
            it = senders_.end() - 1;
        }
    }
    if (it->blocked_until > now) return block_verdict::blocked;
    if (now - it->window_start >= window) {
        it->window_start = now;
        it->count = 0;
    }
    if (++it->count > rate * window) {
        it->blocked_until = now + timeout;
        return block_verdict::newly_blocked;
    }
    return block_verdict::pass;
}

} // namespace dhtc::testnet
