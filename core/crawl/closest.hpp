// The candidate list of an iterative lookup (get_peers for sampled hashes, BEP-33 scrapes):
// at most Width entries, closest to the target first.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "dht/node_id.hpp"
#include "krpc/compact.hpp"

namespace dhtc::crawl {

/// Inserts `fresh` (a candidate whose `node` is not listed yet) into the sorted `c[0..n)`.
/// A full list drops its farthest entry for a closer one, unless that entry has a query in
/// flight (`in_flight(candidate)`: its reply must still find it); a node farther than all of
/// a full list is not worth a query and is not inserted.
template <class Candidate, std::size_t Width, class InFlight>
void insert_closest(const id20& target, std::array<Candidate, Width>& c, std::uint8_t& n, const Candidate& fresh,
                    InFlight in_flight) {
    if (n == Width) {
        if (!dht::closer_to(target, fresh.node.id, c[Width - 1].node.id)) return;
        if (in_flight(c[Width - 1])) return;
        --n;
    }
    std::size_t pos = n;
    while (pos > 0 && dht::closer_to(target, fresh.node.id, c[pos - 1].node.id)) {
        c[pos] = c[pos - 1];
        --pos;
    }
    c[pos] = fresh;
    ++n;
}

} // namespace dhtc::crawl
