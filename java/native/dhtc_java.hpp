// The C++ shim SWIG wraps for Java: an owning handle over dhtc_crawler with std::string in and
// out, and a director class for the callbacks (a C function pointer cannot be a director).
// It includes dhtcrawler.h and no other part of the library (nlohmann/json, header-only, writes
// the one event it makes itself). Two rules live here rather than in Java:
//  - the delivery thread attaches to the JVM once, as a daemon, and detaches when it exits;
//  - nothing thrown by a Java callback (a java_exception by the time it reaches us: the
//    director cleared the Java exception) goes back into the C library: it is reported
//    through the error handler and counts as a rejection.
#ifndef DHTC_JAVA_HPP
#define DHTC_JAVA_HPP

#include <jni.h>

#include <exception>
#include <string>

#ifndef SWIG
#include <nlohmann/json.hpp>
#endif

#include "dhtcrawler.h"

namespace dhtc_java {

#ifndef SWIG // the plumbing below is C++-only; SWIG wraps EventHandler, NativeCrawler and default_options

/// A failed dhtc_* call: its status code, the status name and the library's message.
struct status_error {
    int status;
    std::string name;
    std::string message;
};

inline void check(int status) {
    if (status != DHTC_OK) throw status_error{status, dhtc_status_name(status), dhtc_last_error()};
}

inline std::string take(char* s) {
    std::string out = s ? s : "";
    dhtc_string_free(s);
    return out;
}

/// The JavaVM, recorded by JNI_OnLoad in the wrapper.
inline JavaVM*& java_vm() {
    static JavaVM* vm = nullptr;
    return vm;
}

/// The JNIEnv of the current thread, or nullptr when it is not attached.
inline JNIEnv* current_env() {
    void* env = nullptr;
    JavaVM* vm = java_vm();
    if (!vm || vm->GetEnv(&env, JNI_VERSION_1_8) != JNI_OK) return nullptr;
    return static_cast<JNIEnv*>(env);
}

/// A JNI local frame around one callback. The delivery thread stays attached and never
/// returns to Java, so local references made during a call (by the director or by its
/// exception handling) would otherwise pile up for the life of the crawler.
class local_frame {
public:
    local_frame() : env_(current_env()) {
        if (env_ && env_->PushLocalFrame(32) != JNI_OK) {
            env_->ExceptionClear();
            env_ = nullptr;
        }
    }
    ~local_frame() {
        if (!env_) return;
        if (env_->ExceptionCheck()) env_->ExceptionClear(); // never leave one pending in C
        env_->PopLocalFrame(nullptr);
    }
    local_frame(const local_frame&) = delete;
    local_frame& operator=(const local_frame&) = delete;

private:
    JNIEnv* env_;
};

/// A Java exception thrown by a callback, caught in the director (see director:except in
/// dhtcrawler.i) after it was cleared; what() is the throwable's toString() in UTF-8.
class java_exception : public std::exception {
public:
    java_exception(JNIEnv* env, jthrowable thrown) : text_(describe(env, thrown)) {}
    const char* what() const noexcept override { return text_.c_str(); }

private:
    static std::string describe(JNIEnv* env, jthrowable thrown) {
        std::string text = "a Java exception";
        jclass object = env->FindClass("java/lang/Object");
        jclass string = env->FindClass("java/lang/String");
        jmethodID to_string = object ? env->GetMethodID(object, "toString", "()Ljava/lang/String;") : nullptr;
        jmethodID get_bytes = string ? env->GetMethodID(string, "getBytes", "(Ljava/lang/String;)[B") : nullptr;
        jstring charset = env->NewStringUTF("UTF-8");
        if (to_string && get_bytes && charset) {
            auto str = static_cast<jstring>(env->CallObjectMethod(thrown, to_string));
            auto bytes = str && !env->ExceptionCheck()
                             ? static_cast<jbyteArray>(env->CallObjectMethod(str, get_bytes, charset))
                             : nullptr;
            if (bytes && !env->ExceptionCheck()) {
                text.resize(static_cast<size_t>(env->GetArrayLength(bytes)));
                env->GetByteArrayRegion(bytes, 0, static_cast<jsize>(text.size()), reinterpret_cast<jbyte*>(text.data()));
            }
        }
        if (env->ExceptionCheck()) env->ExceptionClear(); // describing it failed: keep the generic text
        return text;
    }

    std::string text_;
};

/// Attaches the current (library) thread to the JVM on first use, as a daemon so it never
/// keeps the JVM alive, and detaches it when the thread exits. The SWIG director then finds
/// the thread attached and neither attaches nor detaches per call.
class jvm_attachment {
public:
    static void ensure() { thread_local jvm_attachment once; }

    jvm_attachment(const jvm_attachment&) = delete;
    jvm_attachment& operator=(const jvm_attachment&) = delete;

private:
    jvm_attachment() {
        JavaVM* vm = java_vm();
        if (!vm) return;
        void* env = nullptr;
        if (vm->GetEnv(&env, JNI_VERSION_1_8) == JNI_OK) return; // a Java thread: not ours to detach
        JavaVMAttachArgs args{JNI_VERSION_1_8, const_cast<char*>("dhtcrawler-delivery"), nullptr};
        attached_ = vm->AttachCurrentThreadAsDaemon(&env, &args) == JNI_OK;
    }
    ~jvm_attachment() {
        if (attached_) java_vm()->DetachCurrentThread();
    }

    bool attached_ = false;
};

#endif // SWIG

/// The callbacks, implemented in Java (SWIG director). Byte strings carry UTF-8 JSON and the
/// raw info dict; Java decodes them (JNI's own string conversion is "modified UTF-8").
class EventHandler {
public:
    virtual ~EventHandler() = default;
    virtual bool gate(const std::string& /*info_hash*/) { return true; }
    /// Returns a dhtc_answer (DHTC_ANSWER_REJECT, _ACCEPT or _RETRY).
    virtual int torrent(const std::string& /*torrent_json*/, const std::string& /*info*/) { return DHTC_ANSWER_ACCEPT; }
    virtual void completion(const std::string& /*event_json*/) {}
    virtual void retry(const std::string& /*event_json*/) {}
    virtual void error(const std::string& /*event_json*/) {}
    virtual void observation(const std::string& /*event_json*/) {}
    virtual void scrape(const std::string& /*event_json*/) {}
};

/// Which callbacks the Java side registered (bit flags).
enum callbacks : int {
    on_gate = 1,
    on_torrent = 2,
    on_completion = 4,
    on_error = 8,
    on_observation = 16,
    on_retry = 32,
    on_scrape = 64,
};

#ifndef SWIG
namespace detail {

/// Reports a callback that threw through the Java error handler; if that throws too, the
/// report is dropped (there is nobody left to tell).
inline void report_throw(EventHandler* h, const char* which, const char* what) noexcept {
    try {
        // The same envelope as the library's own error events (capi/src/crawler.cpp
        // error_json): invalid UTF-8 in an exception message is replaced, not thrown.
        const nlohmann::json event{
            {"type", "error"}, {"schema", 1}, {"message", std::string(which) + " callback threw: " + what}};
        h->error(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } catch (...) {
    }
}

/// Runs one Java callback on the delivery thread. Returns the callback's decision, or 0 (false,
/// DHTC_ANSWER_REJECT) when it threw (a throw is a rejection).
template <class F>
int call_java(EventHandler* h, const char* which, F&& body) noexcept {
    jvm_attachment::ensure();
    local_frame frame;
    try {
        return body();
    } catch (const std::exception& e) {
        report_throw(h, which, e.what());
    } catch (...) {
        report_throw(h, which, "unknown exception");
    }
    return 0;
}

inline int gate_trampoline(const char* info_hash, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    return call_java(h, "gate", [&] { return h->gate(info_hash) ? 1 : 0; });
}

inline int torrent_trampoline(const char* json, const unsigned char* info, size_t len, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    return call_java(h, "torrent",
                     [&] { return h->torrent(json, std::string(reinterpret_cast<const char*>(info), len)); });
}

inline void completion_trampoline(const char* json, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    call_java(h, "completion", [&] {
        h->completion(json);
        return 1;
    });
}

inline void retry_trampoline(const char* json, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    call_java(h, "retry", [&] {
        h->retry(json);
        return 1;
    });
}

inline void error_trampoline(const char* json, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    jvm_attachment::ensure();
    local_frame frame;
    try { // an error handler that throws is not reported through itself
        h->error(json);
    } catch (...) {
    }
}

inline void observation_trampoline(const char* json, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    call_java(h, "observation", [&] {
        h->observation(json);
        return 1;
    });
}

inline void scrape_trampoline(const char* json, void* u) {
    auto* h = static_cast<EventHandler*>(u);
    call_java(h, "scrape", [&] {
        h->scrape(json);
        return 1;
    });
}

} // namespace detail
#endif // SWIG

/// One crawler. Owns the dhtc_crawler; close() (or the destructor) destroys it. The
/// EventHandler is not owned: the Java side keeps it alive until close() has returned, the
/// moment after which the library never calls it again.
class NativeCrawler {
public:
    explicit NativeCrawler(const std::string& options_json) { check(dhtc_crawler_create(options_json.c_str(), &c_)); }
    ~NativeCrawler() { dhtc_crawler_destroy(c_); }
    NativeCrawler(const NativeCrawler&) = delete;
    NativeCrawler& operator=(const NativeCrawler&) = delete;

    /// Registers the handler for the callbacks named in `which` (callbacks flags). Before start.
    void set_handler(EventHandler* h, int which) {
        using namespace detail;
        check(dhtc_crawler_set_gate_callback(handle(), (which & on_gate) ? gate_trampoline : nullptr, h));
        // Always the acknowledging form: a Java handler that throws must be able to reject.
        check(dhtc_crawler_set_torrent_ack_callback(handle(), (which & on_torrent) ? torrent_trampoline : nullptr, h));
        check(dhtc_crawler_set_completion_callback(handle(), (which & on_completion) ? completion_trampoline : nullptr, h));
        check(dhtc_crawler_set_retry_callback(handle(), (which & on_retry) ? retry_trampoline : nullptr, h));
        check(dhtc_crawler_set_error_callback(handle(), (which & on_error) ? error_trampoline : nullptr, h));
        check(dhtc_crawler_set_observation_callback(handle(), (which & on_observation) ? observation_trampoline : nullptr, h));
        check(dhtc_crawler_set_scrape_callback(handle(), (which & on_scrape) ? scrape_trampoline : nullptr, h));
    }

    /// Asks for a BEP-33 scrape; `info_hash_hex`: 40 hex digits.
    void request_scrape(const std::string& info_hash_hex) {
        const auto digit = [](char ch) {
            if (ch >= '0' && ch <= '9') return ch - '0';
            if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
            if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
            return -1;
        };
        const auto bad = [] {
            throw status_error{DHTC_ERR_INVALID_ARGUMENT, dhtc_status_name(DHTC_ERR_INVALID_ARGUMENT),
                               "the info hash must be 40 hex digits"};
        };
        if (info_hash_hex.size() != 40) bad();
        unsigned char raw[20];
        for (std::size_t i = 0; i < 20; ++i) {
            const int hi = digit(info_hash_hex[2 * i]), lo = digit(info_hash_hex[2 * i + 1]);
            if (hi < 0 || lo < 0) bad();
            raw[i] = static_cast<unsigned char>(hi << 4 | lo);
        }
        check(dhtc_crawler_request_scrape(handle(), raw));
    }

    void start() { check(dhtc_crawler_start(handle())); }
    void run() { check(dhtc_crawler_run(handle())); }
    void shutdown() { check(dhtc_crawler_shutdown(handle())); }

    /// Switches to polling. Before start.
    void enable_polling() { check(dhtc_crawler_enable_polling(handle())); }

    /// The next event, waiting up to `timeout_ms`: its JSON envelope, a NUL byte, then the raw
    /// info dict (empty unless a torrent event); JSON never holds a raw NUL. Empty when no event
    /// came in time. DHTC_ERR_STATE (thrown) once shut down and every event taken.
    std::string poll(long long timeout_ms) {
        char* json = nullptr;
        unsigned char* info = nullptr;
        size_t info_len = 0;
        const int rc = dhtc_crawler_poll_event(handle(), timeout_ms, &json, &info, &info_len);
        if (rc == DHTC_ERR_TIMEOUT) return {};
        check(rc);
        std::string out = json ? json : "";
        dhtc_string_free(json);
        out += '\0';
        if (info) out.append(reinterpret_cast<const char*>(info), info_len);
        dhtc_string_free(reinterpret_cast<char*>(info));
        return out;
    }

    /// Answers a polled gate or torrent event; false when it was answered already or timed out.
    bool answer(long long id, int answer) { // long long: SWIG maps it to a Java long
        const int rc = dhtc_crawler_answer(handle(), static_cast<unsigned long long>(id), answer);
        if (rc == DHTC_ERR_NOT_FOUND) return false;
        check(rc);
        return true;
    }

    /// True once shut down; false when `timeout_ms` ran out first.
    bool wait(long long timeout_ms) {
        const int rc = dhtc_crawler_wait(handle(), timeout_ms);
        if (rc == DHTC_ERR_TIMEOUT) return false;
        check(rc);
        return true;
    }

    std::string stats() {
        char* s = nullptr;
        check(dhtc_crawler_stats(handle(), &s));
        return take(s);
    }
    std::string observability() {
        char* s = nullptr;
        check(dhtc_crawler_observability(handle(), &s));
        return take(s);
    }
    std::string metrics() {
        char* s = nullptr;
        check(dhtc_crawler_metrics(handle(), &s));
        return take(s);
    }

    /// Destroys the crawler: every callback has returned when this returns. From inside a
    /// callback the library refuses (DHTC_ERR_STATE) and the crawler stays usable.
    void close() {
        if (!c_) return;
        check(dhtc_crawler_destroy(c_));
        c_ = nullptr;
    }

    /// close() that waits at most `timeout_ms` for a running callback: false on DHTC_ERR_TIMEOUT
    /// (the crawler is then shut down but not destroyed; call again later).
    bool close_within(long long timeout_ms) {
        if (!c_) return true;
        const int rc = dhtc_crawler_destroy_timeout(c_, timeout_ms);
        if (rc == DHTC_ERR_TIMEOUT) return false;
        check(rc);
        c_ = nullptr;
        return true;
    }

    bool closed() const { return c_ == nullptr; }

private:
    dhtc_crawler* handle() {
        if (!c_) throw status_error{DHTC_ERR_STATE, dhtc_status_name(DHTC_ERR_STATE), "the crawler is closed"};
        return c_;
    }

    dhtc_crawler* c_ = nullptr;
};

/// The options document with every key at its default.
inline std::string default_options() {
    char* s = nullptr;
    check(dhtc_default_options(&s));
    return take(s);
}

} // namespace dhtc_java

#endif
