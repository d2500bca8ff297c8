// Forward schema migrations recorded in the shared schema_migrations table: one row per
// component (the retry store is "retry", the Python torrent sinks "torrents"), holding the
// version its tables are at. The one implementation behind the SQLite and PostgreSQL stores;
// what differs between the databases is passed in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dhtc::retry {

/// One database connection as apply_migrations() needs it.
struct migration_dialect {
    /// Opens the transaction the migration runs in: "BEGIN IMMEDIATE" for SQLite (takes the
    /// write lock at once), "BEGIN" for PostgreSQL.
    std::string begin;
    /// When set, called before the transaction opens and after it ends: PostgreSQL's
    /// schema lock, so crawlers starting together migrate once. Taken outside the
    /// transaction because a holder may be building an index online (CREATE INDEX
    /// CONCURRENTLY waits for every open transaction, a waiter's too). `release` must not
    /// throw.
    std::function<void()> acquire;
    std::function<void()> release;
    /// Names the database in the refusal of a newer schema ("SQLite database x.db").
    std::string database;
    /// Runs one or more statements; throws store_error.
    std::function<void(const std::string& sql)> exec;
    /// The first column of the first row of a query as an integer, or nothing when it
    /// returns no row; throws store_error.
    std::function<std::optional<std::int64_t>(const std::string& sql)> query_int;
    /// Rolls the transaction back; must not throw.
    std::function<void()> rollback;
};

// Retry schema v3, one SQL text for SQLite and PostgreSQL (both have the integer bit
// operators; PostgreSQL's recent_failures is an integer and 20 bits fit): the failure
// classes after cancelled (encryption_failed, utp_timeout). recent_failures goes from four
// 4-bit classes to four 5-bit ones (bits 0..19). failure_counts keeps its slots: classes
// 1..14 where they were; slots 14 and 15 (bits 56..63), once cancelled's and never written
// (cancelled rounds are released, not recorded), now count the new classes, and are cleared
// in case anything stale could pass for such a count. Only rows that need it are rewritten.
inline constexpr const char* retry_v3_failure_packing = R"sql(
UPDATE retry_hashes SET
  recent_failures = (recent_failures & 15) | (((recent_failures >> 4) & 15) << 5) |
                    (((recent_failures >> 8) & 15) << 10) | (((recent_failures >> 12) & 15) << 15),
  failure_counts = failure_counts & 72057594037927935
WHERE recent_failures > 15 OR failure_counts < 0 OR failure_counts > 72057594037927935;
)sql";

/// Brings `component` (letters, digits and '_') to version migrations.size() in one
/// transaction: creates schema_migrations when missing, runs migrations[found..] in order
/// (entry i brings the schema to version i + 1; each may hold several statements), and
/// records the new version. Returns the version found before. Throws store_error (after a
/// rollback) on any failure, and when the database is at a version newer than this build
/// knows.
std::int64_t apply_migrations(const migration_dialect& d, std::string_view component,
                              std::span<const char* const> migrations);

} // namespace dhtc::retry
