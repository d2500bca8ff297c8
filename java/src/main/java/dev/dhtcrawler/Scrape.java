package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * The answer to {@link Crawler#requestScrape(String)} (BEP-33, docs/events.md): the swarm's size
 * estimated from the bloom filters of the DHT nodes closest to the hash.
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param seeders estimated seeders
 * @param leechers estimated leechers
 * @param responders nodes whose reply described the swarm (0: nobody knew it, the estimates mean unknown)
 * @param queried get_peers queries the scrape sent
 * @param timedOut {@code crawl.scrape.timeout_secs} ended it: it had no node to ask, or its answers
 *     did not all come (the estimates cover what came)
 * @param at when the scrape ended, Unix seconds
 * @param json the event as the library sent it
 */
public record Scrape(String infoHash, long seeders, long leechers, long responders, long queried, boolean timedOut,
        long at, String json) implements Event {
    /** Reads a scrape event; never throws (a missing number reads as 0). */
    static Scrape parse(String json) {
        JsonNode e = Json.lenientTree(json);
        return new Scrape(Json.lenientString(e, "info_hash"), Json.lenientInt(e, "seeders"),
                Json.lenientInt(e, "leechers"), Json.lenientInt(e, "responders"), Json.lenientInt(e, "queried"),
                e.path("timed_out").booleanValue(), Json.lenientInt(e, "at"), json);
    }

    @Override
    public String type() {
        return "scrape";
    }
}
