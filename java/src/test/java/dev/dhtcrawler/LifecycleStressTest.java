package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The lifecycle under stress, with no retry store, a SQLite one (a temporary file) and a
 * PostgreSQL one (only with DHTC_TEST_PG=postgresql://...): shutdown from the host thread, another
 * thread, a handler, two threads at once, racing close; close right after run returns. Rounds are
 * in flight each time (announced to a peer that never answers). Afterwards the library's threads
 * (/proc/self/task) and file descriptors (/proc/self/fd) are back to their baseline, and no handler
 * ran after close returned. Loopback only, bootstrap disabled.
 *
 * <p>The timeouts run the test on a thread of its own: a lifecycle call that hangs in native code
 * fails its test instead of hanging the run.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LifecycleStressTest {
    private static final int ROUNDS = 8;
    private static final Pattern HASH = Pattern.compile("[0-9a-f]{40}");

    enum Store { NONE, SQLITE, POSTGRESQL }

    enum Stop { HOST, OTHER_THREAD, HANDLER, TWO_THREADS, RACING_CLOSE, CLOSE_AFTER_RUN }

    private static Path dir;
    private static SilentPeer peer;
    private static final AtomicInteger files = new AtomicInteger();
    private static final java.util.concurrent.atomic.AtomicLong HASHES = new java.util.concurrent.atomic.AtomicLong();
    private static final long SALT = new java.security.SecureRandom().nextLong();

    @BeforeAll
    static void setUp() throws IOException {
        dir = Files.createTempDirectory("dhtc-java-lifecycle-");
        peer = new SilentPeer();
    }

    @AfterAll
    static void tearDown() throws IOException {
        peer.close();
        try (DirectoryStream<Path> ls = Files.newDirectoryStream(dir)) {
            for (Path p : ls) Files.deleteIfExists(p);
        }
        Files.deleteIfExists(dir);
    }

    static Options.Builder options(Store store) {
        Options.Builder b = ContractTest.loopback();
        switch (store) {
            case NONE -> {}
            case SQLITE -> b.set("retry.store.kind", "sqlite")
                    .set("retry.store.path", dir.resolve("retry-" + files.incrementAndGet() + ".sqlite").toString());
            case POSTGRESQL -> {
                String uri = System.getenv("DHTC_TEST_PG");
                Assumptions.assumeTrue(uri != null && !uri.isEmpty(),
                        "DHTC_TEST_PG is not set (a postgresql:// URI, e.g. from tests/pg/start_pg.sh): the PostgreSQL store is not tested");
                b.set("retry.store.kind", "postgresql").set("retry.store.conninfo", uri);
            }
        }
        return b;
    }

    // ---- what the process holds ---------------------------------------------------------------

    /** The comm name (15 bytes at most) of the calling thread: the library's threads inherit it from their creator. */
    static String threadComm() {
        try {
            return Files.readString(Path.of("/proc/thread-self/comm"), StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    /** Native threads named {@code comm} or the delivery thread's name (truncated by the kernel). */
    static int nativeThreads(String comm) {
        int n = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    String name = Files.readString(t.resolve("comm"), StandardCharsets.UTF_8).strip();
                    if (name.equals(comm) || "dhtcrawler-delivery".startsWith(name) && name.startsWith("dhtcrawler")) n++;
                } catch (IOException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
        return n;
    }

    /** Open file descriptors, less the connections the silent peer holds (they are the test's, not the library's). */
    static int openFds() {
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/self/fd"))) {
            int n = 0;
            for (Path ignored : fds) n++;
            return n - 1 - peer.held(); // less the directory stream's own descriptor
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static long javaDeliveryThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("dhtcrawler-delivery")).count();
    }

    /** Waits (up to 10 s of grace) until the threads and fds are back to the baseline, then asserts it. */
    static void assertBackToBaseline(String comm, int threads, int fds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline
                && (nativeThreads(comm) > threads || openFds() > fds || javaDeliveryThreads() > 0)) {
            Thread.sleep(50);
        }
        assertEquals(threads, nativeThreads(comm), "native threads left behind (named " + comm + " or dhtcrawler-delivery)");
        // The fewest of a few samples: a connection the silent peer accepts late from a closed
        // crawler's backlog is an fd for a moment before it is counted as held (a leak stays).
        int open = Integer.MAX_VALUE;
        for (int i = 0; i < 5; i++, Thread.sleep(20)) open = Math.min(open, openFds());
        assertTrue(open <= fds, "file descriptors: " + open + " open, " + fds + " before");
        assertEquals(0, javaDeliveryThreads(), "delivery threads still attached to the JVM");
    }

    // ---- one crawler's life ---------------------------------------------------------------------

    /** A crawler whose handlers note any call after close returned. */
    static final class Watched {
        final Crawler crawler;
        final AtomicBoolean closeReturned = new AtomicBoolean();
        final AtomicInteger lateCalls = new AtomicInteger();
        final AtomicInteger completions = new AtomicInteger();
        final AtomicInteger gates = new AtomicInteger();
        final List<String> errors = new CopyOnWriteArrayList<>();

        Watched(Store store, Stop stop) {
            crawler = new Crawler(options(store).build());
            crawler.onGate(hash -> {
                note();
                gates.incrementAndGet();
                if (stop == Stop.HANDLER) crawler.shutdown();
                return true;
            });
            crawler.onCompletion(c -> {
                note();
                completions.incrementAndGet();
            });
            crawler.onObservation(o -> note());
            crawler.onError(m -> {
                note();
                errors.add(m);
            });
            if (store != Store.NONE) crawler.onRetry(r -> note());
        }

        void note() {
            if (closeReturned.get()) lateCalls.incrementAndGet();
        }

        void close() {
            crawler.close();
            closeReturned.set(true);
        }

        void feed(int round) throws IOException {
            feed(round, 3);
        }

        void feed(int round, int hashes) throws IOException {
            try (DhtClient client = new DhtClient()) {
                int port = DhtClient.portOf(crawler);
                for (int i = 0; i < hashes; i++) {
                    byte[] h = DhtClient.filled(round);
                    h[0] = (byte) i;
                    // Never a hash a shared (PostgreSQL) store holds from an earlier case or run:
                    // a dormant one would not reach the gate at once.
                    long n = HASHES.incrementAndGet();
                    for (int k = 0; k < 8; k++) h[1 + k] = (byte) (n >>> (8 * k));
                    for (int k = 0; k < 8; k++) h[9 + k] = (byte) (SALT >>> (8 * k));
                    client.announce(port, h, peer.port());
                }
            } catch (IOException e) {
                // What the crawler counted (answers refused, by whom) says why it was silent.
                throw new IOException(e.getMessage() + "; the crawler's stats: " + crawler.stats(), e);
            }
        }
    }

    static Thread thread(String name, ThrowingRunnable body, AtomicReference<Throwable> failure) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    static void join(Thread t) throws InterruptedException {
        t.join(30_000);
        if (t.isAlive()) fail(t.getName() + " hangs: " + List.of(t.getStackTrace()));
    }

    /** run() on the calling thread, with a guard that ends the test should run() never return. */
    static void runGuarded(Crawler c) throws InterruptedException {
        AtomicBoolean returned = new AtomicBoolean();
        Thread guard = new Thread(() -> {
            try {
                Thread.sleep(20_000);
                if (!returned.get()) c.shutdown();
            } catch (InterruptedException e) {
                // run returned
            }
        }, "run-guard");
        guard.setDaemon(true);
        guard.start();
        c.run();
        returned.set(true);
        guard.interrupt();
        guard.join();
    }

    static void lifeOf(Store store, Stop stop, int round) throws Exception {
        int threadsBefore = nativeThreads(threadComm());
        Watched w = new Watched(store, stop);
        Crawler c = w.crawler;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try {
            lifeOf(w, stop, round, threadsBefore, failure);
        } finally {
            if (!c.isClosed()) c.close(); // a failed case leaves no crawler behind for the next ones
        }
        assertTrue(c.isClosed());
    }

    private static void lifeOf(Watched w, Stop stop, int round, int threadsBefore, AtomicReference<Throwable> failure)
            throws Exception {
        Crawler c = w.crawler;
        switch (stop) {
            case HOST -> {
                c.start();
                // The count sees the library's threads (they carry their creator's name).
                assertTrue(nativeThreads(threadComm()) > threadsBefore, "no library thread counted");
                w.feed(round);
                c.shutdown();
                c.shutdown();
                w.close();
            }
            case OTHER_THREAD -> {
                Thread stopper = thread("stopper", () -> {
                    while (!c.statsMap().containsKey("endpoints")) Thread.sleep(5);
                    w.feed(round);
                    c.shutdown();
                }, failure);
                runGuarded(c);
                join(stopper);
                w.close();
            }
            case HANDLER -> {
                c.start();
                try {
                    w.feed(round, 1); // its gate shuts down (a stopped crawler answers no more announces)
                } catch (IOException e) {
                    // The PostgreSQL store outlives the round: the crawler may lease a hash an
                    // earlier round left, whose gate shuts it down before the feed is answered
                    // (the failure of stop 42 and 44). Only a gate's shutdown excuses silence.
                    if (w.gates.get() == 0 || !c.awaitShutdown(Duration.ZERO)) throw e;
                }
                // A failure says whether the gate ran at all, and what the crawler saw.
                assertTrue(c.awaitShutdown(Duration.ofSeconds(20)), () -> "the gate's shutdown did not stop the crawler (gate calls: "
                        + w.gates.get() + ", errors: " + w.errors + ", stats: " + c.stats() + ")");
                w.close();
            }
            case TWO_THREADS -> {
                c.start();
                w.feed(round);
                CyclicBarrier both = new CyclicBarrier(2);
                Thread a = thread("stopper-a", () -> {
                    both.await();
                    c.shutdown();
                }, failure);
                Thread b = thread("stopper-b", () -> {
                    both.await();
                    c.shutdown();
                }, failure);
                join(a);
                join(b);
                assertTrue(c.awaitShutdown(Duration.ofSeconds(10)));
                w.close();
            }
            case RACING_CLOSE -> {
                c.start();
                w.feed(round);
                CyclicBarrier all = new CyclicBarrier(3);
                Thread stopper = thread("stopper", () -> {
                    all.await();
                    for (int i = 0; i < 50; i++) c.shutdown(); // no-ops once closed
                }, failure);
                Thread reader = thread("reader", () -> {
                    all.await();
                    try {
                        for (int i = 0; i < 50; i++) c.stats();
                    } catch (DhtcException e) {
                        assertEquals("DHTC_ERR_STATE", e.status()); // closed under it
                    }
                }, failure);
                all.await();
                w.close();
                join(stopper);
                join(reader);
            }
            case CLOSE_AFTER_RUN -> {
                Thread stopper = thread("stopper", () -> {
                    while (!c.statsMap().containsKey("endpoints")) Thread.sleep(5);
                    w.feed(round);
                    c.shutdown();
                }, failure);
                runGuarded(c);
                w.close(); // at once
                join(stopper);
            }
        }
        assertTrue(c.isClosed());
        c.close(); // idempotent
        c.shutdown(); // a no-op once closed
        if (failure.get() != null) throw new AssertionError("a helper thread failed", failure.get());
        Thread.sleep(20); // a late handler would show now
        assertEquals(0, w.lateCalls.get(), "handlers ran after close returned");
        assertEquals(List.of(), w.errors);
    }

    static void stress(Store store, Stop stop) throws Exception {
        options(store); // skips the PostgreSQL cases without DHTC_TEST_PG
        lifeOf(store, stop, 0); // warm up: classes loaded, jars opened, the SilentPeer's threads up
        String comm = threadComm();
        int threads = nativeThreads(comm);
        int fds = openFds();
        for (int round = 1; round <= ROUNDS; round++) lifeOf(store, stop, round);
        assertBackToBaseline(comm, threads, fds);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void shutdownFromTheHostThread(Store store) throws Exception {
        stress(store, Stop.HOST);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void shutdownFromAnotherThread(Store store) throws Exception {
        stress(store, Stop.OTHER_THREAD);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void shutdownFromAHandler(Store store) throws Exception {
        stress(store, Stop.HANDLER);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void shutdownFromTwoThreadsAtOnce(Store store) throws Exception {
        stress(store, Stop.TWO_THREADS);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void shutdownRacingClose(Store store) throws Exception {
        stress(store, Stop.RACING_CLOSE);
    }

    @ParameterizedTest
    @EnumSource(Store.class)
    void closeRightAfterRunReturns(Store store) throws Exception {
        stress(store, Stop.CLOSE_AFTER_RUN);
    }

    /** Shutdown never waits for a handler: a gate that blocks does not block shutdown() (nor run()). */
    @Test
    void shutdownDoesNotWaitForARunningHandler() throws Exception {
        CountDownLatch inGate = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicBoolean gateReturned = new AtomicBoolean();
        try (Crawler c = new Crawler(ContractTest.loopback().build())) {
            c.onGate(hash -> {
                inGate.countDown();
                try {
                    // Released only after the shutdown was seen; bounded, so a core whose
                    // shutdown waits for the handler fails this test instead of hanging it.
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                gateReturned.set(true);
                return true;
            });
            c.start();
            try (DhtClient client = new DhtClient()) {
                client.announce(DhtClient.portOf(c), DhtClient.filled(0x61), peer.port());
            }
            assertTrue(inGate.await(10, TimeUnit.SECONDS));
            c.shutdown();
            boolean stopped = c.awaitShutdown(Duration.ofSeconds(60));
            boolean whileInGate = !gateReturned.get();
            release.countDown();
            assertTrue(stopped, "the crawler did not shut down");
            // By order, not by the clock: the shutdown completed while the gate still ran.
            assertTrue(whileInGate, "shutdown waited for the running gate");
        }
    }

    /** close(Duration) gives up on a handler that keeps running: shut down, not closed; close() later works. */
    @Test
    void closeWithATimeoutLeavesTheCrawlerShutDownButOpen() throws Exception {
        CountDownLatch inGate = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicBoolean closeReturned = new AtomicBoolean();
        AtomicInteger late = new AtomicInteger();
        Crawler c = new Crawler(ContractTest.loopback().build());
        c.onGate(hash -> {
            inGate.countDown();
            try {
                release.await(8, TimeUnit.SECONDS); // bounded, see above
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return true;
        });
        c.onCompletion(done -> {
            if (closeReturned.get()) late.incrementAndGet();
        });
        c.start();
        try (DhtClient client = new DhtClient()) {
            client.announce(DhtClient.portOf(c), DhtClient.filled(0x62), peer.port());
        }
        assertTrue(inGate.await(10, TimeUnit.SECONDS));
        DhtcException e = assertThrows(DhtcException.class, () -> c.close(Duration.ofMillis(200)));
        assertEquals("DHTC_ERR_TIMEOUT", e.status());
        assertFalse(c.isClosed());
        assertTrue(c.awaitShutdown(Duration.ZERO));
        assertNotNull(c.stats()); // the handle is still valid
        release.countDown();
        c.close(Duration.ofSeconds(20));
        closeReturned.set(true);
        assertTrue(c.isClosed());
        Thread.sleep(50);
        assertEquals(0, late.get());
    }

    /**
     * A SQLite retry store with completion and retry handlers: rounds fail (the peer never
     * answers), each ends with a completion, then the store's retry event; each arrives at its own
     * handler, decoded, and nothing reaches the error handler.
     */
    @Test
    void aSqliteStoreDeliversCompletionsAndRetriesEachToItsHandler() throws Exception {
        int hashes = 4;
        List<Completion> completions = new CopyOnWriteArrayList<>();
        List<Retry> retries = new CopyOnWriteArrayList<>();
        List<String> errors = new CopyOnWriteArrayList<>();
        Set<String> announced = ConcurrentHashMap.newKeySet();
        try (Crawler c = new Crawler(options(Store.SQLITE).build())) {
            c.onCompletion(completions::add);
            c.onRetry(retries::add);
            c.onError(errors::add);
            c.start();
            try (DhtClient client = new DhtClient()) {
                for (int i = 0; i < hashes; i++) {
                    byte[] h = DhtClient.filled(0x70 + i);
                    announced.add(DhtClient.hex(h));
                    client.announce(DhtClient.portOf(c), h, peer.port());
                }
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while ((completions.size() < hashes || retries.size() < hashes) && System.nanoTime() < deadline) Thread.sleep(50);
            c.shutdown();
        }
        assertEquals(List.of(), errors);
        assertTrue(completions.size() >= hashes, "completions: " + completions);
        assertTrue(retries.size() >= hashes, "retry events: " + retries);
        Set<String> outcomes = Set.of("accepted", "fetch_failed", "delivery_rejected", "sink_failed", "cancelled");
        for (Completion done : completions) {
            assertEquals("completion", Events.type(done.json()), done.json());
            assertTrue(outcomes.contains(done.outcome()), done.json());
            assertTrue(announced.contains(done.infoHash()), done.json());
        }
        for (Retry r : retries) {
            assertEquals("retry", Events.type(r.json()), r.json());
            assertTrue(announced.contains(r.infoHash()), r.json());
            assertTrue(HASH.matcher(r.infoHash()).matches());
            assertTrue(r.dormant(), r.json()); // the rounds failed
            assertNotNull(r.failure(), r.json());
            assertNotNull(r.nextRetryAt(), r.json());
            assertTrue(r.attempts() >= 1, r.json());
        }
        assertTrue(completions.stream().filter(x -> !x.outcome().equals("cancelled")).allMatch(x -> x.outcome().equals("fetch_failed")),
                completions.toString());
    }
}
