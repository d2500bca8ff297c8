// The pieces of one info dict shared by the peer sessions of one fetch job: leases say
// who fetches which piece (one holder at a time), the buffer assembles what arrives, and
// the contributor set says whether a bad dict has one author or several. Every lease is
// charged to the crawler's memory_budget before its request goes out (and given back when
// the lease is returned unfilled or the job drops the pieces): when the budget is spent,
// acquire() hands out nothing and the sessions wait (idle polls) until it frees up or
// their deadline passes; starved() then says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "metadata/lease_table.hpp"
#include "metadata/memory_budget.hpp"
#include "metadata/piece_source.hpp"
#include "metadata/wire.hpp"

namespace dhtc::metadata {

class shared_pieces final : public piece_source {
public:
    static constexpr std::uint32_t max_sessions = 32;

    /// `budget` may be null (nothing charged); it must outlive this object.
    explicit shared_pieces(std::size_t max_metadata_size, memory_budget* budget = nullptr)
        : max_size_(max_metadata_size), leases_(max_metadata_size), budget_(budget) {}
    ~shared_pieces();
    shared_pieces(const shared_pieces&) = delete;
    shared_pieces& operator=(const shared_pieces&) = delete;

    bool on_metadata_size(std::size_t size) override;
    std::optional<std::uint32_t> acquire(std::uint32_t session) override;
    bool deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) override;
    void release(std::uint32_t session) override;
    bool complete() const override { return leases_.all_received(); }

    /// The assembled dict; complete() must be true.
    std::string_view bytes() const noexcept { return buffer_.bytes(); }
    std::size_t size() const noexcept { return size_; }
    /// How many sessions delivered at least one piece since the last restart().
    unsigned contributors() const noexcept;
    /// The only contributor, when there was exactly one.
    std::optional<std::uint32_t> sole_contributor() const noexcept;
    /// Forgets every piece (the size stays known): the job refetches from one peer.
    void restart();
    /// True when acquire() held back a piece because the memory budget was spent.
    bool starved() const noexcept { return starved_; }
    /// Bytes charged to the budget now (leased and received pieces).
    std::size_t charged() const noexcept { return charged_; }

private:
    std::size_t max_size_;
    std::size_t size_ = 0;
    lease_table leases_;
    wire::metadata_buffer buffer_;
    std::uint32_t contributed_ = 0; // bit per session slot
    memory_budget* budget_;
    std::size_t charged_ = 0;
    bool starved_ = false;
};

} // namespace dhtc::metadata
