package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * BEP-33 through the Java binding, against real libtorrent: a torrent with 6 seeders and 4 leechers
 * in a DHT of libtorrent sessions (tests/lt/lt_scrape_swarm.py under Debian's /usr/bin/python3).
 * The crawler is their bootstrap; {@link Crawler#requestScrape} must estimate both within one.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ScrapeTest {
    private static final int SEEDERS = 6, LEECHERS = 4;
    private static final ObjectMapper JSON = new ObjectMapper();

    private static boolean near(long estimate, int truth) {
        return Math.abs(estimate - truth) <= 1;
    }

    @Test
    void scrapeEventsAndArguments() {
        Scrape s = (Scrape) Events.decode("{\"type\":\"scrape\",\"schema\":1,\"info_hash\":\"" + "ab".repeat(20)
                + "\",\"seeders\":3,\"leechers\":1,\"responders\":2,\"queried\":5,\"timed_out\":false,\"at\":1767312000}", null);
        assertEquals(3, s.seeders());
        assertEquals(1767312000L, s.at());
        assertFalse(s.timedOut());
        assertTrue(((Scrape) Events.decode("{\"type\":\"scrape\",\"timed_out\":true}", null)).timedOut());
        try (Crawler c = new Crawler(ContractTest.loopback().build())) {
            assertThrows(IllegalArgumentException.class, () -> c.requestScrape("abc"));
            c.requestScrape("ab".repeat(20)); // before start: it waits for the crawl
            c.shutdown();
            assertThrows(DhtcException.class, () -> c.requestScrape("ab".repeat(20)));
        }
    }

    /** A scrape the crawler cannot start (it knows no node) ends after crawl.scrape.timeout_secs, timed out. */
    @Test
    void aScrapeWithNoNodeToAskEndsTimedOut() throws Exception {
        BlockingQueue<Scrape> scrapes = new LinkedBlockingQueue<>();
        try (Crawler c = new Crawler(ContractTest.loopback().set("crawl.scrape.timeout_secs", 1).build())) {
            c.onScrape(scrapes::add);
            c.start();
            c.requestScrape("5c".repeat(20));
            Scrape s = scrapes.poll(20, TimeUnit.SECONDS);
            assertNotNull(s, "the scrape never ended");
            assertEquals("5c".repeat(20), s.infoHash());
            assertTrue(s.timedOut(), s.toString());
            assertEquals(0, s.responders());
            assertEquals(0, s.queried());
        }
    }

    @Test
    void aScrapeOfALibtorrentSwarmEstimatesItsSeedersAndLeechers() throws Exception {
        Path script = Path.of(System.getProperty("user.dir")).resolve("../tests/lt/lt_scrape_swarm.py").normalize();
        Process probe = new ProcessBuilder("/usr/bin/python3", "-c", "import libtorrent").start();
        assumeTrue(probe.waitFor() == 0 && Files.exists(script), "/usr/bin/python3 with python3-libtorrent is not installed");
        BlockingQueue<Scrape> scrapes = new LinkedBlockingQueue<>();
        Path workdir = Files.createTempDirectory("dhtc-java-scrape");
        try (Crawler c = new Crawler(ContractTest.loopback().build())) {
            c.onScrape(scrapes::add);
            c.start();
            String endpoint = JSON.readTree(c.stats()).get("endpoints").get(0).asText();
            Process swarm = new ProcessBuilder("/usr/bin/python3", script.toString(), "--bootstrap", endpoint,
                    "--seeders", String.valueOf(SEEDERS), "--leechers", String.valueOf(LEECHERS), "--nodes", "8",
                    "--base", "150", "--duration", "150", "--workdir", workdir.toString())
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            try {
                BufferedReader out = new BufferedReader(new InputStreamReader(swarm.getInputStream(), StandardCharsets.UTF_8));
                String infoHash = null;
                for (String line; infoHash == null && (line = out.readLine()) != null; ) {
                    JsonNode ev = JSON.readTree(line);
                    if ("ready".equals(ev.path("event").asText())) infoHash = ev.get("info_hash").asText();
                }
                assertNotNull(infoHash, "the libtorrent swarm did not get ready");
                Thread.sleep(10_000); // the announces land first
                Scrape last = null;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
                while (System.nanoTime() < deadline
                        && (last == null || last.responders() == 0 || !near(last.seeders(), SEEDERS) || !near(last.leechers(), LEECHERS))) {
                    c.requestScrape(infoHash);
                    Scrape s = scrapes.poll(5, TimeUnit.SECONDS);
                    if (s != null) {
                        assertEquals(infoHash, s.infoHash());
                        last = s;
                    }
                }
                assertNotNull(last, "no scrape answered");
                assertTrue(last.responders() >= 1 && last.queried() >= last.responders(), last.toString());
                assertTrue(near(last.seeders(), SEEDERS) && near(last.leechers(), LEECHERS), last.toString());
            } finally {
                swarm.getOutputStream().close();
                if (!swarm.waitFor(15, TimeUnit.SECONDS)) swarm.destroyForcibly();
            }
        }
    }
}
