// BEP-33's bloom filter of a swarm's IP addresses (k = 2 bits per address, m = 2048 bits in
// 256 bytes; the bits an address sets come from SHA-1 of its 4 or 16 raw bytes), and the
// BEP's estimate of how many addresses a filter holds. A DHT scrape ORs the BFsd (seeds) and
// BFpe (peers) filters of every node that answers, then estimates each union.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/address.hpp"

namespace dhtc::krpc {

class scrape_bloom {
public:
    static constexpr std::size_t size = 256;      ///< bytes on the wire
    static constexpr std::size_t bits = size * 8; ///< m
    /// Beyond about this many addresses the filter saturates and the estimate means little
    /// (the BEP: nodes keep max(seeds, peers) below 6000).
    static constexpr std::size_t saturation = 8000;

    void insert(const ip_address& ip) noexcept;
    bool contains(const ip_address& ip) const noexcept;
    /// ORs a filter as sent (`BFsd`/`BFpe`); false (and nothing merged) unless it is exactly
    /// `size` bytes.
    bool merge(std::string_view wire) noexcept;
    void merge(const scrape_bloom& other) noexcept;

    /// The BEP's estimate: log(c / m) / (k * log(1 - 1/m)) with c the zero bits (at least
    /// 1, at most m - 1); 0 for an empty filter.
    double estimate() const noexcept;
    bool empty() const noexcept;
    std::string_view wire() const noexcept {
        return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
    }

private:
    std::array<std::uint8_t, size> bytes_{};
};

} // namespace dhtc::krpc
