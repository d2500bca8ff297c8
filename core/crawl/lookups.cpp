#include "crawl/lookups.hpp"

#include <algorithm>

#include "crawl/closest.hpp"

namespace dhtc::crawl {

namespace {
// Hashes remembered as recently looked up, so repeats within this many are skipped.
constexpr std::size_t recent_capacity = 65536;
} // namespace

lookups::lookups(const bep51_options& o)
    : options_(o), max_slots_(std::max<std::size_t>(o.max_concurrent_lookups, 1)) {
    // Slots are added as lookups run at once (up to max_slots_), then reused.
    recent_.reserve(recent_capacity);
}

bool lookups::has_free_slot() const noexcept { return active_ < max_slots_; }

void lookups::remember(const id20& h) {
    if (recent_order_.size() == recent_capacity) {
        recent_.erase(recent_order_.front());
        recent_order_.pop_front();
    }
    recent_.insert(h);
    recent_order_.push_back(h);
}

bool lookups::want(const id20& info_hash, const std::optional<krpc::node_entry>& holder) {
    if (recent_.contains(info_hash)) {
        ++duplicates_;
        return false;
    }
    return enqueue(info_hash, holder);
}

bool lookups::want_again(const id20& info_hash) { return enqueue(info_hash, std::nullopt); }

bool lookups::enqueue(const id20& info_hash, const std::optional<krpc::node_entry>& holder) {
    if (queue_.size() >= options_.lookup_queue_capacity) {
        ++dropped_;
        return false;
    }
    if (!recent_.contains(info_hash)) remember(info_hash);
    queue_.push_back(waiting{info_hash, holder, std::nullopt});
    return true;
}

bool lookups::requeue_front(time_point now) {
    if (queue_.empty()) return false;
    waiting& w = queue_.front();
    if (!w.requeued) w.requeued = now;
    if (now - *w.requeued >= requeue_limit) return false;
    queue_.push_back(std::move(w));
    queue_.pop_front();
    return true;
}

bool lookups::start(std::span<const krpc::node_entry> seeds) {
    if (queue_.empty() || !has_free_slot() || seeds.empty()) return false;
    auto it = std::find_if(slots_.begin(), slots_.end(), [](const lookup& l) { return !l.active; });
    if (it == slots_.end()) {
        slots_.emplace_back();
        it = slots_.end() - 1;
    }
    lookup& l = *it;
    l = lookup{};
    l.target = queue_.front().hash;
    if (queue_.front().holder) l.holder = candidate{*queue_.front().holder, state::fresh};
    queue_.pop_front();
    l.active = true;
    for (const auto& s : seeds) add_candidate(l, s);
    ++active_;
    ++started_;
    return true;
}

void lookups::add_candidate(lookup& l, const krpc::node_entry& e) {
    if (find(l, e.ep)) return;
    insert_closest(l.target, l.c, l.n, candidate{e, state::fresh},
                   [](const candidate& c) { return c.st == state::queried; });
}

lookups::candidate* lookups::find(lookup& l, const endpoint& ep) {
    if (l.holder && l.holder->node.ep == ep) return &*l.holder;
    for (std::size_t i = 0; i < l.n; ++i)
        if (l.c[i].node.ep == ep) return &l.c[i];
    return nullptr;
}

std::optional<lookups::query> lookups::next(time_point now) {
    for (std::size_t k = 0; k < slots_.size(); ++k) {
        const std::size_t i = (cursor_ + k) % slots_.size();
        lookup& l = slots_[i];
        if (!l.active || l.in_flight >= parallelism || l.sent >= options_.queries_per_lookup) continue;
        if (l.satisfied()) continue;
        // The holder answered our sample_infohashes moments ago, so it is alive: wait for its
        // answer before spending more queries, and wait for it too while its destination budget
        // defers it (it gave us many samples at once). Asking the closest nodes meanwhile costs
        // queries that the holder, asked a second later, would have made useless.
        if (l.holder && (l.holder->st == state::queried || (l.holder->st == state::fresh && l.holder->not_before > now)))
            continue;
        const auto ready = [now](const candidate& c) { return c.st == state::fresh && c.not_before <= now; };
        candidate* pick = l.holder && ready(*l.holder) ? &*l.holder : nullptr;
        for (std::size_t j = 0; !pick && j < l.n; ++j)
            if (ready(l.c[j])) pick = &l.c[j];
        if (!pick) continue;
        pick->st = state::queried;
        ++l.in_flight;
        ++l.sent;
        cursor_ = i + 1;
        return query{static_cast<std::uint32_t>(i), l.target, pick->node};
    }
    return std::nullopt;
}

void lookups::on_reply(std::uint32_t slot, const endpoint& from, const krpc::compact_nodes& nodes,
                       std::size_t peers_found) {
    if (slot >= slots_.size() || !slots_[slot].active) return;
    lookup& l = slots_[slot];
    if (candidate* c = find(l, from); c && c->st == state::queried) {
        c->st = state::answered;
        --l.in_flight;
        if (c == (l.holder ? &*l.holder : nullptr) && peers_found > 0) l.holder_had_peers = true;
    }
    l.peers = static_cast<std::uint8_t>(std::min<std::size_t>(l.peers + peers_found, 255));
    for (const auto& e : nodes) add_candidate(l, e);
    finish_if_done(l);
}

void lookups::on_failure(std::uint32_t slot, const endpoint& from) {
    if (slot >= slots_.size() || !slots_[slot].active) return;
    lookup& l = slots_[slot];
    if (candidate* c = find(l, from); c && c->st == state::queried) {
        c->st = state::failed;
        --l.in_flight;
    }
    finish_if_done(l);
}

void lookups::on_deferred(std::uint32_t slot, const endpoint& from, time_point now) {
    if (slot >= slots_.size() || !slots_[slot].active) return;
    lookup& l = slots_[slot];
    if (candidate* c = find(l, from); c && c->st == state::queried) {
        --l.in_flight;
        --l.sent;
        if (++c->deferrals > max_deferrals) {
            c->st = state::failed;
        } else {
            c->st = state::fresh;
            c->not_before = now + deferral_wait;
        }
    }
    finish_if_done(l);
}

void lookups::finish_if_done(lookup& l) {
    if (l.in_flight > 0) return;
    const bool budget_spent = l.sent >= options_.queries_per_lookup;
    const bool satisfied = l.satisfied();
    const bool exhausted =
        (!l.holder || l.holder->st != state::fresh) &&
        std::none_of(l.c.begin(), l.c.begin() + l.n, [](const candidate& c) { return c.st == state::fresh; });
    if (budget_spent || satisfied || exhausted) {
        l.active = false;
        --active_;
        ++completed_;
    }
}

} // namespace dhtc::crawl
