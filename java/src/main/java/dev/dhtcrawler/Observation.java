package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * An info hash seen without a peer (docs/events.md).
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param source the node that mentioned it, "ip:port"
 * @param kind {@code get_peers} (someone looked it up) or {@code bep51_sample} (a node sampled it)
 * @param json the event as the library sent it
 */
public record Observation(String infoHash, String source, String kind, String json) implements Event {
    /** Reads an observation; never throws (a missing field reads as null). */
    static Observation parse(String json) {
        JsonNode e = Json.lenientTree(json);
        return new Observation(Json.lenientString(e, "info_hash"), Json.lenientString(e, "source"),
                Json.lenientString(e, "kind"), json);
    }

    @Override
    public String type() {
        return "observation";
    }
}
