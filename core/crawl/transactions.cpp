#include "crawl/transactions.hpp"

#include <algorithm>

namespace dhtc::crawl {

transaction_table::transaction_table(std::size_t capacity, std::uint64_t seed)
    : slots_(std::clamp<std::size_t>(capacity, 1, 65535)), rng_(static_cast<std::uint32_t>(seed ^ (seed >> 32))) {
    free_.reserve(slots_.size());
    for (std::size_t i = slots_.size(); i-- > 0;) free_.push_back(static_cast<std::uint16_t>(i));
}

std::optional<transaction_table::id> transaction_table::open(const pending_query& q) {
    if (free_.empty()) return std::nullopt;
    const std::uint16_t index = free_.back();
    free_.pop_back();
    slot& s = slots_[index];
    s.q = q;
    s.nonce = static_cast<std::uint16_t>(rng_());
    s.live = true;
    ++live_;
    order_.push_back({index, s.nonce});
    return id{static_cast<char>(index >> 8), static_cast<char>(index & 0xff), static_cast<char>(s.nonce >> 8),
              static_cast<char>(s.nonce & 0xff)};
}

std::optional<pending_query> transaction_table::close(std::string_view t, const endpoint& from) {
    if (t.size() != id_size) {
        ++rejected_;
        return std::nullopt;
    }
    const auto byte = [&](std::size_t i) { return static_cast<std::uint16_t>(static_cast<unsigned char>(t[i])); };
    const std::uint16_t index = static_cast<std::uint16_t>(byte(0) << 8 | byte(1));
    const std::uint16_t nonce = static_cast<std::uint16_t>(byte(2) << 8 | byte(3));
    if (index >= slots_.size()) {
        ++rejected_;
        return std::nullopt;
    }
    slot& s = slots_[index];
    // The reply must come from the address and port we asked (protocol.md d.9).
    if (!s.live || s.nonce != nonce || s.q.to != from) {
        ++rejected_;
        return std::nullopt;
    }
    s.live = false;
    --live_;
    free_.push_back(index);
    return s.q;
}

} // namespace dhtc::crawl
