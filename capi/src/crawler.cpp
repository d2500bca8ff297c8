// The C ABI over engine::crawler. Every export is noexcept in effect: its body runs inside
// guard(), which turns any exception into a status and a thread-local message. Callbacks
// from the engine reach the host's function pointers here, on the delivery thread.
#include "dhtcrawler.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>

#include "api/options.hpp"
#include "api/snapshot.hpp"
#include "engine/crawler.hpp"
#include "metadata/torrent_json.hpp"

namespace {

thread_local std::string last_error;

struct status_error {
    int status;
    std::string message;
};

template <class F>
int guard(F&& body) noexcept {
    try {
        last_error.clear();
        return body();
    } catch (const status_error& e) {
        try {
            last_error = e.message;
        } catch (...) {
        }
        return e.status;
    } catch (const std::bad_alloc&) {
        last_error.clear();
        return DHTC_ERR_NO_MEMORY;
    } catch (const std::exception& e) {
        try {
            last_error = e.what();
        } catch (...) {
        }
        return DHTC_ERR_INTERNAL;
    } catch (...) {
        return DHTC_ERR_INTERNAL;
    }
}

[[noreturn]] void fail(int status, std::string message) { throw status_error{status, std::move(message)}; }

char* copy_out(std::string_view s) {
    char* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (!p) throw std::bad_alloc();
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    return p;
}

void require(bool ok, const char* what) {
    if (!ok) fail(DHTC_ERR_INVALID_ARGUMENT, what);
}

std::string completion_json(const dhtc::metadata::completion& c) {
    nlohmann::json j{{"type", "completion"},
                     {"schema", 1},
                     {"info_hash", c.info_hash.hex()},
                     {"outcome", dhtc::metadata::to_string(c.result)},
                     {"failure", c.result == dhtc::metadata::outcome::fetch_failed
                                     ? nlohmann::json(dhtc::metadata::to_string(c.failure))
                                     : nlohmann::json(nullptr)},
                     {"attempts", c.attempts},
                     {"peer", c.peer ? nlohmann::json(c.peer->to_string()) : nlohmann::json(nullptr)},
                     {"round", c.round}};
    return j.dump();
}

std::string retry_json(const dhtc::retry::retry_event& e) {
    const bool dormant = e.state == dhtc::retry::hash_state::dormant;
    return nlohmann::json{{"type", "retry"},
                          {"schema", 1},
                          {"info_hash", e.info_hash.hex()},
                          {"state", dhtc::retry::to_string(e.state)},
                          {"attempts", e.attempts},
                          {"failure", dormant ? nlohmann::json(dhtc::metadata::to_string(e.failure))
                                              : nlohmann::json(nullptr)},
                          {"next_retry_at", dormant ? nlohmann::json(e.next_retry_at) : nlohmann::json(nullptr)}}
        .dump();
}

std::string error_json(const std::string& message) {
    return nlohmann::json{{"type", "error"}, {"schema", 1}, {"message", message}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string observation_json(const dhtc::crawl::observation& o) {
    return nlohmann::json{{"type", "observation"},
                          {"schema", 1},
                          {"info_hash", o.info_hash.hex()},
                          {"source", o.source.to_string()},
                          {"kind", dhtc::crawl::to_string(o.kind)}}
        .dump();
}

} // namespace

/// The opaque handle. Holds the host's callbacks and the polling state; the engine's
/// callbacks (on the delivery thread) dispatch to one or the other.
struct dhtc_crawler {
    std::unique_ptr<dhtc::engine::crawler> engine;
    std::vector<std::string> normalized;
    unsigned answer_timeout_millis = 5000;

    dhtc_gate_fn gate = nullptr;
    void* gate_data = nullptr;
    dhtc_torrent_fn torrent = nullptr;
    dhtc_torrent_ack_fn torrent_ack = nullptr;
    void* torrent_data = nullptr;
    dhtc_event_fn completion = nullptr;
    void* completion_data = nullptr;
    dhtc_event_fn retry = nullptr;
    void* retry_data = nullptr;
    dhtc_event_fn error = nullptr;
    void* error_data = nullptr;
    dhtc_event_fn observation = nullptr;
    void* observation_data = nullptr;
    bool polling = false;

    std::mutex m;
    std::condition_variable changed;
    bool started = false;
    bool starting = false; // engine->start() is running: a shutdown waits for it to finish
    bool shut_down = false;

    // Polling.
    struct event {
        std::string json;
        std::string info;
    };
    static constexpr std::size_t poll_capacity = 8192;
    std::deque<event> events;
    std::map<unsigned long long, std::optional<bool>> answers; // id -> answer, while awaited
    unsigned long long next_id = 1;
    std::uint64_t poll_dropped = 0;

    dhtc::engine::app_callbacks make_callbacks();
    bool await_answer(event e, unsigned long long id, bool default_answer);
    void push(event e, bool droppable);
};

void dhtc_crawler::push(event e, bool droppable) {
    {
        std::lock_guard lock(m);
        if (droppable && events.size() >= poll_capacity) {
            ++poll_dropped;
            return;
        }
        events.push_back(std::move(e));
    }
    changed.notify_all();
}

// On the delivery thread: publish the event, then wait for the host's answer (or the
// configured time, or shutdown) so events stay in order.
bool dhtc_crawler::await_answer(event e, unsigned long long id, bool default_answer) {
    std::unique_lock lock(m);
    answers.emplace(id, std::nullopt);
    events.push_back(std::move(e));
    changed.notify_all();
    changed.wait_for(lock, std::chrono::milliseconds(answer_timeout_millis),
                     [&] { return answers[id].has_value() || shut_down; });
    const auto a = answers[id];
    answers.erase(id);
    return a.value_or(default_answer);
}

dhtc::engine::app_callbacks dhtc_crawler::make_callbacks() {
    dhtc::engine::app_callbacks cb;
    cb.gate = [this](const dhtc::id20& h) {
        if (polling) {
            unsigned long long id;
            {
                std::lock_guard lock(m);
                id = next_id++;
            }
            return await_answer(
                {nlohmann::json{{"type", "gate"}, {"schema", 1}, {"id", id}, {"info_hash", h.hex()}}.dump(), {}}, id,
                true);
        }
        if (!gate) return true;
        const std::string hex = h.hex();
        return gate(hex.c_str(), gate_data) != 0;
    };
    // Without any torrent callback (and without polling) the engine reports delivery_rejected.
    cb.torrent = [this](const dhtc::metadata::delivery& d) {
        const std::string json = dhtc::metadata::to_json_line(d.info, d.peer, d.discovered_at);
        const auto* bytes = reinterpret_cast<const unsigned char*>(d.raw.data());
        if (polling) {
            unsigned long long id;
            {
                std::lock_guard lock(m);
                id = next_id++;
            }
            const std::string env = "{\"type\":\"torrent\",\"schema\":1,\"id\":" + std::to_string(id) +
                                    ",\"torrent\":" + json + "}";
            return await_answer({env, d.raw}, id, false);
        }
        if (torrent_ack) return torrent_ack(json.c_str(), bytes, d.raw.size(), torrent_data) != 0;
        if (torrent) {
            torrent(json.c_str(), bytes, d.raw.size(), torrent_data);
            return true;
        }
        return false;
    };
    cb.completion = [this](const dhtc::metadata::completion& c) {
        if (polling) return push({completion_json(c), {}}, false);
        if (completion) completion(completion_json(c).c_str(), completion_data);
    };
    // Retry events share the completion callback: they tell what became of a round.
    cb.retry = [this](const dhtc::retry::retry_event& e) {
        if (polling) return push({retry_json(e), {}}, true);
        if (retry) retry(retry_json(e).c_str(), retry_data);
    };
    cb.error = [this](const std::string& message) {
        if (polling) return push({error_json(message), {}}, true);
        if (error) error(error_json(message).c_str(), error_data);
    };
    cb.observation = [this](const dhtc::crawl::observation& o) {
        if (polling) return push({observation_json(o), {}}, true);
        if (observation) observation(observation_json(o).c_str(), observation_data);
    };
    return cb;
}

namespace {

// Callbacks may be changed only before start: the delivery thread reads them unlocked.
int set_before_start(dhtc_crawler* c, const std::function<void()>& apply) {
    return guard([&] {
        require(c, "crawler is NULL");
        std::lock_guard lock(c->m);
        if (c->started || c->shut_down) fail(DHTC_ERR_STATE, "callbacks can only be set before start");
        apply();
        return DHTC_OK;
    });
}

int write_out(char** out, std::string_view s) {
    *out = copy_out(s);
    return DHTC_OK;
}

} // namespace

extern "C" {

const char* dhtc_status_name(int status) {
    switch (status) {
    case DHTC_OK: return "DHTC_OK";
    case DHTC_ERR_INVALID_ARGUMENT: return "DHTC_ERR_INVALID_ARGUMENT";
    case DHTC_ERR_INVALID_JSON: return "DHTC_ERR_INVALID_JSON";
    case DHTC_ERR_INVALID_OPTION: return "DHTC_ERR_INVALID_OPTION";
    case DHTC_ERR_BIND: return "DHTC_ERR_BIND";
    case DHTC_ERR_STATE: return "DHTC_ERR_STATE";
    case DHTC_ERR_TIMEOUT: return "DHTC_ERR_TIMEOUT";
    case DHTC_ERR_NO_MEMORY: return "DHTC_ERR_NO_MEMORY";
    case DHTC_ERR_INTERNAL: return "DHTC_ERR_INTERNAL";
    case DHTC_ERR_NOT_FOUND: return "DHTC_ERR_NOT_FOUND";
    case DHTC_ERR_STORE: return "DHTC_ERR_STORE";
    default: return "DHTC_ERR_UNKNOWN";
    }
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
        dhtc::engine::crawler_options options;
        const std::string_view text = options_json ? options_json : "";
        auto c = std::make_unique<dhtc_crawler>();
        if (!text.empty()) {
            auto r = dhtc::api::parse_options(text, options);
            switch (r.status) {
            case dhtc::api::options_status::ok: break;
            case dhtc::api::options_status::invalid_json: fail(DHTC_ERR_INVALID_JSON, r.message);
            default: fail(DHTC_ERR_INVALID_OPTION, r.message);
            }
            c->normalized = std::move(r.normalized);
        }
        c->answer_timeout_millis = options.metadata.gate_timeout_millis;
        std::string error;
        dhtc::engine::create_failure why = dhtc::engine::create_failure::none;
        c->engine = dhtc::engine::crawler::create(options, c->make_callbacks(), error, &why);
        if (!c->engine) fail(why == dhtc::engine::create_failure::store ? DHTC_ERR_STORE : DHTC_ERR_BIND, error);
        *out = c.release();
        return DHTC_OK;
    });
}

int dhtc_crawler_destroy(dhtc_crawler* c) {
    return guard([&] {
        if (!c) return DHTC_OK;
        if (c->engine->delivery().on_this_thread())
            fail(DHTC_ERR_STATE, "dhtc_crawler_destroy called from a callback: call dhtc_crawler_shutdown instead");
        dhtc_crawler_shutdown(c);
        // Joins every thread, delivering what is queued first: after this no callback runs.
        c->engine.reset();
        delete c;
        return DHTC_OK;
    });
}

namespace {

// Starts the engine once (the first of start and run does it), unless a shutdown came
// first. False when it did not start it.
bool start_engine(dhtc_crawler* c) {
    {
        std::lock_guard lock(c->m);
        if (c->started || c->shut_down) return false;
        c->started = true;
        c->starting = true;
    }
    struct starting_done {
        dhtc_crawler* c;
        ~starting_done() {
            {
                std::lock_guard lock(c->m);
                c->starting = false;
            }
            c->changed.notify_all();
        }
    } done{c};
    c->engine->delivery().want_observations(c->polling || c->observation);
    c->engine->start();
    return true;
}

} // namespace

int dhtc_crawler_start(dhtc_crawler* c) {
    return guard([&] {
        require(c, "crawler is NULL");
        if (start_engine(c)) return DHTC_OK;
        std::lock_guard lock(c->m);
        if (c->shut_down) fail(DHTC_ERR_STATE, "the crawler was shut down; create a new one");
        fail(DHTC_ERR_STATE, "the crawler is already started");
    });
}

int dhtc_crawler_run(dhtc_crawler* c) {
    return guard([&] {
        require(c, "crawler is NULL");
        {
            std::lock_guard lock(c->m);
            if (c->shut_down) fail(DHTC_ERR_STATE, "the crawler was shut down; create a new one");
        }
        start_engine(c);
        std::unique_lock lock(c->m);
        c->changed.wait(lock, [&] { return c->shut_down; });
        return DHTC_OK;
    });
}

int dhtc_crawler_wait(dhtc_crawler* c, long long timeout_ms) {
    return guard([&] {
        require(c, "crawler is NULL");
        std::unique_lock lock(c->m);
        if (timeout_ms < 0) {
            c->changed.wait(lock, [&] { return c->shut_down; });
            return DHTC_OK;
        }
        return c->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return c->shut_down; })
                   ? DHTC_OK
                   : DHTC_ERR_TIMEOUT;
    });
}

int dhtc_crawler_shutdown(dhtc_crawler* c) {
    return guard([&] {
        require(c, "crawler is NULL");
        {
            std::unique_lock lock(c->m);
            c->shut_down = true;
            // A stop racing a start on another thread could stop parts not yet started,
            // which would then run on; the start is short (the sockets are bound already).
            c->changed.wait(lock, [&] { return !c->starting; });
        }
        c->changed.notify_all();
        // Called every time, not only the first: stop() is idempotent and a second caller
        // waits until the first one's stop has finished. So when a callback shuts down
        // while the host destroys, destroy cannot free the engine under the callback.
        c->engine->stop();
        return DHTC_OK;
    });
}

int dhtc_crawler_set_gate_callback(dhtc_crawler* c, dhtc_gate_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->gate = fn;
        c->gate_data = user_data;
    });
}

int dhtc_crawler_set_torrent_callback(dhtc_crawler* c, dhtc_torrent_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->torrent = fn;
        c->torrent_ack = nullptr;
        c->torrent_data = user_data;
    });
}

int dhtc_crawler_set_torrent_ack_callback(dhtc_crawler* c, dhtc_torrent_ack_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->torrent_ack = fn;
        c->torrent = nullptr;
        c->torrent_data = user_data;
    });
}

int dhtc_crawler_set_completion_callback(dhtc_crawler* c, dhtc_event_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->completion = fn;
        c->completion_data = user_data;
    });
}

int dhtc_crawler_set_retry_callback(dhtc_crawler* c, dhtc_event_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->retry = fn;
        c->retry_data = user_data;
    });
}

int dhtc_crawler_destroy_timeout(dhtc_crawler* c, long long) { return dhtc_crawler_destroy(c); }

int dhtc_crawler_set_error_callback(dhtc_crawler* c, dhtc_event_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->error = fn;
        c->error_data = user_data;
    });
}

int dhtc_crawler_set_observation_callback(dhtc_crawler* c, dhtc_event_fn fn, void* user_data) {
    return set_before_start(c, [&] {
        c->observation = fn;
        c->observation_data = user_data;
    });
}

int dhtc_crawler_enable_polling(dhtc_crawler* c) {
    return set_before_start(c, [&] { c->polling = true; });
}

int dhtc_crawler_poll_event(dhtc_crawler* c, long long timeout_ms, char** out_json, unsigned char** out_info,
                            size_t* out_info_len) {
    return guard([&] {
        require(c && out_json, "crawler or out_json is NULL");
        *out_json = nullptr;
        if (out_info) *out_info = nullptr;
        if (out_info_len) *out_info_len = 0;
        std::unique_lock lock(c->m);
        const auto ready = [&] { return !c->events.empty() || c->shut_down; };
        if (timeout_ms < 0) {
            c->changed.wait(lock, ready);
        } else {
            c->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
        }
        if (c->events.empty()) {
            if (c->shut_down) fail(DHTC_ERR_STATE, "the crawler is shut down and every event was taken");
            fail(DHTC_ERR_TIMEOUT, "no event");
        }
        dhtc_crawler::event e = std::move(c->events.front());
        c->events.pop_front();
        lock.unlock();
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
        require(c, "crawler is NULL");
        {
            std::lock_guard lock(c->m);
            const auto it = c->answers.find(event_id);
            if (it == c->answers.end() || it->second) fail(DHTC_ERR_NOT_FOUND, "no event awaits that id");
            it->second = answer != 0 && answer != DHTC_ANSWER_RETRY;
        }
        c->changed.notify_all();
        return DHTC_OK;
    });
}

int dhtc_crawler_stats(dhtc_crawler* c, char** out_json) {
    return guard([&] {
        require(c && out_json, "crawler or out_json is NULL");
        auto j = dhtc::api::runtime_snapshot(*c->engine);
        j["normalized"] = c->normalized;
        return write_out(out_json, j.dump());
    });
}

int dhtc_crawler_observability(dhtc_crawler* c, char** out_json) {
    return guard([&] {
        require(c && out_json, "crawler or out_json is NULL");
        return write_out(out_json, dhtc::api::observability_snapshot(*c->engine).dump());
    });
}

int dhtc_crawler_metrics(dhtc_crawler* c, char** out_text) {
    return guard([&] {
        require(c && out_text, "crawler or out_text is NULL");
        return write_out(out_text, dhtc::api::prometheus_text(*c->engine));
    });
}

} // extern "C"
