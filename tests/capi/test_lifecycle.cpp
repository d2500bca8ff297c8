// The lifecycle as hosts really drive it, many times over: every way a shutdown arrives
// (the host thread, another thread, a callback, a thread that handles a signal, racing
// destroy, two threads at once) against every retry store, with destroy right after run
// returns or while a fetch is in flight. Pass: nothing hangs (the test timeout), no
// thread or fd is left, and no callback runs after destroy returned.
// DHTC_LIFECYCLE_CYCLES sets the cycles per combination (the sanitizer stage raises it).
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "capi/host.hpp"
#include "support/eventually.hpp"
#include "support/fake_peer.hpp"

using namespace std::chrono_literals;
using namespace dhtc::capi_test;

namespace {

enum class stop_from { host, other_thread, callback, signal_thread, racing_destroy, two_threads };
const stop_from all_stops[] = {stop_from::host,          stop_from::other_thread,   stop_from::callback,
                               stop_from::signal_thread, stop_from::racing_destroy, stop_from::two_threads};
const char* name_of(stop_from s) {
    const char* names[] = {"host", "other_thread", "callback", "signal_thread", "racing_destroy", "two_threads"};
    return names[static_cast<int>(s)];
}

int cycles_per_case() {
    const char* env = std::getenv("DHTC_LIFECYCLE_CYCLES");
    return env ? std::max(1, std::atoi(env)) : 8;
}

std::string options_with(const std::string& store) {
    auto j = nlohmann::json::parse(loopback_options);
    j["metadata"]["gate_timeout_millis"] = 200;
    if (!store.empty()) j["retry"] = nlohmann::json::parse(store);
    return j.dump();
}

// What every callback checks: it must never run once destroy has returned.
struct watch {
    std::atomic<bool> destroyed{false};
    std::atomic<int> late{0};
    std::atomic<int> calls{0};
    dhtc_crawler* c = nullptr;
    bool shutdown_in_callback = false;
    void seen() {
        calls.fetch_add(1);
        if (destroyed.load()) late.fetch_add(1);
        if (shutdown_in_callback) dhtc_crawler_shutdown(c);
    }
};

void on_event(const char*, void* u) { static_cast<watch*>(u)->seen(); }
int on_gate(const char*, void* u) {
    static_cast<watch*>(u)->seen();
    return 1;
}

// A thread that waits for SIGUSR1 as a host's signal-handling thread does, then shuts down.
struct signal_thread {
    sigset_t set;
    std::atomic<bool> ready{false};
    std::thread t;
    explicit signal_thread(dhtc_crawler* c) {
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        t = std::thread([this, c] {
            pthread_sigmask(SIG_BLOCK, &set, nullptr); // delivered to sigwait, never to a handler
            ready = true;
            int sig = 0;
            sigwait(&set, &sig);
            dhtc_crawler_shutdown(c);
        });
    }
    void fire() {
        while (!ready) std::this_thread::yield();
        pthread_kill(t.native_handle(), SIGUSR1);
    }
    ~signal_thread() { t.join(); }
};

void one_cycle(const std::string& options, stop_from how, bool fetch_in_flight, dhtc::test::fake_peer& peer,
               announcer& client) {
    watch w;
    REQUIRE(dhtc_crawler_create(options.c_str(), &w.c) == DHTC_OK);
    w.shutdown_in_callback = how == stop_from::callback;
    dhtc_crawler_set_gate_callback(w.c, on_gate, &w);
    dhtc_crawler_set_completion_callback(w.c, on_event, &w);
    dhtc_crawler_set_retry_callback(w.c, on_event, &w);
    dhtc_crawler_set_error_callback(w.c, on_event, &w);
    std::atomic<int> run_status{1};
    std::thread runner([&] { run_status = dhtc_crawler_run(w.c); });
    // The announce waits in the socket until the network thread runs.
    if (fetch_in_flight || how == stop_from::callback) {
        // A store that outlives the cycle (PostgreSQL) holds the hash an earlier cycle left:
        // the crawler may lease it at once, and its gate (stop_from::callback) shut the
        // crawler down before this announce is answered. Only that excuses silence.
        if (!client.try_announce(udp_port_of(w.c), peer.info_hash(), peer.local_endpoint().port)) {
            CHECK(how == stop_from::callback);
            CHECK(dhtc_crawler_wait(w.c, 0) == DHTC_OK);
        }
    }
    switch (how) {
    case stop_from::host:
    case stop_from::racing_destroy: break;
    case stop_from::callback:
        // The gate callback shuts down; should the announce not reach it, the wait ends it.
        if (dhtc_crawler_wait(w.c, 3000) == DHTC_ERR_TIMEOUT) dhtc_crawler_shutdown(w.c);
        break;
    case stop_from::other_thread: std::thread([&] { dhtc_crawler_shutdown(w.c); }).join(); break;
    case stop_from::signal_thread: {
        signal_thread s(w.c);
        s.fire();
        break;
    }
    case stop_from::two_threads: {
        std::thread a([&] { dhtc_crawler_shutdown(w.c); });
        std::thread b([&] { dhtc_crawler_shutdown(w.c); });
        a.join();
        b.join();
        break;
    }
    }
    if (how == stop_from::racing_destroy) {
        // A shutdown that has entered the library when destroy begins is waited for.
        std::atomic<bool> entered{false};
        std::thread racer([&] {
            entered = true;
            dhtc_crawler_shutdown(w.c);
        });
        while (!entered) std::this_thread::yield();
        dhtc_crawler_shutdown(w.c); // run() must return before destroy: ask it too
        runner.join();
        CHECK(dhtc_crawler_destroy(w.c) == DHTC_OK);
        w.destroyed = true;
        racer.join();
    } else {
        if (how == stop_from::host) CHECK(dhtc_crawler_shutdown(w.c) == DHTC_OK);
        runner.join();
        CHECK(dhtc_crawler_destroy(w.c) == DHTC_OK); // right after run returned
        w.destroyed = true;
    }
    // run() either ran and was ended, or found the crawler already shut down.
    CHECK((run_status == DHTC_OK || run_status == DHTC_ERR_STATE));
    std::this_thread::sleep_for(1ms);
    CHECK(w.late.load() == 0);
}

void run_matrix(const std::string& store, int cycles) {
    dhtc::test::peer_script silent;
    silent.mode = dhtc::test::peer_mode::silent; // fetches stay in flight until the shutdown
    dhtc::test::fake_peer peer(fixture("v1_single"), silent);
    announcer client;
    const std::size_t threads_before = thread_count();
    const std::size_t fds_before = fd_count();
    for (const auto how : all_stops)
        for (const bool in_flight : {false, true})
            for (int i = 0; i < cycles; ++i) {
                const std::string stop = name_of(how);
                CAPTURE(stop);
                CAPTURE(in_flight);
                one_cycle(options_with(store), how, in_flight, peer, client);
            }
    CHECK(thread_count() <= threads_before);
    // The fake peer lives in this process and closes its side of the last cycle's
    // connection on its own thread when it reads EOF, maybe just after destroy returned.
    CHECK(dhtc::test::eventually([&] { return fd_count() <= fds_before; }, std::chrono::seconds(5)));
}

std::string temp_sqlite() {
    static int n = 0;
    const auto p = std::filesystem::temp_directory_path() /
                   ("dhtc-lifecycle-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".sqlite");
    return p.string();
}

} // namespace

TEST_SUITE("capi.lifecycle") {

TEST_CASE("no retry store: every shutdown path, destroy after run and with fetches in flight") {
    run_matrix("", cycles_per_case());
}

TEST_CASE("SQLite retry store in memory: every shutdown path (the shutdown that hung on std::thread::join)") {
    run_matrix(R"({"store":{"kind":"sqlite","path":""}})", cycles_per_case());
}

TEST_CASE("SQLite retry store in a file: every shutdown path") {
    // Fewer cycles: each opens and closes the file (fsync), which is the slow part, not ours.
    const std::string path = temp_sqlite();
    run_matrix(R"({"store":{"kind":"sqlite","path":")" + path + R"("}})", std::max(1, cycles_per_case() / 8));
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}

TEST_CASE("PostgreSQL retry store: every shutdown path") {
    const char* pg = std::getenv("DHTC_TEST_PG");
    if (!pg) {
        MESSAGE("skipped: DHTC_TEST_PG is not set (tests/run.sh starts PostgreSQL and sets it)");
        return;
    }
    const nlohmann::json store = {{"store", {{"kind", "postgresql"}, {"conninfo", pg}}}};
    run_matrix(store.dump(), std::max(1, cycles_per_case() / 4));
}

} // TEST_SUITE
