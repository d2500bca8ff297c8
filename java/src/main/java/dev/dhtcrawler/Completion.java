package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * The end of one round of a hash (docs/events.md): exactly one per round that passed the gate.
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param outcome {@code accepted}, {@code fetch_failed}, {@code delivery_rejected} or {@code cancelled}
 * @param failure for {@code fetch_failed} the class of the last attempt ({@code timeout},
 *     {@code connect_refused}, ...), otherwise null
 * @param attempts real peer attempts
 * @param peer the peer that served the metadata (or is blamed for a hash mismatch), or null
 * @param json the event as the library sent it
 */
public record Completion(String infoHash, String outcome, String failure, int attempts, String peer, String json) {
    static Completion parse(String json) {
        JsonNode e = Json.tree(json);
        return new Completion(Json.string(e, "info_hash"), Json.string(e, "outcome"), Json.optionalString(e, "failure"),
                (int) Json.integer(e, "attempts"), Json.optionalString(e, "peer"), json);
    }

    /** True when the torrent was fetched, verified and accepted. */
    public boolean accepted() {
        return "accepted".equals(outcome);
    }
}
