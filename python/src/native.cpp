// dhtcrawler._native: a thin pybind11 layer over the C ABI (capi/include/dhtcrawler.h) and
// nothing else. The Python package (dhtcrawler/_crawler.py) builds the idiomatic API on top.
//
// Threads: the library runs every callback on its delivery thread. Each trampoline takes
// the GIL there, calls the Python callable, and catches everything: no Python exception and
// no C++ exception crosses into C. A failed gate or torrent-with-ack counts as a rejection.
// Blocking calls (start, wait, poll, destroy) release the GIL, so the delivery thread can
// take it while the host thread waits; wait and poll run Python's signal handlers every
// few milliseconds. shutdown never blocks.
#include <pybind11/pybind11.h>

#include <dhtcrawler.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace py = pybind11;

namespace {

// Set while a trampoline runs, so the Python side can tell it is on the delivery thread
// (where dhtc_crawler_destroy() is not allowed).
thread_local bool in_delivery_callback = false;

struct delivery_scope {
    delivery_scope() { in_delivery_callback = true; }
    ~delivery_scope() { in_delivery_callback = false; }
    delivery_scope(const delivery_scope&) = delete;
    delivery_scope& operator=(const delivery_scope&) = delete;
};

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() != 0;
#else
    return _Py_IsFinalizing() != 0;
#endif
}

// Strings the library hands out through char** are freed with dhtc_string_free().
struct library_string {
    char* text = nullptr;
    library_string() = default;
    library_string(const library_string&) = delete;
    library_string& operator=(const library_string&) = delete;
    ~library_string() { dhtc_string_free(text); }
    std::string str() const { return text ? std::string(text) : std::string(); }
};

py::object native_error_type; // dhtcrawler._native.NativeError(status, status_name, message)

[[noreturn]] void raise_status(int status) {
    const std::string message = dhtc_last_error();
    PyErr_SetObject(native_error_type.ptr(),
                    py::make_tuple(status, std::string(dhtc_status_name(status)), message).ptr());
    throw py::error_already_set();
}

void check(int status) {
    if (status != DHTC_OK) raise_status(status);
}

// The Python callables one crawler delivers to. Owned by the handle; kept alive until the
// crawler is destroyed, since the library may call back up to then.
struct callbacks {
    py::object gate, torrent, completion, retry, error, observation, scrape;
    bool torrent_wants_ack = false;

    // Called with the GIL held, by the owner only, once the library can no longer call back.
    void clear() {
        gate = py::object();
        torrent = py::object();
        completion = py::object();
        retry = py::object();
        error = py::object();
        observation = py::object();
        scrape = py::object();
    }
};

// A Python callable raised past the package's own guard (which reports and swallows user
// exceptions); say so on sys.unraisablehook rather than let it reach C.
void report_unraisable(py::error_already_set& e, const char* where) {
    e.discard_as_unraisable(where);
}

template <typename F>
int guarded_call(const char* where, int on_failure, F&& call) {
    if (interpreter_finalizing()) return on_failure;
    py::gil_scoped_acquire gil;
    delivery_scope scope;
    try {
        return call();
    } catch (py::error_already_set& e) {
        report_unraisable(e, where);
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        py::error_already_set err;
        report_unraisable(err, where);
    } catch (...) {
        PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
        py::error_already_set err;
        report_unraisable(err, where);
    }
    return on_failure;
}

int gate_trampoline(const char* info_hash, void* user_data) {
    auto* cb = static_cast<callbacks*>(user_data);
    return guarded_call("dhtcrawler gate callback", 0,
                        [&] { return cb->gate(info_hash).cast<bool>() ? 1 : 0; });
}

int torrent_call(callbacks* cb, const char* json, const unsigned char* info, std::size_t len) {
    py::bytes raw(reinterpret_cast<const char*>(info), len);
    py::object result = cb->torrent(py::str(json), raw);
    return result.cast<int>(); // a dhtc_answer (the package's wrapper returns one)
}

void torrent_trampoline(const char* json, const unsigned char* info, std::size_t len, void* user_data) {
    auto* cb = static_cast<callbacks*>(user_data);
    guarded_call("dhtcrawler torrent callback", 0, [&] { return torrent_call(cb, json, info, len); });
}

int torrent_ack_trampoline(const char* json, const unsigned char* info, std::size_t len, void* user_data) {
    auto* cb = static_cast<callbacks*>(user_data);
    return guarded_call("dhtcrawler torrent callback", 0, [&] { return torrent_call(cb, json, info, len); });
}

template <py::object callbacks::*member>
void event_trampoline(const char* json, void* user_data) {
    auto* cb = static_cast<callbacks*>(user_data);
    guarded_call("dhtcrawler event callback", 0, [&] {
        (cb->*member)(py::str(json));
        return 0;
    });
}

// One crawler handle, shared by every Python thread that calls into it. Calls that reach
// the C ABI hold a "use" of the handle; destroy marks the handle closing, requests the
// shutdown (which ends every blocking wait and poll), waits for the uses to end and only
// then destroys. So no thread ever passes a destroyed handle to the library, and two
// closes at once are one destroy (the second waits for the first).
class native_crawler {
public:
    explicit native_crawler(const std::string& options_json) : cb_(std::make_unique<callbacks>()) {
        dhtc_crawler* c = nullptr;
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_create(options_json.c_str(), &c);
        }
        check(status);
        crawler_ = c;
    }

    native_crawler(const native_crawler&) = delete;
    native_crawler& operator=(const native_crawler&) = delete;

    // The Python object is gone, so no method runs (each call holds a reference). A callback
    // may still be running: the crawler is destroyed here only if that takes no waiting for
    // one; otherwise a thread of its own destroys it once the callback returned. That thread
    // owns the callables until then (the library may still deliver cancelled completions)
    // and releases them afterwards.
    ~native_crawler() {
        dhtc_crawler* c = std::exchange(crawler_, nullptr);
        if (!c) return;
        const bool here = !in_delivery_callback; // the library refuses to destroy on its own thread
        int status = DHTC_ERR_STATE;
        {
            py::gil_scoped_release release;
            dhtc_crawler_shutdown(c);
            if (here) status = dhtc_crawler_destroy_timeout(c, 0);
        }
        if (status == DHTC_OK) return;
        std::thread([c, cbs = cb_.release()] {
            dhtc_crawler_destroy(c);
            if (!interpreter_finalizing()) {
                py::gil_scoped_acquire gil;
                delete cbs;
            }
        }).detach();
    }

    void set_gate(py::object fn) {
        use u(*this, true);
        cb_->gate = std::move(fn);
        check(dhtc_crawler_set_gate_callback(u.c, cb_->gate.is_none() ? nullptr : gate_trampoline, cb_.get()));
    }

    void set_torrent(py::object fn, bool with_ack) {
        use u(*this, true);
        cb_->torrent = std::move(fn);
        cb_->torrent_wants_ack = with_ack;
        if (cb_->torrent.is_none()) {
            check(dhtc_crawler_set_torrent_callback(u.c, nullptr, nullptr));
        } else if (with_ack) {
            check(dhtc_crawler_set_torrent_ack_callback(u.c, torrent_ack_trampoline, cb_.get()));
        } else {
            check(dhtc_crawler_set_torrent_callback(u.c, torrent_trampoline, cb_.get()));
        }
    }

    void set_completion(py::object fn) {
        use u(*this, true);
        cb_->completion = std::move(fn);
        check(dhtc_crawler_set_completion_callback(
            u.c, cb_->completion.is_none() ? nullptr : event_trampoline<&callbacks::completion>, cb_.get()));
    }

    void set_retry(py::object fn) {
        use u(*this, true);
        cb_->retry = std::move(fn);
        check(dhtc_crawler_set_retry_callback(
            u.c, cb_->retry.is_none() ? nullptr : event_trampoline<&callbacks::retry>, cb_.get()));
    }

    void set_error(py::object fn) {
        use u(*this, true);
        cb_->error = std::move(fn);
        check(dhtc_crawler_set_error_callback(
            u.c, cb_->error.is_none() ? nullptr : event_trampoline<&callbacks::error>, cb_.get()));
    }

    void set_observation(py::object fn) {
        use u(*this, true);
        cb_->observation = std::move(fn);
        check(dhtc_crawler_set_observation_callback(
            u.c, cb_->observation.is_none() ? nullptr : event_trampoline<&callbacks::observation>, cb_.get()));
    }

    void set_scrape(py::object fn) {
        use u(*this, true);
        cb_->scrape = std::move(fn);
        check(dhtc_crawler_set_scrape_callback(
            u.c, cb_->scrape.is_none() ? nullptr : event_trampoline<&callbacks::scrape>, cb_.get()));
    }

    // `info_hash`: the 20 raw bytes. The status is raised (ERR_STATE: shut down, or the
    // request queue is full).
    void request_scrape(py::bytes info_hash) {
        const std::string raw = info_hash;
        if (raw.size() != 20) throw py::value_error("info_hash must be 20 bytes");
        use u(*this, true);
        check(dhtc_crawler_request_scrape(u.c, reinterpret_cast<const unsigned char*>(raw.data())));
    }

    void enable_polling() {
        use u(*this, true);
        check(dhtc_crawler_enable_polling(u.c));
    }

    void start() {
        use u(*this, true);
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_start(u.c);
        }
        check(status);
    }

    // True once the crawler has been shut down (or closed), false when `timeout_ms` ran out
    // (negative: no limit). Waits in short slices with the GIL released and runs Python's
    // signal handlers between them, so Ctrl-C raises KeyboardInterrupt within a slice. The
    // handle is not held across a handler, which may close the crawler.
    bool wait(long long timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0LL, timeout_ms));
        for (;;) {
            long long slice = signal_slice_ms;
            if (timeout_ms >= 0) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now()).count();
                slice = std::max(0LL, std::min<long long>(slice, left));
            }
            int status = DHTC_OK;
            {
                use u(*this, false);
                if (!u.c) return true;
                py::gil_scoped_release release;
                status = dhtc_crawler_wait(u.c, slice);
            }
            if (status == DHTC_OK) return true;
            if (status != DHTC_ERR_TIMEOUT) check(status);
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return false;
        }
    }

    // The next polled event as (json, info bytes or None), or None when `timeout_ms` ran out.
    // NativeError(DHTC_ERR_STATE) once shut down and every event was taken. Sliced like wait().
    py::object poll(long long timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0LL, timeout_ms));
        for (;;) {
            long long slice = signal_slice_ms;
            if (timeout_ms >= 0) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now()).count();
                slice = std::max(0LL, std::min<long long>(slice, left));
            }
            library_string json;
            unsigned char* info = nullptr;
            std::size_t info_len = 0;
            int status = DHTC_OK;
            {
                use u(*this, true);
                py::gil_scoped_release release;
                status = dhtc_crawler_poll_event(u.c, slice, &json.text, &info, &info_len);
            }
            if (status == DHTC_OK) {
                py::object raw = py::none();
                if (info) {
                    raw = py::bytes(reinterpret_cast<const char*>(info), info_len);
                    dhtc_string_free(reinterpret_cast<char*>(info));
                }
                return py::make_tuple(py::str(json.str()), raw);
            }
            if (status != DHTC_ERR_TIMEOUT) check(status);
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return py::none();
        }
    }

    // False when no event awaits that id (answered already, or its time ran out).
    bool answer(unsigned long long id, int value) {
        use u(*this, true);
        const int status = dhtc_crawler_answer(u.c, id, value);
        if (status == DHTC_ERR_NOT_FOUND) return false;
        check(status);
        return true;
    }

    // Non-blocking (the library only requests the stop); idempotent, also after close and
    // while a close is in progress (which shuts down itself).
    void shutdown() {
        use u(*this, false);
        if (!u.c) return;
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = request_shutdown(u.c);
        }
        check(status);
    }

    // Destroys the crawler, waiting at most `timeout_ms` (negative: no limit) for a running
    // callback. True when destroyed (or closed already); false when the callback was still
    // running: the crawler is then shut down but not destroyed, and destroy may be called
    // again. Not allowed from a callback.
    bool destroy(long long timeout_ms) {
        if (in_delivery_callback) {
            raise_state("close() from inside a callback: call shutdown() there and close afterwards");
        }
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            dhtc_crawler* c = nullptr;
            {
                std::unique_lock lock(m_);
                changed_.wait(lock, [&] { return !closing_; }); // another close: wait for it
                if (!crawler_) return true;
                closing_ = true;
                c = crawler_;
            }
            request_shutdown(c); // ends the waits and polls of other threads
            {
                std::unique_lock lock(m_);
                changed_.wait(lock, [&] { return users_ == 0; });
            }
            status = timeout_ms < 0 ? dhtc_crawler_destroy(c) : dhtc_crawler_destroy_timeout(c, timeout_ms);
            {
                std::lock_guard lock(m_);
                if (status == DHTC_OK) crawler_ = nullptr;
                closing_ = false;
            }
            changed_.notify_all();
        }
        if (status == DHTC_OK) {
            cb_->clear();
            return true;
        }
        if (status == DHTC_ERR_TIMEOUT) return false;
        check(status);
        return false;
    }

    bool closed() {
        std::lock_guard lock(m_);
        return crawler_ == nullptr;
    }

    std::string stats() {
        use u(*this, true);
        return take([&](char** out) { return dhtc_crawler_stats(u.c, out); });
    }
    std::string observability() {
        use u(*this, true);
        return take([&](char** out) { return dhtc_crawler_observability(u.c, out); });
    }
    std::string metrics() {
        use u(*this, true);
        return take([&](char** out) { return dhtc_crawler_metrics(u.c, out); });
    }

private:
    static constexpr long long signal_slice_ms = 20;

    // dhtc_crawler_shutdown(), but never two at once from this binding: while one thread's
    // request is in the library, another one returns at once (the stop is requested already).
    // A library whose shutdown still blocks and joins its threads must not be entered twice
    // concurrently (two joins of one thread hang), and destroy waits for that first call
    // anyway (it is a use of the handle). Called without the GIL.
    int request_shutdown(dhtc_crawler* c) {
        std::unique_lock lock(shutdown_m_, std::try_to_lock);
        if (!lock.owns_lock()) return DHTC_OK;
        return dhtc_crawler_shutdown(c);
    }

    // A call's hold on the handle. With `required`, a closed (or closing) crawler raises
    // StateError; without, `c` is then NULL.
    struct use {
        native_crawler& self;
        dhtc_crawler* c = nullptr;
        use(native_crawler& s, bool required) : self(s) {
            {
                std::lock_guard lock(s.m_);
                if (s.crawler_ && !s.closing_) {
                    c = s.crawler_;
                    ++s.users_;
                }
            }
            if (!c && required) raise_state("the crawler is closed");
        }
        ~use() {
            if (!c) return;
            {
                std::lock_guard lock(self.m_);
                --self.users_;
            }
            self.changed_.notify_all();
        }
        use(const use&) = delete;
        use& operator=(const use&) = delete;
    };

    [[noreturn]] static void raise_state(const char* message) {
        PyErr_SetObject(native_error_type.ptr(),
                        py::make_tuple(static_cast<int>(DHTC_ERR_STATE), std::string(dhtc_status_name(DHTC_ERR_STATE)),
                                       std::string(message))
                            .ptr());
        throw py::error_already_set();
    }

    template <typename F>
    static std::string take(F&& call) {
        library_string s;
        check(call(&s.text));
        return s.str();
    }

    std::mutex m_;
    std::mutex shutdown_m_; // held while a dhtc_crawler_shutdown() of this binding runs
    std::condition_variable changed_;
    dhtc_crawler* crawler_ = nullptr; // NULL once destroyed
    int users_ = 0;                   // calls holding the handle
    bool closing_ = false;            // a destroy is in progress
    std::unique_ptr<callbacks> cb_;
};

std::string default_options() {
    library_string s;
    check(dhtc_default_options(&s.text));
    return s.str();
}

// Creates or migrates the retry store's tables (dhtc_store_migrate) without the GIL: it
// waits on the database.
void store_migrate(const std::string& options_json) {
    int status = DHTC_OK;
    {
        py::gil_scoped_release release;
        status = dhtc_store_migrate(options_json.c_str());
    }
    check(status); // dhtc_last_error() is this thread's: nothing else ran on it since
}

} // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "dhtcrawler's C ABI for Python (internal: use the dhtcrawler package)";

    native_error_type = py::reinterpret_steal<py::object>(
        PyErr_NewException("dhtcrawler._native.NativeError", PyExc_RuntimeError, nullptr));
    m.attr("NativeError") = native_error_type;

    m.attr("ABI_VERSION") = static_cast<int>(DHTC_ABI_VERSION);
    m.attr("OK") = static_cast<int>(DHTC_OK);
    m.attr("ERR_INVALID_ARGUMENT") = static_cast<int>(DHTC_ERR_INVALID_ARGUMENT);
    m.attr("ERR_INVALID_JSON") = static_cast<int>(DHTC_ERR_INVALID_JSON);
    m.attr("ERR_INVALID_OPTION") = static_cast<int>(DHTC_ERR_INVALID_OPTION);
    m.attr("ERR_BIND") = static_cast<int>(DHTC_ERR_BIND);
    m.attr("ERR_STATE") = static_cast<int>(DHTC_ERR_STATE);
    m.attr("ERR_TIMEOUT") = static_cast<int>(DHTC_ERR_TIMEOUT);
    m.attr("ERR_NO_MEMORY") = static_cast<int>(DHTC_ERR_NO_MEMORY);
    m.attr("ERR_INTERNAL") = static_cast<int>(DHTC_ERR_INTERNAL);
    m.attr("ERR_STORE") = static_cast<int>(DHTC_ERR_STORE);
    m.attr("ERR_NOT_FOUND") = static_cast<int>(DHTC_ERR_NOT_FOUND);
    m.attr("ANSWER_REJECT") = static_cast<int>(DHTC_ANSWER_REJECT);
    m.attr("ANSWER_ACCEPT") = static_cast<int>(DHTC_ANSWER_ACCEPT);
    m.attr("ANSWER_RETRY") = static_cast<int>(DHTC_ANSWER_RETRY);
    m.attr("VERSION_STRING") = DHTC_VERSION_STRING;

    m.def("version", [] { return std::string(dhtc_version()); });
    m.def("abi_version", [] { return dhtc_abi_version(); });
    m.def("status_name", [](int status) { return std::string(dhtc_status_name(status)); });
    m.def("default_options", &default_options);
    m.def("store_migrate", &store_migrate, py::arg("options_json"),
          "Creates or migrates the tables of the retry store the options name (dhtc_store_migrate).");
    m.def("in_callback", [] { return in_delivery_callback; },
          "True on the delivery thread while one of this module's callbacks runs.");

    py::class_<native_crawler>(m, "NativeCrawler")
        .def(py::init<const std::string&>(), py::arg("options_json"))
        .def("set_gate", &native_crawler::set_gate)
        .def("set_torrent", &native_crawler::set_torrent, py::arg("fn"), py::arg("with_ack"))
        .def("set_completion", &native_crawler::set_completion)
        .def("set_retry", &native_crawler::set_retry)
        .def("set_error", &native_crawler::set_error)
        .def("set_observation", &native_crawler::set_observation)
        .def("set_scrape", &native_crawler::set_scrape)
        .def("request_scrape", &native_crawler::request_scrape, py::arg("info_hash"))
        .def("enable_polling", &native_crawler::enable_polling)
        .def("start", &native_crawler::start)
        .def("wait", &native_crawler::wait, py::arg("timeout_ms"))
        .def("poll", &native_crawler::poll, py::arg("timeout_ms"))
        .def("answer", &native_crawler::answer, py::arg("id"), py::arg("answer"))
        .def("shutdown", &native_crawler::shutdown)
        .def("destroy", &native_crawler::destroy, py::arg("timeout_ms") = -1)
        .def_property_readonly("closed", &native_crawler::closed)
        .def("stats", &native_crawler::stats)
        .def("observability", &native_crawler::observability)
        .def("metrics", &native_crawler::metrics);
}
