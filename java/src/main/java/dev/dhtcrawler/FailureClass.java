package dev.dhtcrawler;

import java.util.List;

/**
 * The failure classes of {@link Completion#failure()} and {@link Retry#failure()} (docs/events.md), in
 * the library's order. A library newer than this class may send others: compare strings.
 */
public final class FailureClass {
    public static final String CONNECT_REFUSED = "connect_refused";
    public static final String CONNECT_TIMEOUT = "connect_timeout";
    public static final String HANDSHAKE_FAILED = "handshake_failed";
    public static final String NO_EXTENSION_SUPPORT = "no_extension_support";
    public static final String NO_METADATA_SUPPORT = "no_metadata_support";
    public static final String REJECTED = "rejected";
    public static final String TIMEOUT = "timeout";
    public static final String SIZE_LIMIT = "size_limit";
    public static final String HASH_MISMATCH = "hash_mismatch";
    public static final String PARSE_ERROR = "parse_error";
    public static final String NO_PEERS = "no_peers";
    public static final String PROTOCOL_ERROR = "protocol_error";
    public static final String DISCONNECTED = "disconnected";
    public static final String SINK_FAILED = "sink_failed";
    public static final String CANCELLED = "cancelled";
    /** The MSE/PE exchange failed (no common method, no VC, the peer closed it, RC4 unavailable). */
    public static final String ENCRYPTION_FAILED = "encryption_failed";
    /** The peer went silent on uTP (the SYN or the data went unanswered). */
    public static final String UTP_TIMEOUT = "utp_timeout";

    /** Every class above, in the library's order. */
    public static final List<String> ALL = List.of(CONNECT_REFUSED, CONNECT_TIMEOUT, HANDSHAKE_FAILED, NO_EXTENSION_SUPPORT,
            NO_METADATA_SUPPORT, REJECTED, TIMEOUT, SIZE_LIMIT, HASH_MISMATCH, PARSE_ERROR, NO_PEERS, PROTOCOL_ERROR,
            DISCONNECTED, SINK_FAILED, CANCELLED, ENCRYPTION_FAILED, UTP_TIMEOUT);

    private FailureClass() {}
}
