#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/options.hpp"

using dhtc::api::options_status;
using nlohmann::json;

namespace {

struct parsed {
    dhtc::api::options_result r;
    dhtc::api::crawler_options o;
};

parsed parse(std::string_view text) {
    parsed p;
    p.r = dhtc::api::parse_options(text, p.o);
    return p;
}
parsed parse_doc(const json& j) { return parse(j.dump()); }

// A document holding only `value` at the dotted `path`.
json doc_with(std::string_view path, json value) {
    json root = json::object();
    json* at = &root;
    for (;;) {
        const auto dot = path.find('.');
        at = &(*at)[std::string(path.substr(0, dot))];
        if (dot == std::string_view::npos) break;
        path.remove_prefix(dot + 1);
    }
    *at = std::move(value);
    return root;
}

// The value at a dotted path of a document.
const json& at_path(const json& root, std::string_view path) {
    const json* at = &root;
    for (;;) {
        const auto dot = path.find('.');
        at = &at->at(std::string(path.substr(0, dot)));
        if (dot == std::string_view::npos) return *at;
        path.remove_prefix(dot + 1);
    }
}

// Every leaf (dotted path, default value) of the default document.
void leaves(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json>>& out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
        if (it.value().is_object())
            leaves(it.value(), path, out);
        else
            out.emplace_back(path, it.value());
    }
}
std::vector<std::pair<std::string, json>> default_leaves() {
    std::vector<std::pair<std::string, json>> out;
    leaves(json::parse(dhtc::api::default_options_json()), "", out);
    return out;
}

bool has_note(const dhtc::api::options_result& r, const std::string& line) {
    return std::find(r.normalized.begin(), r.normalized.end(), line) != r.normalized.end();
}

std::string notes(const dhtc::api::options_result& r) {
    std::string s;
    for (const auto& n : r.normalized) s += n + "\n";
    return s;
}

// Every key set to a value that is not its default, and needs no normalisation.
const char* const custom_document = R"({
  "port": 0,
  "netmode": "dual",
  "bind_v4": "192.0.2.7",
  "bind_v6": "2001:db8::7",
  "node_id": "00112233445566778899aabbccddeeff00112233",
  "hash_queue_capacity": 1234,
  "allow_private_addresses": true,
  "observation_queue_capacity": 77,
  "announce_observations_per_sec": 12.5,
  "retry": {
    "store": {"kind": "sqlite", "path": "/var/lib/dhtc/state.sqlite", "conninfo": "postgresql://crawler@127.0.0.1/dhtc"},
    "owner_id": "crawler-a", "budget_share": 0.5, "lease_secs": 120, "batch": 32, "queue_capacity": 999,
    "policy": {
      "ladder_secs": [60, 600, 6000], "jitter_percent": 5, "repeated_mismatch_percent": 800, "timeout_retries": 3, "timeout_retry_secs": 30,
      "reactivation_percent": 25, "reactivation_min_secs": 30, "max_priority": 50, "lookup_wait_secs": 7,
      "class_percent": {"connect_refused": 40, "connect_timeout": 41, "handshake_failed": 42,
        "no_extension_support": 43, "no_metadata_support": 44, "rejected": 45, "timeout": 46, "size_limit": 47,
        "hash_mismatch": 48, "parse_error": 49, "no_peers": 20, "protocol_error": 51, "disconnected": 52, "sink_failed": 5,
        "encryption_failed": 53, "utp_timeout": 54}
    }
  },
  "metadata": {
    "timeout_secs": 9, "max_queue_size": 555, "max_worker_count": 32,
    "peer_failure_cache_capacity": 0, "peer_failure_ttl_secs": 120, "refusal_ttl_secs": 900, "first_timeout_ttl_secs": 5, "max_metadata_size": 4194304, "max_in_flight_bytes": 1048576,
    "max_attempts": 5, "gate_timeout_millis": 250, "gate_default": false, "encryption": "prefer_encrypted",
    "transports": "both", "delivered_filter": {"capacity": 7, "period_secs": 3600}
  },
  "crawl": {
    "rate_limit": {
      "max_find_node_rate_per_sec": 12.5, "burst": 3, "max_in_flight": 64, "request_timeout_secs": 5,
      "max_new_destinations_per_minute": 600, "max_replacements_per_minute": 700.25,
      "max_response_rate_per_sec": 80, "max_response_bytes_per_sec": 65536,
      "max_response_rate_per_source": 2.5, "metadata_pressure_floor_percent": 10, "max_in_flight_per_subnet": 2,
      "trusted_response_percent": 35, "max_packets_per_destination_per_sec": 1.5, "destination_burst": 6,
      "max_packets_per_ip_per_sec": 9.5, "ip_burst": 33, "tracked_sources": 999
    },
    "pool": {"capacity": 5000, "recent_probe_ttl_secs": 61, "responsive_capacity": 256,
             "responsive_ttl_secs": 90, "low_watermark": 4999, "max_querier_percent": 5,
             "max_querier_admissions_per_sec": 7.5, "thin_table_nodes": 33},
    "state_file": "/var/lib/dhtc/routing.state",
    "bootstrap": {"interval_secs": 30, "max_nodes_per_round": 7, "source_backoff_base_secs": 10,
                  "source_backoff_max_secs": 20, "sources": ["[2001:db8::1]:6881", "198.51.100.1:1"]},
    "target": {"random_walk_percent": 0, "sparse_bucket_percent": 100, "neighbor_sender_id": false},
    "scheduler": {"priority_event_channel_capacity": 11, "discovery_event_channel_capacity": 12,
                  "event_batch_limit": 13, "node_batch_limit": 14, "routing_snapshot_size": 15,
                  "snapshot_refresh_millis": 16},
    "bep51": {"enabled": false, "max_sample_rate_per_sec": 0, "min_interval_secs": 17,
              "max_lookup_rate_per_sec": 0.5, "max_concurrent_lookups": 18, "lookup_queue_capacity": 19,
              "queries_per_lookup": 20, "sample_retries": 2, "holder_retries": 3,
              "lookup_retries": 4, "lookup_retry_secs": 90, "store_capacity": 21, "answer_interval_secs": 21600},
    "scrape": {"timeout_secs": 7}
  }
})";

} // namespace

TEST_SUITE("options") {

TEST_CASE("an empty document gives the seed's defaults, unchanged") {
    const auto p = parse("{}");
    REQUIRE(p.r.ok());
    CHECK(p.r.message.empty());
    CHECK(p.r.normalized.empty());
    const auto& o = p.o;
    // DHTOptions and metadata.
    CHECK(o.dht.port == 6881);
    CHECK(o.dht.mode == dhtc::engine::netmode::ipv4);
    CHECK(o.metadata.hash_queue_capacity == 10000);
    CHECK(o.metadata.timeout_secs == 4);
    CHECK(o.metadata.max_queue_size == 10000);
    CHECK(o.metadata.max_worker_count == 256);
    CHECK(o.metadata.peer_failure_cache_capacity == 200000);
    CHECK(o.metadata.peer_failure_ttl_secs == 60);
    CHECK(o.metadata.refusal_ttl_secs == 600);
    CHECK(o.metadata.max_metadata_size == 10 * 1024 * 1024); // the seed's 10 MiB payload cap
    // crawl.rate_limit.
    const auto& rl = o.dht.crawl.rate_limit;
    CHECK(rl.max_find_node_rate_per_sec == 200);
    CHECK(rl.burst == 40);
    CHECK(rl.max_in_flight == 512);
    CHECK(rl.request_timeout_secs == 2);
    CHECK(rl.max_new_destinations_per_minute == 10000);
    CHECK(rl.max_replacements_per_minute == 25000);
    CHECK(rl.max_response_rate_per_sec == 500);
    CHECK(rl.max_response_bytes_per_sec == 1048576);
    CHECK(rl.max_response_rate_per_source == 40);
    CHECK(rl.trusted_response_percent == 20);
    CHECK(rl.max_packets_per_destination_per_sec == 2);
    CHECK(rl.destination_burst == 10);
    CHECK(rl.max_packets_per_ip_per_sec == 16);
    CHECK(rl.ip_burst == 80);
    CHECK(rl.tracked_sources == 16384);
    CHECK(rl.metadata_pressure_floor_percent == 25);
    CHECK(rl.max_in_flight_per_subnet == 8);
    // Pool, bootstrap, target, scheduler.
    const auto& c = o.dht.crawl;
    CHECK(c.pool.capacity == 100000);
    CHECK(c.pool.recent_probe_ttl_secs == 600);
    CHECK(c.pool.responsive_capacity == 16384);
    CHECK(c.pool.responsive_ttl_secs == 900);
    CHECK(c.pool.low_watermark == 10000);
    CHECK(c.pool.max_querier_percent == 10);
    CHECK(c.pool.max_querier_admissions_per_sec == 50);
    CHECK(c.bootstrap.interval_secs == 300);
    CHECK(c.bootstrap.max_nodes_per_round == 3);
    CHECK(c.bootstrap.source_backoff_base_secs == 300);
    CHECK(c.bootstrap.source_backoff_max_secs == 3600);
    CHECK(c.target.random_walk_percent == 70);
    CHECK(c.target.sparse_bucket_percent == 30);
    CHECK(c.target.neighbor_sender_id);
    CHECK(c.scheduler.priority_event_channel_capacity == 8192);
    CHECK(c.scheduler.discovery_event_channel_capacity == 16384);
    CHECK(c.scheduler.event_batch_limit == 256);
    CHECK(c.scheduler.node_batch_limit == 4096);
    CHECK(c.scheduler.routing_snapshot_size == 4096);
    CHECK(c.scheduler.snapshot_refresh_millis == 1000);
    CHECK(c.bootstrap.sources == std::vector<std::string>{"router.bittorrent.com:6881", "dht.transmissionbt.com:6881",
                                                          "router.utorrent.com:6881", "dht.aelitis.com:6881"});
    // Ours.
    CHECK_FALSE(c.allow_private_addresses);
    CHECK(o.dht.bind_v4 == "0.0.0.0");
    CHECK(o.dht.bind_v6 == "::");
    CHECK_FALSE(o.dht.node_id.has_value());
    CHECK_FALSE(o.dht.seed.has_value());
    CHECK_FALSE(o.metadata.bind_v4.has_value());
    CHECK(o.observation_queue_capacity == 4096);
    CHECK(c.announce_observations_per_sec == 100);
    CHECK(c.scrape.timeout_secs == 30);
}

TEST_CASE("the default document: every key, pretty, and the same as the struct defaults") {
    const std::string text = dhtc::api::default_options_json();
    CHECK(text.rfind("{\n  \"", 0) == 0); // 2-space indent
    const json doc = json::parse(text);
    CHECK(doc == dhtc::api::to_json(dhtc::api::crawler_options{}));
    CHECK(doc.at("port") == 6881);
    CHECK(doc.at("netmode") == "ipv4");
    CHECK(doc.at("node_id").is_null());
    CHECK(doc.at("hash_queue_capacity") == 10000);
    CHECK(at_path(doc, "metadata.delivered_filter.capacity") == 100000);
    CHECK(at_path(doc, "crawl.bootstrap.sources").size() == 4);
    CHECK(default_leaves().size() == 112);
    CHECK(at_path(doc, "metadata.encryption") == "prefer_encrypted");
    CHECK(at_path(doc, "metadata.transports") == "utp_first");

    const auto p = parse(text);
    REQUIRE(p.r.ok());
    CHECK(p.r.normalized.empty());
    CHECK(dhtc::api::to_json(p.o) == doc);
}

TEST_CASE("every key lands in its field") {
    const auto p = parse(custom_document);
    REQUIRE_MESSAGE(p.r.ok(), p.r.message);
    CHECK_MESSAGE(p.r.normalized.empty(), notes(p.r));
    const auto& o = p.o;
    CHECK(o.dht.port == 0);
    CHECK(o.dht.mode == dhtc::engine::netmode::dual);
    CHECK(o.dht.bind_v4 == "192.0.2.7");
    CHECK(o.dht.bind_v6 == "2001:db8::7");
    REQUIRE(o.dht.node_id.has_value());
    CHECK(o.dht.node_id->hex() == "00112233445566778899aabbccddeeff00112233");
    CHECK(o.metadata.hash_queue_capacity == 1234);
    CHECK(o.dht.crawl.allow_private_addresses);
    CHECK(o.observation_queue_capacity == 77);
    CHECK(o.dht.crawl.announce_observations_per_sec == 12.5);
    CHECK(o.dht.crawl.scrape.timeout_secs == 7);
    CHECK(o.retry.kind == dhtc::retry::store_kind::sqlite);
    CHECK(o.retry.path == "/var/lib/dhtc/state.sqlite");
    CHECK(o.retry.conninfo == "postgresql://crawler@127.0.0.1/dhtc");
    CHECK(o.retry.owner_id == "crawler-a");
    CHECK(o.retry.budget_share == 0.5);
    CHECK(o.retry.lease_secs == 120);
    CHECK(o.retry.batch == 32);
    CHECK(o.retry.queue_capacity == 999);
    CHECK(o.retry.policy.ladder_secs == std::vector<std::uint32_t>{60, 600, 6000});
    CHECK(o.retry.policy.jitter_percent == 5);
    CHECK(o.retry.policy.repeated_mismatch_percent == 800);
    CHECK(o.retry.policy.reactivation_percent == 25);
    CHECK(o.retry.policy.reactivation_min_secs == 30);
    CHECK(o.retry.policy.max_priority == 50);
    CHECK(o.retry.policy.lookup_wait_secs == 7);
    CHECK(o.retry.policy.class_percent[static_cast<std::size_t>(dhtc::api::failure_class::no_peers)] == 20);
    CHECK(o.retry.policy.class_percent[static_cast<std::size_t>(dhtc::api::failure_class::disconnected)] == 52);
    CHECK(o.retry.policy.class_percent[static_cast<std::size_t>(dhtc::api::failure_class::encryption_failed)] == 53);
    CHECK(o.retry.policy.class_percent[static_cast<std::size_t>(dhtc::api::failure_class::utp_timeout)] == 54);
    // Derived: outgoing metadata TCP follows a pinned bind_v4.
    REQUIRE(o.metadata.bind_v4.has_value());
    CHECK(o.metadata.bind_v4->to_string() == "192.0.2.7");

    const auto& m = o.metadata;
    CHECK(m.timeout_secs == 9);
    CHECK(m.max_queue_size == 555);
    CHECK(m.max_worker_count == 32);
    CHECK(m.peer_failure_cache_capacity == 0);
    CHECK(m.peer_failure_ttl_secs == 120);
    CHECK(m.refusal_ttl_secs == 900);
    CHECK(m.max_metadata_size == 4194304);
    CHECK(m.max_in_flight_bytes == 1048576);
    CHECK(m.max_attempts == 5);
    CHECK(m.gate_timeout_millis == 250);
    CHECK_FALSE(m.gate_default);
    CHECK(m.encryption == dhtc::metadata::encryption_policy::prefer_encrypted);
    CHECK(m.transports == dhtc::metadata::transport_policy::both);
    CHECK(m.delivered_filter_capacity == 7);
    CHECK(m.delivered_filter_period_secs == 3600);

    const auto& rl = o.dht.crawl.rate_limit;
    CHECK(rl.max_find_node_rate_per_sec == 12.5);
    CHECK(rl.burst == 3);
    CHECK(rl.max_in_flight == 64);
    CHECK(rl.request_timeout_secs == 5);
    CHECK(rl.max_new_destinations_per_minute == 600);
    CHECK(rl.max_replacements_per_minute == 700.25);
    CHECK(rl.max_response_rate_per_sec == 80);
    CHECK(rl.max_response_bytes_per_sec == 65536);
    CHECK(rl.max_response_rate_per_source == 2.5);
    CHECK(rl.trusted_response_percent == 35);
    CHECK(rl.max_packets_per_destination_per_sec == 1.5);
    CHECK(rl.destination_burst == 6);
    CHECK(rl.max_packets_per_ip_per_sec == 9.5);
    CHECK(rl.ip_burst == 33);
    CHECK(rl.tracked_sources == 999);
    CHECK(rl.metadata_pressure_floor_percent == 10);
    CHECK(rl.max_in_flight_per_subnet == 2);

    const auto& c = o.dht.crawl;
    CHECK(c.pool.capacity == 5000);
    CHECK(c.pool.recent_probe_ttl_secs == 61);
    CHECK(c.pool.responsive_capacity == 256);
    CHECK(c.pool.responsive_ttl_secs == 90);
    CHECK(c.pool.low_watermark == 4999);
    CHECK(c.pool.max_querier_percent == 5);
    CHECK(c.pool.max_querier_admissions_per_sec == 7.5);
    CHECK(c.pool.thin_table_nodes == 33);
    CHECK(c.bootstrap.interval_secs == 30);
    CHECK(c.bootstrap.max_nodes_per_round == 7);
    CHECK(c.bootstrap.source_backoff_base_secs == 10);
    CHECK(c.bootstrap.source_backoff_max_secs == 20);
    CHECK(c.bootstrap.sources == std::vector<std::string>{"[2001:db8::1]:6881", "198.51.100.1:1"});
    CHECK(c.target.random_walk_percent == 0);
    CHECK(c.target.sparse_bucket_percent == 100);
    CHECK_FALSE(c.target.neighbor_sender_id);
    CHECK(c.scheduler.priority_event_channel_capacity == 11);
    CHECK(c.scheduler.discovery_event_channel_capacity == 12);
    CHECK(c.scheduler.event_batch_limit == 13);
    CHECK(c.scheduler.node_batch_limit == 14);
    CHECK(c.scheduler.routing_snapshot_size == 15);
    CHECK(c.scheduler.snapshot_refresh_millis == 16);
    CHECK_FALSE(c.bep51.enabled);
    CHECK(c.bep51.max_sample_rate_per_sec == 0);
    CHECK(c.bep51.min_interval_secs == 17);
    CHECK(c.bep51.max_lookup_rate_per_sec == 0.5);
    CHECK(c.bep51.max_concurrent_lookups == 18);
    CHECK(c.bep51.lookup_queue_capacity == 19);
    CHECK(c.bep51.queries_per_lookup == 20);
    CHECK(c.bep51.store_capacity == 21);
    CHECK(c.bep51.answer_interval_secs == 21600);
}

TEST_CASE("round trips: defaults and a fully customised document") {
    dhtc::api::crawler_options defaults;
    const auto d = parse(dhtc::api::to_json(defaults).dump());
    REQUIRE(d.r.ok());
    CHECK(dhtc::api::to_json(d.o) == dhtc::api::to_json(defaults));

    const json custom = json::parse(custom_document);
    const auto p = parse_doc(custom);
    REQUIRE(p.r.ok());
    const json back = dhtc::api::to_json(p.o);
    CHECK(back == custom);
    const auto again = parse(back.dump());
    REQUIRE(again.r.ok());
    CHECK(again.r.normalized.empty());
    CHECK(dhtc::api::to_json(again.o) == back);
    CHECK(again.o.metadata.bind_v4 == p.o.metadata.bind_v4);

    // Keys absent from a document keep their defaults, not the previous contents of `out`.
    dhtc::api::crawler_options out = p.o;
    REQUIRE(dhtc::api::parse_options(R"({"port": 7000})", out).ok());
    CHECK(out.dht.port == 7000);
    CHECK(out.dht.mode == dhtc::engine::netmode::ipv4);
    CHECK(out.metadata.timeout_secs == 4);
}

TEST_CASE("on error the output is left untouched") {
    dhtc::api::crawler_options out;
    out.dht.port = 1234;
    out.metadata.timeout_secs = 99;
    const auto r = dhtc::api::parse_options(R"({"metadata": {"timeout_secs": 7}, "port": "x"})", out);
    CHECK(r.status == options_status::wrong_type);
    CHECK(out.dht.port == 1234);
    CHECK(out.metadata.timeout_secs == 99);
}

TEST_CASE("unknown keys are refused at every level, with their path") {
    const char* const groups[] = {"",
                                  "metadata",
                                  "metadata.delivered_filter",
                                  "crawl",
                                  "crawl.rate_limit",
                                  "crawl.pool",
                                  "crawl.bootstrap",
                                  "crawl.target",
                                  "crawl.scheduler",
                                  "crawl.bep51"};
    for (const std::string group : groups) {
        const std::string path = group.empty() ? "typo" : group + ".typo";
        CAPTURE(path);
        const auto p = parse_doc(doc_with(path, 1));
        CHECK(p.r.status == options_status::unknown_key);
        CHECK(p.r.path == path);
        CHECK(p.r.message == path + ": unknown key");
    }
    // The seed's example of a typo.
    const auto typo = parse(R"({"metadata": {"timout_secs": 4}})");
    CHECK(typo.r.status == options_status::unknown_key);
    CHECK(typo.r.message == "metadata.timout_secs: unknown key");
    // Dotted names are nesting, never one key.
    const auto dotted = parse(R"({"metadata.timeout_secs": 4})");
    CHECK(dotted.r.status == options_status::unknown_key);
    CHECK(dotted.r.path == "metadata.timeout_secs");
    const auto dotted_group = parse(R"({"crawl.pool": {"capacity": 4}})");
    CHECK(dotted_group.r.status == options_status::unknown_key);
    CHECK(dotted_group.r.path == "crawl.pool");
    // bind_v4 lives at the top only; fields of the structs that are not keys are unknown.
    CHECK(parse(R"({"metadata": {"bind_v4": "1.2.3.4"}})").r.message == "metadata.bind_v4: unknown key");
    CHECK(parse(R"({"metadata": {"delivered_filter_capacity": 1}})").r.status == options_status::unknown_key);
    CHECK(parse(R"({"seed": 1})").r.message == "seed: unknown key");
    CHECK(parse(R"({"dht": {}})").r.message == "dht: unknown key");
    CHECK(parse(R"({"Port": 1})").r.message == "Port: unknown key"); // case matters
    CHECK(parse(R"({"": 1})").r.status == options_status::unknown_key);
    CHECK(parse(R"({"crawl": {"pool": {"": 1}}})").r.path == "crawl.pool.\"\"");
}

TEST_CASE("wrong types are refused for every key, with its path") {
    for (const auto& [path, def] : default_leaves()) {
        CAPTURE(path);
        std::vector<json> wrong;
        std::string expected;
        if (def.is_number_unsigned() || def.is_number_integer()) {
            wrong = {"1", true, nullptr, json::array(), json::object(), 1.5, 2.0};
            expected = "expected an integer";
        } else if (def.is_number_float()) {
            wrong = {"1", false, nullptr, json::array({1}), json::object()};
            expected = "expected a number";
        } else if (def.is_boolean()) {
            wrong = {1, 0, "true", nullptr, json::array()};
            expected = "expected a boolean";
        } else if (def.is_string()) {
            wrong = {1, true, nullptr, json::array({"ipv4"})};
            expected = "expected a string";
        } else if (def.is_null()) { // node_id
            wrong = {1, true, json::array(), json::object()};
            expected = "expected a string or null";
        } else if (path == "retry.policy.ladder_secs") {
            wrong = {"1800", 1, nullptr, json::object()};
            expected = "expected an array of integers (seconds)";
        } else {
            REQUIRE(def.is_array()); // bootstrap sources
            wrong = {"router.bittorrent.com:6881", 1, nullptr, json::object()};
            expected = "expected an array of \"host:port\" strings";
        }
        for (const auto& w : wrong) {
            CAPTURE(w.dump());
            const auto p = parse_doc(doc_with(path, w));
            CHECK(p.r.status == options_status::wrong_type);
            CHECK(p.r.path == path);
            CHECK(p.r.message == path + ": " + expected);
        }
    }
}

TEST_CASE("wrong types of groups, elements and the document") {
    const char* const groups[] = {"metadata", "metadata.delivered_filter", "crawl", "crawl.rate_limit",
                                  "crawl.pool", "crawl.bootstrap", "crawl.target", "crawl.scheduler", "crawl.bep51"};
    for (const std::string group : groups) {
        CAPTURE(group);
        for (const json& w : {json(1), json("x"), json(nullptr), json::array()}) {
            const auto p = parse_doc(doc_with(group, w));
            CHECK(p.r.status == options_status::wrong_type);
            CHECK(p.r.message == group + ": expected an object");
        }
    }
    const auto element = parse(R"({"crawl": {"bootstrap": {"sources": ["a.example:1", 5]}}})");
    CHECK(element.r.status == options_status::wrong_type);
    CHECK(element.r.path == "crawl.bootstrap.sources[1]");
    CHECK(element.r.message == "crawl.bootstrap.sources[1]: expected a \"host:port\" string");
    for (const char* doc : {"[]", "null", "5", "\"port\"", "true"}) {
        CAPTURE(doc);
        const auto p = parse_doc(doc);
        CHECK(p.r.status == options_status::wrong_type);
        CHECK(p.r.path.empty());
        CHECK(p.r.message == "(document): expected an object");
    }
}

TEST_CASE("integers must fit their C++ field") {
    struct bad {
        const char* doc;
        const char* message;
    };
    const bad cases[] = {
        {R"({"port": 65536})", "port: 65536 is out of range 0..65535"},
        {R"({"port": -1})", "port: -1 is out of range 0..65535"},
        {R"({"metadata": {"timeout_secs": 4294967296}})",
         "metadata.timeout_secs: 4294967296 is out of range 0..4294967295"},
        {R"({"metadata": {"timeout_secs": -4}})", "metadata.timeout_secs: -4 is out of range 0..4294967295"},
        {R"({"crawl": {"pool": {"low_watermark": -1}}})",
         "crawl.pool.low_watermark: -1 is out of range 0..18446744073709551615"},
        {R"({"crawl": {"pool": {"low_watermark": -9223372036854775808}}})",
         "crawl.pool.low_watermark: -9223372036854775808 is out of range 0..18446744073709551615"},
        // Beyond 64 bits the parser has only a float: still a range error, not a type error.
        {R"({"hash_queue_capacity": 18446744073709551616})",
         "hash_queue_capacity: 1.8446744073709552e+19 is out of range 0..18446744073709551615"},
        {R"({"crawl": {"target": {"random_walk_percent": 1e300}}})",
         "crawl.target.random_walk_percent: 1e+300 is out of range 0..4294967295"},
        // Rates take any finite number >= 0.
        {R"({"crawl": {"rate_limit": {"burst": -1}}})", "crawl.rate_limit.burst: -1 is negative; expected a number >= 0"},
        {R"({"crawl": {"bep51": {"max_lookup_rate_per_sec": -0.5}}})",
         "crawl.bep51.max_lookup_rate_per_sec: -0.5 is negative; expected a number >= 0"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.doc);
        const auto p = parse(c.doc);
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.message == c.message);
    }
    // The largest value of each field is accepted (normalisation aside).
    CHECK(parse(R"({"port": 65535})").o.dht.port == 65535);
    CHECK(parse(R"({"crawl": {"pool": {"recent_probe_ttl_secs": 4294967295}}})").o.dht.crawl.pool.recent_probe_ttl_secs ==
          4294967295u);
    CHECK(parse(R"({"crawl": {"pool": {"low_watermark": 18446744073709551615}}})").r.ok());
    // Rates: integers and floats alike.
    CHECK(parse(R"({"crawl": {"rate_limit": {"max_response_rate_per_sec": 0}}})").o.dht.crawl.rate_limit
              .max_response_rate_per_sec == 0);
    CHECK(parse(R"({"crawl": {"rate_limit": {"max_response_rate_per_sec": 1.25e2}}})").o.dht.crawl.rate_limit
              .max_response_rate_per_sec == 125);
    // -0 is zero, not negative.
    CHECK(parse(R"({"crawl": {"rate_limit": {"max_response_rate_per_sec": -0.0}}})").r.ok());
    CHECK(parse(R"({"port": -0})").o.dht.port == 0);
}

TEST_CASE("invalid JSON is refused with the parser's byte position") {
    struct bad {
        const char* doc;
        std::size_t offset;
    };
    // The offset counts the bytes read when the parser stopped: the offending byte is the
    // last of them (end of input counts as one).
    const bad cases[] = {
        {R"({"port": 1,})", 12},                  // trailing comma: the '}' where a key belongs
        {"tru", 4},                               // truncated literal
        {"", 1},                                  // nothing
        {R"({"port": 1} x)", 13},                 // trailing garbage
        {R"({"port": 1)", 11},                    // unterminated object
        {R"({'port': 1})", 2},                    // single quotes
        {R"({"port": 01})", 11},                  // leading zero
        {R"({"port": 1e400})", 14},               // overflows a double
        {"{\"bind_v4\": \"\xff\"}", 14},           // not UTF-8
        {"{\"port\": 1} /* no comments */", 13},
    };
    for (const auto& c : cases) {
        CAPTURE(c.doc);
        const auto p = parse(c.doc);
        CHECK(p.r.status == options_status::invalid_json);
        CHECK(p.r.path.empty());
        CHECK(p.r.offset == c.offset);
        CHECK(p.r.message.rfind("(document): invalid JSON at byte " + std::to_string(c.offset) + ": ", 0) == 0);
        CHECK(p.r.message.find("[json.exception") == std::string::npos);
        // Printable ASCII only, whatever the input bytes were.
        CHECK(std::all_of(p.r.message.begin(), p.r.message.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; }));
    }
    const auto exact = parse(R"({"port": 1,})");
    CHECK(exact.r.offset == 12);
    CHECK(exact.r.message.find("parse error at line 1, column 12") != std::string::npos);
}

TEST_CASE("repeated keys, deep nesting and oversized documents are invalid JSON") {
    const auto dup = parse(R"({"port": 1, "port": 2})");
    CHECK(dup.r.status == options_status::invalid_json);
    CHECK(dup.r.message == "port: key repeated in its object");
    const auto nested_dup = parse(R"({"crawl": {"pool": {"capacity": 1, "low_watermark": 1, "capacity": 2}}})");
    CHECK(nested_dup.r.status == options_status::invalid_json);
    CHECK(nested_dup.r.path == "crawl.pool.capacity");
    // The same key in different objects is fine.
    CHECK(parse(R"({"crawl": {"pool": {"capacity": 10}, "bep51": {"store_capacity": 10}}})").r.ok());

    std::string deep(dhtc::api::max_options_depth, '[');
    deep += std::string(dhtc::api::max_options_depth, ']');
    CHECK(parse(deep).r.status == options_status::wrong_type); // deep enough, but not an object
    std::string deeper = "{\"crawl\": " + std::string(dhtc::api::max_options_depth, '[') + "1" +
                         std::string(dhtc::api::max_options_depth, ']') + "}";
    const auto d = parse(deeper);
    CHECK(d.r.status == options_status::invalid_json);
    CHECK(d.r.message.find("nested deeper than 16 levels") != std::string::npos);
    CHECK(d.r.path.rfind("crawl[0][0]", 0) == 0);
    // A hostile nesting far beyond the limit stops early and does not recurse.
    CHECK(parse(std::string(1'000'000, '[')).r.status == options_status::invalid_json);

    std::string big = "{\"port\": 1" + std::string(dhtc::api::max_options_document_bytes, ' ') + "}";
    const auto b = parse(big);
    CHECK(b.r.status == options_status::invalid_json);
    CHECK(b.r.message == "(document): " + std::to_string(big.size()) + " bytes; at most 1048576");
    // Whitespace up to the limit is fine.
    std::string fits = "{}" + std::string(dhtc::api::max_options_document_bytes - 2, ' ');
    CHECK(parse(fits).r.ok());
}

TEST_CASE("capacities, in-flight limits, counts and timeouts are raised to at least 1") {
    const char* const keys[] = {
        "hash_queue_capacity",
        "observation_queue_capacity",
        "metadata.timeout_secs",
        "metadata.max_queue_size",
        "metadata.max_worker_count",
        "metadata.max_metadata_size",
        "metadata.max_attempts",
        "metadata.gate_timeout_millis",
        "crawl.rate_limit.max_in_flight",
        "crawl.rate_limit.request_timeout_secs",
        "crawl.rate_limit.max_in_flight_per_subnet",
        "crawl.pool.capacity",
        "crawl.pool.responsive_capacity",
        "crawl.bootstrap.interval_secs",
        "crawl.bootstrap.max_nodes_per_round",
        "crawl.scheduler.priority_event_channel_capacity",
        "crawl.scheduler.discovery_event_channel_capacity",
        "crawl.scheduler.event_batch_limit",
        "crawl.scheduler.node_batch_limit",
        "crawl.scheduler.routing_snapshot_size",
        "crawl.bep51.max_concurrent_lookups",
        "crawl.bep51.lookup_queue_capacity",
        "crawl.bep51.queries_per_lookup",
        "crawl.bep51.store_capacity",
        "crawl.scrape.timeout_secs",
        "crawl.rate_limit.burst", // a bucket below one token never grants
    };
    for (const std::string key : keys) {
        CAPTURE(key);
        const auto p = parse_doc(doc_with(key, 0));
        REQUIRE(p.r.ok());
        CHECK_MESSAGE(has_note(p.r, key + ": 0 < 1, using 1"), notes(p.r));
        CHECK(at_path(dhtc::api::to_json(p.o), key) == 1);
    }
    CHECK(parse_doc(doc_with("crawl.rate_limit.burst", 0.25)).r.normalized ==
          std::vector<std::string>{"crawl.rate_limit.burst: 0.25 < 1, using 1"});

    // Zero is meaningful where the seed says so (0 disables the cache) and for ports, rates,
    // floors, watermarks and TTLs: no note.
    const char* const zero_ok[] = {
        "port",
        "metadata.peer_failure_cache_capacity",
        "metadata.peer_failure_ttl_secs",
        "metadata.refusal_ttl_secs",
        "metadata.delivered_filter.capacity",
        "metadata.delivered_filter.period_secs",
        "crawl.rate_limit.max_find_node_rate_per_sec",
        "crawl.rate_limit.max_new_destinations_per_minute",
        "crawl.rate_limit.max_replacements_per_minute",
        "crawl.rate_limit.max_response_rate_per_sec",
        "crawl.rate_limit.max_response_bytes_per_sec",
        "crawl.rate_limit.max_response_rate_per_source",
        "crawl.rate_limit.metadata_pressure_floor_percent",
        "crawl.pool.recent_probe_ttl_secs",
        "crawl.pool.responsive_ttl_secs",
        "crawl.pool.low_watermark",
        "crawl.bootstrap.source_backoff_base_secs",
        "crawl.bootstrap.source_backoff_max_secs",
        "crawl.scheduler.snapshot_refresh_millis",
        "crawl.bep51.max_sample_rate_per_sec",
        "crawl.bep51.min_interval_secs",
        "crawl.bep51.max_lookup_rate_per_sec",
        "crawl.bep51.answer_interval_secs",
        "announce_observations_per_sec",
    };
    for (const std::string key : zero_ok) {
        CAPTURE(key);
        const auto p = parse_doc(doc_with(key, 0));
        REQUIRE(p.r.ok());
        CHECK_MESSAGE(p.r.normalized.empty(), notes(p.r));
        CHECK(at_path(dhtc::api::to_json(p.o), key) == 0);
    }
}

TEST_CASE("percentages, component ceilings and rates are lowered, and reported") {
    struct rule {
        const char* key;
        json value;
        std::uint64_t used;
    };
    const rule rules[] = {
        {"crawl.rate_limit.metadata_pressure_floor_percent", 101, 100},
        {"crawl.rate_limit.metadata_pressure_floor_percent", 4294967295u, 100},
        {"metadata.max_queue_size", std::uint64_t{1} << 40, (1u << 24) - 2},
        {"metadata.peer_failure_cache_capacity", std::uint64_t{1} << 24, (1u << 24) - 2},
        {"metadata.delivered_filter.capacity", 20'000'000, (1u << 24) - 2},
        {"metadata.peer_failure_ttl_secs", 86401, 86400},
        {"metadata.refusal_ttl_secs", 86401, 86400},
        {"metadata.max_metadata_size", std::uint64_t{1} << 30, 256u * 1024 * 1024},
        {"metadata.max_worker_count", 1'000'000, 65535},
        {"crawl.pool.capacity", 20'000'000, (1u << 24) - 2},
        {"crawl.pool.responsive_capacity", 20'000'000, (1u << 24) - 1},
        {"crawl.rate_limit.max_in_flight", 65536, 65535},
        {"crawl.rate_limit.max_in_flight_per_subnet", 100000, 65535},
        {"hash_queue_capacity", std::uint64_t{1} << 25, 1u << 24},
        {"observation_queue_capacity", std::uint64_t{1} << 32, 1u << 24},
        {"crawl.scheduler.priority_event_channel_capacity", 16777217, 16777216},
        {"crawl.bep51.store_capacity", std::uint64_t{1} << 60, 1u << 24},
        {"crawl.bep51.answer_interval_secs", 21601, 21600}, // BEP-51: interval is 0..21600
        {"crawl.bep51.queries_per_lookup", 70000, 65535},
        {"crawl.bootstrap.max_nodes_per_round", 70000, 65535},
    };
    for (const auto& r : rules) {
        CAPTURE(r.key);
        const auto p = parse_doc(doc_with(r.key, r.value));
        REQUIRE(p.r.ok());
        CHECK_MESSAGE(has_note(p.r, std::string(r.key) + ": " + r.value.dump() + " > " + std::to_string(r.used) +
                                        ", using " + std::to_string(r.used)),
                      notes(p.r));
        CHECK(at_path(dhtc::api::to_json(p.o), r.key) == r.used);
    }
    const auto rate = parse_doc(doc_with("crawl.rate_limit.max_find_node_rate_per_sec", 1e13));
    REQUIRE(rate.r.ok());
    CHECK(rate.r.normalized == std::vector<std::string>{"crawl.rate_limit.max_find_node_rate_per_sec: 10000000000000 "
                                                        "> 1000000000000, using 1000000000000"});
    CHECK(rate.o.dht.crawl.rate_limit.max_find_node_rate_per_sec == 1e12);
    const auto huge = parse_doc(doc_with("crawl.bep51.max_sample_rate_per_sec", 1e300));
    REQUIRE(huge.r.ok());
    CHECK(huge.o.dht.crawl.bep51.max_sample_rate_per_sec == 1e12);
    CHECK(huge.r.normalized.at(0) == "crawl.bep51.max_sample_rate_per_sec: 1e+300 > 1000000000000, using 1000000000000");
}

TEST_CASE("low_watermark is at most the pool capacity") {
    const auto p = parse(R"({"crawl": {"pool": {"low_watermark": 200000}}})");
    REQUIRE(p.r.ok());
    CHECK(p.r.normalized ==
          std::vector<std::string>{"crawl.pool.low_watermark: 200000 > crawl.pool.capacity 100000, using 100000"});
    CHECK(p.o.dht.crawl.pool.low_watermark == 100000);

    // A smaller capacity pulls the default watermark down with it.
    const auto small = parse(R"({"crawl": {"pool": {"capacity": 500}}})");
    REQUIRE(small.r.ok());
    CHECK(small.r.normalized ==
          std::vector<std::string>{"crawl.pool.low_watermark: 10000 > crawl.pool.capacity 500, using 500"});
    CHECK(small.o.dht.crawl.pool.low_watermark == 500);

    // The capacity is normalised first, then the watermark against it.
    const auto both = parse(R"({"crawl": {"pool": {"capacity": 0, "low_watermark": 0}}})");
    REQUIRE(both.r.ok());
    CHECK(both.r.normalized == std::vector<std::string>{"crawl.pool.capacity: 0 < 1, using 1"});
    CHECK(both.o.dht.crawl.pool.low_watermark == 0);

    CHECK(parse(R"({"crawl": {"pool": {"capacity": 100, "low_watermark": 100}}})").r.normalized.empty());
}

TEST_CASE("the target percents sum to 100") {
    const auto scaled = parse(R"({"crawl": {"target": {"random_walk_percent": 60, "sparse_bucket_percent": 60}}})");
    REQUIRE(scaled.r.ok());
    CHECK(scaled.r.normalized == std::vector<std::string>{"crawl.target: random_walk_percent 60 + "
                                                          "sparse_bucket_percent 60 = 120, scaled to 50 + 50"});
    CHECK(scaled.o.dht.crawl.target.random_walk_percent == 50);
    CHECK(scaled.o.dht.crawl.target.sparse_bucket_percent == 50);

    const auto up = parse(R"({"crawl": {"target": {"random_walk_percent": 1, "sparse_bucket_percent": 2}}})");
    REQUIRE(up.r.ok());
    CHECK(up.r.normalized == std::vector<std::string>{"crawl.target: random_walk_percent 1 + sparse_bucket_percent 2 "
                                                      "= 3, scaled to 33 + 67"});
    CHECK(up.o.dht.crawl.target.random_walk_percent + up.o.dht.crawl.target.sparse_bucket_percent == 100);

    // Each is clamped to 100 first.
    const auto clamped = parse(R"({"crawl": {"target": {"random_walk_percent": 300, "sparse_bucket_percent": 100}}})");
    REQUIRE(clamped.r.ok());
    CHECK(clamped.r.normalized ==
          std::vector<std::string>{"crawl.target.random_walk_percent: 300 > 100, using 100",
                                   "crawl.target: random_walk_percent 100 + sparse_bucket_percent 100 = 200, scaled "
                                   "to 50 + 50"});

    // One share given: the other takes the rest.
    const auto walk = parse(R"({"crawl": {"target": {"random_walk_percent": 80}}})");
    REQUIRE(walk.r.ok());
    CHECK(walk.r.normalized == std::vector<std::string>{"crawl.target.sparse_bucket_percent: not given, using 100 - "
                                                        "crawl.target.random_walk_percent = 20"});
    CHECK(walk.o.dht.crawl.target.sparse_bucket_percent == 20);
    const auto sparse = parse(R"({"crawl": {"target": {"sparse_bucket_percent": 100}}})");
    REQUIRE(sparse.r.ok());
    CHECK(sparse.o.dht.crawl.target.random_walk_percent == 0);
    CHECK(sparse.r.normalized.size() == 1);
    const auto over = parse(R"({"crawl": {"target": {"random_walk_percent": 150}}})");
    REQUIRE(over.r.ok());
    CHECK(over.o.dht.crawl.target.random_walk_percent == 100);
    CHECK(over.o.dht.crawl.target.sparse_bucket_percent == 0);

    // Already 100: nothing to say.
    CHECK(parse(R"({"crawl": {"target": {"random_walk_percent": 25, "sparse_bucket_percent": 75}}})").r.normalized.empty());
    CHECK(parse(R"({"crawl": {"target": {"random_walk_percent": 70}}})").r.normalized.empty());

    // Nothing to scale.
    const auto zero = parse(R"({"crawl": {"target": {"random_walk_percent": 0, "sparse_bucket_percent": 0}}})");
    CHECK(zero.r.status == options_status::invalid_value);
    CHECK(zero.r.path == "crawl.target");
    CHECK(zero.r.message == "crawl.target: random_walk_percent + sparse_bucket_percent is 0; they must sum to 100");
}

TEST_CASE("metadata.encryption: the four policies, anything else refused") {
    using dhtc::metadata::encryption_policy;
    CHECK(parse(R"({"metadata": {"encryption": "prefer_plaintext"}})").o.metadata.encryption == encryption_policy::prefer_plaintext);
    CHECK(parse(R"({"metadata": {"encryption": "prefer_encrypted"}})").o.metadata.encryption == encryption_policy::prefer_encrypted);
    CHECK(parse(R"({"metadata": {"encryption": "require"}})").o.metadata.encryption == encryption_policy::require);
    CHECK(parse(R"({"metadata": {"encryption": "disable"}})").o.metadata.encryption == encryption_policy::disable);
    const auto bad = parse(R"({"metadata": {"encryption": "rc4"}})");
    CHECK(bad.r.status == options_status::invalid_value);
    CHECK(bad.r.path == "metadata.encryption");
    CHECK(parse(R"({"metadata": {"encryption": 1}})").r.status == options_status::wrong_type);
}

TEST_CASE("metadata.transports: tcp, utp or both, anything else refused") {
    using dhtc::metadata::transport_policy;
    CHECK(parse(R"({"metadata": {"transports": "tcp"}})").o.metadata.transports == transport_policy::tcp);
    CHECK(parse(R"({"metadata": {"transports": "utp"}})").o.metadata.transports == transport_policy::utp);
    CHECK(parse(R"({"metadata": {"transports": "both"}})").o.metadata.transports == transport_policy::both);
    const auto bad = parse(R"({"metadata": {"transports": "udp"}})");
    CHECK(bad.r.status == options_status::invalid_value);
    CHECK(bad.r.path == "metadata.transports");
    CHECK(parse(R"({"metadata": {"transports": ["tcp"]}})").r.status == options_status::wrong_type);
}

TEST_CASE("netmode, bind addresses and node_id") {
    CHECK(parse(R"({"netmode": "ipv6"})").o.dht.mode == dhtc::engine::netmode::ipv6);
    CHECK(parse(R"({"netmode": "dual"})").o.dht.mode == dhtc::engine::netmode::dual);
    CHECK(parse(R"({"netmode": "ipv4"})").o.dht.mode == dhtc::engine::netmode::ipv4);
    for (const char* bad : {"ipv5", "IPv4", "Ipv4Only", "", "ipv4 "}) {
        CAPTURE(bad);
        const auto p = parse_doc(doc_with("netmode", bad));
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.message == "netmode: " + json(bad).dump() + " is not one of \"ipv4\", \"ipv6\", \"dual\"");
    }

    CHECK(parse(R"({"bind_v4": "1.2.3"})").r.message == "bind_v4: \"1.2.3\" is not an IPv4 address");
    CHECK(parse(R"({"bind_v4": "::1"})").r.message == "bind_v4: \"::1\" is not an IPv4 address");
    CHECK(parse(R"({"bind_v4": "localhost"})").r.status == options_status::invalid_value);
    CHECK(parse(R"({"bind_v4": ""})").r.status == options_status::invalid_value);
    CHECK(parse(R"({"bind_v6": "1.2.3.4"})").r.message == "bind_v6: \"1.2.3.4\" is not an IPv6 address");
    CHECK(parse(R"({"bind_v6": "fe80::1%eth0"})").r.status == options_status::invalid_value);
    // Long user strings are cut short in messages.
    const auto longer = parse_doc(doc_with("bind_v6", std::string(500, 'x')));
    CHECK(longer.r.message == "bind_v6: \"" + std::string(64, 'x') + "...\" is not an IPv6 address");

    // Addresses are kept in canonical form; metadata.bind_v4 follows a pinned v4 address.
    const auto v6 = parse(R"({"bind_v6": "2001:DB8:0:0:0:0:0:1", "bind_v4": "127.0.0.1"})");
    REQUIRE(v6.r.ok());
    CHECK(v6.o.dht.bind_v6 == "2001:db8::1");
    REQUIRE(v6.o.metadata.bind_v4.has_value());
    CHECK(*v6.o.metadata.bind_v4 == *dhtc::ip_address::parse("127.0.0.1"));
    CHECK_FALSE(parse(R"({"bind_v4": "0.0.0.0"})").o.metadata.bind_v4.has_value());

    const auto id = parse(R"({"node_id": "00112233445566778899AABBCCDDEEFF00112233"})");
    REQUIRE(id.r.ok());
    REQUIRE(id.o.dht.node_id.has_value());
    CHECK(dhtc::api::to_json(id.o).at("node_id") == "00112233445566778899aabbccddeeff00112233");
    CHECK_FALSE(parse(R"({"node_id": null})").o.dht.node_id.has_value());
    for (const std::string& bad : {std::string(39, 'a'), std::string(41, 'a'), std::string(39, 'a') + "g",
                                  std::string(), std::string(40, ' ')}) {
        CAPTURE(bad);
        const auto p = parse_doc(doc_with("node_id", bad));
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.message == "node_id: " + json(bad).dump() + " is not 40 hex digits");
    }
}

TEST_CASE("bootstrap sources are host:port with IPv6 in brackets") {
    const auto good = parse(R"({"crawl": {"bootstrap": {"sources":
        ["[2001:db8::1]:6881", "[::ffff:1.2.3.4]:1", "1.2.3.4:65535", "router_x-1.example.com:6881", "a:1"]}}})");
    REQUIRE_MESSAGE(good.r.ok(), good.r.message);
    CHECK(good.o.dht.crawl.bootstrap.sources.size() == 5);
    CHECK(parse(R"({"crawl": {"bootstrap": {"sources": []}}})").o.dht.crawl.bootstrap.sources.empty());

    struct bad {
        const char* source;
        const char* why;
    };
    const bad cases[] = {
        {"router.bittorrent.com", "no port (expected host:port)"},
        {":6881", "empty host (expected host:port)"},
        {"host:0", "port must be 1..65535"},
        {"host:65536", "port must be 1..65535"},
        {"host:", "port must be 1..65535"},
        {"host:+80", "port must be 1..65535"},
        {"host:12a", "port must be 1..65535"},
        {"host:000000080", "port must be 1..65535"},
        {"::1:6881", "an IPv6 address must be in brackets (expected [address]:port)"},
        {"2001:db8::1", "an IPv6 address must be in brackets (expected [address]:port)"},
        {"[::1]", "no port (expected [address]:port)"},
        {"[::1]6881", "no port (expected [address]:port)"},
        {"[::1:6881", "missing ] after the IPv6 address"},
        {"[1.2.3.4]:6881", "[1.2.3.4] is not an IPv6 address"},
        {"[]:6881", "[] is not an IPv6 address"},
        {"a b:1", "host has a character that is not a letter, digit, '-', '.' or '_'"},
        {"host/x:1", "host has a character that is not a letter, digit, '-', '.' or '_'"},
        {"", "no port (expected host:port)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.source);
        const json doc = doc_with("crawl.bootstrap.sources", json::array({"good.example:1", c.source}));
        const auto p = parse_doc(doc);
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.path == "crawl.bootstrap.sources[1]");
        CHECK(p.r.message == "crawl.bootstrap.sources[1]: " + json(c.source).dump() + ": " + c.why);
    }
    const auto long_host = parse_doc(doc_with("crawl.bootstrap.sources", json::array({std::string(254, 'a') + ":1"})));
    CHECK(long_host.r.status == options_status::invalid_value);
    CHECK(long_host.r.message.find("host longer than 253 characters") != std::string::npos);

    json many = json::array();
    for (std::size_t i = 0; i < dhtc::api::max_bootstrap_sources; ++i) many.push_back("h" + std::to_string(i) + ":1");
    CHECK(parse_doc(doc_with("crawl.bootstrap.sources", many)).r.ok());
    many.push_back("one.more:1");
    const auto too_many = parse_doc(doc_with("crawl.bootstrap.sources", many));
    CHECK(too_many.r.status == options_status::invalid_value);
    CHECK(too_many.r.message == "crawl.bootstrap.sources: 257 sources; at most 256");
}

TEST_CASE("the first problem in key order is the one reported") {
    const auto p = parse(R"({"port": "x", "crawl": {"pool": {"capacity": "y"}}, "bind_v4": 1})");
    CHECK(p.r.status == options_status::wrong_type);
    CHECK(p.r.path == "bind_v4"); // keys are walked in sorted order
    CHECK(parse(R"({"zzz": 1, "aaa": 1})").r.path == "aaa");
}

TEST_CASE("status names") {
    CHECK(dhtc::api::to_string(options_status::ok) == "ok");
    CHECK(dhtc::api::to_string(options_status::invalid_json) == "invalid_json");
    CHECK(dhtc::api::to_string(options_status::unknown_key) == "unknown_key");
    CHECK(dhtc::api::to_string(options_status::wrong_type) == "wrong_type");
    CHECK(dhtc::api::to_string(options_status::invalid_value) == "invalid_value");
}

TEST_CASE("docs/options.md documents every key") {
    std::ifstream in(std::string(DHTC_FIXTURE_DIR) + "/../../docs/options.md");
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    for (const auto& [path, def] : default_leaves()) {
        CAPTURE(path);
        CHECK(doc.find("| `" + path + "` |") != std::string::npos);
    }
    // Its example is a valid document that needs no normalisation.
    const auto start = doc.find("```json\n");
    REQUIRE(start != std::string::npos);
    const auto end = doc.find("```", start + 8);
    REQUIRE(end != std::string::npos);
    const auto example = parse(doc.substr(start + 8, end - start - 8));
    CHECK_MESSAGE(example.r.ok(), example.r.message);
    CHECK(example.r.normalized.empty());
    CHECK(example.o.dht.mode == dhtc::engine::netmode::dual);
    CHECK(example.o.dht.crawl.pool.capacity == 200000);
}

TEST_CASE("mutated documents never crash and always give a status with a message") {
    const std::string base = json::parse(custom_document).dump();
    const std::string alphabet = "{}[]\":,.-+0123456789eE truefalsnl\\x\xff";
    std::mt19937 rng(12345);
    std::size_t accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string s = base;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits && !s.empty(); ++e) {
            const std::size_t at = rng() % s.size();
            switch (rng() % 3) {
            case 0: s[at] = alphabet[rng() % alphabet.size()]; break;
            case 1: s.erase(at, 1 + rng() % 8); break;
            default: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
            }
        }
        const auto p = parse(s);
        if (p.r.ok()) {
            ++accepted;
            // Whatever was accepted is stable under the round trip.
            const auto again = parse(dhtc::api::to_json(p.o).dump());
            REQUIRE(again.r.ok());
            CHECK(dhtc::api::to_json(again.o) == dhtc::api::to_json(p.o));
        } else {
            CHECK_FALSE(p.r.message.empty());
        }
    }
    CHECK(accepted > 0);
}

} // TEST_SUITE

TEST_CASE("retry options: store kinds, connection strings, ladders") {
    {
        const auto p = parse(R"({"retry": {"store": {"kind": "mysql"}}})");
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.path == "retry.store.kind");
    }
    {
        // A fleet without a server, and a connection string libpq cannot read.
        const auto p = parse(R"({"retry": {"store": {"kind": "postgresql"}}})");
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.path == "retry.store.conninfo");
        const auto q = parse(R"({"retry": {"store": {"kind": "postgresql", "conninfo": "host=127.0.0.1 bogus_key=1"}}})");
        CHECK(q.r.status == options_status::invalid_value);
        CHECK(q.r.path == "retry.store.conninfo");
        CHECK(q.r.message.find("bogus_key") != std::string::npos);
        const auto ok = parse(R"({"retry": {"store": {"kind": "postgresql", "conninfo": "postgresql://u@127.0.0.1:5432/db"}}})");
        CHECK(ok.r.ok());
    }
    for (const char* bad : {R"([])", R"([0])", R"([-5])", R"([4294967296])"}) {
        CAPTURE(bad);
        const auto p = parse(std::string(R"({"retry": {"policy": {"ladder_secs": )") + bad + "}}}");
        CHECK(p.r.status == options_status::invalid_value);
    }
    {
        const auto p = parse(R"({"retry": {"owner_id": "has space"}})");
        CHECK(p.r.status == options_status::invalid_value);
        CHECK(p.r.path == "retry.owner_id");
    }
    {
        const auto p = parse(R"({"retry": {"budget_share": 3, "policy": {"jitter_percent": 250}}})");
        REQUIRE(p.r.ok());
        CHECK(p.o.retry.budget_share == 1.0);
        CHECK(p.o.retry.policy.jitter_percent == 100);
        CHECK(p.r.normalized.size() == 2);
    }
}
