// Replaces the global operator new of a test binary with one that counts, so tests can
// assert that hot paths make no heap allocation. Include it in exactly one translation
// unit per binary. Sanitizer runtimes bring their own operator new, so under them counting
// is off (COUNT_ALLOCATIONS is 0) and the tests skip those checks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// GCC flags the inlined malloc/free pair of a replaced operator new/delete as mismatched;
// replacing them this way is what the standard provides for.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef COUNT_ALLOCATIONS
#define COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<std::size_t> g_allocations{0};
}
#if COUNT_ALLOCATIONS
void* operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif
