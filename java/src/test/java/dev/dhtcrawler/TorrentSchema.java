package dev.dhtcrawler;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** docs/torrent.schema.json (its path comes from the system property dhtc.schema.file, set by the pom). */
final class TorrentSchema {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Schema SCHEMA = load();

    private TorrentSchema() {}

    private static Schema load() {
        String file = System.getProperty("dhtc.schema.file", "../docs/torrent.schema.json");
        try {
            String text = Files.readString(Path.of(file));
            return SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12).getSchema(JSON.readTree(text));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the torrent schema " + file, e);
        }
    }

    /** The schema's complaints about a torrent JSON document; empty when it is valid. */
    static List<Error> errors(String torrentJson) {
        try {
            return SCHEMA.validate(JSON.readTree(torrentJson));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
