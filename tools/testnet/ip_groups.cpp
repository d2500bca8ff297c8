#include "testnet/ip_groups.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "testnet/rng.hpp"

namespace dhtc::testnet {

bool ip_group_options::parse_sizes(std::string_view text) {
    const auto dash = text.find('-');
    if (dash == std::string_view::npos) return false;
    std::size_t lo = 0, hi = 0;
    const auto a = text.substr(0, dash), b = text.substr(dash + 1);
    const auto [pa, ea] = std::from_chars(a.data(), a.data() + a.size(), lo);
    const auto [pb, eb] = std::from_chars(b.data(), b.data() + b.size(), hi);
    if (ea != std::errc{} || eb != std::errc{} || pa != a.data() + a.size() || pb != b.data() + b.size()) return false;
    if (lo < 2 || hi < lo || hi > max_group_size) return false;
    min_size = lo;
    max_size = hi;
    return true;
}

ip_groups::ip_groups(std::size_t nodes, const ip_group_options& o)
    : address_(nodes, 0), slot_(nodes, 0), shared_(nodes, false) {
    constexpr std::uint32_t alone = ~std::uint32_t{0};
    std::vector<std::uint32_t> group_of(nodes, alone);
    // Its own random stream, so the other draws from --seed do not move.
    rng r(o.seed, 0x5a4ed1b);
    std::vector<std::uint32_t> candidates;
    for (std::size_t i = 1; i < nodes; ++i) candidates.push_back(static_cast<std::uint32_t>(i));
    for (std::size_t i = candidates.size(); i > 1; --i) std::swap(candidates[i - 1], candidates[r.below(i)]);
    const auto wanted = std::min(candidates.size(), static_cast<std::size_t>(std::llround(o.share * static_cast<double>(nodes))));
    std::size_t taken = 0;
    std::vector<std::size_t> sizes;
    while (wanted - taken >= o.min_size) {
        const std::size_t left = wanted - taken;
        std::size_t size = std::min<std::size_t>(r.between(o.min_size, o.max_size), left);
        // Too few left for another group: this one takes them when it may.
        if (left - size < o.min_size && left <= o.max_size) size = left;
        for (std::size_t k = 0; k < size; ++k) group_of[candidates[taken + k]] = static_cast<std::uint32_t>(sizes.size());
        sizes.push_back(size);
        taken += size;
    }
    groups_ = sizes.size();
    shared_nodes_ = taken;

    // Addresses in node order; a group's address when its first member comes.
    std::vector<std::uint32_t> group_address(groups_, alone);
    std::vector<std::uint8_t> group_used(groups_, 0);
    std::uint32_t next = 0;
    for (std::size_t i = 0; i < nodes; ++i) {
        const auto g = group_of[i];
        if (g == alone) {
            address_[i] = next++;
            continue;
        }
        if (group_address[g] == alone) group_address[g] = next++;
        address_[i] = group_address[g];
        slot_[i] = group_used[g]++;
        shared_[i] = true;
        port_slots_ = std::max<std::size_t>(port_slots_, group_used[g]);
    }
    addresses_ = next;
}

} // namespace dhtc::testnet
