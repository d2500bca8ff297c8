package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * The end of one round of a hash (docs/events.md): exactly one per round that passed the gate.
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param outcome {@code accepted}, {@code fetch_failed}, {@code delivery_rejected}, {@code
 *     sink_failed} (answered {@link Answer#RETRY}: fetched again) or {@code cancelled}; an outcome
 *     newer than this list comes through as it is
 * @param failure for {@code fetch_failed} the class of the last attempt (one of {@link
 *     FailureClass#ALL}, or a class newer than this list), otherwise null
 * @param attempts real peer attempts
 * @param peer the peer that served the metadata (or is blamed for a hash mismatch), or null
 * @param encryption the stream that served the metadata, {@code plaintext} or {@code rc4} (MSE); null
 *     without a serving peer
 * @param transport the transport that served it, {@code tcp} or {@code utp}; null without a serving peer
 * @param round with a retry store the failed rounds before this one, otherwise 0
 * @param json the event as the library sent it
 */
public record Completion(String infoHash, String outcome, String failure, int attempts, String peer, String encryption,
        String transport, int round, String json) implements Event {
    /** Reads a completion; never throws (a field that is missing or of a wrong type reads as null or 0). */
    static Completion parse(String json) {
        JsonNode e = Json.lenientTree(json);
        return new Completion(Json.lenientString(e, "info_hash"), Json.lenientString(e, "outcome"),
                Json.lenientString(e, "failure"), (int) Json.lenientInt(e, "attempts"), Json.lenientString(e, "peer"),
                Json.lenientString(e, "encryption"), Json.lenientString(e, "transport"), (int) Json.lenientInt(e, "round"),
                json);
    }

    @Override
    public String type() {
        return "completion";
    }

    /** True when the torrent was fetched, verified and accepted. */
    public boolean accepted() {
        return "accepted".equals(outcome);
    }

    /** True when the torrent was answered {@link Answer#RETRY}: it is fetched again. */
    public boolean sinkFailed() {
        return "sink_failed".equals(outcome);
    }
}
