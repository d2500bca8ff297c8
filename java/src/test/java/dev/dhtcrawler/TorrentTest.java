package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The Torrent value type over the torrent JSON form, and the schema check the crawl test relies on. */
class TorrentTest {
    // The example of docs/torrent-json.md, with a name outside the BMP.
    static final String HYBRID = """
            {"schema":1,"info_hash":"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116",
             "info_hash_v1":"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116",
             "info_hash_v2":"efa562fb37d767d81ecaa06641a7d311cd946ebb8cf809fed9d2a68fd78f6c66",
             "version":"hybrid","name":"hybrid \uD83C\uDF0D","total_size":54005,"num_files":4,"piece_length":16384,
             "private":false,"files":[{"path":"dir/three.bin","size":33000},{"path":"dir/two.bin","size":20000},
             {"path":"one.bin","size":1000},{"path":"z_last.txt","size":5}],
             "peer":"[2001:db8::1]:51413","discovered_at":"2026-12-02T18:00:00Z","encryption":"rc4","transport":"utp",
             "a_future_field":[1,2]}""";

    @Test
    void readsEveryFieldOfTheJsonForm() {
        byte[] info = {'d', 'e'};
        Torrent t = Torrent.parse(HYBRID, info);
        assertEquals("5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116", t.infoHash());
        assertEquals(Optional.of("5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116"), t.infoHashV1());
        assertEquals(64, t.infoHashV2().orElseThrow().length());
        assertEquals(Torrent.Version.HYBRID, t.version());
        assertEquals("hybrid \uD83C\uDF0D", t.name());
        assertEquals(54005, t.totalSize());
        assertEquals(16384, t.pieceLength());
        assertFalse(t.isPrivate());
        assertEquals(new Torrent.File("dir/three.bin", 33000), t.files().get(0));
        assertEquals(4, t.files().size());
        assertEquals(Optional.of("[2001:db8::1]:51413"), t.peer());
        assertEquals(Optional.of(Instant.parse("2026-12-02T18:00:00Z")), t.discoveredAt());
        assertEquals(Optional.of("rc4"), t.encryption());
        assertEquals(Optional.of("utp"), t.transport());
        assertEquals(HYBRID, t.json());
        assertTrue(TorrentSchema.errors(t.json()).isEmpty(), TorrentSchema.errors(t.json()).toString());
    }

    @Test
    void isImmutable() {
        byte[] info = {'d', 'e'};
        Torrent t = Torrent.parse(HYBRID, info);
        info[0] = 'x';
        assertArrayEquals(new byte[] {'d', 'e'}, t.info());
        t.info()[0] = 'y';
        assertArrayEquals(new byte[] {'d', 'e'}, t.info());
        assertThrows(UnsupportedOperationException.class, () -> t.files().clear());
        assertEquals(t, Torrent.parse(HYBRID, new byte[] {'d', 'e'}));
    }

    @Test
    void v1OnlyHasNoV2Hash() {
        String v1 = HYBRID.replace("\"efa562fb37d767d81ecaa06641a7d311cd946ebb8cf809fed9d2a68fd78f6c66\"", "null")
                .replace("\"hybrid\",", "\"v1\",");
        Torrent t = Torrent.parse(v1, new byte[] {'d', 'e'});
        assertEquals(Optional.empty(), t.infoHashV2());
        assertEquals(Torrent.Version.V1, t.version());
    }

    @Test
    void theSchemaRejectsWhatIsNotATorrent() {
        assertFalse(TorrentSchema.errors(HYBRID.replace("\"num_files\":4", "\"num_files\":0")).isEmpty());
        assertFalse(TorrentSchema.errors(HYBRID.replace("\"info_hash\":\"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116\"",
                "\"info_hash\":\"5E46\"")).isEmpty());
        assertFalse(TorrentSchema.errors(HYBRID.replace("\"files\":[", "\"filez\":[")).isEmpty());
        assertThrows(IllegalArgumentException.class, () -> Torrent.parse(List.of().toString(), new byte[0]));
    }
}
