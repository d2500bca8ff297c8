// Durability of the SQLite retry store: a helper hammering it with state updates is killed
// with SIGKILL again and again. After each kill the file is intact, every hash the helper
// reported committed is there exactly once, and the leases it held are recovered once they
// expire.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <sqlite3.h>

#include "retry/scheduler.hpp"
#include "retry/sqlite_store.hpp"
#include "support/subprocess.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::int64_t scalar(sqlite3* db, const char* sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
    std::int64_t v = -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

std::string text(sqlite3* db, const char* sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
    std::string v;
    if (sqlite3_step(st) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("SQLite retry store survives SIGKILL in the middle of heavy updates") {
    const auto dir = std::filesystem::temp_directory_path() / ("dhtc-retry-kill-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string db = (dir / "state.sqlite").string();
    std::mt19937 rng(12345);
    std::uint64_t committed = 0;
    std::uint64_t recovered_total = 0;
    for (int round = 0; round < 6; ++round) {
        CAPTURE(round);
        std::uint64_t seen = committed;
        {
            test::subprocess hammer({DHTC_RETRY_HAMMER, db, std::to_string(committed), "100000000"});
            // Let it commit a few transactions, then kill it at a random moment.
            const auto kill_after = std::chrono::milliseconds(200 + rng() % 600);
            const auto until = std::chrono::steady_clock::now() + kill_after;
            while (std::chrono::steady_clock::now() < until || seen == committed) {
                const auto line = hammer.read_line(2s);
                if (!line) break;
                if (line->rfind("committed ", 0) == 0) seen = std::stoull(line->substr(10));
            }
            REQUIRE(seen > committed);
            ::kill(hammer.pid(), SIGKILL);
            // Lines already written may report more commits.
            while (const auto line = hammer.read_line(200ms))
                if (line->rfind("committed ", 0) == 0) seen = std::stoull(line->substr(10));
        } // reaped
        committed = seen;

        sqlite3* h = nullptr;
        REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
        CHECK(text(h, "PRAGMA integrity_check") == "ok");
        const auto rows = scalar(h, "SELECT count(*) FROM retry_hashes");
        CHECK(scalar(h, "SELECT count(DISTINCT info_hash) FROM retry_hashes") == rows);
        CHECK(rows >= static_cast<std::int64_t>(committed));  // nothing committed was lost
        CHECK(rows <= static_cast<std::int64_t>(committed) + 50); // at most the transaction in flight
        CHECK(scalar(h, "SELECT count(*) FROM retry_hashes WHERE length(info_hash) != 20") == 0);
        sqlite3_close(h);

        // The killed owner's leases come back after their expiry (one second).
        retry::store s(retry::open_sqlite(db), retry::policy_options{}, "inspector", 60);
        const auto later = retry::scheduler::now() + 2;
        s.begin();
        recovered_total += s.expire_leases(later);
        const auto c = s.counts();
        s.commit();
        CHECK(c.by_state[static_cast<std::size_t>(retry::hash_state::leased)] == 0);
        std::uint64_t total = 0;
        for (const auto n : c.by_state) total += n;
        CHECK(total == static_cast<std::uint64_t>(rows));
    }
    MESSAGE("hashes committed " << committed << ", leases recovered " << recovered_total);
    CHECK(recovered_total > 0);
    std::filesystem::remove_all(dir);
}

}
