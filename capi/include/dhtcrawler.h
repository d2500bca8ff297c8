/**
 * @file dhtcrawler.h
 * @brief The public C API of dhtcrawler, a BitTorrent DHT crawler library.
 *
 * This header is the library's only public surface. It is C99, and every symbol it
 * declares has the `dhtc_` prefix. The library is built as `libdhtcrawler.so` with
 * SOVERSION equal to the ABI major version below.
 *
 * Conventions (they hold for every function added to this header):
 * - Functions that can fail return an `int` status: `DHTC_OK` (0) or a negative code.
 * - Out-parameters come last.
 * - Every string the library returns through a `char **out` is freed with
 *   dhtc_string_free(), never with free().
 * - Options, events and snapshots are JSON documents; they carry a schema number and
 *   only ever gain fields.
 *
 * Version check for hosts that load the library at run time (dlopen): compare
 * dhtc_abi_version() with the DHTC_ABI_VERSION the host was compiled against, and refuse
 * to continue when they differ.
 */
#ifndef DHTCRAWLER_H
#define DHTCRAWLER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DHTC_BUILDING_LIBRARY) && defined(__GNUC__)
#define DHTC_API __attribute__((visibility("default")))
#else
#define DHTC_API
#endif

/** ABI major version of this header. Changes only on incompatible ABI changes. */
#define DHTC_ABI_VERSION 1

/** The version of this header, as numbers and as the string dhtc_version() returns for the
 *  library built with it. A host that loads the library at run time may compare them. */
#define DHTC_VERSION_MAJOR 0
#define DHTC_VERSION_MINOR 1
#define DHTC_VERSION_PATCH 0
#define DHTC_VERSION_STRING "0.1.0"

/**
 * @brief The library's version, "MAJOR.MINOR.PATCH".
 *
 * Thread safety: callable from any thread, at any time, before any other call.
 * @return A static string owned by the library; never NULL; do not free it.
 */
DHTC_API const char *dhtc_version(void);

/**
 * @brief The ABI major version the library was built with.
 *
 * Thread safety: callable from any thread, at any time.
 * @return The library's DHTC_ABI_VERSION; a host built against another value must not
 *         use the library.
 */
DHTC_API int dhtc_abi_version(void);

/* ---- Status codes -------------------------------------------------------------------- */

/**
 * Every status a function returns. Functions return `int` (so the ABI never depends on an
 * enum's size); compare it with these values. Bindings derive their lists from this enum.
 */
typedef enum dhtc_status {
    DHTC_OK = 0,                    /**< success */
    DHTC_ERR_INVALID_ARGUMENT = -1, /**< a NULL handle or out-parameter, or a bad value */
    DHTC_ERR_INVALID_JSON = -2,     /**< the options document is not JSON */
    DHTC_ERR_INVALID_OPTION = -3,   /**< an unknown key, a wrong type or an invalid value */
    DHTC_ERR_BIND = -4,             /**< a socket could not be bound */
    DHTC_ERR_STATE = -5,            /**< not allowed now (e.g. started twice, destroy from a callback) */
    DHTC_ERR_TIMEOUT = -6,          /**< a wait ended before its condition */
    DHTC_ERR_NO_MEMORY = -7,        /**< an allocation failed */
    DHTC_ERR_INTERNAL = -8,         /**< an unexpected failure inside the library */
    DHTC_ERR_NOT_FOUND = -9,        /**< no such event (answered already or timed out) */
    DHTC_ERR_STORE = -10            /**< the retry store could not be opened: an unusable SQLite file, a bad
                                         PostgreSQL connection string or an unreachable server (dhtc_last_error says which) */
} dhtc_status;

/**
 * @brief A stable name for a status code ("DHTC_OK", "DHTC_ERR_BIND", ...).
 * Thread safety: any thread. @return A static string; never NULL.
 */
DHTC_API const char *dhtc_status_name(int status);

/**
 * @brief The message of the last failed call made by this thread.
 *
 * Every function that returns a status sets it (to "" on success). Thread safety: the
 * message is thread-local. @return Valid until the next dhtc_ call on this thread; never
 * NULL; do not free it.
 */
DHTC_API const char *dhtc_last_error(void);

/**
 * @brief Frees a string returned through a `char **out` parameter. NULL is a no-op.
 * Thread safety: any thread. Never use free() on the library's strings.
 */
DHTC_API void dhtc_string_free(char *s);

/**
 * @brief The options document with every key at its default (see docs/options.md).
 * @param out receives a JSON string; free it with dhtc_string_free().
 */
DHTC_API int dhtc_default_options(char **out);

/* ---- The retry store ----------------------------------------------------------------------- */

/**
 * @brief Creates or migrates the tables of the retry store that the options name
 * (`retry.store`: a SQLite file or a PostgreSQL database), then closes it: what
 * dhtc_crawler_create() does to the store, without a crawler (no socket, no thread).
 *
 * For hosts that keep their own tables beside the retry store's (one `schema_migrations`
 * table, one row per component) and need the retry tables before any crawler runs, e.g. to
 * mark imported hashes delivered.
 *
 * @param options_json an options document as dhtc_crawler_create() takes it; only
 *        `retry.store` is used, the rest is validated.
 * @return DHTC_OK once the tables are at this library's version; DHTC_ERR_INVALID_JSON or
 *         DHTC_ERR_INVALID_OPTION for a bad document, or one whose `retry.store.kind` is
 *         "none"; DHTC_ERR_STORE when the store cannot be opened or migrated, or holds a
 *         schema newer than this library's (dhtc_last_error() says which).
 * Thread safety: any thread, concurrently with itself and with crawlers on the same
 * database (the migration runs under SQLite's write lock or PostgreSQL's schema advisory
 * lock). It blocks until the database answers: on SQLite up to the busy timeout, on
 * PostgreSQL up to its connect_timeout (5 s by default) and then while another migration
 * holds the lock. Avoid calling it from a callback: delivery waits meanwhile.
 */
DHTC_API int dhtc_store_migrate(const char *options_json);

/* ---- Lifecycle --------------------------------------------------------------------------- */

/** An opaque crawler. */
typedef struct dhtc_crawler dhtc_crawler;

/**
 * @brief Validates the options, binds the sockets and opens the retry store (if any).
 *
 * @param options_json a JSON object (NULL or "" for all defaults). Unknown keys and wrong
 *        types fail with DHTC_ERR_INVALID_OPTION and a message naming the key's path.
 *        Unsafe values are normalised; what was changed is listed by dhtc_crawler_stats()
 *        under "normalized".
 * @param out receives the crawler; free it with dhtc_crawler_destroy().
 * @return DHTC_OK; DHTC_ERR_BIND when a socket cannot be bound; DHTC_ERR_STORE when the
 *         retry store cannot be opened (a SQLite file, or a PostgreSQL server that does not
 *         answer within its connect_timeout, 5 s by default).
 * Thread safety: any thread. Nothing runs until dhtc_crawler_start() or dhtc_crawler_run().
 */
DHTC_API int dhtc_crawler_create(const char *options_json, dhtc_crawler **out);

/**
 * @brief Stops everything and frees the crawler. NULL is a no-op (DHTC_OK).
 *
 * Shuts the crawler down (if it was not), waits for a callback that is running to return,
 * delivers the completions of the rounds in flight (as "cancelled"), joins every thread and
 * frees the crawler. After it returns no callback runs and no user data is touched again.
 * A dhtc_crawler_shutdown() running on another thread when destroy begins is waited for.
 * From inside a callback it returns DHTC_ERR_STATE and does nothing: call
 * dhtc_crawler_shutdown() there, and destroy afterwards from the host's thread.
 */
DHTC_API int dhtc_crawler_destroy(dhtc_crawler *c);

/**
 * @brief dhtc_crawler_destroy() that waits at most `timeout_ms` (negative: no limit) for a
 * running callback.
 *
 * @return DHTC_OK when the crawler was destroyed. DHTC_ERR_TIMEOUT when a callback was still
 *         running after `timeout_ms`: the crawler is then shut down but not destroyed (it
 *         stays valid, its callback may still return); call this function or
 *         dhtc_crawler_destroy() again later. DHTC_ERR_STATE from inside a callback.
 * Thread safety: like dhtc_crawler_destroy(): one host thread, never a callback.
 */
DHTC_API int dhtc_crawler_destroy_timeout(dhtc_crawler *c, long long timeout_ms);

/** @brief Starts the crawler's threads and returns. Once per crawler (DHTC_ERR_STATE after
 *  a shutdown). Thread safety: any thread except a callback. */
DHTC_API int dhtc_crawler_start(dhtc_crawler *c);

/** @brief Starts (if needed) and blocks until dhtc_crawler_shutdown() is called (then it
 *  returns at once, without waiting for a running callback). */
DHTC_API int dhtc_crawler_run(dhtc_crawler *c);

/**
 * @brief Waits until the crawler has been shut down, at most `timeout_ms` (negative: no limit).
 * @return DHTC_OK once shut down, DHTC_ERR_TIMEOUT otherwise. Hosts that must react to
 *         signals wait in slices.
 */
DHTC_API int dhtc_crawler_wait(dhtc_crawler *c, long long timeout_ms);

/**
 * @brief Stops crawling and fetching, and returns without waiting for anything.
 *
 * Thread-safe and idempotent: any thread, any number of times, concurrently with itself and
 * with dhtc_crawler_destroy(); allowed inside callbacks and from a thread that handles
 * signals. It never blocks on a callback: the threads wind down in the background and
 * dhtc_crawler_destroy() joins them. Callbacks may still run (the cancelled rounds'
 * completions) until destroy returns. A shut-down crawler cannot be started again.
 */
DHTC_API int dhtc_crawler_shutdown(dhtc_crawler *c);

/* ---- Callbacks ------------------------------------------------------------------------------
 * Register before start. Every callback runs on the library's delivery thread: never on a
 * network thread, never two at once, in order. Pointers passed in are valid only during
 * the call. Inside a callback you may call dhtc_crawler_shutdown(), the snapshot functions
 * and dhtc_string_free(); dhtc_crawler_destroy() returns DHTC_ERR_STATE.
 * Event JSON documents carry "type" and "schema" and only ever gain fields; a host ignores
 * a type it does not know (new types may be added).
 */

/** The three answers to a torrent (the ack callback's return, dhtc_crawler_answer()). */
typedef enum dhtc_answer {
    DHTC_ANSWER_REJECT = 0, /**< not wanted: the round completes "delivery_rejected"; the hash is done */
    DHTC_ANSWER_ACCEPT = 1, /**< every sink holds it: "accepted"; the hash is done (any other value also accepts) */
    DHTC_ANSWER_RETRY = 2   /**< wanted, but it could not be stored now (a sink failed): the round completes
                                 "sink_failed", the hash is not recorded done and is fetched again (on the
                                 retry store's short schedule, or at its next announce without a store) */
} dhtc_answer;

/** Before a hash first goes to peers. Return nonzero to fetch it, 0 to skip it (no torrent,
 *  no completion). `info_hash` is 40 lower-case hex characters. */
typedef int (*dhtc_gate_fn)(const char *info_hash, void *user_data);
/** A verified torrent: `torrent_json` is the torrent JSON form (docs/torrent-json.md) with
 *  `peer` and `discovered_at`; `info`/`info_len` the raw info dict exactly as received. */
typedef void (*dhtc_torrent_fn)(const char *torrent_json, const unsigned char *info, size_t info_len,
                                void *user_data);
/** Like dhtc_torrent_fn; returns a dhtc_answer (DHTC_ANSWER_ACCEPT, _REJECT or _RETRY). */
typedef int (*dhtc_torrent_ack_fn)(const char *torrent_json, const unsigned char *info, size_t info_len,
                                   void *user_data);
/** Completion, retry, error and observation events, as JSON envelopes (docs/events.md). */
typedef void (*dhtc_event_fn)(const char *event_json, void *user_data);

/** @brief Sets the gate (NULL: every hash is fetched). Before start. */
DHTC_API int dhtc_crawler_set_gate_callback(dhtc_crawler *c, dhtc_gate_fn fn, void *user_data);
/** @brief Sets the torrent callback (always accepts). Replaces a torrent-with-ack callback. */
DHTC_API int dhtc_crawler_set_torrent_callback(dhtc_crawler *c, dhtc_torrent_fn fn, void *user_data);
/** @brief Sets the torrent callback with acknowledgement. Replaces a plain torrent callback. */
DHTC_API int dhtc_crawler_set_torrent_ack_callback(dhtc_crawler *c, dhtc_torrent_ack_fn fn, void *user_data);
/** @brief One completion event per gated round ({"type":"completion",...}). */
DHTC_API int dhtc_crawler_set_completion_callback(dhtc_crawler *c, dhtc_event_fn fn, void *user_data);
/** @brief What the retry store made of a round ({"type":"retry",...}: dormant with its next
 *  time, or done), after it committed it. Only with a retry store. */
DHTC_API int dhtc_crawler_set_retry_callback(dhtc_crawler *c, dhtc_event_fn fn, void *user_data);
/** @brief Runtime errors ({"type":"error","message":...}), including callbacks that threw. */
DHTC_API int dhtc_crawler_set_error_callback(dhtc_crawler *c, dhtc_event_fn fn, void *user_data);
/** @brief Hashes the DHT side saw ({"type":"observation","kind":...,"source":"ip:port",
 *  "port":N|null,"at":UNIX_SECONDS}): looked up (get_peers), sampled (bep51_sample) or
 *  announced (announce, with the announced port; at most announce_observations_per_sec);
 *  dropped and counted when the application falls behind. */
DHTC_API int dhtc_crawler_set_observation_callback(dhtc_crawler *c, dhtc_event_fn fn, void *user_data);
/** @brief Answers to dhtc_crawler_request_scrape() ({"type":"scrape","info_hash":...,"seeders":N,
 *  "leechers":N,"responders":N,"queried":N,"timed_out":BOOL,"at":UNIX_SECONDS}); dropped and
 *  counted when the application falls behind (docs/events.md). */
DHTC_API int dhtc_crawler_set_scrape_callback(dhtc_crawler *c, dhtc_event_fn fn, void *user_data);

/* ---- Requests ------------------------------------------------------------------------------ */

/**
 * @brief Asks for a BEP-33 scrape of a torrent: a get_peers lookup with scrape=1 toward the
 * nodes closest to `info_hash`, whose seed and peer bloom filters are merged into estimates
 * of the swarm's seeders and leechers.
 *
 * The answer comes as one "scrape" event (its callback, or dhtc_crawler_poll_event()), once the
 * closest nodes have answered or the scrape's query budget is spent (seconds; never for a
 * request made after shutdown), and at the latest crawl.scrape.timeout_secs (30 s) after the
 * request: a scrape that had no node to ask, or whose answers did not come, ends then with
 * "timed_out" true. "responders" 0 means no node knew the swarm: the estimates are then 0 and
 * mean unknown. A hash already waiting or running is not scraped twice (it gets one event).
 * Scrapes draw on the crawl's query budget; a few run at once, the rest wait in a bounded
 * queue.
 *
 * @param info_hash the 20-byte info hash (v1, or a v2 hash truncated to 20 bytes).
 * @return DHTC_OK; DHTC_ERR_STATE after shutdown, or when the request queue is full (ask again
 *         later; dhtc_last_error() says which).
 * Thread safety: any thread, once created (requests made before start run after it); also
 * inside callbacks.
 */
DHTC_API int dhtc_crawler_request_scrape(dhtc_crawler *c, const unsigned char info_hash[20]);

/* ---- Polling --------------------------------------------------------------------------------
 * The alternative to callbacks, for hosts that pull events on their own thread. Enable it
 * before start; callbacks are then not used. Every event type is polled (gate, torrent,
 * completion, retry, error, observation, scrape; dispatch on "type", ignore unknown ones). Gate and
 * torrent events carry an "id" to be answered with dhtc_crawler_answer(); an unanswered gate
 * takes metadata.gate_default after metadata.gate_timeout_millis, an unanswered torrent is
 * answered DHTC_ANSWER_RETRY after the same time (it was not stored, so it is fetched again).
 */

/** @brief Switches event delivery to polling. Before start. */
DHTC_API int dhtc_crawler_enable_polling(dhtc_crawler *c);

/**
 * @brief Takes the next event, waiting up to `timeout_ms` (negative: no limit).
 * @param out_json the event envelope; free with dhtc_string_free().
 * @param out_info for "torrent" events the raw info dict (else NULL); free with
 *        dhtc_string_free((char *)...).
 * @param out_info_len its length (0 when none). out_info and out_info_len may be NULL.
 * @return DHTC_OK, or DHTC_ERR_TIMEOUT when no event came, or DHTC_ERR_STATE after shutdown
 *         once every event has been taken.
 */
DHTC_API int dhtc_crawler_poll_event(dhtc_crawler *c, long long timeout_ms, char **out_json,
                                     unsigned char **out_info, size_t *out_info_len);

/** @brief Answers a gate (nonzero: fetch) or a torrent (a dhtc_answer) event by its id.
 *  DHTC_ERR_NOT_FOUND when it was answered already or its time ran out. Any thread. */
DHTC_API int dhtc_crawler_answer(dhtc_crawler *c, unsigned long long event_id, int answer);

/* ---- Observation ------------------------------------------------------------------------------
 * Cheap, lock-free reads of relaxed counters; any thread, any time between create and
 * destroy (also inside callbacks). Not a transaction across fields. */

/** @brief The runtime snapshot: pool, queues, in flight, endpoints (docs/metrics.md). */
DHTC_API int dhtc_crawler_stats(dhtc_crawler *c, char **out_json);
/** @brief Every counter, every drop, the three histograms (docs/metrics.md). */
DHTC_API int dhtc_crawler_observability(dhtc_crawler *c, char **out_json);
/** @brief The same metrics as Prometheus text exposition (version 0.0.4). */
DHTC_API int dhtc_crawler_metrics(dhtc_crawler *c, char **out_text);

#ifdef __cplusplus
}
#endif

#endif /* DHTCRAWLER_H */
