package dev.dhtcrawler;

/**
 * Receives each verified torrent, once. Runs on the delivery thread. Returning accepts the torrent;
 * throwing rejects it (the completion then says {@code delivery_rejected}) and is reported to the
 * error handler.
 */
@FunctionalInterface
public interface TorrentHandler {
    void onTorrent(Torrent torrent);
}
