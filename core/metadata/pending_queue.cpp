#include "metadata/pending_queue.hpp"

#include <algorithm>

#include "net/address_policy.hpp"

namespace dhtc::metadata {

pending_queue::pending_queue(pending_queue_options options)
    : ttl_(std::max(options.ttl, std::chrono::seconds{0})),
      capacity_(std::clamp<std::size_t>(options.capacity, 1, (std::size_t{1} << 24) - 2)),
      key_(detail::hash_key_from_seed(options.hash_seed)), nodes_(capacity_),
      index_(capacity_, 24, initial_index_entries) {
    clear();
}

void pending_queue::clear() noexcept {
    // Slabs already allocated stay (they are reused from index 0 up).
    free_ = nil;
    fresh_ = 0;
    newest_ = oldest_ = arr_head_ = arr_tail_ = nil;
    index_.clear();
    size_ = 0;
}

std::uint64_t pending_queue::hash_of(const id20& h) const noexcept { return siphash24(key_, h.view()); }

std::uint32_t pending_queue::find(const id20& h, std::uint64_t hv) const {
    return index_.find(hv, [&](std::uint32_t i) { return nodes_[i].e.info_hash == h; });
}

void pending_queue::unlink_recency(std::uint32_t i) noexcept {
    node& n = nodes_[i];
    if (n.newer != nil) nodes_[n.newer].older = n.older;
    else newest_ = n.older;
    if (n.older != nil) nodes_[n.older].newer = n.newer;
    else oldest_ = n.newer;
    n.newer = n.older = nil;
}

void pending_queue::push_newest(std::uint32_t i) noexcept {
    node& n = nodes_[i];
    n.newer = nil;
    n.older = newest_;
    if (newest_ != nil) nodes_[newest_].newer = i;
    else oldest_ = i;
    newest_ = i;
}

void pending_queue::erase_node(std::uint32_t i) noexcept {
    node& n = nodes_[i];
    index_.erase(hash_of(n.e.info_hash), i, [this](std::uint32_t j) { return hash_of(nodes_[j].e.info_hash); });
    unlink_recency(i);
    if (n.prev_arr != nil) nodes_[n.prev_arr].next_arr = n.next_arr;
    else arr_head_ = n.next_arr;
    if (n.next_arr != nil) nodes_[n.next_arr].prev_arr = n.prev_arr;
    else arr_tail_ = n.prev_arr;
    n.next_arr = n.prev_arr = nil;
    n.older = free_;
    free_ = i;
    --size_;
}

std::size_t pending_queue::purge(time_point now) {
    // The arrival list is ordered by first_seen, so the expired entries are exactly a prefix.
    std::size_t n = 0;
    while (arr_head_ != nil && expired_at(nodes_[arr_head_], now)) {
        erase_node(arr_head_);
        ++expired_;
        ++n;
    }
    return n;
}

offer_result pending_queue::offer(const id20& info_hash, const endpoint& peer, api::hash_source src,
                                  time_point event_time, time_point now, api::peer_rtt rtt) {
    const auto record = [this](offer_result r) {
        ++counts_[static_cast<std::size_t>(r)];
        return r;
    };
    purge(now);
    // A sighting from the future would outrank every real one in the staleness and peer
    // replacement comparisons.
    if (event_time > now) event_time = now;
    if (now - event_time >= ttl_) return record(offer_result::expired_event);
    const endpoint who = canonical(peer);
    const std::uint64_t hv = hash_of(info_hash);

    if (const std::uint32_t i = find(info_hash, hv); i != nil) {
        pending_entry& e = nodes_[i].e;
        for (std::uint8_t k = 0; k < e.peer_count; ++k) {
            pending_peer& p = e.peers[k];
            if (p.peer != who) continue;
            // A late-arriving older sighting must not make a peer look staler than it is.
            if (event_time >= p.seen_at) {
                p.seen_at = event_time;
                p.source = src;
            }
            if (rtt.known()) p.rtt = rtt; // the later measurement wins
            return record(offer_result::duplicate_peer);
        }
        offer_result r = offer_result::merged;
        std::uint8_t slot = e.peer_count;
        if (slot == pending_entry::max_peers) {
            slot = 0;
            for (std::uint8_t k = 1; k < e.peer_count; ++k)
                if (e.peers[k].seen_at < e.peers[slot].seen_at) slot = k;
            // Keep the three freshest sightings: a sighting older than all three loses.
            if (event_time < e.peers[slot].seen_at) return record(offer_result::peers_full);
            r = offer_result::peer_replaced;
        } else {
            ++e.peer_count;
        }
        e.peers[slot] = pending_peer{who, src, event_time, rtt};
        e.last_seen = now;
        unlink_recency(i);
        push_newest(i);
        return record(r);
    }

    offer_result r = offer_result::added;
    if (size_ == capacity_) {
        // After purge() the arrival head is the oldest live entry. An event older than it
        // would be the stalest thing in the queue: evicting a fresher entry for it is a loss.
        if (event_time < nodes_[arr_head_].e.first_seen) return record(offer_result::stale);
        erase_node(arr_head_);
        r = offer_result::evicted_oldest;
    }
    // A recycled node, else the next never-used one (its slab allocated on first use).
    std::uint32_t i = free_;
    if (i == nil) {
        if (!nodes_.ensure(fresh_)) return record(offer_result::stale); // out of memory: refused
        i = fresh_++;
    } else {
        free_ = nodes_[i].older;
    }
    node& n = nodes_[i];
    if (!index_.insert(hv, i, [this](std::uint32_t j) { return hash_of(nodes_[j].e.info_hash); })) {
        n.older = free_; // back to the free list: the index could not grow
        free_ = i;
        return record(offer_result::stale);
    }
    // Clamped so a clock stepping back cannot unorder the arrival list (purge relies on it).
    const time_point arrival = arr_tail_ != nil ? std::max(now, nodes_[arr_tail_].e.first_seen) : now;
    n.e = pending_entry{};
    n.e.info_hash = info_hash;
    n.e.peers[0] = pending_peer{who, src, event_time, rtt};
    n.e.peer_count = 1;
    n.e.first_seen = arrival;
    n.e.last_seen = now;
    push_newest(i);
    n.next_arr = nil;
    n.prev_arr = arr_tail_;
    if (arr_tail_ != nil) nodes_[arr_tail_].next_arr = i;
    else arr_head_ = i;
    arr_tail_ = i;
    ++size_;
    return record(r);
}

std::optional<pending_entry> pending_queue::take(time_point now) {
    // Expiry follows arrival order, so after the purge the newest entry is live.
    purge(now);
    if (newest_ == nil) return std::nullopt;
    const std::uint32_t i = newest_;
    pending_entry e = nodes_[i].e;
    erase_node(i);
    ++taken_;
    // Insertion sort of at most three: the worker tries the freshest sighting first.
    for (std::uint8_t k = 1; k < e.peer_count; ++k)
        for (std::uint8_t j = k; j > 0 && e.peers[j].seen_at > e.peers[j - 1].seen_at; --j)
            std::swap(e.peers[j], e.peers[j - 1]);
    return e;
}

bool pending_queue::remove(const id20& info_hash) {
    const std::uint32_t i = find(info_hash, hash_of(info_hash));
    if (i == nil) return false;
    erase_node(i);
    ++removed_;
    return true;
}

bool pending_queue::contains(const id20& info_hash, time_point now) const {
    const std::uint32_t i = find(info_hash, hash_of(info_hash));
    return i != nil && !expired_at(nodes_[i], now);
}

std::size_t pending_queue::memory_bytes() const noexcept {
    return sizeof(*this) + nodes_.memory_bytes() + index_.memory_bytes();
}

std::string_view to_string(offer_result r) noexcept {
    switch (r) {
    case offer_result::added: return "added";
    case offer_result::merged: return "merged";
    case offer_result::duplicate_peer: return "duplicate_peer";
    case offer_result::peer_replaced: return "peer_replaced";
    case offer_result::evicted_oldest: return "evicted_oldest";
    case offer_result::peers_full: return "peers_full";
    case offer_result::stale: return "stale";
    case offer_result::expired_event: return "expired_event";
    }
    return "unknown";
}

} // namespace dhtc::metadata
