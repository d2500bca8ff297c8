#include "crawl/sampled_nodes.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "model/address_hash.hpp"
#include "net/address_policy.hpp"
#include "util/slot_index.hpp"

namespace dhtc::crawl {

namespace {

std::size_t generation_bits(std::size_t want) {
    return std::bit_floor(std::max<std::size_t>(want, std::size_t{1} << 10));
}

// The i-th bit of a node, by double hashing from one 64-bit hash (Kirsch & Mitzenmacher).
std::uint64_t bit_of(std::uint64_t h, int i, std::uint64_t mask) noexcept {
    return ((h & 0xffffffffu) + static_cast<std::uint64_t>(i) * ((h >> 32) | 1)) & mask;
}

} // namespace

sampled_nodes::sampled_nodes(sampled_nodes_options o)
    : period_(std::max(o.period, std::chrono::seconds{1})), mask_(generation_bits(o.bits) - 1),
      key_(detail::hash_key_from_seed(o.hash_seed)), words_(generation_bits(o.bits) / 64), current_(zeroed(words_)),
      previous_(zeroed(words_)) {}

sampled_nodes::generation sampled_nodes::zeroed(std::size_t words) {
    auto* p = static_cast<std::uint64_t*>(std::calloc(words, sizeof(std::uint64_t)));
    if (!p) throw std::bad_alloc();
    return generation(p);
}

void sampled_nodes::rotate(time_point now) {
    if (!started_) {
        started_ = true;
        current_since_ = now;
        return;
    }
    if (now - current_since_ < period_) return;
    if (now - current_since_ >= 2 * period_) {
        std::memset(previous_.get(), 0, words_ * sizeof(std::uint64_t)); // both generations are past
    } else {
        previous_.swap(current_);
    }
    std::memset(current_.get(), 0, words_ * sizeof(std::uint64_t));
    current_since_ = now;
}

void sampled_nodes::insert(const endpoint& ep, time_point now) {
    rotate(now);
    const endpoint c = canonical(ep);
    const std::uint64_t h = detail::hash_endpoint(key_, c.address, c.port);
    for (int i = 0; i < bits_per_node; ++i) {
        const std::uint64_t b = bit_of(h, i, mask_);
        current_[b / 64] |= std::uint64_t{1} << (b % 64);
    }
    ++inserted_;
}

bool sampled_nodes::in(const generation& gen, std::uint64_t h) const noexcept {
    for (int i = 0; i < bits_per_node; ++i) {
        const std::uint64_t b = bit_of(h, i, mask_);
        if (!(gen[b / 64] & (std::uint64_t{1} << (b % 64)))) return false;
    }
    return true;
}

bool sampled_nodes::contains(const endpoint& ep, time_point now) const {
    if (!started_) return false;
    const auto age = now - current_since_;
    if (age >= 2 * period_) return false; // insert() would drop both generations
    const endpoint c = canonical(ep);
    const std::uint64_t h = detail::hash_endpoint(key_, c.address, c.port);
    // Past one period the current generation is about to become the previous one and the
    // previous one to be dropped: only the current still counts.
    if (age >= period_) return in(current_, h);
    return in(current_, h) || in(previous_, h);
}

} // namespace dhtc::crawl
