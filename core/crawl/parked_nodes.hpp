// Crawl candidates whose find_node a budget held back (their node's or IP's destination
// budget, their subnet's in-flight cap, a full source table), each parked until the instant
// that budget allows it. The crawl loop takes them back when due and never looks at them
// before, so a spent budget costs one parking per candidate instead of a revisit per turn.
//
// Thread rules: single owner (the crawl actor).
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <vector>

#include "krpc/compact.hpp"
#include "util/clock.hpp"

namespace dhtc::crawl {

class parked_nodes {
public:
    explicit parked_nodes(std::size_t capacity) : capacity_(capacity) {}

    /// Parks `n` until `due`; false when full (the caller keeps it elsewhere: nothing is dropped here).
    bool park(const krpc::node_entry& n, time_point due) {
        if (heap_.size() >= capacity_) return false;
        heap_.push(parked{due, n});
        return true;
    }
    /// The earliest parked node whose time has come, taken out.
    std::optional<krpc::node_entry> pop_due(time_point now) {
        if (heap_.empty() || heap_.top().due > now) return std::nullopt;
        krpc::node_entry n = heap_.top().node;
        heap_.pop();
        return n;
    }
    std::size_t size() const noexcept { return heap_.size(); }
    std::size_t capacity() const noexcept { return capacity_; }

private:
    struct parked {
        time_point due;
        krpc::node_entry node;
        bool operator>(const parked& o) const noexcept { return due > o.due; }
    };
    std::size_t capacity_;
    std::priority_queue<parked, std::vector<parked>, std::greater<>> heap_;
};

} // namespace dhtc::crawl
