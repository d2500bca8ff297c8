// Waiting in tests without asserting wall-clock times: poll a condition until it holds or a
// generous limit passes.
#pragma once

#include <chrono>
#include <thread>

namespace dhtc::test {

/// Calls `f` every few milliseconds until it returns true (true) or `limit` passed (the
/// last call's result).
template <class F>
bool eventually(F&& f, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (f()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return f();
}

} // namespace dhtc::test
