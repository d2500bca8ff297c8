// The C ABI over api::crawler. It only converts types, catches exceptions and forwards:
// every export's body runs inside guard(), which turns any exception into a status and a
// thread-local message; events, lifecycle and polling live in core/api.
#include "dhtcrawler.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "api/crawler.hpp"
#include "api/event_json.hpp"
#include "api/options.hpp"
#include "retry/scheduler.hpp"
#include "core_version.hpp"
#include "api/snapshot.hpp"

static_assert(DHTC_ABI_VERSION == DHTC_CORE_ABI_VERSION_CHECK, "capi header and CMake disagree on the ABI version");

namespace {

thread_local std::string last_error;

struct status_error { int status; std::string message; }; // NOLINT: thrown by fail() only

int remember(int status, const char* message) noexcept {
    try {
        last_error = message;
    } catch (...) {
    }
    return status;
}

template <class F>
int guard(F&& body) noexcept {
    try {
        last_error.clear();
        return body();
    } catch (const status_error& e) {
        return remember(e.status, e.message.c_str());
    } catch (const std::bad_alloc&) {
        return remember(DHTC_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return remember(DHTC_ERR_INTERNAL, e.what());
    } catch (...) {
        return remember(DHTC_ERR_INTERNAL, "unknown exception");
    }
}

[[noreturn]] void fail(int status, std::string message) { throw status_error{status, std::move(message)}; }

void require(bool ok, const char* what) {
    if (!ok) fail(DHTC_ERR_INVALID_ARGUMENT, what);
}

char* copy_out(std::string_view s) {
    char* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (!p) throw std::bad_alloc();
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    return p;
}

int write_out(char** out, std::string_view s) { return *out = copy_out(s), DHTC_OK; }

using wait_limit = std::optional<std::chrono::milliseconds>;
wait_limit limit(long long timeout_ms) { return timeout_ms < 0 ? wait_limit() : std::chrono::milliseconds(timeout_ms); }

template <class Fn>
struct hook { Fn fn = nullptr; void* data = nullptr; }; // NOLINT: an aggregate

} // namespace

/// The opaque handle: the host's function pointers until start, then the crawler.
struct dhtc_crawler {
    std::vector<std::string> normalized;
    hook<dhtc_gate_fn> gate;
    hook<dhtc_torrent_fn> torrent;
    hook<dhtc_torrent_ack_fn> torrent_ack;
    hook<dhtc_event_fn> completion, retry, error, observation, scrape;
    bool polling = false;
    std::unique_ptr<dhtc::api::crawler> engine;
    std::once_flag configure_once;
    std::atomic<bool> configured{false}; ///< the handlers went to the engine: no more setting

    dhtc::api::event_handlers handlers() const;
};

// The host's function pointers as the delivery's handlers, each event in its JSON form.
dhtc::api::event_handlers dhtc_crawler::handlers() const {
    using namespace dhtc::api;
    event_handlers h;
    const auto event = [](hook<dhtc_event_fn> k, auto to_json) {
        return [k, to_json](const auto& e) { k.fn(to_json(e).c_str(), k.data); };
    };
    if (gate.fn) h.gate = [k = gate](const dhtc::id20& x) { return k.fn(x.hex().c_str(), k.data) != 0; };
    if (torrent.fn || torrent_ack.fn)
        h.torrent = [plain = torrent, ack = torrent_ack](const delivery& d) {
            const std::string json = torrent_json(d);
            const auto* bytes = reinterpret_cast<const unsigned char*>(d.raw.data());
            if (ack.fn) return answer_from_int(ack.fn(json.c_str(), bytes, d.raw.size(), ack.data));
            plain.fn(json.c_str(), bytes, d.raw.size(), plain.data);
            return answer::accept;
        };
    if (completion.fn) h.completion = event(completion, [](const auto& c) { return completion_json(c); });
    if (retry.fn) h.retry = event(retry, [](const auto& r) { return retry_json(r); });
    if (error.fn) h.error = event(error, [](const std::string& m) { return error_json(m); });
    if (observation.fn) h.observation = event(observation, [](const auto& o) { return observation_json(o); });
    if (scrape.fn) h.scrape = event(scrape, [](const auto& s) { return scrape_json(s); });
    return h;
}

namespace {

dhtc::api::crawler& engine(dhtc_crawler* c) {
    require(c && c->engine, "crawler is NULL");
    return *c->engine;
}

template <class Apply>
int set_before_start(dhtc_crawler* c, Apply apply) {
    return guard([&] {
        require(c, "crawler is NULL");
        if (c->configured.load()) fail(DHTC_ERR_STATE, "callbacks can only be set before start");
        apply();
        return DHTC_OK;
    });
}

template <class Render>
int snapshot_out(dhtc_crawler* c, char** out, Render render) {
    return guard([&] {
        require(out, "out is NULL");
        return write_out(out, render(engine(c)));
    });
}

// The options document as dhtc_crawler_create() takes it (NULL or "": every default);
// returns what was normalised.
std::vector<std::string> parse_options(const char* options_json, dhtc::api::crawler_options& options) {
    const std::string_view text = options_json ? options_json : "";
    if (text.empty()) return {};
    auto r = dhtc::api::parse_options(text, options);
    if (r.status == dhtc::api::options_status::invalid_json) fail(DHTC_ERR_INVALID_JSON, r.message);
    if (!r.ok()) fail(DHTC_ERR_INVALID_OPTION, r.message);
    return std::move(r.normalized);
}

constexpr const char* shut_down_message = "the crawler was shut down; create a new one";

// The handlers are handed over once, at the first start or run.
dhtc::api::crawler::start_result start_engine(dhtc_crawler* c) {
    engine(c);
    std::call_once(c->configure_once, [c] {
        c->engine->configure(c->handlers(), c->polling);
        c->configured.store(true);
    });
    return c->engine->start();
}

} // namespace

extern "C" {

const char* dhtc_version(void) { return dhtc::version_string(); }

int dhtc_abi_version(void) { return DHTC_ABI_VERSION; }

const char* dhtc_status_name(int status) {
    static const char* const names[] = {"DHTC_OK", "DHTC_ERR_INVALID_ARGUMENT", "DHTC_ERR_INVALID_JSON",
                                        "DHTC_ERR_INVALID_OPTION", "DHTC_ERR_BIND", "DHTC_ERR_STATE", "DHTC_ERR_TIMEOUT",
                                        "DHTC_ERR_NO_MEMORY", "DHTC_ERR_INTERNAL", "DHTC_ERR_NOT_FOUND", "DHTC_ERR_STORE"};
    static_assert(sizeof names / sizeof *names == 1 - DHTC_ERR_STORE, "one name per dhtc_status");
    return status <= 0 && status >= DHTC_ERR_STORE ? names[-status] : "DHTC_ERR_UNKNOWN";
}

const char* dhtc_last_error(void) { return last_error.c_str(); }

void dhtc_string_free(char* s) { std::free(s); }

int dhtc_default_options(char** out) {
    return guard([&] {
        require(out, "out is NULL");
        return write_out(out, dhtc::api::default_options_json());
    });
}

int dhtc_crawler_create(const char* options_json, dhtc_crawler** out) {
    return guard([&] {
        require(out, "out is NULL");
        *out = nullptr;
        auto c = std::make_unique<dhtc_crawler>();
        dhtc::api::crawler_options options;
        c->normalized = parse_options(options_json, options);
        std::string error;
        auto why = dhtc::api::create_failure::none;
        c->engine = dhtc::api::crawler::create(options, error, &why);
        if (!c->engine) fail(why == dhtc::api::create_failure::store ? DHTC_ERR_STORE : DHTC_ERR_BIND, error);
        *out = c.release();
        return DHTC_OK;
    });
}

int dhtc_store_migrate(const char* options_json) {
    return guard([&] {
        dhtc::api::crawler_options options;
        parse_options(options_json, options);
        if (options.retry.kind == dhtc::retry::store_kind::none)
            fail(DHTC_ERR_INVALID_OPTION, "retry.store.kind: \"none\" names no store to migrate");
        try {
            dhtc::retry::migrate_store(options.retry);
        } catch (const dhtc::retry::store_error& e) {
            fail(DHTC_ERR_STORE, e.what());
        }
        return DHTC_OK;
    });
}

int dhtc_crawler_destroy(dhtc_crawler* c) { return dhtc_crawler_destroy_timeout(c, -1); }

int dhtc_crawler_destroy_timeout(dhtc_crawler* c, long long timeout_ms) {
    return guard([&] {
        if (!c) return DHTC_OK;
        using close_result = dhtc::api::crawler::close_result;
        const auto r = c->engine->close(limit(timeout_ms));
        if (r == close_result::from_handler)
            fail(DHTC_ERR_STATE, "dhtc_crawler_destroy called from a callback: call dhtc_crawler_shutdown instead");
        if (r == close_result::timeout) fail(DHTC_ERR_TIMEOUT, "a callback is still running; the crawler is shut down");
        delete c;
        return DHTC_OK;
    });
}

int dhtc_crawler_start(dhtc_crawler* c) {
    return guard([&] {
        const auto r = start_engine(c);
        if (r == dhtc::api::crawler::start_result::already_started) fail(DHTC_ERR_STATE, "the crawler is already started");
        if (r == dhtc::api::crawler::start_result::shut_down) fail(DHTC_ERR_STATE, shut_down_message);
        return DHTC_OK;
    });
}

int dhtc_crawler_run(dhtc_crawler* c) {
    return guard([&] {
        if (engine(c).shut_down()) fail(DHTC_ERR_STATE, shut_down_message);
        start_engine(c); // a shutdown racing it ends the wait below at once
        c->engine->wait(std::nullopt);
        return DHTC_OK;
    });
}

int dhtc_crawler_wait(dhtc_crawler* c, long long timeout_ms) {
    return guard([&] { return engine(c).wait(limit(timeout_ms)) ? DHTC_OK : DHTC_ERR_TIMEOUT; });
}

int dhtc_crawler_shutdown(dhtc_crawler* c) {
    return guard([&] { return engine(c).shutdown(), DHTC_OK; });
}

// `other` is the field the setter clears: the two torrent callbacks replace each other.
#define DHTC_SETTER(name, type, other)                                                          \
    int dhtc_crawler_set_##name##_callback(dhtc_crawler* c, type fn, void* user_data) {         \
        return set_before_start(c, [&] { c->other = {}, c->name = decltype(c->name){fn, user_data}; }); \
    }
DHTC_SETTER(gate, dhtc_gate_fn, gate)
DHTC_SETTER(torrent, dhtc_torrent_fn, torrent_ack)
DHTC_SETTER(torrent_ack, dhtc_torrent_ack_fn, torrent)
DHTC_SETTER(completion, dhtc_event_fn, completion)
DHTC_SETTER(retry, dhtc_event_fn, retry)
DHTC_SETTER(error, dhtc_event_fn, error)
DHTC_SETTER(observation, dhtc_event_fn, observation)
DHTC_SETTER(scrape, dhtc_event_fn, scrape)
#undef DHTC_SETTER

int dhtc_crawler_request_scrape(dhtc_crawler* c, const unsigned char info_hash[20]) {
    return guard([&] {
        require(info_hash, "info_hash is NULL");
        auto& e = engine(c);
        if (e.shut_down()) fail(DHTC_ERR_STATE, shut_down_message);
        dhtc::id20 h;
        std::memcpy(h.bytes.data(), info_hash, dhtc::id20::size);
        if (!e.request_scrape(h)) fail(DHTC_ERR_STATE, "the scrape request queue is full: ask again later");
        return DHTC_OK;
    });
}

int dhtc_crawler_enable_polling(dhtc_crawler* c) { return set_before_start(c, [&] { c->polling = true; }); }

int dhtc_crawler_poll_event(dhtc_crawler* c, long long timeout_ms, char** out_json, unsigned char** out_info,
                            size_t* out_info_len) {
    return guard([&] {
        require(out_json, "out_json is NULL");
        *out_json = nullptr;
        if (out_info) *out_info = nullptr;
        if (out_info_len) *out_info_len = 0;
        dhtc::api::polled_event e;
        using poll_status = dhtc::api::event_delivery::poll_status;
        const auto got = engine(c).events().poll(limit(timeout_ms), e);
        if (got == poll_status::closed) fail(DHTC_ERR_STATE, "the crawler is shut down and every event was taken");
        if (got == poll_status::timeout) fail(DHTC_ERR_TIMEOUT, "no event");
        *out_json = copy_out(e.json);
        if (out_info && !e.info.empty()) {
            *out_info = reinterpret_cast<unsigned char*>(copy_out(e.info));
            if (out_info_len) *out_info_len = e.info.size();
        }
        return DHTC_OK;
    });
}

int dhtc_crawler_answer(dhtc_crawler* c, unsigned long long event_id, int answer) {
    return guard([&] {
        if (!engine(c).events().answer_event(event_id, answer)) fail(DHTC_ERR_NOT_FOUND, "no event awaits that id");
        return DHTC_OK;
    });
}

int dhtc_crawler_stats(dhtc_crawler* c, char** out_json) {
    return snapshot_out(c, out_json, [c](const dhtc::api::crawler& e) {
        auto j = dhtc::stats::runtime_snapshot(e);
        j["normalized"] = c->normalized;
        return j.dump();
    });
}

int dhtc_crawler_observability(dhtc_crawler* c, char** out_json) {
    return snapshot_out(c, out_json, [](const auto& e) { return dhtc::stats::observability_snapshot(e).dump(); });
}

int dhtc_crawler_metrics(dhtc_crawler* c, char** out_text) {
    return snapshot_out(c, out_text, [](const auto& e) { return dhtc::stats::prometheus_text(e); });
}

} // extern "C"
