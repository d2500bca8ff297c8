package dev.dhtcrawler;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.dhtcrawler.internal.Json;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The crawler's options: one JSON document, the same in every language (docs/options.md). Build it
 * with {@link #builder()} or take a document as it is with {@link #fromJson(String)}. The library
 * validates it strictly when a {@link Crawler} is created: an unknown key or a wrong type fails with
 * a {@link DhtcException} naming the key's path.
 */
public final class Options {
    private final String json;

    private Options(String json) {
        this.json = json;
    }

    /** Every key at its default: the empty document. */
    public static Options defaults() {
        return new Options("{}");
    }

    /** A document as given; nothing is checked before the crawler is created. */
    public static Options fromJson(String json) {
        return new Options(Objects.requireNonNull(json, "json"));
    }

    /** The complete document with every key at its default value, as the library prints it. */
    public static String defaultsJson() {
        return Crawler.defaultOptionsJson();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The JSON document. */
    public String toJson() {
        return json;
    }

    @Override
    public String toString() {
        return json;
    }

    /**
     * Builds the document key by key. The typed methods cover the keys most programs set; {@link
     * #set(String, Object)} reaches any key by its dotted path.
     */
    public static final class Builder {
        private final ObjectNode root = Json.MAPPER.createObjectNode();

        private Builder() {}

        /**
         * Sets the key at a dotted path ({@code "crawl.rate_limit.burst"}) to a String, Number,
         * Boolean, a List of Strings, or null.
         */
        public Builder set(String path, Object value) {
            String[] keys = Objects.requireNonNull(path, "path").split("\\.", -1);
            ObjectNode node = root;
            for (int i = 0; i < keys.length - 1; i++) {
                JsonNode child = node.get(keys[i]);
                node = child instanceof ObjectNode o ? o : node.putObject(keys[i]);
            }
            node.set(keys[keys.length - 1], Json.MAPPER.valueToTree(value));
            return this;
        }

        /** The DHT UDP port; 0 takes any free port. */
        public Builder port(int port) {
            return set("port", port);
        }

        /** "ipv4", "ipv6" or "dual". */
        public Builder netmode(String netmode) {
            return set("netmode", netmode);
        }

        /** The local address of the IPv4 socket. */
        public Builder bindV4(String address) {
            return set("bind_v4", address);
        }

        /** The local address of the IPv6 socket. */
        public Builder bindV6(String address) {
            return set("bind_v6", address);
        }

        /** Admit private, loopback and link-local nodes: for labs and tests, never the real DHT. */
        public Builder allowPrivateAddresses(boolean allow) {
            return set("allow_private_addresses", allow);
        }

        /** The bootstrap routers ("host:port"); none disables bootstrap. */
        public Builder bootstrap(String... sources) {
            return bootstrap(Arrays.asList(sources));
        }

        public Builder bootstrap(List<String> sources) {
            return set("crawl.bootstrap.sources", List.copyOf(sources));
        }

        /** The deadline of one peer attempt, in seconds. */
        public Builder metadataTimeoutSecs(int seconds) {
            return set("metadata.timeout_secs", seconds);
        }

        /** Concurrent metadata jobs. */
        public Builder maxWorkers(int workers) {
            return set("metadata.max_worker_count", workers);
        }

        /** All our DHT queries together, per second. */
        public Builder maxQueryRate(double perSecond) {
            return set("crawl.rate_limit.max_find_node_rate_per_sec", perSecond);
        }

        public Options build() {
            try {
                return new Options(Json.MAPPER.writeValueAsString(root));
            } catch (JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
