#include "support/skip.hpp"

#include <atomic>
#include <cstdio>

namespace dhtc::test {

namespace {
std::atomic<bool> skipped{false};
}

void skip_case(const char* needs) {
    std::fprintf(stderr, "SKIPPED (a test case): %s\n", needs);
    skipped = true;
}

bool any_case_skipped() noexcept { return skipped; }

} // namespace dhtc::test
