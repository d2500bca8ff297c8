// Shared between the cgo preamble (cgo.go) and trampolines.c.
#ifndef DHTCRAWLER_GO_TRAMPOLINES_H
#define DHTCRAWLER_GO_TRAMPOLINES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dhtcrawler.h"

enum { GOC_EVENT_COMPLETION = 1, GOC_EVENT_ERROR = 2, GOC_EVENT_OBSERVATION = 3, GOC_EVENT_RETRY = 4, GOC_EVENT_SCRAPE = 5 };

// dhtc_last_error() is thread-local, so it is copied inside the same cgo call that made the
// failing dhtc_ call: a goroutine may run on another OS thread by the time Go looks at it.
// The copy is ours (malloc), freed by Go with C.free; NULL on success.
static inline char *goc_error_copy(int status) {
    if (status == DHTC_OK) return NULL;
    return strdup(dhtc_last_error());
}

// Registers the trampolines with the cgo.Handle as user data (converted here, in C, so
// no integer becomes an unsafe.Pointer on the Go side). The torrent callback is always set.
int goc_register(dhtc_crawler *c, uintptr_t handle, int want_gate, int want_completion, int want_retry,
                 int want_error, int want_observation, int want_scrape, char **err);

#endif
