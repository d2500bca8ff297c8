#include "testnet/catalog.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/torrent_info.hpp"
#include "metadata/torrent_json.hpp"
#include "util/hashing.hpp"
#include "testnet/torrent_gen.hpp"

namespace dhtc::testnet {

catalog::catalog(std::uint64_t seed, std::size_t count) : seed_(seed) {
    torrents_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        const std::string info = make_info_dict(seed, i);
        metadata::torrent_info parsed;
        // Parse with a placeholder key first: whether it is v1, v2 or hybrid decides the key.
        if (const auto r = metadata::parse_info(info, id20{}, parsed); !r)
            throw std::runtime_error("generated torrent " + std::to_string(i) + " rejected by the parser: " +
                                     std::string(metadata::to_string(r.code)) + " (" + std::string(r.reason) + ")");
        auto& t = torrents_[i];
        if (parsed.has_v1()) t.keys.push_back(metadata::to_id20(parsed.sha1));
        if (parsed.has_v2()) t.keys.push_back(metadata::truncate_to_id20(parsed.sha256));
        parsed.info_hash = t.keys.front();
        t.info_size = info.size();
        t.truth = metadata::to_json_line(parsed);
        for (const auto& k : t.keys) by_key_.emplace_back(k, static_cast<std::uint32_t>(i));
    }
    std::sort(by_key_.begin(), by_key_.end());
}

std::optional<std::size_t> catalog::find(const id20& key) const {
    const auto it = std::lower_bound(by_key_.begin(), by_key_.end(), std::make_pair(key, std::uint32_t{0}));
    if (it == by_key_.end() || it->first != key) return std::nullopt;
    return it->second;
}

std::string catalog::info_dict(std::size_t i) const { return make_info_dict(seed_, i); }

void catalog::add_holder(const id20& key, std::uint32_t node) {
    const auto i = find(key);
    if (!i) return;
    auto& holders = torrents_[*i].holders;
    // A hybrid's two keys at one node: one holder.
    if (holders.empty() || holders.back() != node) holders.push_back(node);
}

void catalog::piece_served(std::size_t i, std::uint32_t requester_ip, std::size_t piece, std::size_t pieces) {
    auto& t = torrents_[i];
    if (t.first_served_at || piece >= pieces) return;
    const std::uint64_t key = std::uint64_t{i} << 32 | requester_ip;
    auto it = partial_.find(key);
    if (it == partial_.end()) {
        // Past the cap, forgetting all partial transfers only delays a first_served_at.
        if (partial_.size() >= max_partial) partial_.clear();
        it = partial_.emplace(key, std::vector<bool>(pieces, false)).first;
    }
    auto& had = it->second;
    had[piece] = true;
    if (std::find(had.begin(), had.end(), false) != had.end()) return;
    t.first_served_at = std::chrono::system_clock::now();
    ++served_;
    // Other requesters' partial transfers of this torrent no longer matter; they are
    // dropped lazily with the cap.
    partial_.erase(it);
}

} // namespace dhtc::testnet
