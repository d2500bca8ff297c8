package dev.dhtcrawler;

/**
 * Receives each verified torrent and answers it: {@link Answer#ACCEPT} (stored), {@link
 * Answer#REJECT} (not wanted) or {@link Answer#RETRY} (could not be stored now: fetched again).
 * Runs on the delivery thread. Throwing, or returning null, counts as a rejection and is reported
 * to the error handler.
 */
@FunctionalInterface
public interface TorrentAnswerHandler {
    Answer onTorrent(Torrent torrent);
}
