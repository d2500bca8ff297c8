package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** Decoding of every event envelope: nothing the library sends makes decoding throw. */
class EventDecodingTest {
    private static final String HASH = "0123456789abcdef0123456789abcdef01234567";

    @Test
    void completionsOfEveryOutcomeAndMalformedOnesNeverThrow() {
        for (String outcome : List.of("accepted", "fetch_failed", "delivery_rejected", "sink_failed", "cancelled", "a_new_one")) {
            String json = "{\"type\":\"completion\",\"schema\":1,\"info_hash\":\"" + HASH + "\",\"outcome\":\"" + outcome
                    + "\",\"failure\":null,\"attempts\":1,\"peer\":null,\"round\":2}";
            Completion c = Completion.parse(json);
            assertEquals(HASH, c.infoHash());
            assertEquals(outcome, c.outcome());
            assertEquals(1, c.attempts());
            assertEquals(2, c.round());
            assertNull(c.failure());
            assertEquals(outcome.equals("sink_failed"), c.sinkFailed());
            assertEquals(outcome.equals("accepted"), c.accepted());
            assertEquals(json, c.json());
        }
        // The stream that served it, typed; null without a serving peer.
        Completion served = Completion.parse("{\"type\":\"completion\",\"schema\":1,\"info_hash\":\"" + HASH
                + "\",\"outcome\":\"accepted\",\"failure\":null,\"attempts\":1,\"peer\":\"127.0.0.1:9\","
                + "\"encryption\":\"rc4\",\"transport\":\"utp\",\"round\":0}");
        assertEquals("rc4", served.encryption());
        assertEquals("utp", served.transport());
        Completion failed = Completion.parse("{\"type\":\"completion\",\"outcome\":\"fetch_failed\",\"failure\":\"utp_timeout\","
                + "\"peer\":null,\"encryption\":null,\"transport\":null}");
        assertEquals(FailureClass.UTP_TIMEOUT, failed.failure());
        assertNull(failed.encryption());
        assertNull(failed.transport());
        assertEquals(17, FailureClass.ALL.size());
        assertEquals(15, FailureClass.ALL.indexOf(FailureClass.ENCRYPTION_FAILED)); // the library's order
        for (String bad : new String[] {"", "{", "null", "[]", "{\"type\":\"completion\"}", "{\"attempts\":\"x\",\"outcome\":3}", null}) {
            Completion c = Completion.parse(bad);
            assertNull(c.outcome());
            assertEquals(0, c.attempts());
        }
    }

    @Test
    void retryEventsDecode() {
        Retry r = Retry.parse("{\"type\":\"retry\",\"schema\":1,\"info_hash\":\"" + HASH
                + "\",\"state\":\"dormant\",\"attempts\":2,\"failure\":\"no_peers\",\"next_retry_at\":1767312000}");
        assertEquals(HASH, r.infoHash());
        assertTrue(r.dormant());
        assertFalse(r.done());
        assertEquals(2, r.attempts());
        assertEquals("no_peers", r.failure());
        assertEquals(Instant.ofEpochSecond(1767312000), r.nextRetryAt());
        Retry done = Retry.parse("{\"type\":\"retry\",\"schema\":1,\"info_hash\":\"" + HASH
                + "\",\"state\":\"done\",\"attempts\":0,\"failure\":null,\"next_retry_at\":null}");
        assertTrue(done.done());
        assertNull(done.nextRetryAt());
        assertNull(Retry.parse("{oops").state());
    }

    @Test
    void everyPolledTypeDecodesAndUnknownOnesAreIgnored() {
        Event gate = Events.decode("{\"type\":\"gate\",\"schema\":1,\"id\":7,\"info_hash\":\"" + HASH + "\"}", new byte[0]);
        assertEquals(new GateEvent(7, HASH, "{\"type\":\"gate\",\"schema\":1,\"id\":7,\"info_hash\":\"" + HASH + "\"}"), gate);
        assertInstanceOf(Completion.class, Events.decode("{\"type\":\"completion\",\"outcome\":\"sink_failed\"}", null));
        assertInstanceOf(Retry.class, Events.decode("{\"type\":\"retry\",\"state\":\"done\"}", null));
        assertInstanceOf(Observation.class, Events.decode("{\"type\":\"observation\",\"kind\":\"get_peers\"}", null));
        Observation lookup = (Observation) Events.decode("{\"type\":\"observation\",\"schema\":1,\"info_hash\":\"" + HASH
                + "\",\"source\":\"1.2.3.4:6881\",\"kind\":\"get_peers\",\"port\":null,\"at\":1767312000}", null);
        assertNull(lookup.port());
        assertFalse(lookup.announce());
        assertEquals(1767312000L, lookup.at());
        Observation announce = (Observation) Events.decode("{\"type\":\"observation\",\"schema\":1,\"info_hash\":\"" + HASH
                + "\",\"source\":\"1.2.3.4:6881\",\"kind\":\"announce\",\"port\":51413,\"at\":1767312001}", null);
        assertTrue(announce.announce());
        assertEquals("1.2.3.4:6881", announce.source());
        assertEquals(51413, announce.port());
        assertEquals(1767312001L, announce.at());
        ErrorEvent error = (ErrorEvent) Events.decode("{\"type\":\"error\",\"message\":\"caf\u00e9 \uD83D\uDE00\"}", null);
        assertEquals("caf\u00e9 \uD83D\uDE00", error.message());
        assertNull(Events.decode("{\"type\":\"something_new\",\"schema\":1}", null));
        assertNull(Events.decode("{\"schema\":1}", null));
        assertNull(Events.decode("not json", null));
        assertNull(Events.decode("{\"type\":\"gate\"}", null)); // no id: cannot be answered
        assertNull(Events.decode("{\"type\":\"torrent\",\"id\":3,\"torrent\":{\"name\":1}}", new byte[0])); // unreadable torrent
        assertEquals(3L, Events.id("{\"type\":\"torrent\",\"id\":3}"));

        String torrent = "{\"info_hash\":\"" + HASH + "\",\"info_hash_v1\":\"" + HASH + "\",\"version\":\"v1\",\"name\":\"x\","
                + "\"total_size\":5,\"piece_length\":16384,\"files\":[{\"path\":\"x\",\"size\":5}]}";
        byte[] info = "d4:name1:xe".getBytes(StandardCharsets.US_ASCII);
        TorrentEvent t = (TorrentEvent) Events.decode("{\"type\":\"torrent\",\"schema\":1,\"id\":8,\"torrent\":" + torrent + "}", info);
        assertEquals(8, t.id());
        assertEquals("x", t.torrent().name());
        assertArrayEquals(info, t.torrent().info());
    }

    @Test
    void theDispatcherIgnoresUnknownTypesAndRoutesRetries() {
        List<Completion> completions = new CopyOnWriteArrayList<>();
        List<Retry> retries = new CopyOnWriteArrayList<>();
        Dispatcher d = new Dispatcher(null, null, completions::add, retries::add, m -> {}, null);
        try {
            d.completion(bytes("{\"type\":\"completion\",\"schema\":1,\"outcome\":\"sink_failed\"}"));
            d.completion(bytes("{\"type\":\"retry\",\"schema\":1,\"state\":\"done\"}")); // an older library sent them here
            d.completion(bytes("{\"type\":\"brand_new\",\"schema\":1}"));
            d.retry(bytes("{\"type\":\"retry\",\"schema\":1,\"state\":\"dormant\"}"));
            d.retry(bytes("{\"type\":\"brand_new\",\"schema\":1}"));
            d.completion(bytes("garbage"));
        } finally {
            d.delete();
        }
        assertEquals(java.util.Arrays.asList("sink_failed", null), completions.stream().map(Completion::outcome).toList());
        assertEquals(List.of("done", "dormant"), retries.stream().map(Retry::state).toList());
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
