#include "api/options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <variant>

#include <nlohmann/json.hpp>

#include "crawl/node_pool.hpp"
#include "model/address.hpp"
#include "retry/postgres_store.hpp"
#include "util/id20.hpp"

namespace dhtc::api {

namespace {

using json = nlohmann::json;
using O = api::crawler_options;

// Upper bounds. Most are the components' own clamps, surfaced here so that an oversized
// value is reported and to_json() shows what really runs; the others bound what the engine
// allocates up front.
constexpr std::uint64_t unbounded = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t queue_max = std::uint64_t{1} << 24;       // preallocated queues and reserves
constexpr std::uint64_t table_max = (std::uint64_t{1} << 24) - 2; // slot_index tables (pending, caches, filter)
constexpr std::uint64_t ring_max = (std::uint64_t{1} << 24) - 1;  // responsive ring
constexpr std::uint64_t pool_max = crawl::node_pool::max_capacity;
constexpr std::uint64_t in_flight_max = 65535;  // the transaction table has 16-bit slots
constexpr std::uint64_t worker_max = 65535;     // each worker is one TCP connection
constexpr std::uint64_t count_max = 65535;      // per-lookup and per-round counts
constexpr std::uint64_t rate_max = 1'000'000'000'000; // token buckets cap rates here
constexpr std::uint64_t metadata_size_max = std::uint64_t{256} * 1024 * 1024; // the lease table's ceiling
constexpr std::uint64_t failure_ttl_max = 24 * 3600; // the peer failure cache's ceiling
constexpr std::uint64_t bep51_interval_max = 21600;  // BEP-51: interval is 0..21600
constexpr std::uint64_t krpc_retries_max = 4;        // retries of one KRPC query after a timeout
constexpr std::uint64_t lookup_retry_secs_max = 3600;

// Keys whose value is not a plain number or boolean.
enum class special : std::uint8_t {
    netmode,
    bind_v4,
    bind_v6,
    node_id,
    sources,
    store_kind,
    store_path,
    state_file,
    store_conninfo,
    owner_id,
    ladder,
    encryption,
    transports
};
constexpr std::size_t max_ladder_steps = 64;
constexpr std::size_t max_text_option = 4096; // paths, connection strings, owner ids
constexpr std::uint64_t percent_max = 100'000; // a class may wait up to 1000x the ladder

template <api::failure_class C>
unsigned& class_percent(O& o) {
    return o.retry.policy.class_percent[static_cast<std::size_t>(C)];
}
using fc = api::failure_class;

// Accessors of one field; the tag keeps the types distinct where size_t is unsigned.
template <class T, int Tag>
struct ref_t {
    T& (*at)(O&);
};
using u16_ref = ref_t<std::uint16_t, 0>;
using uint_ref = ref_t<unsigned, 1>;
using size_ref = ref_t<std::size_t, 2>;
using double_ref = ref_t<double, 3>;
using bool_ref = ref_t<bool, 4>;

struct field {
    std::string_view path; // dotted: each dot is one level of nesting in the document
    std::variant<u16_ref, uint_ref, size_ref, double_ref, bool_ref, special> ref;
    std::uint64_t lo = 0;         // smaller values are raised to this (and reported)
    std::uint64_t hi = unbounded; // larger values are lowered to this (and reported)
};

// Every key of the document, in the order of docs/options.md.
const field fields[] = {
    {"port", u16_ref{[](O& o) -> auto& { return o.dht.port; }}},
    {"netmode", special::netmode},
    {"bind_v4", special::bind_v4},
    {"bind_v6", special::bind_v6},
    {"node_id", special::node_id},
    {"hash_queue_capacity", size_ref{[](O& o) -> auto& { return o.metadata.hash_queue_capacity; }}, 1, queue_max},
    {"allow_private_addresses", bool_ref{[](O& o) -> auto& { return o.dht.crawl.allow_private_addresses; }}},
    {"observation_queue_capacity", size_ref{[](O& o) -> auto& { return o.observation_queue_capacity; }}, 1,
     queue_max},
    {"announce_observations_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.announce_observations_per_sec; }}, 0, rate_max},

    {"metadata.timeout_secs", uint_ref{[](O& o) -> auto& { return o.metadata.timeout_secs; }}, 1},
    {"metadata.max_queue_size", size_ref{[](O& o) -> auto& { return o.metadata.max_queue_size; }}, 1, table_max},
    {"metadata.max_worker_count", size_ref{[](O& o) -> auto& { return o.metadata.max_worker_count; }}, 1,
     worker_max},
    {"metadata.peer_failure_cache_capacity",
     size_ref{[](O& o) -> auto& { return o.metadata.peer_failure_cache_capacity; }}, 0, table_max},
    {"metadata.peer_failure_ttl_secs", uint_ref{[](O& o) -> auto& { return o.metadata.peer_failure_ttl_secs; }}, 0,
     failure_ttl_max},
    {"metadata.first_timeout_ttl_secs",
     uint_ref{[](O& o) -> auto& { return o.metadata.first_timeout_ttl_secs; }}, 0, failure_ttl_max},
    {"metadata.refusal_ttl_secs", uint_ref{[](O& o) -> auto& { return o.metadata.refusal_ttl_secs; }}, 0,
     failure_ttl_max},
    {"metadata.max_metadata_size", size_ref{[](O& o) -> auto& { return o.metadata.max_metadata_size; }}, 1,
     metadata_size_max},
    {"metadata.max_in_flight_bytes", size_ref{[](O& o) -> auto& { return o.metadata.max_in_flight_bytes; }},
     16384, std::uint64_t{1} << 40},
    {"metadata.max_attempts", uint_ref{[](O& o) -> auto& { return o.metadata.max_attempts; }}, 1},
    {"metadata.gate_timeout_millis", uint_ref{[](O& o) -> auto& { return o.metadata.gate_timeout_millis; }}, 1},
    {"metadata.gate_default", bool_ref{[](O& o) -> auto& { return o.metadata.gate_default; }}},
    {"metadata.encryption", special::encryption},
    {"metadata.transports", special::transports},
    {"metadata.delivered_filter.capacity",
     size_ref{[](O& o) -> auto& { return o.metadata.delivered_filter_capacity; }}, 0, table_max},
    {"metadata.delivered_filter.period_secs",
     uint_ref{[](O& o) -> auto& { return o.metadata.delivered_filter_period_secs; }}},

    {"crawl.rate_limit.max_find_node_rate_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_find_node_rate_per_sec; }}, 0, rate_max},
    {"crawl.rate_limit.burst", double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.burst; }}, 1, rate_max},
    {"crawl.rate_limit.max_in_flight", size_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_in_flight; }},
     1, in_flight_max},
    {"crawl.rate_limit.request_timeout_secs",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.request_timeout_secs; }}, 1},
    {"crawl.rate_limit.max_new_destinations_per_minute",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_new_destinations_per_minute; }}, 0, rate_max},
    {"crawl.rate_limit.max_replacements_per_minute",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_replacements_per_minute; }}, 0, rate_max},
    {"crawl.rate_limit.max_response_rate_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_response_rate_per_sec; }}, 0, rate_max},
    {"crawl.rate_limit.max_response_bytes_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_response_bytes_per_sec; }}, 0, rate_max},
    {"crawl.rate_limit.max_response_rate_per_source",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_response_rate_per_source; }}, 0, rate_max},
    {"crawl.rate_limit.trusted_response_percent",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.trusted_response_percent; }}, 0, 100},
    {"crawl.rate_limit.max_packets_per_destination_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_packets_per_destination_per_sec; }}, 0,
     rate_max},
    {"crawl.rate_limit.destination_burst",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.destination_burst; }}, 1, rate_max},
    {"crawl.rate_limit.max_packets_per_ip_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_packets_per_ip_per_sec; }}, 0, rate_max},
    {"crawl.rate_limit.ip_burst", double_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.ip_burst; }}, 1,
     rate_max},
    {"crawl.rate_limit.tracked_sources", size_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.tracked_sources; }},
     1, ring_max},
    {"crawl.rate_limit.metadata_pressure_floor_percent",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.metadata_pressure_floor_percent; }}, 0, 100},
    {"crawl.rate_limit.max_in_flight_per_subnet",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.rate_limit.max_in_flight_per_subnet; }}, 1, in_flight_max},

    {"crawl.pool.capacity", size_ref{[](O& o) -> auto& { return o.dht.crawl.pool.capacity; }}, 1, pool_max},
    {"crawl.pool.recent_probe_ttl_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.pool.recent_probe_ttl_secs; }}},
    {"crawl.pool.responsive_capacity", size_ref{[](O& o) -> auto& { return o.dht.crawl.pool.responsive_capacity; }}, 1,
     ring_max},
    {"crawl.pool.responsive_ttl_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.pool.responsive_ttl_secs; }}},
    {"crawl.pool.low_watermark", size_ref{[](O& o) -> auto& { return o.dht.crawl.pool.low_watermark; }}},
    {"crawl.pool.max_querier_percent", uint_ref{[](O& o) -> auto& { return o.dht.crawl.pool.max_querier_percent; }}, 0,
     100},
    {"crawl.pool.max_querier_admissions_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.pool.max_querier_admissions_per_sec; }}, 0, rate_max},
    {"crawl.pool.thin_table_nodes", size_ref{[](O& o) -> auto& { return o.dht.crawl.pool.thin_table_nodes; }}, 0,
     ring_max},

    {"crawl.bootstrap.interval_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bootstrap.interval_secs; }}, 1},
    {"crawl.bootstrap.max_nodes_per_round",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.bootstrap.max_nodes_per_round; }}, 1, count_max},
    {"crawl.bootstrap.source_backoff_base_secs",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.bootstrap.source_backoff_base_secs; }}},
    {"crawl.bootstrap.source_backoff_max_secs",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.bootstrap.source_backoff_max_secs; }}},
    {"crawl.bootstrap.sources", special::sources},
    {"crawl.state_file", special::state_file},

    {"crawl.target.random_walk_percent", uint_ref{[](O& o) -> auto& { return o.dht.crawl.target.random_walk_percent; }},
     0, 100},
    {"crawl.target.sparse_bucket_percent",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.target.sparse_bucket_percent; }}, 0, 100},
    {"crawl.target.neighbor_sender_id", bool_ref{[](O& o) -> auto& { return o.dht.crawl.target.neighbor_sender_id; }}},

    {"crawl.scheduler.priority_event_channel_capacity",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.priority_event_channel_capacity; }}, 1, queue_max},
    {"crawl.scheduler.discovery_event_channel_capacity",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.discovery_event_channel_capacity; }}, 1, queue_max},
    {"crawl.scheduler.event_batch_limit",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.event_batch_limit; }}, 1, queue_max},
    {"crawl.scheduler.node_batch_limit", size_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.node_batch_limit; }},
     1, queue_max},
    {"crawl.scheduler.routing_snapshot_size",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.routing_snapshot_size; }}, 1, queue_max},
    {"crawl.scheduler.snapshot_refresh_millis",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.scheduler.snapshot_refresh_millis; }}},

    {"crawl.bep51.enabled", bool_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.enabled; }}},
    {"crawl.bep51.max_sample_rate_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.max_sample_rate_per_sec; }}, 0, rate_max},
    {"crawl.bep51.min_interval_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.min_interval_secs; }}},
    {"crawl.bep51.max_lookup_rate_per_sec",
     double_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.max_lookup_rate_per_sec; }}, 0, rate_max},
    {"crawl.bep51.max_concurrent_lookups",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.max_concurrent_lookups; }}, 1, count_max},
    {"crawl.bep51.lookup_queue_capacity",
     size_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.lookup_queue_capacity; }}, 1, queue_max},
    {"crawl.bep51.queries_per_lookup", size_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.queries_per_lookup; }}, 1,
     count_max},
    {"crawl.bep51.sample_retries", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.sample_retries; }}, 0,
     krpc_retries_max},
    {"crawl.bep51.holder_retries", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.holder_retries; }}, 0,
     krpc_retries_max},
    {"crawl.bep51.lookup_retries", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.lookup_retries; }}, 0,
     krpc_retries_max},
    {"crawl.bep51.lookup_retry_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.lookup_retry_secs; }}, 1,
     lookup_retry_secs_max},
    {"crawl.bep51.store_capacity", size_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.store_capacity; }}, 1,
     queue_max},
    {"crawl.bep51.answer_interval_secs",
     uint_ref{[](O& o) -> auto& { return o.dht.crawl.bep51.answer_interval_secs; }}, 0, bep51_interval_max},

    {"crawl.scrape.timeout_secs", uint_ref{[](O& o) -> auto& { return o.dht.crawl.scrape.timeout_secs; }}, 1},

    {"retry.store.kind", special::store_kind},
    {"retry.store.path", special::store_path},
    {"retry.store.conninfo", special::store_conninfo},
    {"retry.owner_id", special::owner_id},
    {"retry.budget_share", double_ref{[](O& o) -> auto& { return o.retry.budget_share; }}, 0, 1},
    {"retry.lease_secs", uint_ref{[](O& o) -> auto& { return o.retry.lease_secs; }}, 1, 30 * 86400},
    {"retry.batch", size_ref{[](O& o) -> auto& { return o.retry.batch; }}, 1, 10'000},
    {"retry.queue_capacity", size_ref{[](O& o) -> auto& { return o.retry.queue_capacity; }}, 1, queue_max},
    {"retry.policy.ladder_secs", special::ladder},
    {"retry.policy.jitter_percent", uint_ref{[](O& o) -> auto& { return o.retry.policy.jitter_percent; }}, 0, 100},
    {"retry.policy.repeated_mismatch_percent",
     uint_ref{[](O& o) -> auto& { return o.retry.policy.repeated_mismatch_percent; }}, 1, percent_max},
    {"retry.policy.reactivation_percent",
     uint_ref{[](O& o) -> auto& { return o.retry.policy.reactivation_percent; }}, 0, 100},
    {"retry.policy.reactivation_min_secs",
     uint_ref{[](O& o) -> auto& { return o.retry.policy.reactivation_min_secs; }}},
    {"retry.policy.max_priority", uint_ref{[](O& o) -> auto& { return o.retry.policy.max_priority; }}},
    {"retry.policy.timeout_retries", uint_ref{[](O& o) -> auto& { return o.retry.policy.timeout_retries; }}, 0, 16},
    {"retry.policy.timeout_retry_secs", uint_ref{[](O& o) -> auto& { return o.retry.policy.timeout_retry_secs; }}, 1,
     86'400},
    {"retry.policy.lookup_wait_secs", uint_ref{[](O& o) -> auto& { return o.retry.policy.lookup_wait_secs; }}, 0,
     3600},
    {"retry.policy.class_percent.connect_refused", uint_ref{&class_percent<fc::connect_refused>}, 1, percent_max},
    {"retry.policy.class_percent.connect_timeout", uint_ref{&class_percent<fc::connect_timeout>}, 1, percent_max},
    {"retry.policy.class_percent.handshake_failed", uint_ref{&class_percent<fc::handshake_failed>}, 1, percent_max},
    {"retry.policy.class_percent.no_extension_support", uint_ref{&class_percent<fc::no_extension_support>}, 1,
     percent_max},
    {"retry.policy.class_percent.no_metadata_support", uint_ref{&class_percent<fc::no_metadata_support>}, 1,
     percent_max},
    {"retry.policy.class_percent.rejected", uint_ref{&class_percent<fc::rejected>}, 1, percent_max},
    {"retry.policy.class_percent.timeout", uint_ref{&class_percent<fc::timeout>}, 1, percent_max},
    {"retry.policy.class_percent.size_limit", uint_ref{&class_percent<fc::size_limit>}, 1, percent_max},
    {"retry.policy.class_percent.hash_mismatch", uint_ref{&class_percent<fc::hash_mismatch>}, 1, percent_max},
    {"retry.policy.class_percent.parse_error", uint_ref{&class_percent<fc::parse_error>}, 1, percent_max},
    {"retry.policy.class_percent.no_peers", uint_ref{&class_percent<fc::no_peers>}, 1, percent_max},
    {"retry.policy.class_percent.protocol_error", uint_ref{&class_percent<fc::protocol_error>}, 1, percent_max},
    {"retry.policy.class_percent.disconnected", uint_ref{&class_percent<fc::disconnected>}, 1, percent_max},
    {"retry.policy.class_percent.sink_failed", uint_ref{&class_percent<fc::sink_failed>}, 1, percent_max},
    {"retry.policy.class_percent.encryption_failed", uint_ref{&class_percent<fc::encryption_failed>}, 1, percent_max},
    {"retry.policy.class_percent.utp_timeout", uint_ref{&class_percent<fc::utp_timeout>}, 1, percent_max},
};

const field* find_field(std::string_view path) noexcept {
    for (const auto& f : fields)
        if (f.path == path) return &f;
    return nullptr;
}

std::size_t index_of(std::string_view path) noexcept {
    const field* f = find_field(path);
    return f ? static_cast<std::size_t>(f - fields) : 0;
}

// A group is a prefix of some key followed by a dot: "crawl", "crawl.pool", ...
bool is_group(std::string_view path) noexcept {
    for (const auto& f : fields)
        if (f.path.size() > path.size() && f.path[path.size()] == '.' && f.path.substr(0, path.size()) == path)
            return true;
    return false;
}

std::string join(std::string_view prefix, std::string_view key) {
    // An empty key would vanish from the path; show it.
    const std::string k = key.empty() ? std::string("\"\"") : std::string(key);
    return prefix.empty() ? k : std::string(prefix) + "." + k;
}

std::string shown_path(std::string_view path) { return path.empty() ? std::string("(document)") : std::string(path); }

// A user string inside a message: quoted, escaped, and cut short so a message stays a line.
std::string quote(std::string_view s) {
    constexpr std::size_t max_shown = 64;
    std::string cut(s.substr(0, max_shown));
    std::string q = json(cut).dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > max_shown) q.insert(q.size() - 1, "...");
    return q;
}

std::string show_double(double d) {
    if (std::trunc(d) == d && std::fabs(d) < 1e15) return std::to_string(static_cast<std::int64_t>(d));
    return json(d).dump();
}

struct parse_state {
    O o;
    options_result r;
    std::vector<bool> present = std::vector<bool>(std::size(fields), false);

    bool fail(options_status s, std::string path, std::string_view what) {
        r.status = s;
        r.message = shown_path(path) + ": " + std::string(what);
        r.path = std::move(path);
        return false;
    }
    void note(std::string line) { r.normalized.push_back(std::move(line)); }
};

template <class T>
bool apply_integer(parse_state& st, const field& f, const json& v, T& dst) {
    const std::string path(f.path);
    constexpr std::uint64_t type_max = std::numeric_limits<T>::max();
    const auto out_of_range = [&](const std::string& shown) {
        return st.fail(options_status::invalid_value, path,
                       shown + " is out of range 0.." + std::to_string(type_max));
    };
    std::uint64_t u = 0;
    if (const auto* p = v.get_ptr<const json::number_unsigned_t*>()) {
        if (*p > type_max) return out_of_range(std::to_string(*p));
        u = *p;
    } else if (const auto* q = v.get_ptr<const json::number_integer_t*>()) {
        if (*q < 0 || static_cast<std::uint64_t>(*q) > type_max) return out_of_range(std::to_string(*q));
        u = static_cast<std::uint64_t>(*q);
    } else if (const auto* d = v.get_ptr<const json::number_float_t*>();
               d && std::trunc(*d) == *d && std::fabs(*d) >= 0x1p63) {
        // An integer too long for 64 bits arrives as a float: report its range, not its type.
        return out_of_range(v.dump());
    } else {
        return st.fail(options_status::wrong_type, path, "expected an integer");
    }
    const std::uint64_t hi = std::min(f.hi, type_max);
    if (u < f.lo) {
        st.note(path + ": " + std::to_string(u) + " < " + std::to_string(f.lo) + ", using " + std::to_string(f.lo));
        u = f.lo;
    } else if (u > hi) {
        st.note(path + ": " + std::to_string(u) + " > " + std::to_string(hi) + ", using " + std::to_string(hi));
        u = hi;
    }
    dst = static_cast<T>(u);
    return true;
}

bool apply_double(parse_state& st, const field& f, const json& v, double& dst) {
    const std::string path(f.path);
    double d = 0;
    if (const auto* p = v.get_ptr<const json::number_unsigned_t*>())
        d = static_cast<double>(*p);
    else if (const auto* q = v.get_ptr<const json::number_integer_t*>())
        d = static_cast<double>(*q);
    else if (const auto* x = v.get_ptr<const json::number_float_t*>())
        d = *x;
    else
        return st.fail(options_status::wrong_type, path, "expected a number");
    if (!std::isfinite(d) || d < 0)
        return st.fail(options_status::invalid_value, path, v.dump() + " is negative; expected a number >= 0");
    const auto lo = static_cast<double>(f.lo);
    const auto hi = static_cast<double>(f.hi);
    if (d < lo) {
        st.note(path + ": " + show_double(d) + " < " + show_double(lo) + ", using " + show_double(lo));
        d = lo;
    } else if (d > hi) {
        st.note(path + ": " + show_double(d) + " > " + show_double(hi) + ", using " + show_double(hi));
        d = hi;
    }
    dst = d;
    return true;
}

// Empty when `text` is a usable "host:port" (IPv6 literals bracketed), else what is wrong.
std::string check_source(std::string_view text) {
    using E = host_port_error;
    const host_port hp = split_host_port(text);
    if (hp.error == E::unclosed_bracket) return "missing ] after the IPv6 address";
    if (hp.bracketed) {
        const auto addr = ip_address::parse(hp.host);
        if (!addr || !addr->is_v6()) return "[" + std::string(hp.host) + "] is not an IPv6 address";
    }
    if (hp.error == E::no_port) return hp.bracketed ? "no port (expected [address]:port)" : "no port (expected host:port)";
    if (hp.error == E::unbracketed_colon) return "an IPv6 address must be in brackets (expected [address]:port)";
    if (hp.error == E::empty_host) return "empty host (expected host:port)";
    if (!hp.bracketed) {
        if (hp.host.size() > 253) return "host longer than 253 characters";
        for (const char c : hp.host) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_';
            if (!ok) return "host has a character that is not a letter, digit, '-', '.' or '_'";
        }
    }
    if (hp.error == E::bad_port || hp.port == 0) return "port must be 1..65535";
    return {};
}

bool apply_special(parse_state& st, const field& f, special s, const json& v) {
    const std::string path(f.path);
    if (s == special::node_id) {
        if (v.is_null()) {
            st.o.dht.node_id.reset();
            return true;
        }
        const auto* text = v.get_ptr<const json::string_t*>();
        if (!text) return st.fail(options_status::wrong_type, path, "expected a string or null");
        const auto id = id20::from_hex(*text);
        if (!id) return st.fail(options_status::invalid_value, path, quote(*text) + " is not 40 hex digits");
        st.o.dht.node_id = *id;
        return true;
    }
    if (s == special::sources) {
        if (!v.is_array()) return st.fail(options_status::wrong_type, path, "expected an array of \"host:port\" strings");
        if (v.size() > max_bootstrap_sources)
            return st.fail(options_status::invalid_value, path,
                           std::to_string(v.size()) + " sources; at most " + std::to_string(max_bootstrap_sources));
        std::vector<std::string> sources;
        sources.reserve(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string at = path + "[" + std::to_string(i) + "]";
            const auto* text = v[i].get_ptr<const json::string_t*>();
            if (!text) return st.fail(options_status::wrong_type, at, "expected a \"host:port\" string");
            if (const std::string why = check_source(*text); !why.empty())
                return st.fail(options_status::invalid_value, at, quote(*text) + ": " + why);
            sources.push_back(*text);
        }
        st.o.dht.crawl.bootstrap.sources = std::move(sources);
        return true;
    }
    if (s == special::ladder) {
        if (!v.is_array()) return st.fail(options_status::wrong_type, path, "expected an array of integers (seconds)");
        if (v.empty() || v.size() > max_ladder_steps)
            return st.fail(options_status::invalid_value, path,
                           std::to_string(v.size()) + " steps; expected 1.." + std::to_string(max_ladder_steps));
        std::vector<std::uint32_t> ladder;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string at = path + "[" + std::to_string(i) + "]";
            const auto* u = v[i].get_ptr<const json::number_unsigned_t*>();
            if (!u) {
                if (v[i].is_number_integer())
                    return st.fail(options_status::invalid_value, at, v[i].dump() + " is negative");
                return st.fail(options_status::wrong_type, at, "expected an integer (seconds)");
            }
            if (*u < 1 || *u > std::numeric_limits<std::uint32_t>::max())
                return st.fail(options_status::invalid_value, at, std::to_string(*u) + " is out of range 1..4294967295");
            ladder.push_back(static_cast<std::uint32_t>(*u));
        }
        st.o.retry.policy.ladder_secs = std::move(ladder);
        return true;
    }
    const auto* text = v.get_ptr<const json::string_t*>();
    if (!text) return st.fail(options_status::wrong_type, path, "expected a string");
    if (text->size() > max_text_option)
        return st.fail(options_status::invalid_value, path,
                       std::to_string(text->size()) + " bytes; at most " + std::to_string(max_text_option));
    switch (s) {
    case special::store_kind:
        if (*text == "none")
            st.o.retry.kind = retry::store_kind::none;
        else if (*text == "sqlite")
            st.o.retry.kind = retry::store_kind::sqlite;
        else if (*text == "postgresql")
            st.o.retry.kind = retry::store_kind::postgresql;
        else
            return st.fail(options_status::invalid_value, path,
                           quote(*text) + " is not one of \"none\", \"sqlite\", \"postgresql\"");
        return true;
    case special::store_path:
    case special::state_file:
        if (text->find('\0') != std::string::npos)
            return st.fail(options_status::invalid_value, path, "a file path cannot hold a NUL byte");
        (s == special::store_path ? st.o.retry.path : st.o.dht.crawl.state_file) = *text;
        return true;
    case special::store_conninfo:
        st.o.retry.conninfo = *text;
        return true;
    case special::owner_id:
        for (const char c : *text)
            if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
                return st.fail(options_status::invalid_value, path, quote(*text) + ": printable ASCII without spaces only");
        st.o.retry.owner_id = *text;
        return true;
    case special::encryption:
        if (const auto p = metadata::parse_encryption_policy(*text))
            st.o.metadata.encryption = *p;
        else
            return st.fail(options_status::invalid_value, path,
                           quote(*text) + R"( is not one of "prefer_plaintext", "prefer_encrypted", "require", "disable")");
        return true;
    case special::transports:
        if (const auto p = metadata::parse_transport_policy(*text))
            st.o.metadata.transports = *p;
        else
            return st.fail(options_status::invalid_value, path, quote(*text) + R"( is not one of "tcp", "utp", "both", "utp_first")");
        return true;
    case special::netmode:
        if (*text == "ipv4")
            st.o.dht.mode = engine::netmode::ipv4;
        else if (*text == "ipv6")
            st.o.dht.mode = engine::netmode::ipv6;
        else if (*text == "dual")
            st.o.dht.mode = engine::netmode::dual;
        else
            return st.fail(options_status::invalid_value, path,
                           quote(*text) + " is not one of \"ipv4\", \"ipv6\", \"dual\"");
        return true;
    case special::bind_v4:
    case special::bind_v6: {
        const bool v6 = s == special::bind_v6;
        const auto addr = ip_address::parse(*text);
        if (!addr || addr->is_v6() != v6)
            return st.fail(options_status::invalid_value, path,
                           quote(*text) + (v6 ? " is not an IPv6 address" : " is not an IPv4 address"));
        // Canonical text, so that equal addresses compare equal downstream.
        (v6 ? st.o.dht.bind_v6 : st.o.dht.bind_v4) = addr->to_string();
        return true;
    }
    default:
        return true;
    }
}

bool apply(parse_state& st, const field& f, const json& v) {
    st.present[static_cast<std::size_t>(&f - fields)] = true;
    return std::visit(
        [&](const auto& ref) -> bool {
            using R = std::decay_t<decltype(ref)>;
            if constexpr (std::is_same_v<R, special>) {
                return apply_special(st, f, ref, v);
            } else if constexpr (std::is_same_v<R, bool_ref>) {
                const auto* b = v.get_ptr<const json::boolean_t*>();
                if (!b) return st.fail(options_status::wrong_type, std::string(f.path), "expected a boolean");
                ref.at(st.o) = *b;
                return true;
            } else if constexpr (std::is_same_v<R, double_ref>) {
                return apply_double(st, f, v, ref.at(st.o));
            } else {
                return apply_integer(st, f, v, ref.at(st.o));
            }
        },
        f.ref);
}

bool walk(parse_state& st, const json& object, const std::string& prefix) {
    for (auto it = object.begin(); it != object.end(); ++it) {
        const std::string& key = it.key();
        const std::string path = join(prefix, key);
        // "crawl.pool" as one key would otherwise pass for the group: the seed's dotted
        // names are written as nesting.
        if (key.find('.') != std::string::npos || key.empty())
            return st.fail(options_status::unknown_key, path, "unknown key");
        if (const field* f = find_field(path)) {
            if (!apply(st, *f, it.value())) return false;
        } else if (is_group(path)) {
            if (!it.value().is_object()) return st.fail(options_status::wrong_type, path, "expected an object");
            if (!walk(st, it.value(), path)) return false;
        } else {
            return st.fail(options_status::unknown_key, path, "unknown key");
        }
    }
    return true;
}

// Rules that involve more than one key, after every key has been applied.
bool cross_check(parse_state& st) {
    // A fleet needs a server: the connection string is checked here (syntax only; whether
    // the server answers is found out when the crawler is created).
    if (st.o.retry.kind == retry::store_kind::postgresql) {
        if (const std::string why = retry::check_postgres_conninfo(st.o.retry.conninfo); !why.empty())
            return st.fail(options_status::invalid_value, "retry.store.conninfo", why);
    }
    auto& pool = st.o.dht.crawl.pool;
    if (pool.low_watermark > pool.capacity) {
        st.note("crawl.pool.low_watermark: " + std::to_string(pool.low_watermark) + " > crawl.pool.capacity " +
                std::to_string(pool.capacity) + ", using " + std::to_string(pool.capacity));
        pool.low_watermark = pool.capacity;
    }

    // Each target draw is a random walk or a sparse bucket: the two shares must make 100.
    auto& t = st.o.dht.crawl.target;
    const bool walk_given = st.present[index_of("crawl.target.random_walk_percent")];
    const bool sparse_given = st.present[index_of("crawl.target.sparse_bucket_percent")];
    if (t.random_walk_percent + t.sparse_bucket_percent == 100) return true;
    if (walk_given != sparse_given) {
        // One share given: the other is the rest, not the default rescaled with it.
        if (walk_given) {
            t.sparse_bucket_percent = 100 - t.random_walk_percent;
            st.note("crawl.target.sparse_bucket_percent: not given, using 100 - crawl.target.random_walk_percent = " +
                    std::to_string(t.sparse_bucket_percent));
        } else {
            t.random_walk_percent = 100 - t.sparse_bucket_percent;
            st.note("crawl.target.random_walk_percent: not given, using 100 - crawl.target.sparse_bucket_percent = " +
                    std::to_string(t.random_walk_percent));
        }
        return true;
    }
    const unsigned sum = t.random_walk_percent + t.sparse_bucket_percent; // each is <= 100 here
    if (sum == 0)
        return st.fail(options_status::invalid_value, "crawl.target",
                       "random_walk_percent + sparse_bucket_percent is 0; they must sum to 100");
    const unsigned walk = (t.random_walk_percent * 100 + sum / 2) / sum;
    st.note("crawl.target: random_walk_percent " + std::to_string(t.random_walk_percent) + " + sparse_bucket_percent " +
            std::to_string(t.sparse_bucket_percent) + " = " + std::to_string(sum) + ", scaled to " +
            std::to_string(walk) + " + " + std::to_string(100 - walk));
    t.random_walk_percent = walk;
    t.sparse_bucket_percent = 100 - walk;
    return true;
}

// The one pass over the text: it builds the document (nlohmann's DOM builder behind it) and
// reports what that builder alone would hide or accept: the byte position of a syntax error,
// nesting beyond max_options_depth, and repeated keys (nlohmann keeps the last one silently;
// a strict document names each option once).
class checked_reader final : public nlohmann::json_sax<json> {
public:
    options_result result;

    explicit checked_reader(json& doc) : dom_(doc, false) {}

    bool null() override { return element() && dom_.null(); }
    bool boolean(bool v) override { return element() && dom_.boolean(v); }
    bool number_integer(number_integer_t v) override { return element() && dom_.number_integer(v); }
    bool number_unsigned(number_unsigned_t v) override { return element() && dom_.number_unsigned(v); }
    bool number_float(number_float_t v, const string_t& s) override { return element() && dom_.number_float(v, s); }
    bool string(string_t& v) override { return element() && dom_.string(v); }
    bool binary(binary_t& v) override { return element() && dom_.binary(v); }
    bool start_object(std::size_t n) override { return element() && open(true) && dom_.start_object(n); }
    bool key(string_t& k) override {
        frame& f = frames_.back();
        f.key = k;
        if (!f.keys.insert(k).second) return fail(path(), "key repeated in its object");
        return dom_.key(k);
    }
    bool end_object() override {
        frames_.pop_back();
        return dom_.end_object();
    }
    bool start_array(std::size_t n) override { return element() && open(false) && dom_.start_array(n); }
    bool end_array() override {
        frames_.pop_back();
        return dom_.end_array();
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
        std::string what = ex.what();
        // Drop the library's "[json.exception.parse_error.101] " prefix.
        if (const auto close = what.find("] "); !what.empty() && what.front() == '[' && close != std::string::npos)
            what.erase(0, close + 2);
        // It quotes the input around the error, which may be any bytes: keep the message
        // printable ASCII, so every binding can decode it.
        for (char& c : what)
            if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
        result.offset = position;
        fail("", "invalid JSON at byte " + std::to_string(position) + ": " + what);
        return false;
    }

private:
    struct frame {
        bool object = false;
        std::string key;        // objects: the current key
        std::size_t index = 0;  // arrays: the current element
        std::size_t count = 0;  // arrays: elements seen
        std::set<std::string> keys;
    };
    std::vector<frame> frames_;
    nlohmann::detail::json_sax_dom_parser<json> dom_;

    bool element() {
        if (!frames_.empty() && !frames_.back().object) frames_.back().index = frames_.back().count++;
        return true;
    }
    bool open(bool object) {
        if (frames_.size() >= max_options_depth)
            return fail(path(), "nested deeper than " + std::to_string(max_options_depth) + " levels");
        frames_.push_back(frame{});
        frames_.back().object = object;
        return true;
    }
    std::string path() const {
        std::string p;
        for (const auto& f : frames_) {
            if (f.object)
                p = join(p, f.key);
            else
                p += "[" + std::to_string(f.index) + "]";
        }
        return p;
    }
    bool fail(std::string p, std::string what) {
        result.status = options_status::invalid_json;
        result.message = shown_path(p) + ": " + what;
        result.path = std::move(p);
        return false;
    }
};

// The node where `path` lives in `root`, created as nested objects on the way.
json& slot(json& root, std::string_view path) {
    json* at = &root;
    for (;;) {
        const auto dot = path.find('.');
        at = &(*at)[std::string(path.substr(0, dot))];
        if (dot == std::string_view::npos) return *at;
        path.remove_prefix(dot + 1);
    }
}

} // namespace

std::string_view to_string(options_status s) noexcept {
    switch (s) {
    case options_status::ok: return "ok";
    case options_status::invalid_json: return "invalid_json";
    case options_status::unknown_key: return "unknown_key";
    case options_status::wrong_type: return "wrong_type";
    case options_status::invalid_value: return "invalid_value";
    }
    return "unknown";
}

options_result parse_options(std::string_view text, api::crawler_options& out) {
    if (text.size() > max_options_document_bytes) {
        options_result r;
        r.status = options_status::invalid_json;
        r.message = "(document): " + std::to_string(text.size()) + " bytes; at most " +
                    std::to_string(max_options_document_bytes);
        return r;
    }
    json doc;
    {
        checked_reader reader(doc);
        if (!json::sax_parse(text.begin(), text.end(), &reader)) return std::move(reader.result);
    }
    parse_state st;
    if (!doc.is_object()) {
        st.fail(options_status::wrong_type, "", "expected an object");
        return std::move(st.r);
    }
    if (!walk(st, doc, "") || !cross_check(st)) return std::move(st.r);

    // Outgoing metadata TCP leaves from the DHT's v4 address when one is pinned.
    const auto v4 = ip_address::parse(st.o.dht.bind_v4);
    if (v4 && *v4 != ip_address::v4(0u))
        st.o.metadata.bind_v4 = *v4;
    else
        st.o.metadata.bind_v4.reset();
    out = std::move(st.o);
    return std::move(st.r);
}

nlohmann::json to_json(const api::crawler_options& o) {
    O m = o; // the accessors hand out mutable references; read them from a copy
    json root = json::object();
    for (const auto& f : fields) {
        json& at = slot(root, f.path);
        std::visit(
            [&](const auto& ref) {
                using R = std::decay_t<decltype(ref)>;
                if constexpr (std::is_same_v<R, special>) {
                    switch (ref) {
                    case special::netmode:
                        at = o.dht.mode == engine::netmode::ipv6 ? "ipv6"
                             : o.dht.mode == engine::netmode::dual ? "dual"
                                                                   : "ipv4";
                        break;
                    case special::bind_v4: at = o.dht.bind_v4; break;
                    case special::bind_v6: at = o.dht.bind_v6; break;
                    case special::node_id: at = o.dht.node_id ? json(o.dht.node_id->hex()) : json(nullptr); break;
                    case special::sources: at = o.dht.crawl.bootstrap.sources; break;
                    case special::store_kind: at = retry::to_string(o.retry.kind); break;
                    case special::store_path: at = o.retry.path; break;
                    case special::state_file: at = o.dht.crawl.state_file; break;
                    case special::store_conninfo: at = o.retry.conninfo; break;
                    case special::owner_id: at = o.retry.owner_id; break;
                    case special::ladder: at = o.retry.policy.ladder_secs; break;
                    case special::encryption: at = std::string(metadata::to_string(o.metadata.encryption)); break;
                    case special::transports: at = std::string(metadata::to_string(o.metadata.transports)); break;
                    }
                } else {
                    at = ref.at(m);
                }
            },
            f.ref);
    }
    return root;
}

std::string default_options_json() { return to_json(api::crawler_options{}).dump(2); }

} // namespace dhtc::api
