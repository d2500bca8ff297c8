#include "crawl/source_table.hpp"

#include <algorithm>

#include "net/address_policy.hpp"

namespace dhtc::crawl {

namespace {

// Exact decimal time slices may sum to 0.9999999999 tokens; see rate_limiter.cpp.
constexpr double tolerance = 1e-9;
// Entries a full table looks at, oldest first, for one it may evict. Trusted and indebted
// entries are skipped (and moved to the young end); under a flood the old end is strangers.
constexpr int eviction_scan = 16;
// Index values carry 24 bits.
constexpr std::size_t max_capacity = (std::size_t{1} << 24) - 1;
// The slot index starts small and doubles with the table.
constexpr std::size_t initial_entries = 1024;

double positive(double v) noexcept { return v > 0 ? v : 0; } // also maps NaN to 0

} // namespace

source_table::source_table(source_table_options options)
    : options_(options), capacity_(std::clamp<std::size_t>(options.capacity, 1, max_capacity)),
      key_(detail::hash_key_from_seed(options.hash_seed)), slots_(capacity_), index_(capacity_, 24, initial_entries) {
    options_.answer_rate = positive(options_.answer_rate);
    options_.destination_rate = positive(options_.destination_rate);
    options_.destination_burst = std::max(1.0, positive(options_.destination_burst));
    options_.answer_headroom = std::min(positive(options_.answer_headroom), options_.destination_burst - 1);
    options_.silence_limit = std::max(1u, options_.silence_limit);
}

std::uint64_t source_table::hash_of_slot(std::uint32_t i) const noexcept {
    return detail::hash_address(key_, slots_[i].address);
}

std::uint32_t source_table::find(const ip_address& a) const {
    return index_.find(detail::hash_address(key_, a), [&](std::uint32_t s) { return slots_[s].address == a; });
}

void source_table::unlink(std::uint32_t i) noexcept {
    entry& e = slots_[i];
    if (e.prev != none) slots_[e.prev].next = e.next;
    else mru_ = e.next;
    if (e.next != none) slots_[e.next].prev = e.prev;
    else lru_ = e.prev;
}

void source_table::link_front(std::uint32_t i) noexcept {
    entry& e = slots_[i];
    e.prev = none;
    e.next = mru_;
    if (mru_ != none) slots_[mru_].prev = i;
    mru_ = i;
    if (lru_ == none) lru_ = i;
}

void source_table::refill(entry& e, time_point now) const noexcept {
    if (now <= e.last) return; // a manual clock stepping back adds nothing
    const double seconds = std::chrono::duration<double>(now - e.last).count();
    e.answer_tokens = std::min(options_.answer_rate, e.answer_tokens + seconds * options_.answer_rate);
    e.destination_tokens =
        std::min(options_.destination_burst, e.destination_tokens + seconds * options_.destination_rate);
    e.last = now;
}

bool source_table::settled(std::uint32_t i, time_point now) const noexcept {
    entry e = slots_[i];
    refill(e, now);
    return e.destination_tokens + tolerance >= options_.destination_burst && e.backoff_until <= now;
}

std::uint32_t source_table::make_room(time_point now) {
    if (size_.load() < capacity_) {
        const auto i = static_cast<std::uint32_t>(size_.load());
        if (!slots_.ensure(i)) return none;
        ++size_;
        return i;
    }
    std::uint32_t trusted_victim = none;
    for (int k = 0; k < eviction_scan && lru_ != none; ++k) {
        const std::uint32_t i = lru_;
        if (settled(i, now) && slots_[i].trusted_until <= now) return evict(i, now);
        // Second chance: a trusted or indebted entry moves to the young end.
        if (trusted_victim == none && settled(i, now)) trusted_victim = i;
        unlink(i);
        link_front(i);
    }
    // Every IP that answered us stays trusted for trust_ttl, and a crawl at full rate asks
    // more IPs than the table holds within it: refusing every new one then stopped the
    // crawl for minutes. A trusted entry that owes nothing goes, and only its trust is lost
    // (it is trusted again at its next answer); an indebted one never does.
    if (trusted_victim != none) {
        ++counters_.trusted_evictions;
        return evict(trusted_victim, now);
    }
    return none;
}

std::uint32_t source_table::evict(std::uint32_t i, time_point now) {
    entry& victim = slots_[i];
    refill(victim, now);
    ++counters_.evictions;
    if (victim.answer_tokens + tolerance < options_.answer_rate) ++counters_.lossy_evictions;
    index_.erase(hash_of_slot(i), i, [this](std::uint32_t s) { return hash_of_slot(s); });
    unlink(i);
    return i;
}

std::uint32_t source_table::touch(const ip_address& address, time_point now) {
    const ip_address a = canonical(address);
    std::uint32_t i = find(a);
    if (i == detail::slot_index::npos) {
        i = make_room(now);
        if (i == none) {
            ++counters_.refused_table_full;
            return none;
        }
        const std::uint64_t h = detail::hash_address(key_, a);
        if (!index_.insert(h, i, [this](std::uint32_t s) { return hash_of_slot(s); })) {
            ++counters_.refused_table_full; // the index could not grow: leave the slot unused
            return none;
        }
        slots_[i] = entry{};
        entry& e = slots_[i];
        e.address = a;
        e.last = now;
        e.answer_tokens = options_.answer_rate;
        e.destination_tokens = options_.destination_burst;
        link_front(i);
        return i;
    }
    if (mru_ != i) {
        unlink(i);
        link_front(i);
    }
    refill(slots_[i], now);
    return i;
}

source_table::answer_check source_table::check_answer(const ip_address& source, time_point now) {
    answer_check c;
    c.slot = touch(source, now);
    if (c.slot == none) return c;
    const entry& e = slots_[c.slot];
    c.trusted = e.trusted_until > now;
    if (e.answer_tokens + tolerance < 1) {
        ++counters_.refused_answer_source;
        c.verdict = send_verdict::over_answer_budget;
    } else if (e.destination_tokens + tolerance < 1) {
        ++counters_.refused_answer_destination;
        c.verdict = send_verdict::over_budget;
    } else {
        c.verdict = send_verdict::ok;
    }
    return c;
}

void source_table::commit_answer(const answer_check& c) noexcept {
    if (c.verdict != send_verdict::ok || c.slot == none) return;
    entry& e = slots_[c.slot];
    e.answer_tokens = std::max(0.0, e.answer_tokens - 1);
    e.destination_tokens = std::max(0.0, e.destination_tokens - 1);
}

send_verdict source_table::try_query(const ip_address& to, time_point now) {
    const std::uint32_t i = touch(to, now);
    if (i == none) return send_verdict::table_full;
    entry& e = slots_[i];
    if (e.backoff_until > now) {
        ++counters_.refused_query_backoff;
        return send_verdict::backed_off;
    }
    if (e.destination_tokens + tolerance < 1 + options_.answer_headroom) {
        ++counters_.refused_query_destination;
        return send_verdict::over_budget;
    }
    e.destination_tokens = std::max(0.0, e.destination_tokens - 1);
    return send_verdict::ok;
}

bool source_table::has_query_budget(const ip_address& to, time_point now) {
    const std::uint32_t i = touch(to, now);
    return i != none && slots_[i].destination_tokens + tolerance >= 1 + options_.answer_headroom;
}

void source_table::back_off(entry& e, time_point now) noexcept {
    const unsigned shift = std::min<unsigned>(e.backoffs, 16);
    const auto wait = std::min(options_.backoff_base * (std::int64_t{1} << shift), options_.backoff_max);
    e.backoff_until = std::max(e.backoff_until, now + wait);
    if (e.backoffs < 255) ++e.backoffs;
    e.silent = 0;
}

void source_table::on_answered(const ip_address& from, time_point now) {
    const std::uint32_t i = touch(from, now);
    if (i == none) return;
    entry& e = slots_[i];
    e.trusted_until = now + options_.trust_ttl;
    e.silent = 0;
    if (e.backoff_until <= now) e.backoffs = 0;
}

void source_table::on_rate_limited(const ip_address& from, time_point now) {
    const std::uint32_t i = touch(from, now);
    if (i == none) return;
    back_off(slots_[i], now);
    ++counters_.backoffs_rate_limited;
}

void source_table::on_silence(const ip_address& to, time_point now) {
    const std::uint32_t i = touch(to, now);
    if (i == none) return;
    entry& e = slots_[i];
    if (++e.silent < options_.silence_limit) return;
    back_off(e, now);
    ++counters_.backoffs_silence;
}

bool source_table::trusted(const ip_address& a, time_point now) const {
    const std::uint32_t i = find(canonical(a));
    return i != detail::slot_index::npos && slots_[i].trusted_until > now;
}

bool source_table::backing_off(const ip_address& a, time_point now) const {
    const std::uint32_t i = find(canonical(a));
    return i != detail::slot_index::npos && slots_[i].backoff_until > now;
}

} // namespace dhtc::crawl
