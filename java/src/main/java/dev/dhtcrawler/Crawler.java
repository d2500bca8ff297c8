package dev.dhtcrawler;

import dev.dhtcrawler.internal.DhtcNative;
import dev.dhtcrawler.internal.DhtcNativeConstants;
import dev.dhtcrawler.internal.Json;
import dev.dhtcrawler.internal.NativeCrawler;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A DHT crawler: joins the DHT, learns info hashes, fetches and verifies their metadata, and hands
 * each torrent to the application once.
 *
 * <pre>{@code
 * try (Crawler crawler = new Crawler(Options.builder().port(6881).build())) {
 *     crawler.onTorrent(t -> System.out.println(t.name()));
 *     crawler.run(); // until shutdown() is called, from a handler or another thread
 * }
 * }</pre>
 *
 * <p>Handlers are set before {@link #start()}; they run on the library's delivery thread, one at a
 * time, in order, never on a network thread. Inside a handler {@link #shutdown()}, {@link #stats()}
 * and the other snapshots are allowed; {@link #close()} is refused there ({@code DHTC_ERR_STATE}).
 * A handler that throws is reported to the error handler and, where it decides something, counts
 * as a rejection. Once {@link #close()} has returned no handler runs again.
 *
 * <p>Instead of handlers, events can be polled: {@link #enablePolling()} before start, then {@link
 * #poll(Duration)} on any thread and {@link #answer(long, Answer)} for gate and torrent events.
 *
 * <p>Thread safety: every method may be called from any thread. {@link #shutdown()} never blocks
 * (it only requests the stop); {@link #close()} waits for calls in progress on other threads and
 * for a handler that is running.
 */
public final class Crawler implements AutoCloseable {
    private final NativeCrawler crawler;
    // Readers: calls into the native crawler from application threads. Writer: close(), which
    // must not free the crawler under them. Calls from inside a handler take no lock: the
    // library's destroy already waits for the handler to return.
    private final ReentrantReadWriteLock lifetime = new ReentrantReadWriteLock();
    private volatile boolean closed;
    // Set while a close() waits for or holds the write lock: shutdown() then leaves the stop to it.
    private volatile boolean closing;
    private boolean started;
    private boolean polling;
    private volatile boolean drained;
    private volatile Dispatcher dispatcher;

    private Gate gate;
    private TorrentAnswerHandler torrent;
    private CompletionHandler completion;
    private RetryHandler retry;
    private ErrorHandler error;
    private ObservationHandler observation;
    private ScrapeHandler scrape;

    /**
     * Validates the options and binds the sockets; nothing runs until {@link #start()} or
     * {@link #run()}.
     *
     * @throws DhtcException DHTC_ERR_INVALID_JSON, DHTC_ERR_INVALID_OPTION (the message names the
     *     key's path) or DHTC_ERR_BIND
     */
    public Crawler(Options options) {
        crawler = new NativeCrawler(Objects.requireNonNull(options, "options").toJson().getBytes(StandardCharsets.UTF_8));
    }

    /** Same as {@code new Crawler(Options.fromJson(json))}. */
    public Crawler(String optionsJson) {
        this(Options.fromJson(optionsJson));
    }

    /** The library's version, "MAJOR.MINOR.PATCH". */
    public static String version() {
        return DhtcNative.dhtc_version();
    }

    /** The library's ABI version (checked against the binding's when the library is loaded). */
    public static int abiVersion() {
        return DhtcNative.dhtc_abi_version();
    }

    /** The ABI version this binding was built against. */
    public static int bindingAbiVersion() {
        return DhtcNativeConstants.DHTC_ABI_VERSION;
    }

    static String defaultOptionsJson() {
        return new String(DhtcNative.defaultOptions(), StandardCharsets.UTF_8);
    }

    /** Decides which new hashes are fetched (default: all). */
    public synchronized Crawler onGate(Gate handler) {
        beforeStart();
        gate = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives each torrent; it is accepted unless the handler throws. Replaces {@link #onTorrentAck}. */
    public synchronized Crawler onTorrent(TorrentHandler handler) {
        Objects.requireNonNull(handler);
        beforeStart();
        torrent = t -> {
            handler.onTorrent(t);
            return Answer.ACCEPT;
        };
        return this;
    }

    /**
     * Receives each torrent and accepts (true) or rejects (false) it. Replaces {@link #onTorrent}
     * and {@link #onTorrentAnswer}.
     */
    public synchronized Crawler onTorrentAck(TorrentAckHandler handler) {
        Objects.requireNonNull(handler);
        beforeStart();
        torrent = t -> Answer.of(handler.onTorrent(t));
        return this;
    }

    /**
     * Receives each torrent and answers it with one of the three {@link Answer}s: {@link
     * Answer#RETRY} when it could not be stored now (it is fetched again). Replaces {@link
     * #onTorrent} and {@link #onTorrentAck}. (A separate name: a lambda returning a boolean and one
     * returning an Answer could not be told apart by an overload.)
     */
    public synchronized Crawler onTorrentAnswer(TorrentAnswerHandler handler) {
        beforeStart();
        torrent = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives what the retry store made of each round (only with a retry store). */
    public synchronized Crawler onRetry(RetryHandler handler) {
        beforeStart();
        retry = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives one completion per round that passed the gate. */
    public synchronized Crawler onCompletion(CompletionHandler handler) {
        beforeStart();
        completion = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives runtime errors and the exceptions the other handlers threw. */
    public synchronized Crawler onError(ErrorHandler handler) {
        beforeStart();
        error = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives the hashes the DHT side saw: looked up, sampled, or announced (with the announcing node and port). */
    public synchronized Crawler onObservation(ObservationHandler handler) {
        beforeStart();
        observation = Objects.requireNonNull(handler);
        return this;
    }

    /** Receives the answers to {@link #requestScrape(String)}. */
    public synchronized Crawler onScrape(ScrapeHandler handler) {
        beforeStart();
        scrape = Objects.requireNonNull(handler);
        return this;
    }

    /**
     * Asks for a BEP-33 scrape of a torrent: a get_peers lookup with scrape=1 toward the nodes
     * closest to the hash, whose seed and peer bloom filters are merged into estimates. The answer
     * comes as one {@link Scrape} event ({@link #onScrape}, or {@link #poll(Duration)}) within
     * seconds, and at the latest {@code crawl.scrape.timeout_secs} after the request ({@link
     * Scrape#timedOut()}: no node to ask, or answers missing); a hash already waiting is not scraped
     * twice. Any thread, before or after start.
     *
     * @param infoHash 40 hex digits (a v2 hash truncated to 20 bytes)
     * @throws IllegalArgumentException for a malformed hash
     * @throws DhtcException DHTC_ERR_STATE after shutdown, or when the request queue is full (ask again later)
     */
    public void requestScrape(String infoHash) {
        Objects.requireNonNull(infoHash, "infoHash");
        if (!infoHash.matches("[0-9a-fA-F]{40}")) throw new IllegalArgumentException("infoHash must be 40 hex digits");
        withCrawler(c -> {
            c.request_scrape(infoHash.getBytes(StandardCharsets.US_ASCII)); // the native side takes bytes
            return null;
        });
    }

    /** Starts the crawler's threads and returns. Once per crawler. */
    public synchronized void start() { // locks in one order everywhere: this, then the lifetime lock
        withCrawler(c -> {
            registerHandlers(c);
            c.start();
            started = true;
            return null;
        });
    }

    /**
     * Starts (if not yet started) and blocks until {@link #shutdown()} is called. An interrupt of
     * the calling thread shuts the crawler down, and run() returns with the interrupt flag set.
     */
    public void run() {
        synchronized (this) {
            if (!started) start();
        }
        while (true) {
            if (awaitSlice(200)) return;
            if (Thread.currentThread().isInterrupted()) {
                shutdown();
                return;
            }
        }
    }

    /**
     * Stops crawling and fetching, and returns without waiting for anything (the threads wind down
     * in the background; {@link #close()} joins them). Idempotent; allowed from any thread, inside
     * handlers, concurrently with itself and with close(); a no-op once closed. Cannot be started
     * again. Handlers (the cancelled rounds' completions) may still run until close() returns.
     */
    public void shutdown() {
        if (inHandler()) {
            crawler.shutdown(); // close() cannot complete while a handler runs
            return;
        }
        if (closed || closing) return; // close() shuts it down
        // Only close() takes the write lock: when it is held, close() is doing the shutdown.
        if (!lifetime.readLock().tryLock()) return;
        try {
            if (!closed) crawler.shutdown();
        } finally {
            lifetime.readLock().unlock();
        }
    }

    /**
     * Switches event delivery to polling ({@link #poll(Duration)}): before {@link #start()}, and
     * with no handler set.
     */
    public synchronized Crawler enablePolling() {
        beforeStart();
        if (gate != null || torrent != null || completion != null || retry != null || error != null || observation != null
                || scrape != null) {
            throw new IllegalStateException("polling replaces the handlers: set none");
        }
        withCrawler(c -> {
            c.enable_polling();
            return null;
        });
        polling = true;
        return this;
    }

    /**
     * Takes the next event, waiting up to {@code timeout} (negative: no limit). Every event type is
     * polled; answer {@link GateEvent}s and {@link TorrentEvent}s with {@link #answer(long, Answer)}
     * (an unanswered torrent is answered {@link Answer#RETRY} after {@code
     * metadata.gate_timeout_millis}). An event of a type this binding does not know is skipped with
     * a log line. After shutdown the remaining events (the cancelled completions among them) are
     * returned, then empty at once ({@link #isDrained()}); empty too once closed.
     *
     * @return the event, or empty when none came in time
     * @throws IllegalStateException when polling was not enabled
     * @throws InterruptedException when the waiting thread is interrupted
     */
    public Optional<Event> poll(Duration timeout) throws InterruptedException {
        if (!polling) throw new IllegalStateException("enablePolling() was not called");
        final boolean forever = timeout.isNegative();
        final long deadline = forever ? 0 : System.nanoTime() + timeout.toNanos();
        while (true) {
            if (Thread.interrupted()) throw new InterruptedException();
            if (drained || closed) return Optional.empty();
            long left = forever ? 100 : Math.max(0, (deadline - System.nanoTime()) / 1_000_000);
            long slice = Math.min(left, 100); // close() waits for one slice at most
            byte[] raw;
            try {
                raw = withCrawler(c -> c.poll(slice));
            } catch (DhtcException e) {
                if (closed) return Optional.empty();
                if (e.code() == DhtcNativeConstants.DHTC_ERR_STATE) {
                    drained = true; // shut down, every event taken
                    return Optional.empty();
                }
                throw e;
            }
            if (raw.length > 0) {
                int nul = 0;
                while (nul < raw.length && raw[nul] != 0) nul++;
                String json = new String(raw, 0, nul, StandardCharsets.UTF_8);
                byte[] info = nul + 1 < raw.length ? Arrays.copyOfRange(raw, nul + 1, raw.length) : new byte[0];
                Event event = Events.decode(json, info);
                if (event != null) return Optional.of(event);
                if ("torrent".equals(Events.type(json))) { // unreadable: rejected, as a throwing handler would
                    Long id = Events.id(json);
                    if (id != null) answer(id, Answer.REJECT);
                }
                continue; // skipped: take the next one within the time left
            }
            if (!forever && left == 0) return Optional.empty();
        }
    }

    /** True once the crawler was shut down and {@link #poll(Duration)} has returned every event. */
    public boolean isDrained() {
        return drained || closed;
    }

    /**
     * Answers a polled {@link TorrentEvent} (or a {@link GateEvent}: {@link Answer#ACCEPT} fetches,
     * anything else skips).
     *
     * @return false when it was answered already, its time ran out or the crawler is closed
     */
    public boolean answer(long id, Answer answer) {
        Objects.requireNonNull(answer, "answer");
        int code = answer.code();
        try {
            return withCrawler(c -> c.answer(id, code));
        } catch (DhtcException e) {
            if (closed) return false;
            throw e;
        }
    }

    /** Answers a polled {@link GateEvent} (true: fetch) or {@link TorrentEvent} (true: accept, false: reject). */
    public boolean answer(long id, boolean accept) {
        return answer(id, Answer.of(accept));
    }

    /**
     * Waits until the crawler has been shut down, at most {@code timeout}.
     *
     * @return true once shut down, false when the time ran out
     * @throws InterruptedException when the waiting thread is interrupted
     */
    public boolean awaitShutdown(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long left = Math.max(0, (deadline - System.nanoTime()) / 1_000_000);
            if (awaitSlice(Math.min(left, 200))) return true;
            if (Thread.interrupted()) throw new InterruptedException();
            if (left == 0) return false;
        }
    }

    /** The runtime snapshot (docs/metrics.md) as JSON. */
    public String stats() {
        return utf8(withCrawler(NativeCrawler::stats));
    }

    /** {@link #stats()} read into maps, lists, numbers and strings. */
    public Map<String, Object> statsMap() {
        return Json.map(stats());
    }

    /** Every counter, every drop and the histograms (docs/metrics.md) as JSON. */
    public String observability() {
        return utf8(withCrawler(NativeCrawler::observability));
    }

    /** {@link #observability()} read into maps, lists, numbers and strings. */
    public Map<String, Object> observabilityMap() {
        return Json.map(observability());
    }

    /** The same metrics as Prometheus text exposition (version 0.0.4). */
    public String metrics() {
        return utf8(withCrawler(NativeCrawler::metrics));
    }

    /**
     * Stops everything and frees the crawler. When it returns, every handler has returned and
     * none runs again. Idempotent.
     *
     * @throws DhtcException DHTC_ERR_STATE when called inside a handler (call {@link #shutdown()}
     *     there, and close from the application's thread afterwards)
     */
    @Override
    public void close() {
        closeWithin(-1);
    }

    /**
     * {@link #close()} that waits at most {@code timeout} for a handler that is still running.
     *
     * @throws DhtcException DHTC_ERR_TIMEOUT when a handler was still running after {@code
     *     timeout}: the crawler is then shut down but not closed (call close again later);
     *     DHTC_ERR_STATE when called inside a handler
     */
    public void close(Duration timeout) {
        long millis = timeout.isNegative() ? -1 : Math.max(0, timeout.toMillis());
        if (!closeWithin(millis)) {
            throw DhtcException.of(DhtcNativeConstants.DHTC_ERR_TIMEOUT,
                    "a handler was still running after " + timeout + ": shut down, not closed yet");
        }
    }

    private boolean closeWithin(long millis) {
        if (inHandler()) {
            throw DhtcException.of(DhtcNativeConstants.DHTC_ERR_STATE, "close() inside a handler: call shutdown() there and close afterwards");
        }
        if (closed) return true;
        try {
            shutdown(); // run(), awaitShutdown() and poll() return within a slice and release the lock
        } catch (DhtcException e) {
            // destroy shuts it down anyway
        }
        closing = true;
        lifetime.writeLock().lock();
        try {
            if (closed) return true;
            // Destroys the crawler, joining the delivery thread: no handler runs after this.
            if (millis < 0) {
                crawler.close();
            } else if (!crawler.close_within(millis)) {
                return false;
            }
            closed = true;
            crawler.delete();
            // Only now the director, and with it the JNI reference to the handlers, goes.
            if (dispatcher != null) dispatcher.delete();
            return true;
        } finally {
            if (!closed) closing = false;
            lifetime.writeLock().unlock();
        }
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    private boolean inHandler() {
        Dispatcher d = dispatcher;
        return d != null && d.inHandler();
    }

    /** One slice of a wait; a crawler closed meanwhile (from another thread) counts as shut down. */
    private boolean awaitSlice(long millis) {
        try {
            return withCrawler(c -> c.waitFor(millis));
        } catch (DhtcException e) {
            if (closed) return true;
            throw e;
        }
    }

    private interface NativeCall<T> {
        T apply(NativeCrawler c);
    }

    private <T> T withCrawler(NativeCall<T> call) {
        if (inHandler()) return call.apply(crawler); // close() cannot complete while a handler runs
        lifetime.readLock().lock();
        try {
            if (closed) throw DhtcException.of(DhtcNativeConstants.DHTC_ERR_STATE, "the crawler is closed");
            return call.apply(crawler);
        } finally {
            lifetime.readLock().unlock();
        }
    }

    private void beforeStart() {
        if (started || closed) throw new IllegalStateException("handlers are set before start()");
        if (polling) throw new IllegalStateException("polling is enabled: events are polled, not handled");
    }

    private void registerHandlers(NativeCrawler c) {
        if (dispatcher != null) return; // start() again: the library answers DHTC_ERR_STATE
        int which = 0;
        if (gate != null) which |= DhtcNativeConstants.on_gate;
        if (torrent != null) which |= DhtcNativeConstants.on_torrent;
        // The completion callback also takes retry events from a library that still sends them there.
        if (completion != null || retry != null) which |= DhtcNativeConstants.on_completion;
        if (retry != null) which |= DhtcNativeConstants.on_retry;
        if (error != null) which |= DhtcNativeConstants.on_error;
        if (observation != null) which |= DhtcNativeConstants.on_observation;
        if (scrape != null) which |= DhtcNativeConstants.on_scrape;
        if (which == 0) return;
        // Exceptions of the other handlers are reported to the error handler; without one they
        // still count as rejections, and the report goes nowhere.
        ErrorHandler errors = error != null ? error : message -> {};
        dispatcher = new Dispatcher(gate, torrent, completion, retry, errors, observation, scrape);
        c.setHandler(dispatcher, which | DhtcNativeConstants.on_error);
    }

    private static String utf8(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
