// A small, fast, platform-independent random source (SplitMix64), so that everything the
// test network generates from --seed is the same on every machine and standard library.
#pragma once

#include <cstdint>

namespace dhtc::testnet {

class rng {
public:
    using result_type = std::uint64_t;
    explicit rng(std::uint64_t seed) noexcept : state_(seed) {}
    /// Two values mixed into one seed: independent streams per (seed, purpose, index).
    rng(std::uint64_t seed, std::uint64_t stream) noexcept : state_(seed ^ (stream * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL)) {
        (*this)();
    }

    static constexpr result_type min() noexcept { return 0; }
    static constexpr result_type max() noexcept { return ~result_type{0}; }

    result_type operator()() noexcept {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    /// Uniform in [0, n); n > 0. The tiny modulo bias does not matter here.
    std::uint64_t below(std::uint64_t n) noexcept { return (*this)() % n; }
    /// Uniform in [lo, hi].
    std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept { return lo + below(hi - lo + 1); }
    /// True with probability p.
    bool chance(double p) noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53 < p; }

private:
    std::uint64_t state_;
};

} // namespace dhtc::testnet
