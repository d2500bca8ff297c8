// The info hashes announced to us, kept for BEP-51 sample_infohashes answers. Only real
// announces enter (never get_peers noise or bootstrap lookups), so what we sample is what
// the DHT stored with us.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::dht {

class sample_store {
public:
    /// `capacity` hashes at most (oldest evicted first); answers carry up to `max_samples`
    /// hashes, a random subset redrawn every `interval` (the `interval` we advertise).
    sample_store(std::size_t capacity, std::size_t max_samples, std::chrono::seconds interval, std::uint64_t seed);

    /// Records an announced hash; a repeat is ignored.
    void add(const id20& info_hash);

    /// The hashes to put in an answer's `samples` at `now`.
    std::span<const id20> samples(clock::time_point now);
    /// How many hashes are stored (the answer's `num`).
    std::size_t size() const noexcept { return set_.size(); }
    std::chrono::seconds interval() const noexcept { return interval_; }
    std::uint64_t evicted() const noexcept { return evicted_; }

private:
    void redraw();

    std::size_t capacity_;
    std::size_t max_samples_;
    std::chrono::seconds interval_;
    std::vector<id20> ring_; // insertion order, for eviction
    std::size_t ring_head_ = 0;
    std::unordered_set<id20, id20_hash> set_;
    std::vector<id20> current_;
    clock::time_point drawn_at_{};
    bool dirty_ = true; // the current draw predates hashes that arrived while it was short
    std::mt19937_64 rng_;
    std::uint64_t evicted_ = 0;
};

} // namespace dhtc::dht
