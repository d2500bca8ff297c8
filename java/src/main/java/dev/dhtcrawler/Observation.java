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
public record Observation(String infoHash, String source, String kind, String json) {
    static Observation parse(String json) {
        JsonNode e = Json.tree(json);
        return new Observation(Json.string(e, "info_hash"), Json.optionalString(e, "source"), Json.string(e, "kind"), json);
    }
}
