package dev.dhtcrawler;

import dev.dhtcrawler.internal.DhtcNativeConstants;

/**
 * The three answers to a torrent (docs/events.md): a {@link TorrentAnswerHandler}'s return, or
 * {@link Crawler#answer(long, Answer)} for a polled event. The values are those of the C header's
 * {@code dhtc_answer}.
 */
public enum Answer {
    /** Every sink holds it: the round completes {@code accepted} and the hash is done. */
    ACCEPT(DhtcNativeConstants.DHTC_ANSWER_ACCEPT),
    /** Not wanted: the round completes {@code delivery_rejected} and the hash is done. */
    REJECT(DhtcNativeConstants.DHTC_ANSWER_REJECT),
    /**
     * Wanted, but it could not be stored now (a sink failed): the round completes {@code
     * sink_failed}, the hash is not recorded done and is fetched again.
     */
    RETRY(DhtcNativeConstants.DHTC_ANSWER_RETRY);

    private final int code;

    Answer(int code) {
        this.code = code;
    }

    /** The C value ({@code DHTC_ANSWER_*}). */
    public int code() {
        return code;
    }

    /** {@link #ACCEPT} for true, {@link #REJECT} for false (the boolean handlers' meaning). */
    public static Answer of(boolean accept) {
        return accept ? ACCEPT : REJECT;
    }
}
