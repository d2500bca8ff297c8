#include "crawl/scrapes.hpp"

#include <algorithm>
#include <cmath>

#include "crawl/closest.hpp"

namespace dhtc::crawl {

scrapes::scrapes(const scrape_options& o) : options_(o) {
    options_.max_concurrent = std::max<std::size_t>(options_.max_concurrent, 1);
    options_.queries_per_scrape = std::max<std::size_t>(options_.queries_per_scrape, 1);
}

bool scrapes::want(const id20& info_hash, time_point now) {
    const bool running = std::any_of(slots_.begin(), slots_.end(),
                                     [&](const scrape& s) { return s.active && s.target == info_hash; });
    const bool queued =
        std::any_of(queue_.begin(), queue_.end(), [&](const request& r) { return r.target == info_hash; });
    if (running || queued) return true;
    if (queue_.size() >= options_.queue_capacity) {
        ++dropped_;
        return false;
    }
    queue_.push_back({info_hash, now + std::chrono::seconds(options_.timeout_secs)});
    return true;
}

bool scrapes::start(std::span<const krpc::node_entry> seeds) {
    if (queue_.empty() || !has_free_slot() || seeds.empty()) return false;
    auto it = std::find_if(slots_.begin(), slots_.end(), [](const scrape& s) { return !s.active; });
    if (it == slots_.end()) {
        slots_.emplace_back();
        it = slots_.end() - 1;
    }
    scrape& s = *it;
    std::vector<ip_address> legacy = std::move(s.legacy); // keeps its capacity
    s = scrape{};
    legacy.clear();
    s.legacy = std::move(legacy);
    s.target = queue_.front().target;
    s.deadline = queue_.front().deadline;
    queue_.pop_front();
    s.active = true;
    for (const auto& e : seeds) add_candidate(s, e);
    ++active_;
    ++started_;
    return true;
}

void scrapes::add_candidate(scrape& s, const krpc::node_entry& e) {
    if (find(s, e.ep)) return;
    insert_closest(s.target, s.c, s.n, candidate{e, state::fresh},
                   [](const candidate& c) { return c.st == state::queried; });
}

scrapes::candidate* scrapes::find(scrape& s, const endpoint& ep) {
    for (std::size_t i = 0; i < s.n; ++i)
        if (s.c[i].node.ep == ep) return &s.c[i];
    return nullptr;
}

// The closest fresh candidate among the `closest` nearest that have not failed: a scrape
// asks only the neighbourhood of the hash, where its announces are.
scrapes::candidate* scrapes::pick(scrape& s) {
    std::size_t considered = 0;
    for (std::size_t i = 0; i < s.n && considered < closest; ++i) {
        if (s.c[i].st == state::failed) continue;
        ++considered;
        if (s.c[i].st == state::fresh) return &s.c[i];
    }
    return nullptr;
}

std::optional<scrapes::query> scrapes::next() {
    for (std::size_t k = 0; k < slots_.size(); ++k) {
        const std::size_t i = (cursor_ + k) % slots_.size();
        scrape& s = slots_[i];
        if (!s.active || s.in_flight >= parallelism || s.sent >= options_.queries_per_scrape) continue;
        candidate* c = pick(s);
        if (!c) continue;
        c->st = state::queried;
        ++s.in_flight;
        ++s.sent;
        cursor_ = i + 1;
        return query{static_cast<std::uint32_t>(i), s.target, c->node};
    }
    return std::nullopt;
}

scrapes::scrape* scrapes::running(std::uint32_t slot, const id20& target) {
    if (slot >= slots_.size() || !slots_[slot].active || slots_[slot].target != target) return nullptr;
    return &slots_[slot];
}

std::optional<scrape_result> scrapes::on_reply(std::uint32_t slot, const id20& target, const endpoint& from,
                                               const reply& r) {
    scrape* running_scrape = running(slot, target);
    if (!running_scrape) return std::nullopt; // ended (its deadline passed), maybe the slot reused
    scrape& s = *running_scrape;
    candidate* c = find(s, from);
    if (!c || c->st != state::queried) return std::nullopt; // not a query of this scrape
    c->st = state::answered;
    --s.in_flight;
    const bool seeds = s.seeds.merge(r.seeds_filter);
    const bool peers = s.peers.merge(r.peers_filter);
    if (seeds || peers) {
        ++s.responders;
    } else if (r.values && !r.values->empty()) {
        ++s.responders;
        for (const endpoint& peer : *r.values)
            if (s.legacy.size() < max_legacy) s.legacy.push_back(peer.address);
    }
    if (r.nodes)
        for (const auto& e : *r.nodes) add_candidate(s, e);
    return finish_if_done(s);
}

std::optional<scrape_result> scrapes::on_failure(std::uint32_t slot, const id20& target, const endpoint& from) {
    scrape* running_scrape = running(slot, target);
    if (!running_scrape) return std::nullopt;
    scrape& s = *running_scrape;
    candidate* c = find(s, from);
    if (!c || c->st != state::queried) return std::nullopt;
    c->st = state::failed;
    --s.in_flight;
    return finish_if_done(s);
}

std::optional<scrape_result> scrapes::finish_if_done(scrape& s) {
    if (s.in_flight > 0) return std::nullopt;
    if (s.sent < options_.queries_per_scrape && pick(s)) return std::nullopt;
    return finish(s, false);
}

void scrapes::expire(time_point now, std::vector<scrape_result>& out) {
    while (!queue_.empty() && queue_.front().deadline <= now) {
        // Never started: no node to ask.
        scrape_result nobody;
        nobody.info_hash = queue_.front().target;
        nobody.timed_out = true;
        queue_.pop_front();
        ++completed_;
        ++timed_out_;
        out.push_back(nobody);
    }
    for (auto& s : slots_)
        if (s.active && s.deadline <= now) out.push_back(finish(s, true)); // answers still out are ignored
}

scrape_result scrapes::finish(scrape& s, bool timed_out) {
    // The legacy rule: a values-only peer is a peer unless some node listed it as a seed.
    for (const auto& ip : s.legacy)
        if (!s.seeds.contains(ip)) s.peers.insert(ip);
    s.active = false;
    --active_;
    ++completed_;
    if (timed_out) ++timed_out_;
    return scrape_result{s.target,
                         static_cast<std::uint64_t>(std::llround(s.seeds.estimate())),
                         static_cast<std::uint64_t>(std::llround(s.peers.estimate())),
                         s.responders,
                         s.sent,
                         timed_out};
}

} // namespace dhtc::crawl
