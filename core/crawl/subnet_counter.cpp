#include "crawl/subnet_counter.hpp"

#include <algorithm>
#include <cstring>

namespace dhtc::crawl {

subnet_counter::subnet_counter(subnet_counter_options options)
    : per_subnet_max_(std::max<std::size_t>(options.per_subnet_max, 1)),
      total_max_(std::clamp<std::size_t>(options.total_max, 1, (std::size_t{1} << 24) - 1)),
      key_(detail::hash_key_from_seed(options.hash_seed)), slots_(std::make_unique<slot[]>(total_max_)),
      free_(std::make_unique<std::uint32_t[]>(total_max_)), index_(total_max_, 24) {
    // Hand out low slot numbers first (cache-friendlier for the usual small counts).
    for (std::size_t i = 0; i < total_max_; ++i) free_[i] = static_cast<std::uint32_t>(total_max_ - 1 - i);
    free_count_ = total_max_;
}

std::uint64_t subnet_counter::hash_of(subnet_key k) const noexcept {
    char buf[8];
    std::memcpy(buf, &k.value, sizeof buf);
    return siphash24(key_, std::string_view(buf, sizeof buf));
}

std::uint32_t subnet_counter::find(subnet_key k, std::uint64_t h) const {
    return index_.find(h, [&](std::uint32_t i) { return slots_[i].key == k; });
}

subnet_acquire subnet_counter::try_acquire(const ip_address& a) {
    if (total_ >= total_max_) {
        ++refused_total_;
        return subnet_acquire::total_full;
    }
    const subnet_key k = subnet_of(a);
    const std::uint64_t h = hash_of(k);
    std::uint32_t i = find(k, h);
    if (i == detail::slot_index::npos) {
        // total_ < total_max_ and every held slot has count >= 1, so a free slot exists.
        i = free_[--free_count_];
        slots_[i] = slot{k, 0};
        index_.insert(h, i);
    } else if (slots_[i].count >= per_subnet_max_) {
        ++refused_subnet_;
        return subnet_acquire::subnet_full;
    }
    ++slots_[i].count;
    ++total_;
    return subnet_acquire::ok;
}

bool subnet_counter::release(const ip_address& a) {
    const subnet_key k = subnet_of(a);
    const std::uint64_t h = hash_of(k);
    const std::uint32_t i = find(k, h);
    if (i == detail::slot_index::npos) {
        ++unmatched_releases_;
        return false;
    }
    --total_;
    if (--slots_[i].count == 0) {
        index_.erase(h, i, [this](std::uint32_t j) { return hash_of(slots_[j].key); });
        free_[free_count_++] = i;
    }
    return true;
}

std::size_t subnet_counter::in_flight(const ip_address& a) const {
    const subnet_key k = subnet_of(a);
    const std::uint32_t i = find(k, hash_of(k));
    return i == detail::slot_index::npos ? 0 : slots_[i].count;
}

} // namespace dhtc::crawl
