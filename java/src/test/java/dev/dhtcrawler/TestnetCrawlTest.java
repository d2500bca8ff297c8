package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The binding against the loopback test network (tools/testnet): every delivered torrent is valid
 * against docs/torrent.schema.json, equals its truth entry, came from one of its seeders and is
 * accepted once; a torrent handler that throws rejects. The tool is found through the system
 * property or environment variable DHTCRAWLER_TESTNET.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TestnetCrawlTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int TORRENTS = 30;

    static String testnetBinary() {
        String bin = System.getProperty("DHTCRAWLER_TESTNET", System.getenv("DHTCRAWLER_TESTNET"));
        if (bin == null || bin.isEmpty()) {
            fail("DHTCRAWLER_TESTNET is not set: point it (environment or -D) at the dhtcrawler-testnet binary of a build tree");
        }
        if (!Files.isExecutable(Path.of(bin))) fail("DHTCRAWLER_TESTNET=" + bin + " is not an executable");
        return bin;
    }

    /** Reads stdout until "BOOTSTRAP ip:port" (the network is up), at most two minutes. */
    static String awaitBootstrap(Process net) throws Exception {
        BlockingQueue<String> lines = new ArrayBlockingQueue<>(64);
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(net.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) lines.offer(line);
            } catch (Exception e) {
                // the process ended
            }
        }, "testnet-stdout");
        reader.setDaemon(true);
        reader.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (System.nanoTime() < deadline) {
            String line = lines.poll(1, TimeUnit.SECONDS);
            if (line != null && line.startsWith("BOOTSTRAP ")) return line.substring("BOOTSTRAP ".length()).trim();
            if (line == null && !net.isAlive()) break;
        }
        fail("the testnet never printed BOOTSTRAP (exit " + (net.isAlive() ? "none yet" : net.exitValue()) + ")");
        return null;
    }

    /** A truth entry as the crawler must deliver it when found under {@code key}. */
    private static JsonNode expectedForm(JsonNode entry, String key) {
        ObjectNode e = entry.deepCopy();
        e.remove(List.of("seeders", "seeder_policies", "seeder_behaviours", "announce_keys", "first_served_at", "holders",
                "holders_shared_ip"));
        e.put("info_hash", key);
        return e;
    }

    @Test
    void theJavaExampleCrawlsTheTestNetwork() throws Exception {
        String bin = testnetBinary();
        Process net = new ProcessBuilder(bin, "--nodes", "100", "--seeders", "8", "--torrents", "10", "--seed", "5",
                "--duration", "120", "--reannounce", "30", "--quiet")
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        Path out = Files.createTempFile("dhtc-java-example-", ".out");
        try {
            String bootstrap = awaitBootstrap(net);
            String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            Process example = new ProcessBuilder(javaBin, "-cp", System.getProperty("java.class.path"),
                    System.getProperty("dhtc.example.file", "../examples/java/Crawl.java"),
                    "--seconds", "15", "--port", "0", "--bootstrap", bootstrap, "--allow-private")
                    .redirectOutput(out.toFile())
                    .redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
            if (!example.waitFor(120, TimeUnit.SECONDS)) {
                example.destroyForcibly();
                fail("the example did not stop after --seconds 15");
            }
            assertEquals(0, example.exitValue());
            List<String> lines = Files.readAllLines(out, StandardCharsets.UTF_8);
            assertTrue(!lines.isEmpty(), "the example printed no torrent");
            for (String line : lines) assertEquals(List.of(), TorrentSchema.errors(line), line);
        } finally {
            net.destroy();
            if (!net.waitFor(20, TimeUnit.SECONDS)) net.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            Files.deleteIfExists(out);
        }
    }

    @Test
    void crawlsTheLoopbackTestNetwork() throws Exception {
        String bin = testnetBinary();
        Path dir = Files.createTempDirectory("dhtc-java-testnet-");
        Path truthFile = dir.resolve("truth.json");
        Process net = new ProcessBuilder(bin, "--nodes", "300", "--seeders", "24", "--torrents", String.valueOf(TORRENTS),
                "--misbehave", "0.2", "--seed", "11", "--duration", "240", "--reannounce", "60", "--churn", "0.05",
                "--quiet", "--truth", truthFile.toString())
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        Map<String, Torrent> accepted = new ConcurrentHashMap<>();
        Map<String, Integer> acceptedTimes = new ConcurrentHashMap<>();
        List<String> schemaErrors = new CopyOnWriteArrayList<>();
        List<Completion> completions = new CopyOnWriteArrayList<>();
        List<String> errors = new CopyOnWriteArrayList<>();
        AtomicReference<String> thrownFor = new AtomicReference<>();
        Map<String, JsonNode> byKey = new HashMap<>(); // every announce key -> its truth entry
        try {
            String bootstrap = awaitBootstrap(net);
            JsonNode truth = JSON.readTree(truthFile.toFile());
            assertEquals(TORRENTS, truth.size());
            for (JsonNode entry : truth) for (JsonNode k : entry.get("announce_keys")) byKey.put(k.asText(), entry);

            Options options = Options.builder()
                    .port(0)
                    .bindV4("127.0.0.1")
                    .allowPrivateAddresses(true)
                    .bootstrap(bootstrap) // the testnet only, never the real DHT
                    .set("crawl.bootstrap.interval_secs", 5) // retry soon should the first round find nobody
                    .build();
            try (Crawler crawler = new Crawler(options)) {
                crawler.onTorrentAck(t -> {
                    var problems = TorrentSchema.errors(t.json());
                    if (!problems.isEmpty()) schemaErrors.add(t.infoHash() + ": " + problems);
                    // The first torrent's handler throws: that must count as a rejection.
                    if (thrownFor.compareAndSet(null, t.infoHash())) throw new IllegalStateException("reject by throwing");
                    accepted.put(t.infoHash(), t);
                    acceptedTimes.merge(t.infoHash(), 1, Integer::sum);
                    return true;
                });
                crawler.onCompletion(completions::add);
                crawler.onError(errors::add);
                crawler.start();
                int wanted = TORRENTS * 6 / 10;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(200);
                while (accepted.size() < wanted && System.nanoTime() < deadline) Thread.sleep(500);
                Thread.sleep(2000); // a duplicate delivery would show up now
                crawler.shutdown();
            }
        } finally {
            net.destroy();
            if (!net.waitFor(20, TimeUnit.SECONDS)) net.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            Files.deleteIfExists(truthFile);
            Files.deleteIfExists(dir);
        }

        assertEquals(List.of(), schemaErrors);
        System.out.println("testnet: accepted " + accepted.size() + " of " + TORRENTS + " torrents");
        assertTrue(accepted.size() >= TORRENTS * 6 / 10, "accepted only " + accepted.size() + " of " + TORRENTS);
        acceptedTimes.forEach((hash, n) -> assertEquals(1, n, hash + " accepted " + n + " times"));

        // The torrent whose handler threw was rejected, and the error handler heard about it.
        String rejected = thrownFor.get();
        assertNotNull(rejected);
        assertTrue(completions.stream().anyMatch(c -> c.infoHash().equals(rejected) && c.outcome().equals("delivery_rejected")),
                "no delivery_rejected completion for " + rejected);
        assertTrue(errors.stream().anyMatch(m -> m.contains("torrent callback threw") && m.contains("reject by throwing")),
                errors.toString());
        for (String hash : accepted.keySet()) {
            assertTrue(completions.stream().anyMatch(c -> c.infoHash().equals(hash) && c.accepted()), "no accepted completion for " + hash);
            // Typed: the stream that served it, on the completion and on the torrent.
            for (Completion c : completions) {
                if (!c.infoHash().equals(hash) || !c.accepted()) continue;
                assertTrue(List.of("plaintext", "rc4").contains(c.encryption()), c.json());
                assertTrue(List.of("tcp", "utp").contains(c.transport()), c.json());
                assertEquals(accepted.get(hash).encryption(), Optional.of(c.encryption()), c.json());
                assertEquals(accepted.get(hash).transport(), Optional.of(c.transport()), c.json());
            }
        }
        for (Torrent t : accepted.values()) {
            JsonNode entry = byKey.get(t.infoHash());
            assertNotNull(entry, "delivered a torrent the testnet does not have: " + t.infoHash());
            ObjectNode delivered = (ObjectNode) JSON.readTree(t.json());
            delivered.remove(List.of("peer", "discovered_at", "encryption", "transport"));
            assertEquals(expectedForm(entry, t.infoHash()), delivered);
            List<String> seeders = new ArrayList<>();
            entry.get("seeders").forEach(s -> seeders.add(s.asText()));
            assertTrue(seeders.contains(t.peer().orElseThrow()), t.infoHash() + " came from " + t.peer() + ", not one of " + seeders);
        }
    }
}
