#include "metadata/shared_pieces.hpp"

#include <bit>

namespace dhtc::metadata {

bool shared_pieces::on_metadata_size(std::size_t size) {
    if (size_ != 0) return size == size_; // the first peer to tell sets it; others must agree
    if (size == 0 || size > max_size_ || !leases_.reset(size)) return false;
    if (buffer_.reset(size, max_size_) != wire::wire_error::none) return false;
    size_ = size;
    return true;
}

std::optional<std::uint32_t> shared_pieces::acquire(std::uint32_t session) {
    if (session >= max_sessions || size_ == 0) return std::nullopt;
    return leases_.acquire(static_cast<lease_table::owner_id>(session));
}

bool shared_pieces::deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) {
    if (session >= max_sessions) return false;
    if (leases_.complete(piece, static_cast<lease_table::owner_id>(session)) != lease_complete_result::completed)
        return false;
    if (buffer_.store(piece, data) != wire::wire_error::none) return false;
    contributed_ |= std::uint32_t{1} << session;
    return true;
}

void shared_pieces::release(std::uint32_t session) {
    if (session < max_sessions) leases_.release(static_cast<lease_table::owner_id>(session));
}

unsigned shared_pieces::contributors() const noexcept { return static_cast<unsigned>(std::popcount(contributed_)); }

std::optional<std::uint32_t> shared_pieces::sole_contributor() const noexcept {
    if (contributors() != 1) return std::nullopt;
    return static_cast<std::uint32_t>(std::countr_zero(contributed_));
}

void shared_pieces::restart() {
    leases_.reset_all();
    buffer_.reset(size_, max_size_);
    contributed_ = 0;
}

} // namespace dhtc::metadata
