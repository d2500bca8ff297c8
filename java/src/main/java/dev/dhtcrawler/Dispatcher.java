package dev.dhtcrawler;

import dev.dhtcrawler.internal.EventHandler;
import dev.dhtcrawler.internal.Json;
import java.nio.charset.StandardCharsets;

/**
 * The SWIG director the library's callbacks arrive at, on the delivery thread: it decodes the
 * UTF-8 payloads and calls the application's handlers. An exception thrown by a handler is not
 * caught here: it goes back to the JNI layer, which clears it, reports it to the error handler and
 * counts it as a rejection (dhtc_java.hpp). Decoding itself never throws: an event of a type this
 * binding does not know is ignored with a log line.
 */
final class Dispatcher extends EventHandler {
    /** True on the delivery thread while one of this crawler's handlers runs. */
    private final ThreadLocal<Boolean> inHandler = ThreadLocal.withInitial(() -> false);

    private final Gate gate;
    private final TorrentAnswerHandler torrent;
    private final CompletionHandler completion;
    private final RetryHandler retry;
    private final ErrorHandler error;
    private final ObservationHandler observation;
    private final ScrapeHandler scrape;

    Dispatcher(Gate gate, TorrentAnswerHandler torrent, CompletionHandler completion, RetryHandler retry,
            ErrorHandler error, ObservationHandler observation) {
        this(gate, torrent, completion, retry, error, observation, null);
    }

    Dispatcher(Gate gate, TorrentAnswerHandler torrent, CompletionHandler completion, RetryHandler retry,
            ErrorHandler error, ObservationHandler observation, ScrapeHandler scrape) {
        this.gate = gate;
        this.torrent = torrent;
        this.completion = completion;
        this.retry = retry;
        this.error = error;
        this.observation = observation;
        this.scrape = scrape;
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
    public int torrent(byte[] json, byte[] info) {
        inHandler.set(true);
        try {
            Answer a = torrent.onTorrent(Torrent.parse(utf8(json), info));
            if (a == null) throw new NullPointerException("the torrent handler returned no Answer");
            return a.code();
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void completion(byte[] json) {
        String text = utf8(json);
        String type = Events.type(text);
        if ("retry".equals(type)) { // a library that still sends them here
            retry(json);
            return;
        }
        if (type != null && !type.equals("completion")) {
            Events.ignore("an event of unknown type \"" + type + "\" on the completion callback", text);
            return;
        }
        if (completion == null) return;
        inHandler.set(true);
        try {
            completion.onCompletion(Completion.parse(text));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void retry(byte[] json) {
        String text = utf8(json);
        String type = Events.type(text);
        if (type != null && !type.equals("retry")) {
            Events.ignore("an event of unknown type \"" + type + "\" on the retry callback", text);
            return;
        }
        if (retry == null) return;
        inHandler.set(true);
        try {
            retry.onRetry(Retry.parse(text));
        } finally {
            inHandler.set(false);
        }
    }

    @Override
    public void error(byte[] json) {
        String text = utf8(json);
        String message = Json.lenientString(Json.lenientTree(text), "message");
        inHandler.set(true);
        try {
            error.onError(message != null ? message : text);
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

    @Override
    public void scrape(byte[] json) {
        inHandler.set(true);
        try {
            scrape.onScrape(Scrape.parse(utf8(json)));
        } finally {
            inHandler.set(false);
        }
    }

    private static String utf8(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
