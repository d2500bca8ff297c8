package dev.dhtcrawler;

/**
 * One event taken with {@link Crawler#poll(java.time.Duration)} (docs/events.md). Dispatch with
 * {@code instanceof} over the permitted types (or a pattern switch, from Java 21); {@link GateEvent}
 * and {@link TorrentEvent} carry an id to be answered with {@link Crawler#answer(long, Answer)}.
 */
public sealed interface Event permits GateEvent, TorrentEvent, Completion, Retry, ErrorEvent, Observation, Scrape {
    /** The envelope's {@code type}: gate, torrent, completion, retry, error, observation or scrape. */
    String type();

    /** The event as the library sent it (it may carry fields newer than this class). */
    String json();
}
