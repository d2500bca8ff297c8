#include "dht/sample_store.hpp"

#include <algorithm>

namespace dhtc::dht {

sample_store::sample_store(std::size_t capacity, std::size_t max_samples, std::chrono::seconds interval,
                           std::uint64_t seed)
    : capacity_(std::max<std::size_t>(capacity, 1)), max_samples_(max_samples), interval_(interval), rng_(seed) {
    // The ring and the set grow as hashes arrive (up to capacity_): a large capacity costs
    // only what was stored.
    current_.reserve(max_samples_);
}

void sample_store::add(const id20& info_hash) {
    if (set_.contains(info_hash)) return;
    if (ring_.size() < capacity_) {
        ring_.push_back(info_hash);
    } else {
        set_.erase(ring_[ring_head_]);
        ring_[ring_head_] = info_hash;
        ring_head_ = (ring_head_ + 1) % capacity_;
        ++evicted_;
    }
    set_.insert(info_hash);
    // While the published sample is not full, new hashes should show up at once rather than
    // after a whole interval.
    if (current_.size() < max_samples_) dirty_ = true;
}

void sample_store::redraw() {
    current_.clear();
    const std::size_t n = ring_.size();
    const std::size_t k = std::min(max_samples_, n);
    // k distinct picks by rejection: cheap because k is at most max_samples (20), and when
    // the store holds fewer than that, k == n is small too.
    std::vector<std::size_t> picks;
    picks.reserve(k);
    std::unordered_set<std::size_t> used;
    while (picks.size() < k) {
        const std::size_t i = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
        if (used.insert(i).second) picks.push_back(i);
    }
    for (auto i : picks) current_.push_back(ring_[i]);
}

std::span<const id20> sample_store::samples(clock::time_point now) {
    if (dirty_ || now - drawn_at_ >= interval_) {
        redraw();
        drawn_at_ = now;
        dirty_ = false;
    }
    return current_;
}

} // namespace dhtc::dht
