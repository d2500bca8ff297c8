// Nodes we sampled (BEP-51) whose next turn is hours away. A libtorrent node asks for
// 21,600 s between samples; keeping each such node in the sample schedule for six hours
// filled it (16,384 entries) within minutes of a crawl, after which no new node was sampled
// at all (the 100,000-node discovery run plateaued at 17% of the network sampled). Those
// nodes are remembered here instead, in two generations of a Bloom filter, a few bits each,
// and sampled again only when met again after the filter forgot them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/siphash.hpp"

namespace dhtc::crawl {

struct sampled_nodes_options {
    /// How long a generation lasts: a node inserted is remembered at least this long and
    /// less than twice it. BEP-51's largest interval, so every interval is honoured.
    std::chrono::seconds period{21'600};
    /// Bits per generation (rounded down to a power of two, at least 2^10). Four bits per
    /// node: about 8 bits per node sampled within a period keeps false positives near 2%.
    std::size_t bits = std::size_t{1} << 23;
    std::uint64_t hash_seed = 0; ///< 0: random (tests pass a fixed one)
};

/// A false positive only ever makes us skip a node we could have sampled, never sample one
/// early. Thread rules: single owner. No allocation after construction; the bits come from
/// calloc, so a crawler that samples little does not pay their resident memory.
class sampled_nodes {
public:
    explicit sampled_nodes(sampled_nodes_options options = {});

    /// Remembers `ep` (canonical form) as sampled at `now`.
    void insert(const endpoint& ep, time_point now);
    /// True when `ep` was inserted less than one period before `now` (always), or less than
    /// two (until its generation is dropped), or on a false positive.
    bool contains(const endpoint& ep, time_point now) const;

    std::uint64_t inserted() const noexcept { return inserted_; }
    std::size_t memory_bytes() const noexcept { return 2 * words_ * sizeof(std::uint64_t); }

private:
    static constexpr int bits_per_node = 4;
    void rotate(time_point now);
    struct free_words {
        void operator()(std::uint64_t* p) const noexcept { std::free(p); }
    };
    using generation = std::unique_ptr<std::uint64_t[], free_words>;
    static generation zeroed(std::size_t words);
    bool in(const generation& gen, std::uint64_t h) const noexcept;

    std::chrono::seconds period_;
    std::uint64_t mask_;
    siphash_key key_;
    std::size_t words_;
    generation current_, previous_;
    time_point current_since_{};
    bool started_ = false;
    std::uint64_t inserted_ = 0;
};

} // namespace dhtc::crawl
