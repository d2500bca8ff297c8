/* SWIG interface of the Java binding. It wraps the shim (dhtc_java.hpp) and the version and
 * status parts of dhtcrawler.h; everything lands in dev.dhtcrawler.internal, beneath the
 * hand-written public API. Generated at build time by CMake, never committed. */
%module(directors="1") DhtcNative

%begin %{
// The delivery thread attaches itself (dhtc_java::jvm_attachment); should the director ever
// find a thread unattached, it attaches it as a daemon too. (%begin: before SWIG's runtime.)
#define SWIG_JAVA_ATTACH_CURRENT_THREAD_AS_DAEMON
%}

%{
#include "dhtc_java.hpp"

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* /*reserved*/) {
    dhtc_java::java_vm() = vm;
    return JNI_VERSION_1_8;
}

// Raises dev.dhtcrawler.DhtcException(code, status name, UTF-8 message bytes).
static void dhtc_java_throw(JNIEnv* jenv, const dhtc_java::status_error& e) {
    jclass cls = jenv->FindClass("dev/dhtcrawler/DhtcException");
    if (!cls) return; // NoClassDefFoundError is pending
    jmethodID ctor = jenv->GetMethodID(cls, "<init>", "(ILjava/lang/String;[B)V");
    if (!ctor) return;
    jstring name = jenv->NewStringUTF(e.name.c_str());
    jbyteArray message = jenv->NewByteArray(static_cast<jsize>(e.message.size()));
    if (!name || !message) return; // OutOfMemoryError is pending
    jenv->SetByteArrayRegion(message, 0, static_cast<jsize>(e.message.size()),
                             reinterpret_cast<const jbyte*>(e.message.data()));
    jobject ex = jenv->NewObject(cls, ctor, static_cast<jint>(e.status), name, message);
    if (ex) jenv->Throw(static_cast<jthrowable>(ex));
}
%}

%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
  }
%}

/* No finalizers: a crawler is freed by Crawler.close() alone, never from the finalizer
 * thread, and the callback director outlives every call the library can still make. */
%typemap(javafinalize) SWIGTYPE %{%}

/* Strings cross as byte[] holding UTF-8: JNI's own string conversion is "modified UTF-8",
 * which mangles characters outside the BMP (torrent names have them). */
%typemap(jni) std::string, const std::string& "jbyteArray"
%typemap(jtype) std::string, const std::string& "byte[]"
%typemap(jstype) std::string, const std::string& "byte[]"
%typemap(javain) std::string, const std::string& "$javainput"
%typemap(javaout) std::string, const std::string& { return $jnicall; }
%typemap(javadirectorin) std::string, const std::string& "$jniinput"
%typemap(directorin, descriptor="[B") const std::string& %{
  $input = jenv->NewByteArray(static_cast<jsize>($1.size()));
  if (!$input) throw Swig::DirectorException(jenv, jenv->ExceptionOccurred());
  jenv->SetByteArrayRegion($input, 0, static_cast<jsize>($1.size()), reinterpret_cast<const jbyte*>($1.data()));
  Swig::LocalRefGuard $1_refguard(jenv, $input);
%}
%typemap(in) const std::string& (std::string bytes) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "null byte[]");
    return $null;
  }
  {
    const jsize n = jenv->GetArrayLength($input);
    bytes.resize(static_cast<size_t>(n));
    jenv->GetByteArrayRegion($input, 0, n, reinterpret_cast<jbyte*>(bytes.data()));
  }
  $1 = &bytes;
%}
%typemap(out) std::string %{
  $result = jenv->NewByteArray(static_cast<jsize>($1.size()));
  if ($result)
    jenv->SetByteArrayRegion($result, 0, static_cast<jsize>($1.size()), reinterpret_cast<const jbyte*>($1.data()));
%}

/* Every failed dhtc_* call becomes a DhtcException; nothing C++ escapes into the JVM. */
%exception {
  try {
    $action
  } catch (const dhtc_java::status_error& e) {
    dhtc_java_throw(jenv, e);
    return $null;
  } catch (const std::bad_alloc&) {
    SWIG_JavaThrowException(jenv, SWIG_JavaOutOfMemoryError, "dhtcrawler: out of memory");
    return $null;
  } catch (const std::exception& e) {
    dhtc_java_throw(jenv, dhtc_java::status_error{DHTC_ERR_INTERNAL, "DHTC_ERR_INTERNAL", e.what()});
    return $null;
  }
}

/* The #define constants become Java literals: DHTC_ABI_VERSION is then the version this
 * binding was built against, compared at load with the library's dhtc_abi_version(). */
%javaconst(1);

/* From the C header only the version and status functions and the constants; the crawler
 * functions are reached through the shim. */
%rename("$ignore", regextarget=1, fullname=1) "^dhtc_crawler";
%ignore dhtc_last_error;
%ignore dhtc_string_free;
%ignore dhtc_default_options;
%ignore dhtc_store_migrate; /* migrating a store without a crawler: not part of the Java API yet */
// The header's enums (dhtc_status, dhtc_answer) become int constants beside the #defines.
%include "enumsimple.swg"
%include "dhtcrawler.h"

%rename(waitFor) dhtc_java::NativeCrawler::wait; // Object.wait(long) is final
%feature("director") dhtc_java::EventHandler;
/* A Java exception leaving a callback is cleared here and continues as a C++ exception, which
 * the shim's trampoline catches, reports and counts as a rejection: it never reaches C. */
%feature("director:except") %{
  jthrowable $error = jenv->ExceptionOccurred();
  if ($error) {
    jenv->ExceptionClear();
    throw dhtc_java::java_exception(jenv, $error);
  }
%}
%ignore dhtc_java::NativeCrawler::NativeCrawler(const NativeCrawler&);
%rename(setHandler) dhtc_java::NativeCrawler::set_handler;
%rename(defaultOptions) dhtc_java::default_options;
%include "dhtc_java.hpp"
