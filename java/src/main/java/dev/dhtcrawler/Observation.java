package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * An info hash the DHT side saw (docs/events.md): looked up, sampled or announced.
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param source the node that queried us ({@code get_peers}, {@code announce}) or sent the sample, "ip:port"
 * @param kind {@code get_peers} (someone looked it up), {@code bep51_sample} (a node sampled it) or
 *     {@code announce} (a node announced a peer for it; at most {@code announce_observations_per_sec})
 * @param port for {@code announce} the port announced (the peer is the source's IP at that port),
 *     otherwise null
 * @param at when the crawler saw it, Unix seconds (0 when the library did not say)
 * @param json the event as the library sent it
 */
public record Observation(String infoHash, String source, String kind, Integer port, long at, String json)
        implements Event {
    /** Reads an observation; never throws (a missing field reads as null or 0). */
    static Observation parse(String json) {
        JsonNode e = Json.lenientTree(json);
        Long port = Json.lenientLong(e, "port");
        return new Observation(Json.lenientString(e, "info_hash"), Json.lenientString(e, "source"),
                Json.lenientString(e, "kind"), port == null ? null : port.intValue(), Json.lenientInt(e, "at"), json);
    }

    @Override
    public String type() {
        return "observation";
    }

    /** True for an announce (a peer for the hash, at {@link #port()} of the source's IP). */
    public boolean announce() {
        return "announce".equals(kind);
    }
}
