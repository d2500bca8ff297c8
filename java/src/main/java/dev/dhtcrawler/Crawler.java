package dev.dhtcrawler;

import dev.dhtcrawler.internal.DhtcNative;
import dev.dhtcrawler.internal.DhtcNativeConstants;
import dev.dhtcrawler.internal.Json;
import dev.dhtcrawler.internal.NativeCrawler;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
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
 * <p>Thread safety: every method may be called from any thread; {@link #close()} waits for calls in
 * progress on other threads.
 */
public final class Crawler implements AutoCloseable {
    private final NativeCrawler crawler;
    // Readers: calls into the native crawler from application threads. Writer: close(), which
    // must not free the crawler under them. Calls from inside a handler take no lock: the
    // library's destroy already waits for the handler to return.
    private final ReentrantReadWriteLock lifetime = new ReentrantReadWriteLock();
    private volatile boolean closed;
    private boolean started;
    private volatile Dispatcher dispatcher;

    private Gate gate;
    private TorrentAckHandler torrent;
    private CompletionHandler completion;
    private ErrorHandler error;
    private ObservationHandler observation;

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
            return true;
        };
        return this;
    }

    /** Receives each torrent and accepts (true) or rejects (false) it. Replaces {@link #onTorrent}. */
    public synchronized Crawler onTorrentAck(TorrentAckHandler handler) {
        beforeStart();
        torrent = Objects.requireNonNull(handler);
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

    /** Receives hashes seen without a peer. */
    public synchronized Crawler onObservation(ObservationHandler handler) {
        beforeStart();
        observation = Objects.requireNonNull(handler);
        return this;
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

    /** Stops crawling and fetching. Idempotent; allowed inside handlers. Cannot be started again. */
    public void shutdown() {
        withCrawler(c -> {
            c.shutdown();
            return null;
        });
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
        if (inHandler()) {
            throw new DhtcException(DhtcNativeConstants.DHTC_ERR_STATE, "DHTC_ERR_STATE",
                    "close() inside a handler: call shutdown() there and close afterwards");
        }
        lifetime.writeLock().lock();
        try {
            if (closed) return;
            crawler.close(); // joins the delivery thread: no handler runs after this
            closed = true;
            crawler.delete();
            if (dispatcher != null) dispatcher.delete();
        } finally {
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
            if (closed) {
                throw new DhtcException(DhtcNativeConstants.DHTC_ERR_STATE, "DHTC_ERR_STATE", "the crawler is closed");
            }
            return call.apply(crawler);
        } finally {
            lifetime.readLock().unlock();
        }
    }

    private void beforeStart() {
        if (started || closed) throw new IllegalStateException("handlers are set before start()");
    }

    private void registerHandlers(NativeCrawler c) {
        if (dispatcher != null) return; // start() again: the library answers DHTC_ERR_STATE
        int which = 0;
        if (gate != null) which |= DhtcNativeConstants.on_gate;
        if (torrent != null) which |= DhtcNativeConstants.on_torrent;
        if (completion != null) which |= DhtcNativeConstants.on_completion;
        if (error != null) which |= DhtcNativeConstants.on_error;
        if (observation != null) which |= DhtcNativeConstants.on_observation;
        if (which == 0) return;
        // Exceptions of the other handlers are reported to the error handler; without one they
        // still count as rejections, and the report goes nowhere.
        ErrorHandler errors = error != null ? error : message -> {};
        dispatcher = new Dispatcher(gate, torrent, completion, errors, observation);
        c.setHandler(dispatcher, which | DhtcNativeConstants.on_error);
    }

    private static String utf8(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
