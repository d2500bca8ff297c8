package dev.dhtcrawler;

import java.nio.charset.StandardCharsets;

/**
 * A failed call into the library: the status (its stable name, e.g. {@code
 * "DHTC_ERR_INVALID_OPTION"}, and its code) and the library's message, which for a bad option
 * names the key's path (e.g. {@code "metadata.timout_secs: unknown key"}).
 */
public final class DhtcException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;
    private final String status;

    /** Made by the JNI layer; the message comes as UTF-8 bytes. */
    DhtcException(int code, String status, byte[] message) {
        this(code, status, new String(message, StandardCharsets.UTF_8));
    }

    DhtcException(int code, String status, String message) {
        super(status + ": " + message);
        this.code = code;
        this.status = status;
    }

    /** The status name: DHTC_ERR_INVALID_JSON, DHTC_ERR_INVALID_OPTION, DHTC_ERR_BIND, DHTC_ERR_STATE, ... */
    public String status() {
        return status;
    }

    /** The status code of the C API (negative). */
    public int code() {
        return code;
    }
}
