package dev.dhtcrawler;

/**
 * Receives each verified torrent and decides whether it is accepted (true) or rejected (false),
 * for example after storing it. Runs on the delivery thread. Throwing counts as a rejection and is
 * reported to the error handler.
 */
@FunctionalInterface
public interface TorrentAckHandler {
    boolean onTorrent(Torrent torrent);
}
