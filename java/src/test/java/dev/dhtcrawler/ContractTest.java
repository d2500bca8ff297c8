package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The C contract tests (tests/capi/test_capi.cpp) as a Java host sees them: typed errors naming the
 * key, the lifecycle many times over with fetches in flight, handlers that throw, no handler after
 * close, shutdown from a handler and from another thread. Loopback only, bootstrap disabled.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ContractTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Options.Builder loopback() {
        return Options.builder()
                .port(0)
                .bindV4("127.0.0.1")
                .allowPrivateAddresses(true)
                .bootstrap() // never the real DHT
                .metadataTimeoutSecs(2)
                .set("metadata.gate_timeout_millis", 2000)
                // The tests' peers speak plaintext TCP; the default (uTP first, MSE) would wait out a silent SYN.
                .set("metadata.transports", "tcp")
                .set("metadata.encryption", "prefer_plaintext");
    }

    private static long deliveryThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("dhtcrawler-delivery"))
                .count();
    }

    private static <T> T poll(BlockingQueue<T> q) throws InterruptedException {
        return q.poll(10, TimeUnit.SECONDS);
    }

    @Test
    void versionAndAbiAgreeWithTheHeader() {
        assertEquals(Crawler.bindingAbiVersion(), Crawler.abiVersion());
        assertTrue(Crawler.version().matches("\\d+\\.\\d+\\.\\d+.*"), Crawler.version());
    }

    @Test
    void badJsonAndBadOptionsThrowWithStatusAndKeyPath() throws Exception {
        DhtcException e = assertThrows(DhtcException.class, () -> new Crawler("{not json"));
        assertEquals("DHTC_ERR_INVALID_JSON", e.status());
        assertEquals(-2, e.code());
        assertFalse(e.getMessage().isEmpty());

        e = assertThrows(DhtcException.class, () -> new Crawler("{\"metadata\":{\"timout_secs\":4}}"));
        assertEquals("DHTC_ERR_INVALID_OPTION", e.status());
        assertTrue(e.getMessage().contains("metadata.timout_secs"), e.getMessage());

        Options burst = Options.builder().set("crawl.rate_limit.burst", "many").build();
        e = assertThrows(DhtcException.class, () -> new Crawler(burst));
        assertEquals("DHTC_ERR_INVALID_OPTION", e.status());
        assertTrue(e.getMessage().contains("crawl.rate_limit.burst"), e.getMessage());

        e = assertThrows(DhtcException.class, () -> new Crawler(Options.builder().netmode("ipv5").build()));
        assertEquals("DHTC_ERR_INVALID_OPTION", e.status());
        assertTrue(e.getMessage().contains("netmode"), e.getMessage());

        // A non-BMP character in a bad key comes back intact (UTF-8, not JNI's modified UTF-8).
        e = assertThrows(DhtcException.class, () -> new Crawler(Options.builder().set("caf\u00e9\uD83D\uDE00", 1).build()));
        assertTrue(e.getMessage().contains("caf\u00e9\uD83D\uDE00"), e.getMessage());

        // A port in use is a bind error, reported at creation.
        try (Crawler first = new Crawler(loopback().build())) {
            int port = DhtClient.portOf(first);
            e = assertThrows(DhtcException.class, () -> new Crawler(loopback().port(port).build()));
            assertEquals("DHTC_ERR_BIND", e.status());
            assertTrue(e.getMessage().contains("bind"), e.getMessage());
        }
    }

    @Test
    void theDefaultsDocumentParsesAndIsAcceptedBack() throws Exception {
        JsonNode defaults = JSON.readTree(Options.defaultsJson());
        assertEquals(6881, defaults.get("port").asInt());
        assertEquals(4, defaults.get("metadata").get("timeout_secs").asInt());
        ObjectNode mine = (ObjectNode) defaults;
        mine.put("port", 0);
        mine.put("bind_v4", "127.0.0.1");
        ((ObjectNode) mine.get("crawl").get("bootstrap")).putArray("sources");
        try (Crawler c = new Crawler(Options.fromJson(JSON.writeValueAsString(mine)))) {
            c.start();
            assertTrue(DhtClient.portOf(c) > 0); // bound to a free port, as the document said
            c.shutdown();
        }
    }

    @Test
    void theBuilderNestsDottedKeys() throws Exception {
        JsonNode j = JSON.readTree(loopback().maxQueryRate(50).build().toJson());
        assertEquals(0, j.get("port").asInt());
        assertEquals(50.0, j.get("crawl").get("rate_limit").get("max_find_node_rate_per_sec").asDouble());
        assertTrue(j.get("crawl").get("bootstrap").get("sources").isArray());
        assertEquals(0, j.get("crawl").get("bootstrap").get("sources").size());
        assertEquals(2000, j.get("metadata").get("gate_timeout_millis").asInt());
        assertEquals(2, j.get("metadata").get("timeout_secs").asInt());
    }

    @Test
    void createStartShutdownClose100TimesWithFetchesInFlight() throws Exception {
        AtomicInteger completions = new AtomicInteger();
        try (SilentPeer peer = new SilentPeer(); DhtClient client = new DhtClient()) {
            for (int i = 0; i < 100; i++) {
                Crawler c = new Crawler(loopback().build());
                c.onCompletion(done -> completions.incrementAndGet());
                c.start();
                client.announce(DhtClient.portOf(c), DhtClient.filled(i), peer.port());
                if (i % 20 == 0) Thread.sleep(50); // some rounds surely connected
                c.shutdown();
                c.shutdown(); // idempotent
                DhtcException again = assertThrows(DhtcException.class, c::start);
                assertEquals("DHTC_ERR_STATE", again.status());
                c.close();
                c.close(); // idempotent
                assertTrue(c.isClosed());
                assertEquals("DHTC_ERR_STATE", assertThrows(DhtcException.class, c::stats).status());
            }
        }
        // Rounds that passed the gate before each shutdown completed (as cancelled).
        assertTrue(completions.get() > 0);
        // Every delivery thread detached from the JVM when it ended.
        assertEquals(0, deliveryThreads());
    }

    @Test
    void throwingHandlersAreReportedAndCountAsRejections() throws Exception {
        BlockingQueue<String> errors = new LinkedBlockingQueue<>();
        List<Completion> completions = new CopyOnWriteArrayList<>();
        AtomicInteger gates = new AtomicInteger();
        try (SilentPeer peer = new SilentPeer(); DhtClient client = new DhtClient()) {
            try (Crawler c = new Crawler(loopback().build())) {
                c.onGate(hash -> {
                    gates.incrementAndGet();
                    throw new IllegalStateException("gate boom " + hash);
                });
                c.onObservation(o -> {
                    throw new UnsupportedOperationException("observation boom");
                });
                c.onCompletion(completions::add);
                c.onError(message -> {
                    errors.add(message);
                    throw new RuntimeException("the error handler throws too"); // dropped
                });
                c.start();
                int port = DhtClient.portOf(c);
                byte[] hash = DhtClient.filled(0x17);
                client.announce(port, hash, peer.port());
                // Its lookup and the announce itself are observations: two throws, and the gate's.
                List<String> seen = new java.util.ArrayList<>();
                java.util.function.Predicate<String> observationThrew = m -> m.contains("observation callback threw")
                        && m.contains("java.lang.UnsupportedOperationException") && m.contains("observation boom");
                java.util.function.Predicate<String> gateThrew =
                        m -> m.contains("gate callback threw") && m.contains("gate boom " + DhtClient.hex(hash));
                while (seen.stream().filter(observationThrew).count() < 2 || seen.stream().noneMatch(gateThrew)) {
                    String m = poll(errors);
                    assertNotNull(m, "two observation errors and the gate's expected, got " + seen);
                    seen.add(m);
                }
                // The throw was a rejection: counted as such (the error report comes first, the
                // count when the answer reaches the pipeline), and no round started.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (gateRejected(c) < 1 && System.nanoTime() < deadline) Thread.sleep(10);
                assertEquals(1, gateRejected(c));
                // The crawler still works after the throws.
                client.sendGetPeers(port, DhtClient.filled(0x18));
                assertNotNull(poll(errors));
            }
        }
        assertEquals(1, gates.get());
        // A rejected gate produces no completion, not even a cancelled one at close.
        assertEquals(List.of(), completions);
    }

    private static int gateRejected(Crawler c) {
        @SuppressWarnings("unchecked")
        Map<String, Object> metadata = (Map<String, Object>) c.observabilityMap().get("metadata");
        return ((Number) metadata.get("gate_rejected")).intValue();
    }

    /** An announce is an observation too: the announcing node, the port it named and the time. */
    @Test
    void anAnnounceIsObservedWithItsNodePortAndTime() throws Exception {
        BlockingQueue<Observation> observations = new LinkedBlockingQueue<>();
        try (DhtClient client = new DhtClient(); Crawler c = new Crawler(loopback().build())) {
            c.onObservation(observations::add);
            c.start();
            long before = System.currentTimeMillis() / 1000;
            byte[] hash = DhtClient.filled(0x5d);
            client.announce(DhtClient.portOf(c), hash, 51413);
            Observation announce = null;
            for (Observation o; announce == null && (o = poll(observations)) != null; ) {
                if (o.announce()) announce = o;
            }
            long after = System.currentTimeMillis() / 1000;
            assertNotNull(announce, "no announce observation");
            assertEquals(DhtClient.hex(hash), announce.infoHash());
            assertEquals("127.0.0.1:" + client.localPort(), announce.source());
            assertEquals(51413, announce.port());
            assertTrue(announce.at() >= before && announce.at() <= after, announce.toString());
        }
    }

    @Test
    void noHandlerRunsAfterClose() throws Exception {
        AtomicInteger observations = new AtomicInteger();
        AtomicBoolean closed = new AtomicBoolean();
        AtomicBoolean lateCall = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        Crawler c = new Crawler(loopback().build());
        c.onObservation(o -> {
            if (closed.get()) lateCall.set(true);
            observations.incrementAndGet();
        });
        c.start();
        int port = DhtClient.portOf(c);
        Thread flood = new Thread(() -> {
            try (DhtClient client = new DhtClient()) {
                for (int i = 0; i < 20000 && !stop.get(); i++) {
                    byte[] h = DhtClient.filled(i & 0xff);
                    h[0] = (byte) (i >> 8);
                    client.sendGetPeers(port, h);
                    if (i % 64 == 0) Thread.sleep(1);
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        flood.start();
        // Snapshots from several threads while the events flow.
        List<Thread> readers = new java.util.ArrayList<>();
        AtomicReference<Throwable> readerFailure = new AtomicReference<>();
        for (int t = 0; t < 3; t++) {
            Thread r = new Thread(() -> {
                while (!stop.get()) {
                    try {
                        assertTrue(c.stats().startsWith("{"));
                        assertTrue(c.observability().startsWith("{"));
                        assertFalse(c.metrics().isEmpty());
                    } catch (DhtcException e) {
                        if (!e.status().equals("DHTC_ERR_STATE")) readerFailure.set(e); // closed under us: expected
                        return;
                    } catch (Throwable e) {
                        readerFailure.set(e);
                        return;
                    }
                }
            });
            r.start();
            readers.add(r);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (observations.get() < 200 && System.nanoTime() < deadline) Thread.sleep(10);
        c.close();
        closed.set(true);
        int atClose = observations.get();
        Thread.sleep(300); // the flood goes on against a closed port
        stop.set(true);
        flood.join();
        for (Thread r : readers) r.join();
        assertTrue(atClose >= 200, "observations before close: " + atClose);
        assertEquals(atClose, observations.get());
        assertFalse(lateCall.get());
        assertEquals(null, readerFailure.get());
    }

    @Test
    void shutdownFromInsideAHandlerEndsRunAndCloseThereIsRefused() throws Exception {
        AtomicReference<String> closeStatus = new AtomicReference<>();
        AtomicReference<Thread> handlerThread = new AtomicReference<>();
        AtomicInteger gates = new AtomicInteger();
        AtomicBoolean guardFired = new AtomicBoolean();
        try (SilentPeer peer = new SilentPeer(); Crawler c = new Crawler(loopback().build())) {
            c.onGate(hash -> {
                gates.incrementAndGet();
                handlerThread.set(Thread.currentThread());
                try {
                    c.close();
                } catch (DhtcException e) {
                    closeStatus.set(e.status());
                }
                assertTrue(c.stats().contains("endpoints")); // snapshots are allowed here
                c.shutdown();
                return true;
            });
            c.start();
            int port = DhtClient.portOf(c);
            Thread feeder = new Thread(() -> {
                try (DhtClient client = new DhtClient()) {
                    Thread.sleep(100);
                    client.announce(port, DhtClient.filled(0x33), peer.port());
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            Thread guard = new Thread(() -> { // the test must end even if run() never returns
                try {
                    if (!c.awaitShutdown(Duration.ofSeconds(20))) {
                        guardFired.set(true);
                        c.shutdown();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            feeder.start();
            guard.start();
            c.run();
            feeder.join();
            guard.join();
            assertFalse(c.isClosed());
        }
        assertFalse(guardFired.get());
        assertEquals(1, gates.get());
        // The library's delivery thread, attached as a daemon (it never keeps the JVM alive).
        assertEquals("dhtcrawler-delivery", handlerThread.get().getName());
        assertTrue(handlerThread.get().isDaemon());
        assertFalse(handlerThread.get().isAlive()); // detached when it ended, at close
        assertEquals("DHTC_ERR_STATE", closeStatus.get());
    }

    @Test
    void shutdownFromAnotherThreadEndsRun() throws Exception {
        try (Crawler c = new Crawler(loopback().build())) {
            Thread stopper = new Thread(() -> {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
                c.shutdown();
            });
            stopper.start();
            c.run();
            stopper.join();
            assertTrue(c.awaitShutdown(Duration.ZERO));
        }
    }

    @Test
    void closeFromAnotherThreadEndsRun() throws Exception {
        Crawler c = new Crawler(loopback().build());
        Thread closer = new Thread(() -> {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            }
            c.close();
        });
        closer.start();
        c.run(); // returns once closed: a closed crawler is shut down
        closer.join();
        assertTrue(c.isClosed());
        assertTrue(c.awaitShutdown(Duration.ofSeconds(1)));
    }

    @Test
    void anInterruptedRunShutsTheCrawlerDown() throws Exception {
        try (Crawler c = new Crawler(loopback().build())) {
            AtomicBoolean interruptedAfter = new AtomicBoolean();
            Thread runner = new Thread(() -> {
                c.run();
                interruptedAfter.set(Thread.currentThread().isInterrupted());
            });
            runner.start();
            assertFalse(c.awaitShutdown(Duration.ofMillis(100)));
            runner.interrupt();
            runner.join(20000);
            assertFalse(runner.isAlive());
            assertTrue(interruptedAfter.get());
            assertTrue(c.awaitShutdown(Duration.ZERO));
        }
    }

    @Test
    void handlersAreSetBeforeStart() {
        try (Crawler c = new Crawler(loopback().build())) {
            c.start();
            assertThrows(IllegalStateException.class, () -> c.onGate(h -> true));
        }
    }
}
