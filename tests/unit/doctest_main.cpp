// doctest's main, plus one exit code: a test binary whose only gaps are cases that skipped for
// a missing service (support/skip.hpp) exits 77, which ctest reports as skipped (the binary's
// output says what it needs) instead of passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/skip.hpp"

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (context.shouldExit() || result != 0) return result;
    return dhtc::test::any_case_skipped() ? 77 : 0;
}
