#include "crawl/recent_probes.hpp"

#include <algorithm>

namespace dhtc::crawl {

recent_probes::recent_probes(recent_probes_options options)
    : base({.capacity = std::clamp<std::size_t>(options.capacity, 1, base::max_capacity),
            .ttl = options.ttl,
            .repeat = expiring_repeat::refresh,
            .hash_seed = options.hash_seed}) {}

} // namespace dhtc::crawl
