// The embedded backend: one SQLite file (WAL), shared with the CLI's torrent tables.
// Tables are prefixed retry_; the schema version lives in schema_migrations under the
// component "retry" and only moves forward. An empty path opens an in-memory database
// (same code, not durable).
#pragma once

#include <memory>
#include <string>

#include "retry/store.hpp"

namespace dhtc::retry {

/// Opens (creating and migrating as needed) the database at `path`; throws store_error with
/// a message naming the file when it cannot. `busy_timeout_millis` bounds how long a write
/// waits for another process holding the file.
std::unique_ptr<backend> open_sqlite(const std::string& path, unsigned busy_timeout_millis = 5000);

/// The schema version this build writes (a newer one in the file is refused).
inline constexpr int sqlite_schema_version = 3;

} // namespace dhtc::retry
