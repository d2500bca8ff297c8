package dev.dhtcrawler;

import dev.dhtcrawler.internal.DhtcNativeConstants;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

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

    /**
     * Every status of the C header's {@code dhtc_status}: SWIG generates a constant for each at
     * build time (DhtcNativeConstants), read here; code to name, from DHTC_OK downwards.
     */
    private static final Map<Integer, String> NAMES;

    static {
        Map<Integer, String> names = new java.util.TreeMap<>(java.util.Comparator.reverseOrder());
        for (Field f : DhtcNativeConstants.class.getFields()) {
            String n = f.getName();
            if (f.getType() != int.class || !Modifier.isStatic(f.getModifiers())) continue;
            if (!n.equals("DHTC_OK") && !n.startsWith("DHTC_ERR_")) continue;
            try {
                names.put(f.getInt(null), n);
            } catch (IllegalAccessException e) {
                throw new ExceptionInInitializerError(e);
            }
        }
        NAMES = Collections.unmodifiableMap(new LinkedHashMap<>(names));
    }

    /** Every status code of the C API and its name ("DHTC_OK", "DHTC_ERR_BIND", ..., "DHTC_ERR_STORE"), in the header's order. */
    public static Map<Integer, String> statusNames() {
        return NAMES;
    }

    /** The name of a status code, or "DHTC_UNKNOWN(code)" for a code the header does not have. */
    public static String statusName(int code) {
        String name = NAMES.get(code);
        return name != null ? name : "DHTC_UNKNOWN(" + code + ")";
    }

    static DhtcException of(int code, String message) {
        return new DhtcException(code, statusName(code), message);
    }

    /** The status name: DHTC_ERR_INVALID_JSON, DHTC_ERR_INVALID_OPTION, DHTC_ERR_BIND, DHTC_ERR_STATE, DHTC_ERR_TIMEOUT, DHTC_ERR_STORE, ... */
    public String status() {
        return status;
    }

    /** The status code of the C API (negative). */
    public int code() {
        return code;
    }
}
