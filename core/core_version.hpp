// The library's version, as built (from the CMake project version).
#pragma once

namespace dhtc {

/// "MAJOR.MINOR.PATCH".
const char* version_string() noexcept;
/// The ABI major version the core was built for (matches DHTC_ABI_VERSION).
int abi_version() noexcept;

} // namespace dhtc
