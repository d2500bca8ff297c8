#include "dhtcrawler.h"

#include "core_version.hpp"

static_assert(DHTC_ABI_VERSION == DHTC_CORE_ABI_VERSION_CHECK, "capi header and CMake disagree on the ABI version");

extern "C" {

const char* dhtc_version(void) { return dhtc::version_string(); }

int dhtc_abi_version(void) { return DHTC_ABI_VERSION; }

} // extern "C"
