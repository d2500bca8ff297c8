// PostgreSQL for tests: a fresh schema per test on the server named by DHTC_TEST_PG (set by
// tests/run.sh after starting the packaged cluster). Without it, the cases that need it skip
// (a plain ctest reports their binary as skipped); tests/run.sh fails when PostgreSQL did not
// start, so CI never skips them.
#pragma once

#include <optional>
#include <string>

struct pg_conn;

namespace dhtc::test {

/// DHTC_TEST_PG, or nothing.
std::optional<std::string> pg_base();
/// DHTC_TEST_PG; or, when it is not set, nothing, and the calling case is marked skipped
/// (support/skip.hpp): the caller returns.
std::optional<std::string> pg_base_or_skip();
/// Drops and recreates `schema` on the test server; returns a connection string whose
/// search_path is that schema (so each test has its own retry tables). Throws on failure.
std::string pg_fresh_schema(const std::string& base, const std::string& schema);
/// Runs one SQL statement and returns the first column of the first row ("" if none).
std::string pg_query(const std::string& conninfo, const std::string& sql);

/// One connection kept open across statements (a session lock lives as long as it does).
class pg_session {
public:
    /// Throws on failure to connect.
    explicit pg_session(const std::string& conninfo);
    ~pg_session();
    pg_session(const pg_session&) = delete;
    pg_session& operator=(const pg_session&) = delete;
    /// As pg_query, on this connection. Throws on failure.
    std::string query(const std::string& sql);

private:
    pg_conn* conn_;
};

} // namespace dhtc::test
