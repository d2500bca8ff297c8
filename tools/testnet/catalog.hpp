// The torrents of the test network: for each one its DHT keys, the JSON form the core's
// parser gives its info dict (exactly what a correct crawler must deliver), the seeders
// holding it and when its metadata was first served in full.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/id20.hpp"

namespace dhtc::testnet {

struct torrent {
    std::vector<id20> keys;   ///< announce keys: SHA-1 (v1), truncated SHA-256 (v2), both (hybrid, v1 first)
    std::size_t info_size = 0;
    /// The parser's JSON form (info_hash = keys[0]) as one compact JSON object. Kept as
    /// text: at 10,000 torrents a JSON tree costs ten times the memory.
    std::string truth;
    std::vector<std::uint32_t> seeders; ///< seeder indices
    /// Node indices whose peer store held one of its keys when every torrent had been
    /// announced once (record_holders), in node order.
    std::vector<std::uint32_t> holders;
    std::optional<std::chrono::system_clock::time_point> first_served_at;
};

class catalog {
public:
    /// Generates and parses `count` torrents from `seed`. Throws std::runtime_error if the
    /// core parser rejects a generated info dict (a generator bug).
    catalog(std::uint64_t seed, std::size_t count);

    std::uint64_t seed() const noexcept { return seed_; }
    std::size_t size() const noexcept { return torrents_.size(); }
    torrent& at(std::size_t i) { return torrents_[i]; }
    const torrent& at(std::size_t i) const { return torrents_[i]; }
    /// The torrent announced under `key`, if any.
    std::optional<std::size_t> find(const id20& key) const;
    /// Regenerates torrent i's info dict (the generator is deterministic).
    std::string info_dict(std::size_t i) const;

    /// A well-behaved seeder served `piece` (of `pieces`) of torrent i to `requester_ip`.
    /// first_served_at is set once one requester has had every piece, from one connection
    /// or several (a fetcher may spread the pieces over seeders).
    void piece_served(std::size_t i, std::uint32_t requester_ip, std::size_t piece, std::size_t pieces);

    /// Node `node` stores `key`: it becomes a holder of the torrent announced under it.
    /// Call node by node, in node order.
    void add_holder(const id20& key, std::uint32_t node);
    /// Every node's store was read into `holders` (the truth file then lists them).
    void holders_recorded() noexcept { holders_recorded_ = true; }
    bool has_holders() const noexcept { return holders_recorded_; }
    std::size_t served_count() const noexcept { return served_; }

private:
    static constexpr std::size_t max_partial = 65536;
    std::uint64_t seed_;
    std::vector<torrent> torrents_;
    std::vector<std::pair<id20, std::uint32_t>> by_key_; // sorted
    std::unordered_map<std::uint64_t, std::vector<bool>> partial_; // (torrent, requester) -> pieces had
    std::size_t served_ = 0;
    bool holders_recorded_ = false;
};

} // namespace dhtc::testnet
