package dev.dhtcrawler.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.UncheckedIOException;
import java.util.Map;

/** The one JSON mapper of the binding, and the few reads it needs. */
public final class Json {
    public static final ObjectMapper MAPPER = new ObjectMapper();

    private Json() {}

    public static JsonNode tree(String json) {
        try {
            return MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException("dhtcrawler: the library sent invalid JSON", e);
        }
    }

    @SuppressWarnings("unchecked")
    public static Map<String, Object> map(String json) {
        try {
            return MAPPER.readValue(json, Map.class);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException("dhtcrawler: the library sent invalid JSON", e);
        }
    }

    /** A required string field. */
    public static String string(JsonNode node, String field) {
        JsonNode v = node.get(field);
        if (v == null || !v.isTextual()) throw new IllegalArgumentException("torrent JSON: " + field + " is not a string");
        return v.textValue();
    }

    /** A string field that may be absent or null. */
    public static String optionalString(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? null : v.asText();
    }

    /** The tree of an event the library sent, or an empty object when it is not JSON: event decoding never throws. */
    public static JsonNode lenientTree(String json) {
        try {
            JsonNode n = json == null ? null : MAPPER.readTree(json);
            return n == null ? MAPPER.createObjectNode() : n;
        } catch (JsonProcessingException | RuntimeException e) {
            return MAPPER.createObjectNode();
        }
    }

    /** A textual field, or null when it is absent, null or not a string. */
    public static String lenientString(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v != null && v.isTextual() ? v.textValue() : null;
    }

    /** An integer field, or null when it is absent, null or not an integer. */
    public static Long lenientLong(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v != null && v.isIntegralNumber() && v.canConvertToLong() ? v.longValue() : null;
    }

    /** An integer field, or 0 when it is absent, null or not an integer. */
    public static long lenientInt(JsonNode node, String field) {
        Long v = lenientLong(node, field);
        return v == null ? 0 : v;
    }

    /** A required integer field. */
    public static long integer(JsonNode node, String field) {
        JsonNode v = node.get(field);
        if (v == null || !v.canConvertToLong() || !v.isIntegralNumber()) {
            throw new IllegalArgumentException("torrent JSON: " + field + " is not an integer");
        }
        return v.longValue();
    }
}
