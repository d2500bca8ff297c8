package dev.dhtcrawler;

/**
 * A polled runtime error of the crawler.
 *
 * @param message what went wrong
 * @param json the event as the library sent it
 */
public record ErrorEvent(String message, String json) implements Event {
    @Override
    public String type() {
        return "error";
    }
}
