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

shared_pieces::~shared_pieces() {
    if (budget_ != nullptr && charged_ != 0) budget_->release(charged_);
}

std::optional<std::uint32_t> shared_pieces::acquire(std::uint32_t session) {
    if (session >= max_sessions || size_ == 0) return std::nullopt;
    if (budget_ == nullptr) return leases_.acquire(static_cast<lease_table::owner_id>(session));
    if (leases_.pending() == 0) return std::nullopt;
    // Charge a whole piece first (the last may be shorter: the rest goes back at once).
    if (!budget_->try_charge(wire::metadata_piece_size)) {
        starved_ = true; // the session polls again after idle_poll_interval
        return std::nullopt;
    }
    const auto piece = leases_.acquire(static_cast<lease_table::owner_id>(session));
    const std::size_t len = piece ? leases_.piece_length(*piece) : 0;
    budget_->release(wire::metadata_piece_size - len);
    charged_ += len;
    return piece;
}

bool shared_pieces::deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) {
    if (session >= max_sessions) return false;
    const auto owner = static_cast<lease_table::owner_id>(session);
    // The bytes go in first: a piece the buffer could not keep stays leased (and is
    // released with the session) rather than counted received without its bytes.
    if (leases_.holder(piece) != owner) {
        (void)leases_.complete(piece, owner); // counts the refusal
        return false;
    }
    if (buffer_.store(piece, data) != wire::wire_error::none) return false;
    if (leases_.complete(piece, owner) != lease_complete_result::completed) return false;
    contributed_ |= std::uint32_t{1} << session;
    return true;
}

void shared_pieces::release(std::uint32_t session) {
    if (session >= max_sessions) return;
    const auto owner = static_cast<lease_table::owner_id>(session);
    if (budget_ != nullptr && leases_.leased() != 0) {
        std::size_t back = 0;
        for (std::uint32_t i = 0; i < leases_.piece_count(); ++i)
            if (leases_.holder(i) == owner) back += leases_.piece_length(i);
        budget_->release(back);
        charged_ -= back;
    }
    leases_.release(owner);
}

unsigned shared_pieces::contributors() const noexcept { return static_cast<unsigned>(std::popcount(contributed_)); }

std::optional<std::uint32_t> shared_pieces::sole_contributor() const noexcept {
    if (contributors() != 1) return std::nullopt;
    return static_cast<std::uint32_t>(std::countr_zero(contributed_));
}

void shared_pieces::restart() {
    if (budget_ != nullptr && charged_ != 0) budget_->release(charged_);
    charged_ = 0;
    leases_.reset_all();
    buffer_.reset(size_, max_size_);
    contributed_ = 0;
}

} // namespace dhtc::metadata
