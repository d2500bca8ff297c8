#include "dht/token_manager.hpp"

#include <cstring>

namespace dhtc::dht {

namespace {
// splitmix64: derives a stream of well-mixed secrets from one seed.
std::uint64_t splitmix64(std::uint64_t& s) noexcept {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
} // namespace

token_manager::token_manager(const clock& c, std::uint64_t seed) noexcept
    : clock_(c), rng_state_(seed), rotated_at_(c.now()) {
    previous_ = next_secret();
    current_ = next_secret();
}

siphash_key token_manager::next_secret() noexcept { return {splitmix64(rng_state_), splitmix64(rng_state_)}; }

void token_manager::rotate_if_due() noexcept {
    const auto now = clock_.now();
    if (now - rotated_at_ < rotation) return;
    // After a long silence both secrets are stale: rotate twice so old tokens die.
    const bool long_gap = now - rotated_at_ >= 2 * rotation;
    previous_ = long_gap ? next_secret() : current_;
    current_ = next_secret();
    rotated_at_ = now;
}

token_manager::token token_manager::make_with(const siphash_key& secret, const ip_address& ip) noexcept {
    const std::uint64_t h = siphash24(secret, ip.bytes());
    token t;
    std::memcpy(t.data(), &h, token_size);
    return t;
}

token_manager::token token_manager::make(const ip_address& ip) noexcept {
    rotate_if_due();
    return make_with(current_, ip);
}

bool token_manager::check(const ip_address& ip, std::string_view t) noexcept {
    rotate_if_due();
    if (t.size() != token_size) return false;
    const auto matches = [&](const siphash_key& secret) {
        const token expected = make_with(secret, ip);
        return std::memcmp(expected.data(), t.data(), token_size) == 0;
    };
    return matches(current_) || matches(previous_);
}

} // namespace dhtc::dht
