#include "metadata/lease_table.hpp"

#include <algorithm>

namespace dhtc::metadata {

namespace {
// Far above any real info dict (the spec caps them at 10 MiB); keeps the piece count in 32
// bits and the state array small whatever a caller passes.
constexpr std::size_t size_ceiling = std::size_t{256} * 1024 * 1024;
} // namespace

lease_table::lease_table(std::size_t max_metadata_size)
    : max_size_(std::min(max_metadata_size, size_ceiling)),
      state_((max_size_ + piece_size - 1) / piece_size, st_pending) {}

bool lease_table::reset(std::size_t metadata_size) {
    if (metadata_size == 0 || metadata_size > max_size_) {
        size_ = count_ = 0;
        leased_ = received_ = first_pending_ = 0;
        return false;
    }
    size_ = metadata_size;
    count_ = (metadata_size + piece_size - 1) / piece_size;
    reset_all();
    return true;
}

void lease_table::reset_all() noexcept {
    std::fill(state_.begin(), state_.begin() + static_cast<std::ptrdiff_t>(count_), st_pending);
    leased_ = received_ = first_pending_ = 0;
}

std::optional<std::uint32_t> lease_table::acquire(owner_id owner) {
    if (owner > max_owner) {
        ++refused_;
        return std::nullopt;
    }
    for (std::size_t i = first_pending_; i < count_; ++i) {
        if (state_[i] != st_pending) continue;
        state_[i] = owner;
        ++leased_;
        first_pending_ = i + 1;
        return static_cast<std::uint32_t>(i);
    }
    first_pending_ = count_;
    return std::nullopt;
}

lease_complete_result lease_table::complete(std::uint32_t piece, owner_id owner) {
    lease_complete_result r;
    if (piece >= count_ || owner > max_owner) r = lease_complete_result::out_of_range;
    else if (state_[piece] == st_received) r = lease_complete_result::already_received;
    else if (state_[piece] == st_pending) r = lease_complete_result::not_leased;
    else if (state_[piece] != owner) r = lease_complete_result::not_holder;
    else {
        state_[piece] = st_received;
        --leased_;
        ++received_;
        return lease_complete_result::completed;
    }
    ++refused_;
    return r;
}

std::size_t lease_table::release(owner_id owner) {
    if (owner > max_owner || leased_ == 0) return 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < count_; ++i) {
        if (state_[i] != owner) continue;
        state_[i] = st_pending;
        first_pending_ = std::min(first_pending_, i);
        ++n;
    }
    leased_ -= n;
    released_ += n;
    return n;
}

std::optional<lease_table::owner_id> lease_table::holder(std::uint32_t piece) const noexcept {
    if (piece >= count_ || state_[piece] == st_pending || state_[piece] == st_received) return std::nullopt;
    return state_[piece];
}

bool lease_table::is_received(std::uint32_t piece) const noexcept {
    return piece < count_ && state_[piece] == st_received;
}

std::size_t lease_table::piece_length(std::uint32_t piece) const noexcept {
    if (piece >= count_) return 0;
    return piece + 1 < count_ ? piece_size : size_ - piece_size * (count_ - 1);
}

std::string_view to_string(lease_complete_result r) noexcept {
    switch (r) {
    case lease_complete_result::completed: return "completed";
    case lease_complete_result::not_holder: return "not_holder";
    case lease_complete_result::not_leased: return "not_leased";
    case lease_complete_result::already_received: return "already_received";
    case lease_complete_result::out_of_range: return "out_of_range";
    }
    return "unknown";
}

} // namespace dhtc::metadata
