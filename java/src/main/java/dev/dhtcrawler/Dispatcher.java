package dev.dhtcrawler;

import dev.dhtcrawler.internal.EventHandler;
import java.nio.charset.StandardCharsets;

/**
 * The SWIG director the library's callbacks arrive at, on the delivery thread: it decodes the
 * UTF-8 payloads and calls the application's handlers. An exception thrown here is not caught: it
 * goes back to the JNI layer, which clears it, reports it to the error handler and counts it as a
 * rejection (dhtc_java.hpp).
 */
final class Dispatcher extends EventHandler {
    /** True on the delivery thread while one of this crawler's handlers runs. */
    private final ThreadLocal<Boolean> inHandler = ThreadLocal.withInitial(() -> false);

    private final Gate gate;
    private final TorrentAckHandler torrent;
    private final CompletionHandler completion;
    private final ErrorHandler error;
    private final ObservationHandler observation;

    Dispatcher(Gate gate, TorrentAckHandler torrent, CompletionHandler completion, ErrorHandler error,
            ObservationHandler observation) {
        this.gate = gate;
        this.torrent = torrent;
        this.completion = completion;
        this.error = error;
        this.observation = observation;
    }

    /** True when the calling thread is inside one of this crawler's handlers (Crawler refuses close() there). */
    boolean inHandler() {
        return inHandler.get();
    }

    @Override
    public boolean gate(byte[] infoHash) {
        inHandler.set(true);
        try {
            return gate.fetch(new String(infoHash, StandardCharsets.US_ASCII));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public boolean torrent(byte[] json, byte[] info) {
        inHandler.set(true);
        try {
            return torrent.onTorrent(Torrent.parse(utf8(json), info));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void completion(byte[] json) {
        inHandler.set(true);
        try {
            completion.onCompletion(Completion.parse(utf8(json)));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void error(byte[] json) {
        inHandler.set(true);
        try {
            error.onError(dev.dhtcrawler.internal.Json.string(dev.dhtcrawler.internal.Json.tree(utf8(json)), "message"));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void observation(byte[] json) {
        inHandler.set(true);
        try {
            observation.onObservation(Observation.parse(utf8(json)));
        } finally {
            inHandler.set(false);
        }
    }

    private static String utf8(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
