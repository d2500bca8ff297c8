// Which pieces of one info dict are still needed, which peer is fetching each, and which have
// arrived. One table per metadata fetch job; its peers lease pieces so that no piece is ever
// requested from two peers at once, and a failed peer's pieces go back to the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dhtc::metadata {

/// What complete() did.
enum class lease_complete_result : std::uint8_t {
    completed,        ///< the piece is now received
    not_holder,       ///< refused: the piece is leased to another owner
    not_leased,       ///< refused: the piece is pending (its lease was released or never taken)
    already_received, ///< refused: the piece arrived before
    out_of_range,     ///< refused: no such piece (or an invalid owner id)
};
std::string_view to_string(lease_complete_result r) noexcept;

/// The lease states of the 16 KiB pieces of one info dict (BEP 9).
///
/// A piece is pending, leased to exactly one owner, or received. acquire() leases the lowest
/// pending piece, so a released piece is fetched again before any later one (the dict is
/// assembled in order and a lost piece does not wait behind the rest). Only the lease holder
/// can complete a piece; received pieces stay received until reset_all() (the assembled
/// dict failed its hash, and the job refetches everything from one peer).
///
/// Owners are small integers (the job's peer slots), at most max_owner.
/// Thread rules: single owner (the fetch job). reset() allocates nothing: the state array
/// is sized for `max_metadata_size` at construction (640 bytes x 2 for the 10 MiB cap).
class lease_table {
public:
    using owner_id = std::uint16_t;
    static constexpr std::size_t piece_size = 16'384;
    static constexpr owner_id max_owner = 0xfffd;

    /// Room for a dict of up to `max_metadata_size` bytes (clamped to 256 MiB).
    explicit lease_table(std::size_t max_metadata_size = 10 * 1024 * 1024);

    /// Starts over for a dict of `metadata_size` bytes: ceil(size / 16 KiB) pending pieces.
    /// False (and an empty table) when the size is 0 or above the maximum.
    bool reset(std::size_t metadata_size);
    /// Every piece back to pending, received ones included; the size stays.
    void reset_all() noexcept;

    /// Leases the lowest pending piece to `owner`; nothing when none is pending or the
    /// owner id is invalid (counted as refused).
    std::optional<std::uint32_t> acquire(owner_id owner);
    /// Marks `piece` received if `owner` holds its lease; every refusal is counted.
    lease_complete_result complete(std::uint32_t piece, owner_id owner);
    /// Every piece leased to `owner` goes back to pending (the peer failed or was
    /// cancelled); returns how many.
    std::size_t release(owner_id owner);

    /// The owner leasing `piece`; nothing when it is pending, received or out of range.
    std::optional<owner_id> holder(std::uint32_t piece) const noexcept;
    bool is_received(std::uint32_t piece) const noexcept;
    /// True when the table has pieces and all of them arrived.
    bool all_received() const noexcept { return count_ != 0 && received_ == count_; }

    std::size_t piece_count() const noexcept { return count_; }
    std::size_t metadata_size() const noexcept { return size_; }
    /// Bytes of `piece`: 16 KiB except the last; 0 out of range.
    std::size_t piece_length(std::uint32_t piece) const noexcept;
    std::size_t pending() const noexcept { return count_ - leased_ - received_; }
    std::size_t leased() const noexcept { return leased_; }
    std::size_t received() const noexcept { return received_; }
    std::size_t max_metadata_size() const noexcept { return max_size_; }

    /// Calls refused by acquire() (invalid owner) and complete().
    std::uint64_t refused() const noexcept { return refused_; }
    /// Leases given back by release().
    std::uint64_t released() const noexcept { return released_; }

private:
    static constexpr std::uint16_t st_pending = 0xffff;
    static constexpr std::uint16_t st_received = 0xfffe;

    std::size_t max_size_;
    std::vector<std::uint16_t> state_; // st_pending, st_received, or the owner
    std::size_t size_ = 0;
    std::size_t count_ = 0;
    std::size_t leased_ = 0;
    std::size_t received_ = 0;
    std::size_t first_pending_ = 0; // no pending piece below this index
    std::uint64_t refused_ = 0;
    std::uint64_t released_ = 0;
};

} // namespace dhtc::metadata
