package dhtcrawler

// The only place that calls the C API. Every wrapper returns the status and, on failure, a
// copy of dhtc_last_error() taken in the same cgo call (the message is thread-local).

/*
#cgo pkg-config: dhtcrawler
#include "trampolines.h"

static int goc_create(const char *options, dhtc_crawler **out, char **err) {
    int s = dhtc_crawler_create(options, out);
    *err = goc_error_copy(s);
    return s;
}
static int goc_destroy(dhtc_crawler *c, char **err) {
    int s = dhtc_crawler_destroy(c);
    *err = goc_error_copy(s);
    return s;
}
static int goc_start(dhtc_crawler *c, char **err) {
    int s = dhtc_crawler_start(c);
    *err = goc_error_copy(s);
    return s;
}
static int goc_wait(dhtc_crawler *c, char **err) {
    int s = dhtc_crawler_wait(c, -1);
    *err = goc_error_copy(s);
    return s;
}
static int goc_shutdown(dhtc_crawler *c, char **err) {
    int s = dhtc_crawler_shutdown(c);
    *err = goc_error_copy(s);
    return s;
}
static int goc_destroy_timeout(dhtc_crawler *c, long long timeout_ms, char **err) {
    int s = dhtc_crawler_destroy_timeout(c, timeout_ms);
    *err = goc_error_copy(s);
    return s;
}
static int goc_enable_polling(dhtc_crawler *c, char **err) {
    int s = dhtc_crawler_enable_polling(c);
    *err = goc_error_copy(s);
    return s;
}
static int goc_poll(dhtc_crawler *c, long long timeout_ms, char **json, unsigned char **info, size_t *info_len,
                    char **err) {
    int s = dhtc_crawler_poll_event(c, timeout_ms, json, info, info_len);
    *err = goc_error_copy(s);
    return s;
}
static int goc_request_scrape(dhtc_crawler *c, const unsigned char *info_hash, char **err) {
    int s = dhtc_crawler_request_scrape(c, info_hash);
    *err = goc_error_copy(s);
    return s;
}
static int goc_answer(dhtc_crawler *c, unsigned long long id, int answer, char **err) {
    int s = dhtc_crawler_answer(c, id, answer);
    *err = goc_error_copy(s);
    return s;
}
static int goc_default_options(char **out, char **err) {
    int s = dhtc_default_options(out);
    *err = goc_error_copy(s);
    return s;
}
enum { GOC_STATS = 1, GOC_OBSERVABILITY = 2, GOC_METRICS = 3 };
static int goc_snapshot(dhtc_crawler *c, int which, char **out, char **err) {
    int s = DHTC_ERR_INVALID_ARGUMENT;
    switch (which) {
    case GOC_STATS: s = dhtc_crawler_stats(c, out); break;
    case GOC_OBSERVABILITY: s = dhtc_crawler_observability(c, out); break;
    case GOC_METRICS: s = dhtc_crawler_metrics(c, out); break;
    }
    *err = goc_error_copy(s);
    return s;
}
static int goc_abi_header(void) { return DHTC_ABI_VERSION; }
static const char *goc_header_version(void) { return DHTC_VERSION_STRING; }
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// statusError builds the Go error for a failed call from its status and the copied message,
// and frees the copy.
func statusError(status C.int, msg *C.char) error {
	if status == C.DHTC_OK {
		return nil
	}
	message := ""
	if msg != nil {
		message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return &Error{Status: int(status), Name: C.GoString(C.dhtc_status_name(status)), Message: message}
}

// takeString copies a library-owned string and frees it with the library's own free.
func takeString(s *C.char) string {
	if s == nil {
		return ""
	}
	defer C.dhtc_string_free(s)
	return C.GoString(s)
}

func libVersion() string      { return C.GoString(C.dhtc_version()) }
func libABI() int             { return int(C.dhtc_abi_version()) }
func headerABI() int          { return int(C.goc_abi_header()) }
func headerVersion() string   { return C.GoString(C.goc_header_version()) }
func statusName(s int) string { return C.GoString(C.dhtc_status_name(C.int(s))) }

func cDefaultOptions() (string, error) {
	var out, msg *C.char
	if err := statusError(C.goc_default_options(&out, &msg), msg); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cCreate(options string) (*C.dhtc_crawler, error) {
	copt := C.CString(options)
	defer C.free(unsafe.Pointer(copt))
	var c *C.dhtc_crawler
	var msg *C.char
	if err := statusError(C.goc_create(copt, &c, &msg), msg); err != nil {
		return nil, err
	}
	return c, nil
}

func cRegister(c *C.dhtc_crawler, h cgo.Handle, gate, completion, retry, errs, observation, scrape bool) error {
	var msg *C.char
	return statusError(C.goc_register(c, C.uintptr_t(h), cbool(gate), cbool(completion), cbool(retry),
		cbool(errs), cbool(observation), cbool(scrape), &msg), msg)
}

func cRequestScrape(c *C.dhtc_crawler, infoHash [20]byte) error {
	var msg *C.char
	return statusError(C.goc_request_scrape(c, (*C.uchar)(unsafe.Pointer(&infoHash[0])), &msg), msg)
}

func cEnablePolling(c *C.dhtc_crawler) error {
	var msg *C.char
	return statusError(C.goc_enable_polling(c, &msg), msg)
}

// cPoll takes the next event (its JSON and, for a torrent, the raw info dict), waiting up
// to timeoutMillis; both are copied and the library's buffers freed.
func cPoll(c *C.dhtc_crawler, timeoutMillis int64) (doc string, info []byte, err error) {
	var out, msg *C.char
	var cinfo *C.uchar
	var n C.size_t
	if err := statusError(C.goc_poll(c, C.longlong(timeoutMillis), &out, &cinfo, &n, &msg), msg); err != nil {
		return "", nil, err
	}
	if cinfo != nil {
		info = C.GoBytes(unsafe.Pointer(cinfo), C.int(n))
		C.dhtc_string_free((*C.char)(unsafe.Pointer(cinfo)))
	}
	return takeString(out), info, nil
}

func cAnswer(c *C.dhtc_crawler, id uint64, answer int) error {
	var msg *C.char
	return statusError(C.goc_answer(c, C.ulonglong(id), C.int(answer), &msg), msg)
}

// cDestroyTimeout is destroy waiting at most timeoutMillis for a running callback;
// DHTC_ERR_TIMEOUT leaves the crawler shut down and valid.
func cDestroyTimeout(c *C.dhtc_crawler, timeoutMillis int64) error {
	var msg *C.char
	return statusError(C.goc_destroy_timeout(c, C.longlong(timeoutMillis), &msg), msg)
}

func cDestroy(c *C.dhtc_crawler) error {
	var msg *C.char
	return statusError(C.goc_destroy(c, &msg), msg)
}

func cStart(c *C.dhtc_crawler) error {
	var msg *C.char
	return statusError(C.goc_start(c, &msg), msg)
}

// cWait blocks until the crawler has been shut down.
func cWait(c *C.dhtc_crawler) error {
	var msg *C.char
	return statusError(C.goc_wait(c, &msg), msg)
}

func cShutdown(c *C.dhtc_crawler) error {
	var msg *C.char
	return statusError(C.goc_shutdown(c, &msg), msg)
}

type snapshotKind C.int

const (
	snapshotStats         snapshotKind = C.GOC_STATS
	snapshotObservability snapshotKind = C.GOC_OBSERVABILITY
	snapshotMetrics       snapshotKind = C.GOC_METRICS
)

func cSnapshot(c *C.dhtc_crawler, which snapshotKind) (string, error) {
	var out, msg *C.char
	if err := statusError(C.goc_snapshot(c, C.int(which), &out, &msg), msg); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// The status codes of dhtcrawler.h, taken from the header itself (a status the header
// drops fails the build; one it adds fails TestEveryHeaderStatusHasAGoError).
const (
	statusOK              = int(C.DHTC_OK)
	statusInvalidArgument = int(C.DHTC_ERR_INVALID_ARGUMENT)
	statusInvalidJSON     = int(C.DHTC_ERR_INVALID_JSON)
	statusInvalidOption   = int(C.DHTC_ERR_INVALID_OPTION)
	statusBind            = int(C.DHTC_ERR_BIND)
	statusState           = int(C.DHTC_ERR_STATE)
	statusTimeout         = int(C.DHTC_ERR_TIMEOUT)
	statusNoMemory        = int(C.DHTC_ERR_NO_MEMORY)
	statusInternal        = int(C.DHTC_ERR_INTERNAL)
	statusNotFound        = int(C.DHTC_ERR_NOT_FOUND)
	statusStore           = int(C.DHTC_ERR_STORE)
)

// The answers of dhtcrawler.h (dhtc_answer).
const (
	answerReject = int(C.DHTC_ANSWER_REJECT)
	answerAccept = int(C.DHTC_ANSWER_ACCEPT)
	answerRetry  = int(C.DHTC_ANSWER_RETRY)
)
