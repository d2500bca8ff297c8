// dhtcrawler._native: a thin pybind11 layer over the C ABI (capi/include/dhtcrawler.h) and
// nothing else. The Python package (dhtcrawler/_crawler.py) builds the idiomatic API on top.
//
// Threads: the library runs every callback on its delivery thread. Each trampoline takes
// the GIL there, calls the Python callable, and catches everything: no Python exception and
// no C++ exception crosses into C. A failed gate or torrent-with-ack counts as a rejection.
// Blocking calls (wait, run, shutdown, destroy) release the GIL, so the delivery thread can
// take it while the host thread waits.
#include <pybind11/pybind11.h>

#include <dhtcrawler.h>

#include <memory>
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
    py::object gate, torrent, completion, error, observation;
    bool torrent_wants_ack = false;

    // Called with the GIL held, by the owner only, once the library can no longer call back.
    void clear() {
        gate = py::object();
        torrent = py::object();
        completion = py::object();
        error = py::object();
        observation = py::object();
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
    return result.cast<bool>() ? 1 : 0;
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

    ~native_crawler() {
        if (!crawler_) return;
        dhtc_crawler* c = std::exchange(crawler_, nullptr);
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_destroy(c);
        }
        if (status == DHTC_OK) return;
        // Dropped from inside one of its own callbacks: the library refuses to destroy there.
        // Stop it now and destroy it from a thread of its own; that thread owns the callables
        // (the library may still deliver cancelled completions) and releases them afterwards.
        dhtc_crawler_shutdown(c);
        std::thread([c, cbs = cb_.release()] {
            dhtc_crawler_destroy(c);
            if (!interpreter_finalizing()) {
                py::gil_scoped_acquire gil;
                delete cbs;
            }
        }).detach();
    }

    void set_gate(py::object fn) {
        cb_->gate = std::move(fn);
        check(dhtc_crawler_set_gate_callback(crawler(), cb_->gate.is_none() ? nullptr : gate_trampoline, cb_.get()));
    }

    void set_torrent(py::object fn, bool with_ack) {
        cb_->torrent = std::move(fn);
        cb_->torrent_wants_ack = with_ack;
        if (cb_->torrent.is_none()) {
            check(dhtc_crawler_set_torrent_callback(crawler(), nullptr, nullptr));
        } else if (with_ack) {
            check(dhtc_crawler_set_torrent_ack_callback(crawler(), torrent_ack_trampoline, cb_.get()));
        } else {
            check(dhtc_crawler_set_torrent_callback(crawler(), torrent_trampoline, cb_.get()));
        }
    }

    void set_completion(py::object fn) {
        cb_->completion = std::move(fn);
        check(dhtc_crawler_set_completion_callback(
            crawler(), cb_->completion.is_none() ? nullptr : event_trampoline<&callbacks::completion>, cb_.get()));
    }

    void set_error(py::object fn) {
        cb_->error = std::move(fn);
        check(dhtc_crawler_set_error_callback(
            crawler(), cb_->error.is_none() ? nullptr : event_trampoline<&callbacks::error>, cb_.get()));
    }

    void set_observation(py::object fn) {
        cb_->observation = std::move(fn);
        check(dhtc_crawler_set_observation_callback(
            crawler(), cb_->observation.is_none() ? nullptr : event_trampoline<&callbacks::observation>,
            cb_.get()));
    }

    void start() {
        dhtc_crawler* c = crawler();
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_start(c);
        }
        check(status);
    }

    // True once the crawler has been shut down, false when the slice ran out.
    bool wait(long long timeout_ms) {
        dhtc_crawler* c = crawler();
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_wait(c, timeout_ms);
        }
        if (status == DHTC_ERR_TIMEOUT) return false;
        check(status);
        return true;
    }

    void shutdown() {
        if (!crawler_) return; // idempotent, also after close
        dhtc_crawler* c = crawler_;
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_shutdown(c);
        }
        check(status);
    }

    // Destroys the crawler; afterwards no callback runs. Not allowed from a callback.
    void destroy() {
        if (!crawler_) return;
        if (in_delivery_callback) {
            raise_state("close() from inside a callback: call shutdown() there and close afterwards");
        }
        dhtc_crawler* c = crawler_;
        int status = DHTC_OK;
        {
            py::gil_scoped_release release;
            status = dhtc_crawler_destroy(c);
        }
        check(status);
        crawler_ = nullptr;
        cb_->clear();
    }

    bool closed() const { return crawler_ == nullptr; }

    std::string stats() { return take([&](char** out) { return dhtc_crawler_stats(crawler(), out); }); }
    std::string observability() {
        return take([&](char** out) { return dhtc_crawler_observability(crawler(), out); });
    }
    std::string metrics() { return take([&](char** out) { return dhtc_crawler_metrics(crawler(), out); }); }

private:
    dhtc_crawler* crawler() const {
        if (!crawler_) raise_state("the crawler is closed");
        return crawler_;
    }

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

    dhtc_crawler* crawler_ = nullptr;
    std::unique_ptr<callbacks> cb_;
};

std::string default_options() {
    library_string s;
    check(dhtc_default_options(&s.text));
    return s.str();
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

    m.def("version", [] { return std::string(dhtc_version()); });
    m.def("abi_version", [] { return dhtc_abi_version(); });
    m.def("status_name", [](int status) { return std::string(dhtc_status_name(status)); });
    m.def("default_options", &default_options);
    m.def("in_callback", [] { return in_delivery_callback; },
          "True on the delivery thread while one of this module's callbacks runs.");

    py::class_<native_crawler>(m, "NativeCrawler")
        .def(py::init<const std::string&>(), py::arg("options_json"))
        .def("set_gate", &native_crawler::set_gate)
        .def("set_torrent", &native_crawler::set_torrent, py::arg("fn"), py::arg("with_ack"))
        .def("set_completion", &native_crawler::set_completion)
        .def("set_error", &native_crawler::set_error)
        .def("set_observation", &native_crawler::set_observation)
        .def("start", &native_crawler::start)
        .def("wait", &native_crawler::wait, py::arg("timeout_ms"))
        .def("shutdown", &native_crawler::shutdown)
        .def("destroy", &native_crawler::destroy)
        .def_property_readonly("closed", &native_crawler::closed)
        .def("stats", &native_crawler::stats)
        .def("observability", &native_crawler::observability)
        .def("metrics", &native_crawler::metrics);
}
