// The fleet backend: several crawlers share one PostgreSQL database (libpq). Same schema
// semantics as SQLite; due hashes are leased with FOR UPDATE SKIP LOCKED so two crawlers
// never take the same row, and every transition locks its row first (FOR UPDATE), so a
// read-modify-write never interleaves with another crawler's.
#pragma once

#include <memory>
#include <string>

#include "retry/store.hpp"

namespace dhtc::retry {

/// Connects and migrates; throws store_error with a message that names the server (never
/// the password) when the connection string is malformed or the server cannot be reached.
std::unique_ptr<backend> open_postgres(const std::string& conninfo);

/// Checks a connection string's syntax without connecting: empty when usable, else why not.
std::string check_postgres_conninfo(const std::string& conninfo);

inline constexpr int postgres_schema_version = 3;

/// The advisory lock key every component's schema changes take, the Python sinks' too
/// (dialect.PG_SCHEMA_LOCK): a session lock, waited for outside any transaction.
inline constexpr long long postgres_schema_lock = 7305042;

} // namespace dhtc::retry
