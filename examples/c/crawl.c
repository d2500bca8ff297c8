/*
 * A plain C host that loads libdhtcrawler.so at run time (dlopen), checks its ABI version,
 * and crawls, printing every torrent as one JSON line on stdout.
 *
 *   dhtc-crawl-example [--lib PATH] [--options JSON] [--seconds N]
 *
 * --options is the options document (docs/options.md); --seconds stops after N seconds
 * (0: run until SIGINT/SIGTERM). Status and errors go to stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <dhtcrawler.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The functions this host uses, resolved with dlsym. */
struct api {
    int (*abi_version)(void);
    const char *(*version)(void);
    const char *(*last_error)(void);
    int (*create)(const char *, dhtc_crawler **);
    int (*destroy)(dhtc_crawler *);
    int (*start)(dhtc_crawler *);
    int (*wait)(dhtc_crawler *, long long);
    int (*shutdown)(dhtc_crawler *);
    int (*set_torrent)(dhtc_crawler *, dhtc_torrent_fn, void *);
    int (*set_error)(dhtc_crawler *, dhtc_event_fn, void *);
    int (*stats)(dhtc_crawler *, char **);
    void (*string_free)(char *);
};

static volatile sig_atomic_t interrupted = 0;
static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

static void on_torrent(const char *json, const unsigned char *info, size_t info_len, void *user) {
    unsigned long *count = user;
    (void)info;
    (void)info_len;
    ++*count;
    fputs(json, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static void on_error(const char *json, void *user) {
    (void)user;
    fprintf(stderr, "dhtcrawler: %s\n", json);
}

/* dlsym returns an object pointer; converting through a union keeps -pedantic quiet. */
static int resolve(void *lib, const char *name, void *slot, size_t size) {
    union {
        void *object;
        void (*function)(void);
    } u;
    u.object = dlsym(lib, name);
    if (!u.object) {
        fprintf(stderr, "missing symbol %s\n", name);
        return 0;
    }
    memcpy(slot, &u.function, size);
    return 1;
}

#define RESOLVE(lib, name, field) resolve(lib, name, &(field), sizeof(field))

int main(int argc, char **argv) {
    const char *lib_path = "libdhtcrawler.so.1";
    const char *options = NULL;
    double seconds = 0;
    struct api a;
    void *lib;
    dhtc_crawler *crawler = NULL;
    unsigned long torrents = 0;
    struct timespec start, now;
    int i, rc;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--lib")) lib_path = argv[i + 1];
        else if (!strcmp(argv[i], "--options")) options = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    }
    lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", lib_path, dlerror());
        return 1;
    }
    if (!RESOLVE(lib, "dhtc_abi_version", a.abi_version) || !RESOLVE(lib, "dhtc_version", a.version) ||
        !RESOLVE(lib, "dhtc_last_error", a.last_error) || !RESOLVE(lib, "dhtc_crawler_create", a.create) ||
        !RESOLVE(lib, "dhtc_crawler_destroy", a.destroy) || !RESOLVE(lib, "dhtc_crawler_start", a.start) ||
        !RESOLVE(lib, "dhtc_crawler_wait", a.wait) || !RESOLVE(lib, "dhtc_crawler_shutdown", a.shutdown) ||
        !RESOLVE(lib, "dhtc_crawler_set_torrent_callback", a.set_torrent) ||
        !RESOLVE(lib, "dhtc_crawler_set_error_callback", a.set_error) ||
        !RESOLVE(lib, "dhtc_crawler_stats", a.stats) || !RESOLVE(lib, "dhtc_string_free", a.string_free))
        return 1;
    /* A host built against another ABI must not go on: the SQLite model of a version check. */
    if (a.abi_version() != DHTC_ABI_VERSION) {
        fprintf(stderr, "libdhtcrawler ABI %d, this program needs %d\n", a.abi_version(), DHTC_ABI_VERSION);
        return 1;
    }
    fprintf(stderr, "dhtcrawler %s\n", a.version());

    rc = a.create(options, &crawler);
    if (rc != DHTC_OK) {
        fprintf(stderr, "create failed (%d): %s\n", rc, a.last_error());
        return 2;
    }
    a.set_torrent(crawler, on_torrent, &torrents);
    a.set_error(crawler, on_error, NULL);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (a.start(crawler) != DHTC_OK) {
        fprintf(stderr, "start failed: %s\n", a.last_error());
        a.destroy(crawler);
        return 1;
    }
    {
        char *stats = NULL;
        if (a.stats(crawler, &stats) == DHTC_OK) {
            fprintf(stderr, "started: %s\n", stats);
            a.string_free(stats);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* Wait in slices so signals are noticed. */
    while (!interrupted && a.wait(crawler, 200) == DHTC_ERR_TIMEOUT) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds > 0 && (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 >= seconds)
            break;
    }
    a.shutdown(crawler);
    a.destroy(crawler);
    fprintf(stderr, "%lu torrents\n", torrents);
    dlclose(lib);
    return 0;
}
