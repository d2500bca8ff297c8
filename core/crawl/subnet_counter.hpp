// In-flight queries per subnet. A crawler that fires its whole in-flight budget at one /24
// (a node list full of one operator's addresses, or a reflection attempt naming a victim's
// network) looks like an attack to that network and wastes the budget; capping each /24
// (/64 for IPv6) spreads the probes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/slot_index.hpp"
#include "model/address.hpp"
#include "net/address_policy.hpp"

namespace dhtc::crawl {

struct subnet_counter_options {
    std::size_t per_subnet_max = 8; ///< crawl.rate_limit.max_in_flight_per_subnet; at least 1
    std::size_t total_max = 512;    ///< crawl.rate_limit.max_in_flight; 1..2^24-1
    std::uint64_t hash_seed = 0;    ///< 0: random (tests pass a fixed one)
};

/// Outcome of subnet_counter::try_acquire().
enum class subnet_acquire : std::uint8_t {
    ok,
    subnet_full, ///< the subnet already has per_subnet_max in flight
    total_full,  ///< total_max in flight overall
};

/// Counts in flight per subnet_key with both caps enforced. The table holds at most
/// total_max subnets (each counted one holds at least one request), so it is bounded by
/// construction; a subnet whose count drops to 0 leaves it.
///
/// Thread rules: single owner. No allocation after construction.
class subnet_counter {
public:
    explicit subnet_counter(subnet_counter_options options = {});

    /// Counts one more request to `a`'s subnet if both caps allow.
    subnet_acquire try_acquire(const ip_address& a);
    subnet_acquire try_acquire(const endpoint& ep) { return try_acquire(ep.address); }
    /// Gives back one request of `a`'s subnet. False (and counted) when none was held: a
    /// caller bug, so it never underflows.
    bool release(const ip_address& a);
    bool release(const endpoint& ep) { return release(ep.address); }

    /// Requests in flight to `a`'s subnet.
    std::size_t in_flight(const ip_address& a) const;
    std::size_t in_flight() const noexcept { return total_; }
    /// Subnets with at least one request in flight.
    std::size_t subnets() const noexcept { return index_.size(); }
    std::size_t per_subnet_max() const noexcept { return per_subnet_max_; }
    std::size_t total_max() const noexcept { return total_max_; }

    std::uint64_t refused_subnet() const noexcept { return refused_subnet_; }
    std::uint64_t refused_total() const noexcept { return refused_total_; }
    std::uint64_t unmatched_releases() const noexcept { return unmatched_releases_; }

private:
    struct slot {
        subnet_key key;
        std::uint32_t count = 0;
    };

    std::uint64_t hash_of(subnet_key k) const noexcept;
    std::uint32_t find(subnet_key k, std::uint64_t h) const;

    std::size_t per_subnet_max_;
    std::size_t total_max_;
    siphash_key key_;
    std::unique_ptr<slot[]> slots_;
    std::unique_ptr<std::uint32_t[]> free_; // stack of unused slot numbers
    std::size_t free_count_ = 0;
    detail::slot_index index_;
    std::size_t total_ = 0;
    std::uint64_t refused_subnet_ = 0;
    std::uint64_t refused_total_ = 0;
    std::uint64_t unmatched_releases_ = 0;
};

} // namespace dhtc::crawl
