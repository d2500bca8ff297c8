// C trampolines: the library calls these with the user_data pointer it was given, which
// holds a cgo.Handle (an integer, never a Go pointer). They only convert and forward to the
// exported Go functions in callbacks.go; every one of those recovers its own panics.
#include <stdint.h>

#include "dhtcrawler.h"
#include "_cgo_export.h"
#include "trampolines.h"

static int gate(const char *info_hash, void *user_data) {
    return goDhtcGate((uintptr_t)user_data, (char *)info_hash);
}

static int torrent(const char *json, const unsigned char *info, size_t info_len, void *user_data) {
    return goDhtcTorrent((uintptr_t)user_data, (char *)json, (char *)info, info_len);
}

static void completion(const char *json, void *user_data) {
    goDhtcEvent((uintptr_t)user_data, GOC_EVENT_COMPLETION, (char *)json);
}

static void retry(const char *json, void *user_data) {
    goDhtcEvent((uintptr_t)user_data, GOC_EVENT_RETRY, (char *)json);
}

static void error_event(const char *json, void *user_data) {
    goDhtcEvent((uintptr_t)user_data, GOC_EVENT_ERROR, (char *)json);
}

static void observation(const char *json, void *user_data) {
    goDhtcEvent((uintptr_t)user_data, GOC_EVENT_OBSERVATION, (char *)json);
}

static void scrape(const char *json, void *user_data) {
    goDhtcEvent((uintptr_t)user_data, GOC_EVENT_SCRAPE, (char *)json);
}

int goc_register(dhtc_crawler *c, uintptr_t handle, int want_gate, int want_completion, int want_retry,
                 int want_error, int want_observation, int want_scrape, char **err) {
    void *user_data = (void *)handle;
    int status = dhtc_crawler_set_torrent_ack_callback(c, torrent, user_data);
    if (status == DHTC_OK && want_gate) status = dhtc_crawler_set_gate_callback(c, gate, user_data);
    if (status == DHTC_OK && want_completion)
        status = dhtc_crawler_set_completion_callback(c, completion, user_data);
    if (status == DHTC_OK && want_retry) status = dhtc_crawler_set_retry_callback(c, retry, user_data);
    if (status == DHTC_OK && want_error) status = dhtc_crawler_set_error_callback(c, error_event, user_data);
    if (status == DHTC_OK && want_observation)
        status = dhtc_crawler_set_observation_callback(c, observation, user_data);
    if (status == DHTC_OK && want_scrape) status = dhtc_crawler_set_scrape_callback(c, scrape, user_data);
    *err = goc_error_copy(status);
    return status;
}
