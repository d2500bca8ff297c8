#include "crawl/lookups.hpp"

#include <algorithm>

#include "crawl/closest.hpp"

namespace dhtc::crawl {

namespace {
// Hashes remembered as recently looked up, so repeats within this many are skipped.
constexpr std::size_t recent_capacity = 65536;
// Waiting hashes next_to_start() may park in one call, so one call stays short however many
// hashes wait on spent budgets (each is parked once, then not looked at until due).
constexpr std::size_t parks_per_call = 64;
} // namespace

lookups::lookups(const bep51_options& o, ready_fn ready_at)
    : options_(o), ready_at_(std::move(ready_at)), max_slots_(std::max<std::size_t>(o.max_concurrent_lookups, 1)) {
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
    if (const auto it = holders_.find(info_hash); it != holders_.end()) {
        // Waiting still: another node that sampled it is one more to ask if the first is busy.
        holder_list& h = it->second;
        if (holder && h.count < max_holders &&
            std::none_of(h.nodes.begin(), h.nodes.begin() + h.count,
                         [&](const krpc::node_entry& n) { return n.ep == holder->ep; })) {
            h.nodes[h.count++] = *holder;
            ++holders_added_;
        }
        ++duplicates_;
        return false;
    }
    if (recent_.contains(info_hash)) {
        ++duplicates_;
        return false;
    }
    return enqueue(info_hash, holder);
}

bool lookups::want_again(const id20& info_hash) {
    if (holders_.contains(info_hash)) return true; // waiting already: it will run
    return enqueue(info_hash, std::nullopt);
}

bool lookups::enqueue(const id20& info_hash, const std::optional<krpc::node_entry>& holder) {
    if (queued() >= options_.lookup_queue_capacity) {
        ++dropped_;
        return false;
    }
    if (!recent_.contains(info_hash)) remember(info_hash);
    holder_list& h = holders_[info_hash];
    if (holder) h.nodes[h.count++] = *holder;
    queue_.push_back(waiting{info_hash, {}, std::nullopt, 0});
    return true;
}

time_point lookups::holders_ready_at(const holder_list& h, time_point now) const {
    if (h.count == 0 || !ready_at_) return now;
    time_point first = time_point::max();
    for (std::size_t i = 0; i < h.count && first > now; ++i) first = std::min(first, ready_at_(h.nodes[i], now));
    return first;
}

std::optional<id20> lookups::next_to_start(time_point now) {
    if (next_) return next_->hash;
    for (std::size_t parks = 0; parks < parks_per_call; ++parks) {
        waiting w;
        if (!parked_.empty() && parked_.top().due <= now) {
            w = parked_.top();
            parked_.pop();
        } else if (!queue_.empty()) {
            w = queue_.front();
            queue_.pop_front();
        } else {
            return std::nullopt;
        }
        const time_point ready = holders_ready_at(holders_[w.hash], now);
        const bool waited_enough = w.parked_since && now - *w.parked_since >= requeue_limit;
        if (ready <= now || waited_enough) {
            next_ = w;
            return w.hash;
        }
        // Every holder's budget is spent: asking the closest nodes instead would cost queries
        // that the holder, asked a moment later, makes useless. Wait for the first of them.
        if (!w.parked_since) w.parked_since = now;
        w.due = std::min(ready, *w.parked_since + requeue_limit);
        ++parkings_;
        parked_seconds_ += std::chrono::duration<double>(w.due - now).count();
        parked_.push(w);
    }
    return std::nullopt;
}

bool lookups::start(std::span<const krpc::node_entry> seeds) {
    if (!next_ || !has_free_slot() || seeds.empty()) return false;
    auto it = std::find_if(slots_.begin(), slots_.end(), [](const lookup& l) { return !l.active; });
    if (it == slots_.end()) {
        slots_.emplace_back();
        it = slots_.end() - 1;
    }
    lookup& l = *it;
    l = lookup{};
    l.target = next_->hash;
    l.again = next_->again;
    if (const auto h = holders_.find(l.target); h != holders_.end()) {
        for (std::size_t i = 0; i < h->second.count; ++i) l.holders[i] = candidate{h->second.nodes[i], state::fresh};
        l.holder_count = h->second.count;
        holders_.erase(h);
    }
    next_.reset();
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
    for (auto& h : l.holder_span())
        if (h.node.ep == ep) return &h;
    for (std::size_t i = 0; i < l.n; ++i)
        if (l.c[i].node.ep == ep) return &l.c[i];
    return nullptr;
}

bool lookups::is_holder(lookup& l, const candidate* c) const noexcept {
    return c >= l.holders.data() && c < l.holders.data() + l.holder_count;
}

std::optional<lookups::query> lookups::next(time_point now) {
    const auto ready = [now](const candidate& c) { return c.st == state::fresh && c.not_before <= now; };
    for (std::size_t k = 0; k < slots_.size(); ++k) {
        const std::size_t i = (cursor_ + k) % slots_.size();
        lookup& l = slots_[i];
        if (!l.active || l.in_flight >= parallelism || l.sent >= options_.queries_per_lookup) continue;
        if (l.satisfied()) continue;
        const auto holders = l.holder_span();
        // The holders answered our sample_infohashes moments ago, so they are alive: wait for a
        // holder's answer before spending more queries, and while every fresh holder's budget
        // defers it. Asking the closest nodes meanwhile costs queries that a holder, asked a
        // second later, would have made useless. A deferred holder gives way to the next one.
        if (std::any_of(holders.begin(), holders.end(), [](const candidate& h) { return h.st == state::queried; }))
            continue;
        candidate* pick = nullptr;
        for (auto& h : holders)
            if (ready(h)) {
                pick = &h;
                break;
            }
        if (!pick && std::any_of(holders.begin(), holders.end(), [](const candidate& h) { return h.st == state::fresh; }))
            continue;
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
        if (is_holder(l, c) && peers_found > 0) l.holder_had_peers = true;
        if (c->retries > 0) {
            ++holder_retry_answers_;
            holder_retry_peers_ += peers_found;
        }
    }
    if (l.again > 0 && l.peers == 0 && peers_found > 0) ++lookup_retries_found_;
    if (l.other_outcomes < 255) ++l.other_outcomes;
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
    if (l.other_outcomes < 255) ++l.other_outcomes;
    finish_if_done(l);
}

void lookups::on_timeout(std::uint32_t slot, const endpoint& from, time_point now) {
    if (slot >= slots_.size() || !slots_[slot].active) return;
    lookup& l = slots_[slot];
    if (candidate* c = find(l, from); c && c->st == state::queried) {
        --l.in_flight;
        if (is_holder(l, c) && c->retries < options_.holder_retries) {
            // Asked again at once, before any other candidate (holders go first): the
            // retry is part of the same query, so it does not count against the budget.
            ++c->retries;
            c->st = state::fresh;
            --l.sent;
            ++holder_retries_;
        } else {
            c->st = state::failed;
            if (l.timeouts < 255) ++l.timeouts;
        }
    }
    finish_if_done(l, now);
}

void lookups::on_deferred(std::uint32_t slot, const endpoint& from, time_point ready_at) {
    if (slot >= slots_.size() || !slots_[slot].active) return;
    lookup& l = slots_[slot];
    if (candidate* c = find(l, from); c && c->st == state::queried) {
        --l.in_flight;
        --l.sent;
        if (++c->deferrals > max_deferrals) {
            c->st = state::failed;
        } else {
            c->st = state::fresh;
            c->not_before = ready_at;
        }
    }
    finish_if_done(l);
}

void lookups::finish_if_done(lookup& l, std::optional<time_point> now) {
    if (l.in_flight > 0) return;
    const bool budget_spent = l.sent >= options_.queries_per_lookup;
    const bool satisfied = l.satisfied();
    const auto fresh = [](const candidate& c) { return c.st == state::fresh; };
    const auto holders = l.holder_span();
    const bool exhausted =
        std::none_of(holders.begin(), holders.end(), fresh) && std::none_of(l.c.begin(), l.c.begin() + l.n, fresh);
    if (budget_spent || satisfied || exhausted) {
        l.active = false;
        --active_;
        ++completed_;
        if (now && l.peers == 0 && l.other_outcomes == 0 && l.timeouts > 0 && l.again < options_.lookup_retries)
            run_again_later(l, *now);
    }
}

// Nothing but silence: the nodes were there moments ago (they sampled the hash or answered
// the crawl), so a lost datagram or a short outage is likelier than an empty swarm. The
// hash waits with its holders, parked like a hash whose holders' budgets are spent.
void lookups::run_again_later(const lookup& l, time_point now) {
    if (holders_.contains(l.target)) return; // queued again meanwhile (a retry round asked for it)
    if (queued() >= options_.lookup_queue_capacity) {
        ++dropped_;
        return;
    }
    holder_list& h = holders_[l.target];
    for (std::size_t i = 0; i < l.holder_count; ++i) h.nodes[h.count++] = l.holders[i].node;
    const auto wait = std::chrono::seconds(options_.lookup_retry_secs) * (1u << (2 * std::min<unsigned>(l.again, 8)));
    parked_.push(waiting{l.target, now + wait, std::nullopt, static_cast<std::uint8_t>(l.again + 1)});
    ++lookup_retries_;
}

} // namespace dhtc::crawl
