package dev.dhtcrawler;

import com.fasterxml.jackson.databind.JsonNode;
import dev.dhtcrawler.internal.Json;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One verified torrent: the torrent JSON form (docs/torrent-json.md), read into fields, plus the
 * raw info dict exactly as received. Immutable; {@link #info()} returns a copy.
 */
public final class Torrent {
    /** How the info dict is hashed: v1 (SHA-1), v2 (SHA-256) or both. */
    public enum Version { V1, V2, HYBRID }

    /** One payload file: its path relative to the torrent root, joined with '/', and its size. */
    public record File(String path, long size) {
        public File {
            Objects.requireNonNull(path, "path");
        }
    }

    private final String json;
    private final byte[] info;
    private final String infoHash;
    private final String infoHashV1;
    private final String infoHashV2;
    private final Version version;
    private final String name;
    private final long totalSize;
    private final long pieceLength;
    private final boolean isPrivate;
    private final List<File> files;
    private final String peer;
    private final Instant discoveredAt;
    private final String encryption;
    private final String transport;

    private Torrent(String json, byte[] info) {
        JsonNode t = Json.tree(json);
        this.json = json;
        this.info = info.clone();
        this.infoHash = Json.string(t, "info_hash");
        this.infoHashV1 = Json.optionalString(t, "info_hash_v1");
        this.infoHashV2 = Json.optionalString(t, "info_hash_v2");
        this.version = Version.valueOf(Json.string(t, "version").toUpperCase(java.util.Locale.ROOT));
        this.name = Json.string(t, "name");
        this.totalSize = Json.integer(t, "total_size");
        this.pieceLength = Json.integer(t, "piece_length");
        JsonNode p = t.get("private");
        this.isPrivate = p != null && p.asBoolean(false);
        List<File> list = new ArrayList<>();
        JsonNode fs = t.get("files");
        if (fs == null || !fs.isArray()) throw new IllegalArgumentException("torrent JSON: files is not an array");
        for (JsonNode f : fs) list.add(new File(Json.string(f, "path"), Json.integer(f, "size")));
        this.files = List.copyOf(list);
        this.peer = Json.optionalString(t, "peer");
        String at = Json.optionalString(t, "discovered_at");
        this.discoveredAt = at == null ? null : Instant.parse(at);
        this.encryption = Json.optionalString(t, "encryption");
        this.transport = Json.optionalString(t, "transport");
    }

    /**
     * Reads a torrent from its JSON form and raw info dict (as a callback or a polled event gives
     * them).
     *
     * @throws IllegalArgumentException when the JSON is not the torrent form
     */
    public static Torrent parse(String json, byte[] info) {
        Objects.requireNonNull(json, "json");
        Objects.requireNonNull(info, "info");
        return new Torrent(json, info);
    }

    /** The DHT key it was found under: 40 lower-case hex digits. */
    public String infoHash() { return infoHash; }

    /** SHA-1 of the info dict (40 hex); empty for a v2-only torrent. */
    public Optional<String> infoHashV1() { return Optional.ofNullable(infoHashV1); }

    /** SHA-256 of the info dict (64 hex); empty for a v1-only torrent. */
    public Optional<String> infoHashV2() { return Optional.ofNullable(infoHashV2); }

    public Version version() { return version; }

    /** The torrent's name (valid UTF-8; never empty, ".", ".." and never with '/'). */
    public String name() { return name; }

    /** The sum of the payload file sizes (padding excluded). */
    public long totalSize() { return totalSize; }

    public long pieceLength() { return pieceLength; }

    /** The BEP-27 private flag. */
    public boolean isPrivate() { return isPrivate; }

    /** The payload files, padding excluded; never empty. */
    public List<File> files() { return files; }

    /** The peer that served the metadata ("1.2.3.4:6881" or "[v6]:port"), when delivered by a crawler. */
    public Optional<String> peer() { return Optional.ofNullable(peer); }

    /** When the metadata was verified, when delivered by a crawler. */
    public Optional<Instant> discoveredAt() { return Optional.ofNullable(discoveredAt); }

    /** The stream that served the metadata, {@code plaintext} or {@code rc4} (MSE), when delivered by a crawler. */
    public Optional<String> encryption() { return Optional.ofNullable(encryption); }

    /** The transport that served the metadata, {@code tcp} or {@code utp}, when delivered by a crawler. */
    public Optional<String> transport() { return Optional.ofNullable(transport); }

    /** The torrent JSON form as the library produced it (it may carry fields newer than this class). */
    public String json() { return json; }

    /** A copy of the raw info dict, exactly as received (its SHA-1 / SHA-256 are the info hashes). */
    public byte[] info() { return info.clone(); }

    /** The size of the raw info dict in bytes. */
    public int infoSize() { return info.length; }

    @Override
    public boolean equals(Object o) {
        return o instanceof Torrent t && json.equals(t.json) && Arrays.equals(info, t.info);
    }

    @Override
    public int hashCode() {
        return 31 * json.hashCode() + Arrays.hashCode(info);
    }

    @Override
    public String toString() {
        return "Torrent[" + infoHash + " " + version + " \"" + name + "\" " + files.size() + " files, " + totalSize + " bytes]";
    }
}
