package dev.dhtcrawler;

/**
 * Decides whether a newly seen info hash is fetched from peers. Runs on the delivery thread before
 * the hash first goes to peers; returning false skips it (no torrent, no completion). Throwing
 * counts as false and is reported to the error handler.
 */
@FunctionalInterface
public interface Gate {
    boolean fetch(String infoHash);
}
