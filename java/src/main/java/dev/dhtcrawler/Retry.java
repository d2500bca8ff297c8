package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;
import java.time.Instant;

/**
 * What the retry store made of a round (docs/events.md), after it committed it.
 *
 * @param infoHash the hash, 40 lower-case hex digits
 * @param state {@code dormant} (the round failed; due again at {@code nextRetryAt}) or {@code done}
 *     (never fetched again)
 * @param attempts failed rounds so far (0 for done)
 * @param failure for dormant the class that failed the round, otherwise null
 * @param nextRetryAt for dormant when the hash is due again, otherwise null
 * @param json the event as the library sent it
 */
public record Retry(String infoHash, String state, int attempts, String failure, Instant nextRetryAt, String json)
        implements Event {
    /** Reads a retry event; never throws (a field that is missing or of a wrong type reads as null or 0). */
    static Retry parse(String json) {
        JsonNode e = Json.lenientTree(json);
        Long next = Json.lenientLong(e, "next_retry_at");
        return new Retry(Json.lenientString(e, "info_hash"), Json.lenientString(e, "state"),
                (int) Json.lenientInt(e, "attempts"), Json.lenientString(e, "failure"),
                next == null ? null : Instant.ofEpochSecond(next), json);
    }

    @Override
    public String type() {
        return "retry";
    }

    /** True when the hash waits for another round. */
    public boolean dormant() {
        return "dormant".equals(state);
    }

    /** True when the hash is done (delivered or rejected): never fetched again. */
    public boolean done() {
        return "done".equals(state);
    }
}
