// Which nodes share an IP address: on the real internet several DHT nodes sit behind one
// address (carrier-grade NAT, a seedbox, an office NAT, one machine running several
// clients), each on its own UDP port with its own id, table, peer store, tokens and
// blocker, like separate libtorrent sessions. A share of the nodes is put into groups of
// a few nodes each; every group has one address and its members use port slots 0, 1, ...
// (slot 0 is the main port). Every other host has an address of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dhtc::testnet {

struct ip_group_options {
    double share = 0;             ///< share of the nodes placed in groups (node 0 never is)
    std::size_t min_size = 2;
    std::size_t max_size = 16;
    std::uint64_t seed = 1;
    /// Parses "MIN-MAX" (2 <= MIN <= MAX <= max_group_size) into min_size, max_size.
    bool parse_sizes(std::string_view text);
};

/// The most nodes one address may hold: the test network opens a UDP socket per port slot.
inline constexpr std::size_t max_group_size = 64;

class ip_groups {
public:
    /// Places `nodes` nodes: the grouped ones are drawn at random (node 0, the bootstrap,
    /// stays alone) and split into groups of min_size..max_size (uniform); fewer than
    /// min_size left over stay alone, so the share is rounded down to whole groups. Node i
    /// uses the address with index address_of(i); the grouped nodes' addresses are given
    /// in node order, so with share 0 node i has address i.
    ip_groups(std::size_t nodes, const ip_group_options& o);

    std::size_t address_of(std::size_t node) const noexcept { return address_[node]; }
    /// 0 for the main port; a group's members use 0, 1, ... in node order.
    std::size_t port_slot(std::size_t node) const noexcept { return slot_[node]; }
    bool shared(std::size_t node) const noexcept { return shared_[node]; }
    /// Distinct addresses the nodes use (the first one free for other hosts).
    std::size_t addresses() const noexcept { return addresses_; }
    /// Port slots in use: the largest group's size, 1 without groups.
    std::size_t port_slots() const noexcept { return port_slots_; }
    std::size_t groups() const noexcept { return groups_; }
    std::size_t shared_nodes() const noexcept { return shared_nodes_; }

private:
    std::vector<std::uint32_t> address_;
    std::vector<std::uint8_t> slot_;
    std::vector<bool> shared_;
    std::size_t addresses_ = 0;
    std::size_t port_slots_ = 1;
    std::size_t groups_ = 0;
    std::size_t shared_nodes_ = 0;
};

} // namespace dhtc::testnet
