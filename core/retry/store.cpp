#include "retry/store.hpp"

#include <algorithm>

namespace dhtc::retry {

using api::failure_class;

namespace {
constexpr unsigned count_bits = 4;
constexpr std::uint64_t count_max = (1u << count_bits) - 1;
constexpr unsigned recent_bits = 5;
constexpr std::uint32_t recent_mask = (1u << recent_bits) - 1;
static_assert(api::failure_class_count - 1 <= recent_mask, "a recent class is 5 bits");
static_assert(recent_bits * retry_row::recent_kept <= 31, "recent_failures fits PostgreSQL's integer");

// Counter slot s sits at bits [s * 4, s * 4 + 4) of failure_counts. Classes 1..14 keep the
// slots they always had (class i at slot i - 1); cancelled, never a recorded failure (a
// cancelled round is released, not failed), has none, which frees slots 14 and 15 for the
// classes after it. 64 bits hold 16 slots.
constexpr unsigned no_slot = 64;
constexpr unsigned counter_slot(failure_class c) noexcept {
    const auto i = static_cast<unsigned>(c);
    if (c == failure_class::none || c == failure_class::cancelled || i >= api::failure_class_count) return no_slot;
    return i < static_cast<unsigned>(failure_class::cancelled) ? i - 1 : i - 2;
}
static_assert(counter_slot(failure_class::sink_failed) == 13);
static_assert(counter_slot(failure_class::encryption_failed) == 14);
static_assert(counter_slot(failure_class::utp_timeout) == 15);
static_assert(api::failure_class_count - 2 <= 16, "16 four-bit counter slots in 64 bits");
} // namespace

std::string_view to_string(hash_state s) noexcept {
    switch (s) {
    case hash_state::pending: return "pending";
    case hash_state::leased: return "leased";
    case hash_state::done: return "done";
    case hash_state::dormant: return "dormant";
    }
    return "unknown";
}

std::string_view to_string(claim_result r) noexcept {
    switch (r) {
    case claim_result::fetch: return "fetch";
    case claim_result::done: return "done";
    case claim_result::busy: return "busy";
    case claim_result::deferred: return "deferred";
    }
    return "unknown";
}

std::uint32_t retry_row::failures(failure_class c) const noexcept {
    const unsigned slot = counter_slot(c);
    if (slot == no_slot) return 0;
    return static_cast<std::uint32_t>((failure_counts >> (slot * count_bits)) & count_max);
}

void retry_row::add_failure(failure_class c) noexcept {
    const unsigned slot = counter_slot(c);
    if (slot == no_slot) return;
    const unsigned shift = slot * count_bits;
    if (((failure_counts >> shift) & count_max) < count_max) failure_counts += std::uint64_t{1} << shift;
    recent_failures = ((recent_failures << recent_bits) | static_cast<unsigned>(c)) &
                      ((1u << (recent_bits * recent_kept)) - 1);
}

std::vector<failure_class> retry_row::recent() const {
    std::vector<failure_class> out;
    for (std::size_t k = 0; k < recent_kept; ++k) {
        const unsigned c = (recent_failures >> (k * recent_bits)) & recent_mask;
        if (c == 0 || c >= api::failure_class_count) break;
        out.push_back(static_cast<failure_class>(c));
    }
    return out;
}

void retry_row::merge_peers(std::span<const endpoint> fresh) {
    std::vector<endpoint> merged;
    for (const auto& list : {std::vector<endpoint>(fresh.begin(), fresh.end()), peers})
        for (const auto& p : list)
            if (merged.size() < max_peers && std::find(merged.begin(), merged.end(), p) == merged.end())
                merged.push_back(p);
    peers = std::move(merged);
}

std::string pack_peers(std::span<const endpoint> peers) {
    std::string out;
    for (const auto& p : peers) {
        const auto addr = p.address.bytes();
        out.push_back(static_cast<char>(addr.size() + 2));
        out.append(addr);
        out.push_back(static_cast<char>(p.port >> 8));
        out.push_back(static_cast<char>(p.port & 0xff));
    }
    return out;
}

std::vector<endpoint> unpack_peers(std::string_view packed) {
    std::vector<endpoint> out;
    while (!packed.empty() && out.size() < retry_row::max_peers) {
        const auto len = static_cast<unsigned char>(packed[0]);
        if ((len != 6 && len != 18) || packed.size() < 1u + len) break;
        const auto addr = ip_address::from_bytes(packed.substr(1, len - 2));
        if (!addr) break;
        const auto hi = static_cast<unsigned char>(packed[len - 1]);
        const auto lo = static_cast<unsigned char>(packed[len]);
        out.push_back(endpoint{*addr, static_cast<std::uint16_t>(hi << 8 | lo)});
        packed.remove_prefix(1u + len);
    }
    return out;
}

store::store(std::unique_ptr<backend> db, policy_options policy, std::string owner, std::uint32_t lease_secs,
             std::uint64_t seed)
    : db_(std::move(db)), policy_(std::move(policy)), owner_(std::move(owner)), lease_secs_(std::max(lease_secs, 1u)),
      rng_(seed ? seed : std::random_device{}()) {}

void store::lease_to_us(retry_row& r, unix_seconds now) const {
    r.state = hash_state::leased;
    r.lease_owner = owner_;
    r.next_retry_at = now + lease_secs_;
}

claim_answer store::claim(const id20& info_hash, std::span<const endpoint> peers, unix_seconds now) {
    auto row = db_->load(info_hash);
    if (!row) {
        retry_row r;
        r.info_hash = info_hash;
        r.first_seen = r.last_seen = now;
        r.observations = 1;
        r.merge_peers(peers);
        lease_to_us(r, now);
        if (db_->insert(r)) return {claim_result::fetch, 0};
        return {claim_result::busy, 0}; // another crawler inserted it first: its round
    }
    retry_row& r = *row;
    // Done rows are read-only here: a popular torrent is announced all day long.
    if (r.state == hash_state::done) return {claim_result::done, r.attempts};
    r.last_seen = now;
    ++r.observations;
    claim_answer a{claim_result::fetch, r.attempts};
    const bool due = r.next_retry_at <= now; // leased: the lease has expired
    if (due) {
        r.merge_peers(peers);
        lease_to_us(r, now);
    } else if (r.state == hash_state::leased) {
        a.result = claim_result::busy;
    } else {
        r.merge_peers(peers);
        r.priority = std::min(r.priority + 1, policy_.max_priority);
        r.next_retry_at = reactivated_at(policy_, r.next_retry_at, now);
        a.result = claim_result::deferred;
    }
    db_->update(r);
    return a;
}

bool store::observe(const id20& info_hash, std::span<const endpoint> peers, unix_seconds now) {
    auto row = db_->load(info_hash);
    if (!row || (row->state != hash_state::dormant && row->state != hash_state::pending)) return false;
    retry_row& r = *row;
    r.last_seen = now;
    ++r.observations;
    r.merge_peers(peers);
    r.priority = std::min(r.priority + 1, policy_.max_priority);
    r.next_retry_at = reactivated_at(policy_, r.next_retry_at, now);
    db_->update(r);
    return true;
}

std::optional<retry_row> store::record_failure(const id20& info_hash, failure_class cls, unix_seconds now) {
    // A cancelled round is no attempt (and has no counter slot): it gives the lease back.
    if (cls == failure_class::cancelled || cls == failure_class::none) {
        release(info_hash, now);
        return std::nullopt;
    }
    auto row = db_->load(info_hash);
    if (!row || row->state == hash_state::done) return std::nullopt;
    retry_row& r = *row;
    // Our lease ran out and another crawler took the hash over: its round decides.
    if (r.state == hash_state::leased && r.lease_owner != owner_ && r.next_retry_at > now) return std::nullopt;
    ++r.attempts;
    r.add_failure(cls);
    r.state = hash_state::dormant;
    r.lease_owner.clear();
    // They just failed; fresh observations bring new ones. Not after sink_failed: the peers
    // served the torrent, it was our side that could not keep it.
    if (cls != failure_class::sink_failed) r.peers.clear();
    const double u01 = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    const std::uint32_t timeout_rounds = r.failures(failure_class::timeout) +
                                         r.failures(failure_class::connect_timeout) +
                                         r.failures(failure_class::utp_timeout);
    r.next_retry_at =
        now + next_delay_secs(policy_, r.attempts, cls, r.failures(failure_class::hash_mismatch), u01, timeout_rounds);
    db_->update(r);
    return r;
}

void store::record_done(const id20& info_hash, unix_seconds now) {
    auto row = db_->load(info_hash);
    if (row && row->state == hash_state::done) return;
    retry_row r = row ? *row : retry_row{};
    r.info_hash = info_hash;
    if (!row) r.first_seen = now;
    r.last_seen = now;
    r.state = hash_state::done;
    r.next_retry_at = 0;
    r.lease_owner.clear();
    r.peers.clear();
    if (row)
        db_->update(r);
    else if (!db_->insert(r))
        record_done(info_hash, now); // inserted meanwhile by another crawler: now it exists
}

void store::release(const id20& info_hash, unix_seconds retry_at) {
    auto row = db_->load(info_hash);
    if (!row || !ours(*row)) return;
    // A hash that failed before goes back to sleep; a first round back to the queue.
    row->state = row->attempts > 0 ? hash_state::dormant : hash_state::pending;
    row->lease_owner.clear();
    row->next_retry_at = retry_at;
    db_->update(*row);
}

std::vector<retry_row> store::lease_due(std::size_t batch, unix_seconds now) {
    if (batch == 0) return {};
    return db_->lease_due(batch, owner_, now + lease_secs_, now);
}

} // namespace dhtc::retry
