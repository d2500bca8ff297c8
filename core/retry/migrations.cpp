#include "retry/migrations.hpp"

#include <algorithm>

#include "retry/store.hpp"

namespace dhtc::retry {

std::int64_t apply_migrations(const migration_dialect& d, std::string_view component,
                              std::span<const char* const> migrations) {
    // The component goes into the SQL as a literal: it is a constant of this build, never input.
    const bool plain = !component.empty() && std::all_of(component.begin(), component.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!plain) throw store_error("schema migrations: bad component name " + std::string(component));
    const std::string name(component);
    const auto target = static_cast<std::int64_t>(migrations.size());
    if (d.acquire) d.acquire();
    struct releases { // after the transaction ends, also when it failed
        const migration_dialect& d;
        ~releases() {
            if (d.release) d.release();
        }
    } held{d};
    d.exec(d.begin);
    try {
        d.exec("CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL)");
        const std::int64_t found =
            d.query_int("SELECT version FROM schema_migrations WHERE component = '" + name + "'").value_or(0);
        if (found > target)
            throw store_error(d.database + " has " + name + " schema version " + std::to_string(found) +
                              ", newer than this build's " + std::to_string(target));
        for (std::int64_t v = std::max<std::int64_t>(found, 0); v < target; ++v)
            d.exec(migrations[static_cast<std::size_t>(v)]);
        d.exec("INSERT INTO schema_migrations(component, version) VALUES ('" + name + "', " + std::to_string(target) +
               ") ON CONFLICT (component) DO UPDATE SET version = excluded.version");
        d.exec("COMMIT");
        return found;
    } catch (...) {
        d.rollback();
        throw;
    }
}

} // namespace dhtc::retry
