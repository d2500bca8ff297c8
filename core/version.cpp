#include "version.hpp"

#include "core_version.hpp"

namespace dhtc {

const char* version_string() noexcept { return DHTC_CORE_VERSION_STRING; }
int abi_version() noexcept { return DHTC_CORE_ABI_VERSION; }

} // namespace dhtc
