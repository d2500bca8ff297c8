#include "dht/source_table.hpp"

#include <algorithm>
#include <cstring>

#include "model/address_hash.hpp"
#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {

// Exact decimal time slices may sum to 0.9999999999 tokens; see rate_limiter.cpp.
constexpr double tolerance = 1e-9;
// A parked query wakes this long after its token is due, so the token is there when it does.
constexpr auto ready_margin = std::chrono::milliseconds(1);
// What try_query says of a node the full tables cannot track: ask again after this.
constexpr auto table_full_wait = std::chrono::seconds(1);
// The index tables start small and double as entries arrive.
constexpr std::size_t initial_entries = 1024;

// A round trip sample above this is taken as this (no KRPC query waits that long).
constexpr std::int64_t max_rtt_us = 60'000'000;

double positive(double v) noexcept { return v > 0 ? v : 0; } // also maps NaN to 0

double seconds_between(time_point from, time_point to) noexcept {
    return to > from ? std::chrono::duration<double>(to - from).count() : 0.0;
}

// When a bucket holding `tokens`, refilled at `rate`, reaches `need`; `now` when it holds it.
time_point when_holds(double tokens, double need, double rate, time_point now) noexcept {
    if (tokens + tolerance >= need) return now;
    if (rate <= 0) return time_point::max();
    const double wait = (need - tokens) / rate;
    if (wait > 1e9) return time_point::max();
    return now + std::chrono::duration_cast<duration>(std::chrono::duration<double>(wait)) + ready_margin;
}

} // namespace

source_table::source_table(source_table_options options)
    : options_(options), key_(detail::hash_key_from_seed(options.hash_seed)), ips_(options.capacity, initial_entries),
      nodes_(options.capacity, initial_entries),
      aliases_(std::clamp<std::size_t>(options.capacity, 1, lru_slots<node_entry>::max_capacity), 24, initial_entries) {
    options_.answer_rate = positive(options_.answer_rate);
    options_.node_rate = positive(options_.node_rate);
    options_.node_burst = std::max(1.0, positive(options_.node_burst));
    options_.ip_rate = positive(options_.ip_rate);
    options_.ip_burst = std::max(1.0, positive(options_.ip_burst));
    options_.answer_headroom = std::min(positive(options_.answer_headroom), options_.node_burst - 1);
    // The IP keeps the same share of its burst for answers as each of its nodes.
    ip_headroom_ = std::min(options_.answer_headroom * options_.ip_burst / options_.node_burst, options_.ip_burst - 1);
    options_.silence_limit = std::max(1u, options_.silence_limit);
}

// RFC 6298's smoothing: the first sample as it is, then 7/8 of the old value and 1/8 of the
// new. Integer microseconds, at least 1 once timed (0 means none).
void source_table::smooth_rtt(ip_entry& e, duration sample) noexcept {
    const std::int64_t us =
        std::clamp<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(sample).count(), 1, max_rtt_us);
    const std::int64_t old = e.srtt_us;
    e.srtt_us = static_cast<std::uint32_t>(old == 0 ? us : std::max<std::int64_t>(1, old + (us - old) / 8));
}

// ---- keys ---------------------------------------------------------------------------------

std::uint64_t source_table::ip_hash(const ip_address& a) const noexcept { return detail::hash_address(key_, a); }

std::uint64_t source_table::node_hash(const endpoint& ep) const noexcept {
    return detail::hash_endpoint(key_, ep.address, ep.port);
}

std::uint64_t source_table::alias_hash(const ip_address& a, const id20& id) const noexcept {
    char buf[16 + 20 + 1];
    const auto b = a.bytes();
    std::memcpy(buf, b.data(), b.size());
    std::memcpy(buf + b.size(), id.bytes.data(), id.bytes.size());
    buf[b.size() + id.bytes.size()] = 'n';
    return siphash24(key_, std::string_view(buf, b.size() + id.bytes.size() + 1));
}

std::uint32_t source_table::find_ip(const ip_address& a) const {
    return ips_.find(ip_hash(a), [&](const ip_entry& e) { return e.address == a; });
}

std::uint32_t source_table::find_node(const endpoint& ep, const id20& id) const {
    const std::uint32_t i = nodes_.find(node_hash(ep), [&](const node_entry& e) { return e.ep == ep; });
    if (i != none || id.is_zero()) return i;
    const std::uint32_t a = aliases_.find(alias_hash(ep.address, id), [&](std::uint32_t s) {
        return nodes_[s].id == id && nodes_[s].ep.address == ep.address;
    });
    return a == detail::slot_index::npos ? none : a;
}

// ---- buckets ------------------------------------------------------------------------------

void source_table::refill(ip_entry& e, time_point now) const noexcept {
    if (now <= e.last) return; // a manual clock stepping back adds nothing
    const double s = seconds_between(e.last, now);
    e.answer_tokens = std::min(options_.answer_rate, e.answer_tokens + s * options_.answer_rate);
    e.tokens = std::min(options_.ip_burst, e.tokens + s * options_.ip_rate);
    e.last = now;
}

void source_table::refill(node_entry& e, time_point now) const noexcept {
    if (now <= e.last) return;
    const double s = seconds_between(e.last, now);
    e.answer_tokens = std::min(options_.node_burst, e.answer_tokens + s * options_.node_rate);
    e.tokens = std::min(options_.node_burst, e.tokens + s * options_.node_rate);
    e.last = now;
}

time_point source_table::ready_at(const ip_entry* ip, const node_entry* node, time_point now) const noexcept {
    time_point at = now;
    if (node) {
        at = std::max(at, node->backoff_until);
        at = std::max(at, when_holds(node->tokens, 1 + options_.answer_headroom, options_.node_rate, now));
    }
    if (ip) at = std::max(at, when_holds(ip->tokens, 1 + ip_headroom_, options_.ip_rate, now));
    return at;
}

// The instant a refused query is told to come back: `ready` (the budget's next token), or
// after the queries refused before it, one token apart.
time_point source_table::reserve_slot(time_point& next_slot, time_point ready, double rate) const noexcept {
    if (ready == time_point::max() || rate <= 0) return ready;
    const time_point slot = std::max(next_slot, ready);
    next_slot = slot + std::chrono::duration_cast<duration>(std::chrono::duration<double>(1.0 / rate));
    return slot;
}

// ---- tracking -----------------------------------------------------------------------------

std::uint32_t source_table::touch_ip(const ip_address& a, time_point now) {
    std::uint32_t i = find_ip(a);
    if (i != none) {
        ips_.touch(i);
        refill(ips_[i], now);
        return i;
    }
    // A trusted IP that owes nothing may go when no stranger does: every IP that answered us
    // stays trusted for trust_ttl, and a crawl at full rate asks more IPs than the table holds
    // within it, so refusing new ones stopped the crawl for minutes. Only its trust is lost.
    const auto choose = [&](const ip_entry& e) {
        ip_entry c = e;
        refill(c, now);
        if (c.tokens + tolerance < options_.ip_burst) return eviction_choice::keep;
        return c.trusted_until > now ? eviction_choice::second_best : eviction_choice::evict;
    };
    const auto evicted = [&](std::uint32_t, const ip_entry& e) {
        ip_entry c = e;
        refill(c, now);
        ++counters_.evictions;
        if (c.answer_tokens + tolerance < options_.answer_rate) ++counters_.lossy_evictions;
        if (c.trusted_until > now) ++counters_.trusted_evictions;
    };
    i = ips_.insert(ip_hash(a), choose, evicted, [this](const ip_entry& e) { return ip_hash(e.address); });
    if (i == none) {
        ++counters_.refused_table_full;
        return none;
    }
    ip_entry& e = ips_[i];
    e.address = a;
    e.last = now;
    e.answer_tokens = options_.answer_rate;
    e.tokens = options_.ip_burst;
    return i;
}

std::uint32_t source_table::touch_node(const endpoint& ep, const id20& id, time_point now) {
    std::uint32_t i = find_node(ep, id);
    if (i != none) {
        node_entry& e = nodes_[i];
        if (e.ep != ep) {
            // Its id at another port of the same IP: NAT rebinding, or a stale pool entry.
            // One node, one budget: the entry follows it to the port it uses now.
            nodes_.rehash(i, node_hash(e.ep), node_hash(ep), [this](const node_entry& n) { return node_hash(n.ep); });
            e.ep = ep;
            ++counters_.node_rebinds;
        }
        nodes_.touch(i);
        refill(e, now);
        if (!id.is_zero() && e.id != id) set_id(i, id);
        return i;
    }
    const auto choose = [&](const node_entry& e) {
        node_entry c = e;
        refill(c, now);
        const bool settled = c.tokens + tolerance >= options_.node_burst &&
                             c.answer_tokens + tolerance >= options_.node_burst && c.backoff_until <= now;
        return settled ? eviction_choice::evict : eviction_choice::keep;
    };
    const auto evicted = [&](std::uint32_t slot, const node_entry& e) {
        ++counters_.node_evictions;
        if (e.id_indexed) aliases_.erase(alias_hash(e.ep.address, e.id), slot, alias_slot_hash());
    };
    i = nodes_.insert(node_hash(ep), choose, evicted, [this](const node_entry& n) { return node_hash(n.ep); });
    if (i == none) {
        ++counters_.refused_node_table_full;
        return none;
    }
    node_entry& e = nodes_[i];
    e.ep = ep;
    e.last = now;
    e.answer_tokens = options_.node_burst;
    e.tokens = options_.node_burst;
    set_id(i, id);
    return i;
}

void source_table::set_id(std::uint32_t i, const id20& id) {
    node_entry& e = nodes_[i];
    if (e.id_indexed) aliases_.erase(alias_hash(e.ep.address, e.id), i, alias_slot_hash());
    e.id = id;
    e.id_indexed = false;
    if (id.is_zero()) return;
    const std::uint64_t h = alias_hash(e.ep.address, id);
    const bool taken = aliases_.find(h, [&](std::uint32_t s) {
        return nodes_[s].id == id && nodes_[s].ep.address == e.ep.address;
    }) != detail::slot_index::npos;
    // Another entry of this IP already answers to this id (it was first met under it): that
    // one stays its alias. Failing to grow the index only costs the alias.
    if (!taken) e.id_indexed = aliases_.insert(h, i, alias_slot_hash());
}

// ---- answers ------------------------------------------------------------------------------

source_table::answer_check source_table::check_answer(const endpoint& source, const id20& id, time_point now) {
    answer_check c;
    const endpoint ep = canonical(source);
    c.ip_slot = touch_ip(ep.address, now);
    if (c.ip_slot == none) return c;
    const ip_entry& ip = ips_[c.ip_slot];
    c.trusted = ip.trusted_until > now;
    if (ip.answer_tokens + tolerance < 1) {
        ++counters_.refused_answer_source;
        c.verdict = send_verdict::over_answer_budget;
        return c;
    }
    if (ip.tokens + tolerance < 1) {
        ++counters_.refused_answer_ip;
        c.verdict = send_verdict::over_budget;
        return c;
    }
    // Only now, with its IP's budgets willing: a flood rotating source ports cannot create
    // nodes faster than its IP is answered.
    c.node_slot = touch_node(ep, id, now);
    if (c.node_slot == none) return c;
    if (nodes_[c.node_slot].answer_tokens + tolerance < 1) {
        ++counters_.refused_answer_destination;
        c.verdict = send_verdict::over_budget;
        return c;
    }
    c.verdict = send_verdict::ok;
    return c;
}

void source_table::commit_answer(const answer_check& c) noexcept {
    if (c.verdict != send_verdict::ok || c.ip_slot == none || c.node_slot == none) return;
    ip_entry& ip = ips_[c.ip_slot];
    ip.answer_tokens = std::max(0.0, ip.answer_tokens - 1);
    ip.tokens = std::max(0.0, ip.tokens - 1);
    node_entry& n = nodes_[c.node_slot];
    n.answer_tokens = std::max(0.0, n.answer_tokens - 1);
    n.tokens -= 1; // answers come first: they may take what our queries left below zero
}

// ---- our queries --------------------------------------------------------------------------

source_table::query_check source_table::try_query(const endpoint& to, const id20& id, time_point now) {
    const endpoint ep = canonical(to);
    const std::uint32_t ip_slot = touch_ip(ep.address, now);
    const std::uint32_t node_slot = ip_slot == none ? none : touch_node(ep, id, now);
    if (node_slot == none) return {send_verdict::table_full, now + table_full_wait};
    ip_entry& ip = ips_[ip_slot];
    node_entry& n = nodes_[node_slot];
    if (n.backoff_until > now) {
        ++counters_.refused_query_backoff;
        return {send_verdict::backed_off, n.backoff_until};
    }
    const bool node_short = n.tokens + tolerance < 1 + options_.answer_headroom;
    const bool ip_short = ip.tokens + tolerance < 1 + ip_headroom_;
    if (node_short || ip_short) {
        ++(node_short ? counters_.refused_query_destination : counters_.refused_query_ip);
        time_point at = ready_at(&ip, &n, now);
        if (node_short) at = std::max(at, reserve_slot(n.next_slot, at, options_.node_rate));
        if (ip_short) at = std::max(at, reserve_slot(ip.next_slot, at, options_.ip_rate));
        return {send_verdict::over_budget, at};
    }
    n.tokens -= 1;
    ip.tokens -= 1;
    return {send_verdict::ok, now};
}

time_point source_table::query_ready_at(const endpoint& to, const id20& id, time_point now) const {
    const endpoint ep = canonical(to);
    const std::uint32_t ip_slot = find_ip(ep.address);
    const std::uint32_t node_slot = find_node(ep, id);
    ip_entry ip;
    node_entry n;
    if (ip_slot != none) {
        ip = ips_[ip_slot];
        refill(ip, now);
    }
    if (node_slot != none) {
        n = nodes_[node_slot];
        refill(n, now);
    }
    return ready_at(ip_slot == none ? nullptr : &ip, node_slot == none ? nullptr : &n, now);
}

// ---- what nodes tell us -------------------------------------------------------------------

void source_table::back_off(node_entry& e, time_point now) noexcept {
    const unsigned shift = std::min<unsigned>(e.backoffs, 16);
    const auto wait = std::min(options_.backoff_base * (std::int64_t{1} << shift), options_.backoff_max);
    e.backoff_until = std::max(e.backoff_until, now + wait);
    if (e.backoffs < 255) ++e.backoffs;
    e.silent = 0;
}

void source_table::on_answered(const endpoint& from, const id20& id, time_point now,
                               std::optional<duration> round_trip) {
    const endpoint ep = canonical(from);
    if (const std::uint32_t i = touch_ip(ep.address, now); i != none) {
        ips_[i].trusted_until = now + options_.trust_ttl;
        if (round_trip) {
            smooth_rtt(ips_[i], *round_trip);
            ++counters_.rtt_samples;
        }
    }
    const std::uint32_t n = touch_node(ep, id, now);
    if (n == none) return;
    node_entry& e = nodes_[n];
    e.silent = 0;
    if (e.backoff_until <= now) e.backoffs = 0;
}

void source_table::on_rate_limited(const endpoint& from, const id20& id, time_point now) {
    const std::uint32_t n = touch_node(canonical(from), id, now);
    if (n == none) return;
    back_off(nodes_[n], now);
    ++counters_.backoffs_rate_limited;
}

void source_table::on_silence(const endpoint& to, const id20& id, time_point now) {
    const std::uint32_t n = touch_node(canonical(to), id, now);
    if (n == none) return;
    node_entry& e = nodes_[n];
    if (++e.silent < options_.silence_limit) return;
    back_off(e, now);
    ++counters_.backoffs_silence;
}

bool source_table::trusted(const ip_address& a, time_point now) const {
    const std::uint32_t i = find_ip(canonical(a));
    return i != none && ips_[i].trusted_until > now;
}

std::optional<duration> source_table::round_trip(const ip_address& a, time_point now) {
    ++counters_.rtt_lookups;
    const std::uint32_t i = find_ip(canonical(a));
    if (i == none || ips_[i].srtt_us == 0 || ips_[i].trusted_until <= now) return std::nullopt;
    ++counters_.rtt_known;
    return std::chrono::microseconds(ips_[i].srtt_us);
}

bool source_table::backing_off(const endpoint& ep, time_point now) const {
    const std::uint32_t i = find_node(canonical(ep), id20{});
    return i != none && nodes_[i].backoff_until > now;
}

} // namespace dhtc::crawl
