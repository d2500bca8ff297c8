// Small pieces every benchmark program measures with.
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <vector>

#include "util/id20.hpp"

namespace dhtc::bench {

/// CPU time of this process so far (user + system), in seconds.
inline double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// CPU time of the calling thread so far, in seconds.
inline double thread_cpu_seconds() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

/// The `p` quantile (0..1) of an ascending sample; 0 when it is empty.
inline double quantile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0.0;
    return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

/// Resident set size in bytes, from /proc/self/statm (pages).
inline std::size_t rss_bytes() {
    std::ifstream in("/proc/self/statm");
    std::size_t total = 0;
    std::size_t resident = 0;
    in >> total >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

/// A well-spread, reproducible id for the n-th synthetic node or hash.
inline id20 id_of(std::uint64_t n) {
    id20 id;
    std::uint64_t x = n * 0x9e3779b97f4a7c15ull + 1;
    for (auto& b : id.bytes) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        b = static_cast<std::uint8_t>(x >> 56);
    }
    return id;
}

} // namespace dhtc::bench
