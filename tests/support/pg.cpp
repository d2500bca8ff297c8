#include "support/pg.hpp"

#include "support/skip.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <stdexcept>

namespace dhtc::test {

std::optional<std::string> pg_base() {
    const char* v = std::getenv("DHTC_TEST_PG");
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

std::optional<std::string> pg_base_or_skip() {
    auto base = pg_base();
    if (!base)
        skip_case("needs PostgreSQL: DHTC_TEST_PG is not set (tests/run.sh starts it; or export "
                  "DHTC_TEST_PG=$(bash tests/pg/start_pg.sh | tail -1))");
    return base;
}

pg_session::pg_session(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
        std::string why = PQerrorMessage(conn_);
        PQfinish(conn_);
        throw std::runtime_error("test pg connect: " + why);
    }
}

pg_session::~pg_session() { PQfinish(conn_); }

std::string pg_session::query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        std::string why = PQerrorMessage(conn_);
        PQclear(r);
        throw std::runtime_error("test pg: " + why);
    }
    std::string out;
    if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) out = PQgetvalue(r, 0, 0);
    PQclear(r);
    return out;
}

std::string pg_query(const std::string& conninfo, const std::string& sql) { return pg_session(conninfo).query(sql); }

std::string pg_fresh_schema(const std::string& base, const std::string& schema) {
    pg_query(base, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " +
                       schema);
    const char sep = base.find('?') == std::string::npos ? '?' : '&';
    return base + sep + "options=-csearch_path%3D" + schema;
}

} // namespace dhtc::test
