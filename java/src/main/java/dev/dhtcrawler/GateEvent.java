package dev.dhtcrawler;

/**
 * A polled gate request: answer it with {@link Crawler#answer(long, boolean)} (or {@link
 * Answer#ACCEPT}/{@link Answer#REJECT}); unanswered, it takes {@code metadata.gate_default} after
 * {@code metadata.gate_timeout_millis}.
 *
 * @param id the id to answer
 * @param infoHash the hash, 40 lower-case hex digits
 * @param json the event as the library sent it
 */
public record GateEvent(long id, String infoHash, String json) implements Event {
    @Override
    public String type() {
        return "gate";
    }
}
