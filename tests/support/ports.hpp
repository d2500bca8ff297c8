// Loopback ports for tests that need an address nothing answers on, or one a child process
// binds next.
#pragma once

#include <cstdint>

namespace dhtc::test {

/// A port on 127.0.0.1 bound and released at once (`type`: SOCK_DGRAM or SOCK_STREAM): free
/// right now and nothing listens on it. Throws when no socket can be bound.
std::uint16_t unused_loopback_port(int type);

} // namespace dhtc::test
