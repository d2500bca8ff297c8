#include "metadata/delivered_filter.hpp"

#include <algorithm>

namespace dhtc::metadata {

delivered_filter::delivered_filter(delivered_filter_options options)
    : base({.capacity = options.period.count() <= 0 ? 0 : std::min<std::size_t>(options.capacity, (std::size_t{1} << 24) - 2),
            .ttl = options.period,
            .repeat = expiring_repeat::keep,
            .hash_seed = options.hash_seed}) {}

} // namespace dhtc::metadata
