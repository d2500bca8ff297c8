package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;

/**
 * Decodes the library's event envelopes. Never throws: an envelope of a type this binding does not
 * know (the library may add types) is ignored with a log line, as is one it cannot read.
 */
final class Events {
    static final System.Logger LOG = System.getLogger("dev.dhtcrawler");

    private Events() {}

    /** The envelope's type, or null when it has none. */
    static String type(String json) {
        return Json.lenientString(Json.lenientTree(json), "type");
    }

    /** Logs and drops an event nobody decodes. */
    static void ignore(String why, String json) {
        LOG.log(System.Logger.Level.WARNING, "dhtcrawler: ignoring {0}: {1}", why, json);
    }

    /**
     * A polled event, or null when it is of an unknown type or cannot be read (logged). A torrent
     * event whose torrent cannot be read is returned as null too; the caller rejects its id.
     */
    static Event decode(String json, byte[] info) {
        JsonNode e = Json.lenientTree(json);
        String type = Json.lenientString(e, "type");
        if (type == null) {
            ignore("an event without a type", json);
            return null;
        }
        switch (type) {
            case "completion":
                return Completion.parse(json);
            case "retry":
                return Retry.parse(json);
            case "observation":
                return Observation.parse(json);
            case "scrape":
                return Scrape.parse(json);
            case "error": {
                String message = Json.lenientString(e, "message");
                return new ErrorEvent(message != null ? message : json, json);
            }
            case "gate": {
                Long id = Json.lenientLong(e, "id");
                String hash = Json.lenientString(e, "info_hash");
                if (id == null || hash == null) {
                    ignore("a gate event without id or info_hash", json);
                    return null;
                }
                return new GateEvent(id, hash, json);
            }
            case "torrent": {
                Long id = Json.lenientLong(e, "id");
                JsonNode t = e.get("torrent");
                if (id == null || t == null || !t.isObject()) {
                    ignore("a torrent event without id or torrent", json);
                    return null;
                }
                try {
                    return new TorrentEvent(id, Torrent.parse(t.toString(), info == null ? new byte[0] : info), json);
                } catch (RuntimeException bad) {
                    ignore("a torrent event that does not read (" + bad + ")", json);
                    return null;
                }
            }
            default:
                ignore("an event of unknown type \"" + type + "\"", json);
                return null;
        }
    }

    /** The id of a gate or torrent event, or null. */
    static Long id(String json) {
        return Json.lenientLong(Json.lenientTree(json), "id");
    }
}
