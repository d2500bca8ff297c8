// The crawl actor's queries in flight. A transaction id names a slot and carries a random
// nonce, so a reply is matched in O(1) and a forged or stale `t` (or one from another
// address) is recognised and dropped (protocol.md a: never act on unknown transactions).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

enum class query_kind : std::uint8_t { bootstrap, find_node, sample, get_peers, scrape, ping };

struct pending_query {
    endpoint to;
    id20 node_id;             ///< the destination's id when known (zero for bootstrap)
    id20 target;              ///< what the query asked about (find_node target, info hash)
    time_point sent_at{};
    query_kind kind = query_kind::find_node;
    std::uint32_t context = 0; ///< bootstrap source index, or lookup slot
    std::uint8_t attempt = 0;  ///< 0: the first send; n: the n-th retry after a timeout
};

class transaction_table {
public:
    static constexpr std::size_t id_size = 4; ///< 2 bytes slot, 2 bytes nonce
    using id = std::array<char, id_size>;

    /// At most `capacity` (<= 65535) queries in flight.
    transaction_table(std::size_t capacity, std::uint64_t seed);

    /// Records a query; its transaction id, or nothing when the table is full.
    std::optional<id> open(const pending_query& q);
    /// Removes and returns the query `t` answers, when `from` is where it went; nothing for
    /// an unknown, stale or foreign id (counted in rejected()).
    std::optional<pending_query> close(std::string_view t, const endpoint& from);
    /// Removes every query sent `timeout` or longer before `now`, oldest first, calling
    /// `on_timeout(const pending_query&)` for each.
    template <class F>
    void expire(time_point now, duration timeout, F&& on_timeout);

    std::size_t in_flight() const noexcept { return live_; }
    std::size_t capacity() const noexcept { return slots_.size(); }
    std::uint64_t rejected() const noexcept { return rejected_; }

private:
    struct slot {
        pending_query q;
        std::uint16_t nonce = 0;
        bool live = false;
    };
    struct sent {
        std::uint16_t index;
        std::uint16_t nonce;
    };

    std::vector<slot> slots_;
    std::vector<std::uint16_t> free_;
    // Send order; with one timeout for all, it is also expiry order. Holds at most the
    // queries sent within one timeout (rate x timeout), closed ones are skipped lazily.
    std::deque<sent> order_;
    std::mt19937 rng_;
    std::size_t live_ = 0;
    std::uint64_t rejected_ = 0;
};

template <class F>
void transaction_table::expire(time_point now, duration timeout, F&& on_timeout) {
    while (!order_.empty()) {
        const sent s = order_.front();
        slot& sl = slots_[s.index];
        if (sl.live && sl.nonce == s.nonce) {
            if (now - sl.q.sent_at < timeout) return;
            sl.live = false;
            --live_;
            free_.push_back(s.index);
            on_timeout(sl.q);
        }
        order_.pop_front();
    }
}

} // namespace dhtc::crawl
