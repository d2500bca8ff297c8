#include "crawl/node_pool.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "model/address_hash.hpp"

namespace dhtc::crawl {

namespace {

std::uint32_t family_size(std::size_t capacity, unsigned percent) {
    const std::size_t p = std::min(percent, 100u);
    return static_cast<std::uint32_t>((capacity * p + 99) / 100);
}

} // namespace

node_pool::node_pool(const clock& c, const address_policy& policy, node_pool_options options)
    : policy_(&policy), capacity_(std::clamp<std::size_t>(options.capacity, 1, max_capacity)),
      key_(detail::hash_key_from_seed(options.hash_seed)), index_(capacity_, 25, initial_nodes),
      replacements_(token_bucket::per_minute(c, options.max_replacements_per_minute)) {
    static_assert(sizeof(entry<4>) == v4_entry_bytes && sizeof(entry<16>) == v6_entry_bytes);
    v4_share_ = options.v4_share_percent;
    v6_share_ = options.v6_share_percent;
    v4_max_ = family_size(capacity_, v4_share_);
    v6_max_ = family_size(capacity_, v6_share_);
    // The rings start small and double as the pool fills (resize()): a large capacity costs
    // only what the pool once held. Once grown, pushes allocate nothing.
    if (!resize(std::min(capacity_, initial_nodes))) throw std::bad_alloc();
}

// Rebuilds the rings, the order bits and the index at `cur` nodes: every node keeps its FIFO
// place, the rings are laid out from position 0. False (nothing changed) when an allocation
// failed.
bool node_pool::resize(std::size_t cur) noexcept {
    const std::uint32_t c4 = std::min(family_size(cur, v4_share_), v4_max_);
    const std::uint32_t c6 = std::min(family_size(cur, v6_share_), v6_max_);
    const std::size_t words = (cur + 63) / 64;
    std::unique_ptr<entry<4>[]> s4(c4 ? new (std::nothrow) entry<4>[c4]() : nullptr);
    std::unique_ptr<entry<16>[]> s6(c6 ? new (std::nothrow) entry<16>[c6]() : nullptr);
    std::unique_ptr<std::uint64_t[]> ord(new (std::nothrow) std::uint64_t[words]());
    if ((c4 && !s4) || (c6 && !s6) || !ord) return false;
    for (std::uint32_t k = 0; k < v4_.count; ++k) s4[k] = v4_.slots[(v4_.head + k) % v4_.cap];
    for (std::uint32_t k = 0; k < v6_.count; ++k) s6[k] = v6_.slots[(v6_.head + k) % v6_.cap];
    for (std::size_t k = 0; k < size_; ++k) {
        const std::size_t from = (order_head_ + k) % cur_;
        if (order_[from >> 6] >> (from & 63) & 1) ord[k >> 6] |= std::uint64_t{1} << (k & 63);
    }
    v4_.slots = std::move(s4);
    v6_.slots = std::move(s6);
    order_ = std::move(ord);
    v4_.cap = c4;
    v6_.cap = c6;
    v4_.head = v6_.head = 0;
    order_words_ = words;
    order_head_ = 0;
    cur_ = cur;
    // The index, again from the new positions (it only grows: no allocation fails here
    // that the growth below does not report).
    index_.clear();
    const auto rehash = [this](std::uint32_t w) { return hash_of_value(w); };
    for (std::uint32_t k = 0; k < v4_.count; ++k)
        if (!index_.insert(hash_of_value(k), k, rehash)) return false;
    for (std::uint32_t k = 0; k < v6_.count; ++k)
        if (!index_.insert(hash_of_value(k | v6_flag), k | v6_flag, rehash)) return false;
    return true;
}

std::uint64_t node_pool::hash_of(const ip_address& a, std::uint16_t port) const noexcept {
    return detail::hash_endpoint(key_, a, port);
}

pool_node node_pool::node_at(std::uint32_t value) const noexcept {
    pool_node n;
    const std::uint32_t pos = value & (v6_flag - 1);
    if (value & v6_flag) {
        const auto& e = v6_.slots[pos];
        std::memcpy(n.id.bytes.data(), e.id, 20);
        std::array<std::uint8_t, 16> b;
        std::memcpy(b.data(), e.addr, 16);
        n.ep.address = ip_address::v6(b);
        n.ep.port = static_cast<std::uint16_t>(e.port[0] << 8 | e.port[1]);
    } else {
        const auto& e = v4_.slots[pos];
        std::memcpy(n.id.bytes.data(), e.id, 20);
        n.ep.address = ip_address::v4(std::array<std::uint8_t, 4>{e.addr[0], e.addr[1], e.addr[2], e.addr[3]});
        n.ep.port = static_cast<std::uint16_t>(e.port[0] << 8 | e.port[1]);
    }
    return n;
}

std::uint64_t node_pool::hash_of_value(std::uint32_t value) const noexcept {
    const pool_node n = node_at(value);
    return hash_of(n.ep.address, n.ep.port);
}

std::uint32_t node_pool::find(const ip_address& a, std::uint16_t port, std::uint64_t h) const {
    const std::uint8_t pb[2] = {static_cast<std::uint8_t>(port >> 8), static_cast<std::uint8_t>(port)};
    const bool v6 = a.is_v6();
    const auto* ab = a.raw().data();
    return index_.find(h, [&](std::uint32_t value) {
        if (((value & v6_flag) != 0) != v6) return false;
        const std::uint32_t pos = value & (v6_flag - 1);
        if (v6) {
            const auto& e = v6_.slots[pos];
            return std::memcmp(e.addr, ab, 16) == 0 && std::memcmp(e.port, pb, 2) == 0;
        }
        const auto& e = v4_.slots[pos];
        return std::memcmp(e.addr, ab, 4) == 0 && std::memcmp(e.port, pb, 2) == 0;
    });
}

bool node_pool::contains(const endpoint& ep) const {
    const endpoint c = canonical(ep);
    return find(c.address, c.port, hash_of(c.address, c.port)) != detail::slot_index::npos;
}

push_result node_pool::push(const id20& id, const endpoint& ep, origin from) {
    const auto done = [this](push_result r) {
        ++results_[static_cast<std::size_t>(r)];
        return r;
    };
    const endpoint c = canonical(ep);
    const admission_verdict v = policy_->verdict(c);
    if (v != admission_verdict::ok) {
        ++bogons_[static_cast<std::size_t>(v)];
        return done(push_result::bogon);
    }
    const std::uint64_t h = hash_of(c.address, c.port);
    if (find(c.address, c.port, h) != detail::slot_index::npos) return done(push_result::duplicate);
    const bool v6 = c.address.is_v6();
    // Grow before a ring or the pool is full at its current size.
    if (cur_ < capacity_ && (size_ == cur_ || (v6 ? v6_.count == v6_.cap && v6_.cap < v6_max_
                                                   : v4_.count == v4_.cap && v4_.cap < v4_max_)))
        (void)resize(std::min(capacity_, cur_ * 2));
    const bool family_full = v6 ? v6_.count == v6_.cap : v4_.count == v4_.cap;
    push_result result = push_result::accepted;
    if (size_ == cur_) {
        // Evicting the oldest makes room in a full family ring only if the oldest is of that
        // family; otherwise refuse before evicting anything.
        if (family_full && order_bit(order_head_) != v6) return done(push_result::family_full);
        if (!replacements_.try_acquire()) return done(push_result::over_budget);
        remove_oldest();
        result = push_result::replaced_oldest;
    } else if (family_full) {
        return done(push_result::family_full);
    }

    const std::uint8_t pb[2] = {static_cast<std::uint8_t>(c.port >> 8), static_cast<std::uint8_t>(c.port)};
    std::uint32_t value;
    if (v6) {
        const std::uint32_t pos = v6_.tail();
        auto& e = v6_.slots[pos];
        std::memcpy(e.id, id.bytes.data(), 20);
        std::memcpy(e.addr, c.address.raw().data(), 16);
        std::memcpy(e.port, pb, 2);
        ++v6_.count;
        value = pos | v6_flag;
    } else {
        const std::uint32_t pos = v4_.tail();
        auto& e = v4_.slots[pos];
        std::memcpy(e.id, id.bytes.data(), 20);
        std::memcpy(e.addr, c.address.raw().data(), 4);
        std::memcpy(e.port, pb, 2);
        ++v4_.count;
        value = pos;
    }
    // Grows the index (doubling) when the pool passes 80% of its buckets; a failure leaves
    // the node out of the pool.
    if (!index_.insert(h, value, [this](std::uint32_t w) { return hash_of_value(w); })) {
        if (v6) --v6_.count;
        else --v4_.count;
        return done(push_result::family_full);
    }
    std::size_t gpos = order_head_ + size_;
    if (gpos >= cur_) gpos -= cur_;
    const std::uint64_t bit = std::uint64_t{1} << (gpos & 63);
    if (v6) order_[gpos >> 6] |= bit;
    else order_[gpos >> 6] &= ~bit;
    ++size_;
    if (from == origin::query) querier_positions_.push_back(pushed_);
    ++pushed_;
    return done(result);
}

pool_node node_pool::remove_oldest() noexcept {
    const bool v6 = order_bit(order_head_);
    std::uint32_t value;
    if (v6) {
        value = v6_.head | v6_flag;
        v6_.head = v6_.head + 1 == v6_.cap ? 0 : v6_.head + 1;
        --v6_.count;
    } else {
        value = v4_.head;
        v4_.head = v4_.head + 1 == v4_.cap ? 0 : v4_.head + 1;
        --v4_.count;
    }
    // The slot keeps its bytes until a push overwrites it, so it can still be read here.
    const pool_node n = node_at(value);
    index_.erase(hash_of(n.ep.address, n.ep.port), value, [this](std::uint32_t w) { return hash_of_value(w); });
    order_head_ = order_head_ + 1 == cur_ ? 0 : order_head_ + 1;
    --size_;
    ++removed_;
    if (!querier_positions_.empty() && querier_positions_.front() < removed_) querier_positions_.pop_front();
    return n;
}

std::optional<pool_node> node_pool::pop() {
    if (size_ == 0) return std::nullopt;
    ++popped_;
    return remove_oldest();
}

void node_pool::sample(std::size_t max, std::vector<pool_node>& out) const {
    if (max == 0 || size_ == 0) return;
    const std::size_t step = std::max<std::size_t>(1, (size_ + max - 1) / max);
    std::size_t taken = 0;
    const auto take = [&](const auto& r, std::uint32_t flag) {
        for (std::size_t i = 0; i < r.count && taken < max; i += step, ++taken) {
            const std::size_t pos = (r.head + i) % r.cap;
            out.push_back(node_at(static_cast<std::uint32_t>(pos) | flag));
        }
    };
    take(v4_, 0);
    take(v6_, v6_flag);
}

void node_pool::clear() noexcept {
    index_.clear();
    v4_.head = v4_.count = 0;
    v6_.head = v6_.count = 0;
    order_head_ = 0;
    size_ = 0;
    querier_positions_.clear();
    removed_ = pushed_;
}

std::size_t node_pool::memory_bytes() const noexcept {
    return sizeof(*this) + std::size_t{v4_.cap} * sizeof(entry<4>) + std::size_t{v6_.cap} * sizeof(entry<16>) +
           order_words_ * sizeof(std::uint64_t) + index_.memory_bytes() +
           querier_positions_.size() * sizeof(std::uint64_t);
}

} // namespace dhtc::crawl
