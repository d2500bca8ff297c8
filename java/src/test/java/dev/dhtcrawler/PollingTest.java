package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Polling: every event type comes through poll(), gate and torrent events are answered by id. Loopback only. */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PollingTest {
    /** Polls until an event of {@code type} comes (others are collected into {@code seen}), at most 30 s. */
    static <T extends Event> T pollFor(Crawler c, Class<T> type, List<Event> seen) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            Optional<Event> e = c.poll(Duration.ofMillis(200));
            if (e.isEmpty()) continue;
            seen.add(e.get());
            if (type.isInstance(e.get())) return type.cast(e.get());
        }
        fail("no " + type.getSimpleName() + " polled; saw " + seen);
        return null;
    }

    @Test
    void pollingIsExclusiveWithHandlersAndNeedsEnabling() throws Exception {
        try (Crawler c = new Crawler(ContractTest.loopback().build())) {
            assertThrows(IllegalStateException.class, () -> c.poll(Duration.ZERO));
            c.onError(m -> {});
            assertThrows(IllegalStateException.class, c::enablePolling);
        }
        try (Crawler c = new Crawler(ContractTest.loopback().build())) {
            c.enablePolling();
            assertThrows(IllegalStateException.class, () -> c.onGate(h -> true));
            c.start();
            assertEquals(Optional.empty(), c.poll(Duration.ofMillis(50)));
        }
    }

    @Test
    void gateCompletionAndRetryArePolledAndAnswered() throws Exception {
        Path db = Files.createTempFile("dhtc-java-poll-", ".sqlite");
        List<Event> seen = new ArrayList<>();
        try (SilentPeer peer = new SilentPeer(); DhtClient client = new DhtClient();
                Crawler c = new Crawler(ContractTest.loopback()
                        .set("retry.store.kind", "sqlite").set("retry.store.path", db.toString()).build())) {
            c.enablePolling();
            c.start();
            byte[] hash = DhtClient.filled(0x51);
            client.announce(DhtClient.portOf(c), hash, peer.port());

            GateEvent gate = pollFor(c, GateEvent.class, seen);
            assertEquals(DhtClient.hex(hash), gate.infoHash());
            assertEquals("gate", gate.type());
            assertTrue(c.answer(gate.id(), Answer.ACCEPT));
            assertFalse(c.answer(gate.id(), Answer.ACCEPT), "a second answer finds nothing");

            Completion done = pollFor(c, Completion.class, seen); // the peer never answers: the fetch fails
            assertEquals(DhtClient.hex(hash), done.infoHash());
            assertEquals("fetch_failed", done.outcome());
            Retry retry = pollFor(c, Retry.class, seen);
            assertEquals(DhtClient.hex(hash), retry.infoHash());
            assertTrue(retry.dormant(), retry.json());
            assertTrue(seen.stream().anyMatch(e -> e instanceof Observation o && o.infoHash().equals(DhtClient.hex(hash))), seen.toString());

            c.shutdown();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!c.isDrained() && System.nanoTime() < deadline) c.poll(Duration.ofMillis(200)).ifPresent(seen::add);
            assertTrue(c.isDrained());
            // After the end a poll returns at once, whatever its timeout: one of a day returns
            // (a bound far from any machine's speed, not a measured time).
            assertEquals(Optional.empty(), assertTimeoutPreemptively(Duration.ofSeconds(60),
                    () -> c.poll(Duration.ofDays(1)), "poll waited after the end"));
        } finally {
            Files.deleteIfExists(db);
        }
        for (Event e : seen) assertEquals(e.type(), Events.type(e.json()), e.json());
    }

    @Test
    void anUnansweredGateTakesTheDefaultAndCannotBeAnsweredLate() throws Exception {
        try (SilentPeer peer = new SilentPeer(); DhtClient client = new DhtClient();
                Crawler c = new Crawler(ContractTest.loopback().set("metadata.gate_timeout_millis", 300).build())) {
            c.enablePolling();
            c.start();
            client.announce(DhtClient.portOf(c), DhtClient.filled(0x52), peer.port());
            List<Event> seen = new ArrayList<>();
            GateEvent gate = pollFor(c, GateEvent.class, seen);
            Thread.sleep(1000);
            assertFalse(c.answer(gate.id(), true));
        }
    }

    @Test
    void closeFromAnotherThreadEndsAPollThatWaitsForever() throws Exception {
        Crawler c = new Crawler(ContractTest.loopback().build());
        c.enablePolling();
        c.start();
        AtomicReference<Optional<Event>> got = new AtomicReference<>();
        Thread poller = new Thread(() -> {
            try {
                Optional<Event> e;
                do {
                    e = c.poll(Duration.ofSeconds(-1));
                } while (e.isPresent());
                got.set(e);
            } catch (InterruptedException ignored) {
                // not expected
            }
        });
        poller.start();
        Thread.sleep(200);
        c.close();
        poller.join(10_000);
        assertFalse(poller.isAlive(), "poll() kept waiting on a closed crawler");
        assertEquals(Optional.empty(), got.get());
        assertTrue(c.isDrained());
        assertFalse(c.answer(1, Answer.ACCEPT));
    }
}
