package dev.dhtcrawler;

/**
 * A polled torrent: answer it with {@link Crawler#answer(long, Answer)}; unanswered, it is
 * answered {@link Answer#RETRY} after {@code metadata.gate_timeout_millis}.
 *
 * @param id the id to answer
 * @param torrent the torrent, its raw info dict included ({@link Torrent#info()})
 * @param json the event as the library sent it
 */
public record TorrentEvent(long id, Torrent torrent, String json) implements Event {
    @Override
    public String type() {
        return "torrent";
    }
}
