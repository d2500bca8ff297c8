// PostgreSQL for tests: a fresh schema per test on the server named by DHTC_TEST_PG (set by
// tests/run.sh after starting the packaged cluster). Tests that need it fail, not skip,
// when it is missing.
#pragma once

#include <optional>
#include <string>

namespace dhtc::test {

/// DHTC_TEST_PG, or nothing.
std::optional<std::string> pg_base();
/// Drops and recreates `schema` on the test server; returns a connection string whose
/// search_path is that schema (so each test has its own retry tables). Throws on failure.
std::string pg_fresh_schema(const std::string& base, const std::string& schema);
/// Runs one SQL statement and returns the first column of the first row ("" if none).
std::string pg_query(const std::string& conninfo, const std::string& sql);

} // namespace dhtc::test
