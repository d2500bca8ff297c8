// get_peers / announce_peer write tokens. A token proves the announcer recently asked us
// from the same IP. It is bound to the IP only (as BEP-5 says, unlike libtorrent, which
// also mixes in the info hash), so no valid announce is ever refused for that reason.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/siphash.hpp"

namespace dhtc::dht {

class token_manager {
public:
    static constexpr std::size_t token_size = 8;
    static constexpr std::chrono::minutes rotation{5};
    using token = std::array<char, token_size>;

    /// `seed` must come from a proper random source; it keys the first two secrets.
    token_manager(const clock& c, std::uint64_t seed) noexcept;

    /// The token to hand to `ip` now. Rotates the secret when it is due.
    token make(const ip_address& ip) noexcept;
    /// True when `t` was made for `ip` under the current or the previous secret.
    bool check(const ip_address& ip, std::string_view t) noexcept;

private:
    void rotate_if_due() noexcept;
    static token make_with(const siphash_key& secret, const ip_address& ip) noexcept;
    siphash_key next_secret() noexcept;

    const clock& clock_;
    std::uint64_t rng_state_;
    siphash_key current_{};
    siphash_key previous_{};
    clock::time_point rotated_at_;
};

} // namespace dhtc::dht
