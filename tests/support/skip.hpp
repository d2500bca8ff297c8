// A test case that cannot run here (a service it needs is missing) says so and returns; the
// binary then exits 77 (tests/unit/doctest_main.cpp), which ctest reports as skipped.
// tests/run.sh starts what the cases need and counts a service that did not start as a failure.
#pragma once

namespace dhtc::test {

/// Prints "SKIPPED (a test case): <needs>" and marks the run as skipped. The caller returns.
void skip_case(const char* needs);
/// Whether a case of this run called skip_case.
bool any_case_skipped() noexcept;

} // namespace dhtc::test
