/**
 * @file dhtcrawler.h
 * @brief The public C API of dhtcrawler, a BitTorrent DHT crawler library.
 *
 * This header is the library's only public surface. It is C99, and every symbol it
 * declares has the `dhtc_` prefix. The library is built as `libdhtcrawler.so` with
 * SOVERSION equal to the ABI major version below.
 *
 * Conventions (they hold for every function added to this header):
 * - Functions that can fail return an `int` status: `DHTC_OK` (0) or a negative code.
 * - Out-parameters come last.
 * - Every string the library returns through a `char **out` is freed with
 *   dhtc_string_free(), never with free().
 * - Options, events and snapshots are JSON documents; they carry a schema number and
 *   only ever gain fields.
 *
 * Version check for hosts that load the library at run time (dlopen): compare
 * dhtc_abi_version() with the DHTC_ABI_VERSION the host was compiled against, and refuse
 * to continue when they differ.
 */
#ifndef DHTCRAWLER_H
#define DHTCRAWLER_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DHTC_BUILDING_LIBRARY) && defined(__GNUC__)
#define DHTC_API __attribute__((visibility("default")))
#else
#define DHTC_API
#endif

/** ABI major version of this header. Changes only on incompatible ABI changes. */
#define DHTC_ABI_VERSION 1

/**
 * @brief The library's version, "MAJOR.MINOR.PATCH".
 *
 * Thread safety: callable from any thread, at any time, before any other call.
 * @return A static string owned by the library; never NULL; do not free it.
 */
DHTC_API const char *dhtc_version(void);

/**
 * @brief The ABI major version the library was built with.
 *
 * Thread safety: callable from any thread, at any time.
 * @return The library's DHTC_ABI_VERSION; a host built against another value must not
 *         use the library.
 */
DHTC_API int dhtc_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DHTCRAWLER_H */
