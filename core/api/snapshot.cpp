#include "api/snapshot.hpp"

#include <atomic>
#include <charconv>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string_view>
#include <vector>

#include "api/crawler.hpp"
#include "model/events.hpp"
#include "metadata/peer_session.hpp"

namespace dhtc::stats {
namespace {

using json = nlohmann::json;

std::uint64_t load(const std::atomic<std::uint64_t>& a) noexcept { return a.load(std::memory_order_relaxed); }

const bounded_queue<api::hash_event>& ingress_of(const api::crawler& c) { return c.pipeline().ingress(); }

// ---- Prometheus text exposition 0.0.4 ----

void append_escaped(std::string& out, std::string_view v, bool quote) {
    for (const char ch : v) {
        if (ch == '\\') {
            out += "\\\\";
        } else if (ch == '\n') {
            out += "\\n";
        } else if (quote && ch == '"') {
            out += "\\\"";
        } else {
            out += ch;
        }
    }
}

void append_value(std::string& out, std::uint64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void append_value(std::string& out, double v) {
    if (v != v) {
        out += "NaN";
    } else if (v == std::numeric_limits<double>::infinity()) {
        out += "+Inf";
    } else if (v == -std::numeric_limits<double>::infinity()) {
        out += "-Inf";
    } else {
        // Shortest round-trip form: 0.01 stays "0.01", which matters for `le` labels.
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, v);
        out.append(buf, r.ptr);
    }
}

struct label {
    std::string_view name;  ///< empty: no label
    std::string_view value;
};

// Families in the order first seen; each keeps its series together, as the format requires.
class exposition {
public:
    template <class V>
    void sample(std::string_view family, std::string_view type, std::string_view help, std::string_view suffix,
                std::initializer_list<label> labels, V value) {
        std::string& body = find(family, type, help).body;
        body.append(family).append(suffix);
        bool first = true;
        for (const auto& l : labels) {
            if (l.name.empty()) continue;
            body += first ? '{' : ',';
            first = false;
            body.append(l.name).append("=\"");
            append_escaped(body, l.value, true);
            body += '"';
        }
        if (!first) body += '}';
        body += ' ';
        append_value(body, value);
        body += '\n';
    }

    std::string text() const {
        std::string out;
        for (const auto& f : families_) {
            out.append("# HELP ").append(f.name).append(" ");
            append_escaped(out, f.help, false);
            out.append("\n# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
            out += f.body;
        }
        return out;
    }

private:
    struct family_text {
        std::string name;
        std::string type;
        std::string help;
        std::string body;
    };
    family_text& find(std::string_view name, std::string_view type, std::string_view help) {
        // About a hundred families: a linear scan from the back (the usual hit) is enough.
        for (auto it = families_.rbegin(); it != families_.rend(); ++it) {
            if (it->name == name) return *it;
        }
        families_.push_back({std::string(name), std::string(type), std::string(help), {}});
        return families_.back();
    }

    std::vector<family_text> families_;
};

// ---- one walk, two outputs ----

enum class kind : std::uint8_t { counter, gauge };

using path = std::initializer_list<std::string_view>;

// Writes each metric either into the JSON document (at `path`) or into the exposition
// (as family{label}); a metric with an empty family is JSON-only, one with an empty path
// Prometheus-only.
class collector {
public:
    explicit collector(exposition* prom) : prom_(prom) {}

    template <class V>
    void metric(kind k, path p, std::string_view family, label l, std::string_view help, V value) {
        if (prom_ == nullptr) {
            if (p.size() != 0) put(p, json(value));
        } else if (!family.empty()) {
            prom_->sample(family, k == kind::counter ? "counter" : "gauge", help, "", {l}, value);
        }
    }
    template <class V>
    void counter(path p, std::string_view family, label l, std::string_view help, V value) {
        metric(kind::counter, p, family, l, help, value);
    }
    /// A counter with several labels (a crossed view).
    void counter_by(path p, std::string_view family, std::initializer_list<label> labels, std::string_view help,
                    std::uint64_t value) {
        if (prom_ == nullptr)
            put(p, json(value));
        else
            prom_->sample(family, "counter", help, "", labels, value);
    }
    template <class V>
    void gauge(path p, std::string_view family, label l, std::string_view help, V value) {
        metric(kind::gauge, p, family, l, help, value);
    }
    /// JSON-only value (flags, strings).
    void note(path p, json value) {
        if (prom_ == nullptr) put(p, std::move(value));
    }

    /// `scale` converts the recorded unit to the Prometheus base unit (ms -> s: 1000).
    template <std::size_t N>
    void histogram(std::string_view key, std::string_view unit, std::string_view family, std::string_view help,
                   double scale, const stats::histogram<N>& h) {
        std::array<std::uint64_t, N> counts{};
        for (std::size_t i = 0; i < N; ++i) counts[i] = h.count(i);
        const std::uint64_t overflow = h.overflow();
        const std::uint64_t sum = h.sum();
        if (prom_ == nullptr) {
            json j = histogram_json(h.bounds(), counts, overflow, sum);
            j["unit"] = unit;
            put({"histograms", key}, std::move(j));
            return;
        }
        // Cumulative buckets and _count from the same loads, so +Inf always equals _count.
        std::uint64_t cumulative = 0;
        std::string le;
        for (std::size_t i = 0; i < N; ++i) {
            cumulative += counts[i];
            le.clear();
            append_value(le, static_cast<double>(h.bounds()[i]) / scale);
            prom_->sample(family, "histogram", help, "_bucket", {{"le", le}}, cumulative);
        }
        cumulative += overflow;
        prom_->sample(family, "histogram", help, "_bucket", {{"le", "+Inf"}}, cumulative);
        prom_->sample(family, "histogram", help, "_sum", {}, static_cast<double>(sum) / scale);
        prom_->sample(family, "histogram", help, "_count", {}, cumulative);
    }

    json doc = json::object();

private:
    void put(path p, json value) {
        json* at = &doc;
        for (const auto seg : p) at = &(*at)[std::string(seg)];
        *at = std::move(value);
    }

    exposition* prom_;
};

// A counter struct's fields: JSON key in its section, Prometheus family and label, help.
template <class S>
struct field {
    std::string_view key;
    std::atomic<std::uint64_t> S::*member;
    kind k;
    std::string_view family;
    label l;
    std::string_view help;
};

template <class S, std::size_t N>
void emit(collector& out, std::string_view section, const S& s, const field<S> (&fields)[N]) {
    for (const auto& f : fields) out.metric(f.k, {section, f.key}, f.family, f.l, f.help, load(s.*f.member));
}

constexpr auto C = kind::counter;
constexpr auto G = kind::gauge;

using udp = net::udp_counters;
constexpr field<udp> udp_fields[] = {
    {"rx_packets", &udp::rx_packets, C, "dhtc_udp_rx_packets_total", {}, "UDP datagrams received."},
    {"rx_bytes", &udp::rx_bytes, C, "dhtc_udp_rx_bytes_total", {},
     "UDP payload bytes received, at each datagram's real length (dropped ones included)."},
    {"rx_oversize", &udp::rx_oversize, C, "dhtc_udp_rx_oversize_total", {},
     "Datagrams longer than the 1500-byte limit, dropped unread."},
    {"rx_truncated", &udp::rx_truncated, C, "dhtc_udp_rx_truncated_total", {},
     "Datagrams longer than the receive buffer (cut short by the kernel; counted in rx_oversize too)."},
    {"tx_packets", &udp::tx_packets, C, "dhtc_udp_tx_packets_total", {}, "UDP datagrams sent."},
    {"tx_bytes", &udp::tx_bytes, C, "dhtc_udp_tx_bytes_total", {}, "UDP payload bytes sent."},
    {"tx_dropped", &udp::tx_dropped, C, "dhtc_udp_tx_dropped_total", {},
     "Datagrams dropped before sending: send queue full or socket refused."},
    {"tx_errors", &udp::tx_errors, C, "dhtc_udp_tx_errors_total", {}, "Datagrams the kernel refused to send."},
    {"rx_calls", &udp::rx_calls, C, "dhtc_udp_rx_calls_total", {}, "recvmmsg system calls (up to 32 datagrams each)."},
    {"tx_calls", &udp::tx_calls, C, "dhtc_udp_tx_calls_total", {}, "sendmmsg system calls (up to 32 datagrams each)."},
    {"rx_waits", &udp::rx_waits, C, "dhtc_udp_rx_waits_total", {},
     "Times the socket was found empty and the network thread waited for readability (an epoll wait each)."},
    {"rx_yields", &udp::rx_yields, C, "dhtc_udp_rx_yields_total", {},
     "Times the socket was still not empty after a bounded drain and other work went first."},
};

using node = dht::node_counters;
constexpr field<node> node_fields[] = {
    {"rx_bad_bencode", &node::rx_bad_bencode, C, "dhtc_dht_rx_bad_bencode_total", {},
     "Datagrams that are not decodable bencode within the packet limits."},
    {"rx_bad_krpc", &node::rx_bad_krpc, C, "dhtc_dht_rx_bad_krpc_total", {},
     "Decodable datagrams that are not valid KRPC messages."},
    {"rx_queries", &node::rx_queries, C, "dhtc_dht_rx_queries_total", {}, "KRPC queries received."},
    {"rx_replies", &node::rx_replies, C, "dhtc_dht_rx_replies_total", {},
     "KRPC responses and errors received for our transactions."},
    {"replies_sent", &node::replies_sent, C, "dhtc_dht_replies_sent_total", {}, "Answers sent to queries."},
    {"replies_over_budget", &node::replies_over_budget, C, "dhtc_dht_replies_over_budget_total", {},
     "Answers not sent because a response budget refused them."},
    {"replies_send_failed", &node::replies_send_failed, C, "dhtc_dht_replies_send_failed_total", {},
     "Answers the transport refused."},
    {"foreign_transactions", &node::foreign_transactions, C, "dhtc_dht_foreign_transactions_total", {},
     "Replies whose transaction id we can never have issued."},
    {"reply_queue_dropped", &node::reply_queue_dropped, C, "dhtc_dht_reply_queue_dropped_total", {},
     "Always 0: replies reach the crawl actor as they arrive, through no queue (kept for stable names)."},
};

using resp = dht::responder_counters;
constexpr std::string_view queries_help = "Queries answered, by method.";
constexpr field<resp> responder_fields[] = {
    {"ping", &resp::ping, C, "dhtc_dht_queries_total", {"method", "ping"}, queries_help},
    {"find_node", &resp::find_node, C, "dhtc_dht_queries_total", {"method", "find_node"}, queries_help},
    {"get_peers", &resp::get_peers, C, "dhtc_dht_queries_total", {"method", "get_peers"}, queries_help},
    {"announce_peer", &resp::announce_peer, C, "dhtc_dht_queries_total", {"method", "announce_peer"}, queries_help},
    {"sample_infohashes", &resp::sample_infohashes, C, "dhtc_dht_queries_total", {"method", "sample_infohashes"},
     queries_help},
    {"unknown_answered", &resp::unknown_answered, C, "dhtc_dht_queries_unknown_answered_total", {},
     "Queries of an unknown method answered like find_node."},
    {"unknown_refused", &resp::unknown_refused, C, "dhtc_dht_queries_unknown_refused_total", {},
     "Queries of an unknown method answered with error 204."},
    {"malformed", &resp::malformed, C, "dhtc_dht_queries_malformed_total", {},
     "Malformed queries answered with error 203."},
    {"bad_token", &resp::bad_token, C, "dhtc_dht_queries_bad_token_total", {},
     "announce_peer queries refused: token missing, expired or foreign."},
    {"own_id", &resp::own_id, C, "dhtc_dht_queries_own_id_total", {}, "Queries carrying our own node id, ignored."},
    {"bootstrap_lookups", &resp::bootstrap_lookups, C, "dhtc_dht_bootstrap_lookups_total", {},
     "libtorrent bootstrap-lookup hashes kept from fetching."},
};

using cs = crawl::crawl_stats;
constexpr std::string_view crawl_queries_help = "Queries the crawl actor sent, by kind.";
constexpr std::string_view crawl_refused_help = "Crawl destinations refused, by reason.";
constexpr field<cs> crawl_fields[] = {
    {"pool_size", &cs::pool_size, G, "dhtc_crawl_pool_size", {}, "Nodes in the crawl pool."},
    {"pool_capacity", &cs::pool_capacity, G, "dhtc_crawl_pool_capacity", {}, "Capacity of the crawl pool."},
    {"responsive_size", &cs::responsive_size, G, "dhtc_crawl_responsive_size", {},
     "Nodes in the responsive ring."},
    {"in_flight", &cs::in_flight, G, "dhtc_crawl_in_flight", {}, "Crawl queries awaiting a reply."},
    {"queries_find_node", &cs::queries_find_node, C, "dhtc_crawl_queries_total", {"kind", "find_node"},
     crawl_queries_help},
    {"queries_bootstrap", &cs::queries_bootstrap, C, "dhtc_crawl_queries_total", {"kind", "bootstrap"},
     crawl_queries_help},
    {"queries_sample", &cs::queries_sample, C, "dhtc_crawl_queries_total", {"kind", "sample"}, crawl_queries_help},
    {"queries_get_peers", &cs::queries_get_peers, C, "dhtc_crawl_queries_total", {"kind", "get_peers"},
     crawl_queries_help},
    {"queries_ping", &cs::queries_ping, C, "dhtc_crawl_queries_total", {"kind", "ping"}, crawl_queries_help},
    {"replies", &cs::replies, C, "dhtc_crawl_replies_total", {}, "Valid replies to our queries."},
    {"reply_errors", &cs::reply_errors, C, "dhtc_crawl_reply_errors_total", {}, "KRPC error replies to our queries."},
    {"reply_malformed", &cs::reply_malformed, C, "dhtc_crawl_reply_malformed_total", {},
     "Replies to our queries that did not parse."},
    {"reply_unmatched", &cs::reply_unmatched, C, "dhtc_crawl_reply_unmatched_total", {},
     "Replies with an unknown or stale transaction or a wrong source, dropped."},
    {"reply_own_id", &cs::reply_own_id, C, "dhtc_crawl_reply_own_id_total", {},
     "Replies claiming our own node id, dropped."},
    {"timeouts", &cs::timeouts, C, "dhtc_crawl_timeouts_total", {}, "Crawl queries that timed out."},
    {"send_failed", &cs::send_failed, C, "dhtc_crawl_send_failed_total", {},
     "Query datagrams the transport refused."},
    {"rate_limited_turns", &cs::rate_limited_turns, C, "dhtc_crawl_rate_limited_turns_total", {},
     "Actor turns that ended on an empty query budget."},
    {"refused_new_destination", &cs::refused_new_destination, C, "dhtc_crawl_refused_total",
     {"reason", "new_destination"}, crawl_refused_help},
    {"refused_subnet", &cs::refused_subnet, C, "dhtc_crawl_refused_total", {"reason", "subnet"}, crawl_refused_help},
    {"refused_in_flight", &cs::refused_in_flight, C, "dhtc_crawl_refused_total", {"reason", "in_flight"},
     crawl_refused_help},
    {"refused_policy", &cs::refused_policy, C, "dhtc_crawl_refused_total", {"reason", "policy"}, crawl_refused_help},
    {"deferred_destination", &cs::deferred_destination, C, "dhtc_crawl_deferred_destination_total", {},
     "Queries parked until their node's or IP's destination budget (or a full source table) let them go."},
    // Exported scaled: dhtc_crawl_deferred_destination_seconds_total, see walk().
    {"deferred_micros", &cs::deferred_micros, C, "", {}, ""},
    {"parked_size", &cs::parked_size, G, "dhtc_crawl_parked_size", {},
     "find_node candidates parked until a budget lets them go."},
    {"skipped_backoff", &cs::skipped_backoff, C, "dhtc_crawl_refused_total", {"reason", "backoff"}, crawl_refused_help},
    {"pool_querier_size", &cs::pool_querier_size, G, "dhtc_crawl_pool_querier_size", {},
     "Pooled nodes learned only from their queries to us."},
    {"querier_share_full", &cs::querier_share_full, C, "dhtc_crawl_querier_refused_total", {"reason", "share_full"},
     "Queriers kept out of the pool, by reason."},
    {"querier_over_rate", &cs::querier_over_rate, C, "dhtc_crawl_querier_refused_total", {"reason", "rate"},
     "Queriers kept out of the pool, by reason."},
    {"skipped_recent", &cs::skipped_recent, C, "dhtc_crawl_skipped_recent_total", {},
     "Nodes not queued again because they were probed recently."},
    {"skipped_zero_id", &cs::skipped_zero_id, C, "dhtc_crawl_skipped_zero_id_total", {},
     "Nodes skipped for an all-zero node id."},
    {"pool_accepted", &cs::pool_accepted, C, "dhtc_crawl_pool_accepted_total", {}, "Nodes added to the pool."},
    {"pool_replaced", &cs::pool_replaced, C, "dhtc_crawl_pool_replaced_total", {},
     "Pool entries replaced by newer nodes."},
    {"pool_duplicate", &cs::pool_duplicate, C, "dhtc_crawl_pool_duplicate_total", {},
     "Nodes refused by the pool as duplicates."},
    {"pool_bogon", &cs::pool_bogon, C, "dhtc_crawl_pool_bogon_total", {},
     "Nodes refused by the pool for an invalid address."},
    {"pool_over_budget", &cs::pool_over_budget, C, "dhtc_crawl_pool_over_budget_total", {},
     "Replacements refused by the replacement budget."},
    {"pool_family_full", &cs::pool_family_full, C, "dhtc_crawl_pool_family_full_total", {},
     "Nodes refused because their address family's share of the pool was full."},
    {"samples_received", &cs::samples_received, C, "dhtc_crawl_samples_received_total", {},
     "Info hashes received in sample_infohashes replies."},
    {"sample_retries", &cs::sample_retries, C, "dhtc_crawl_sample_retries_total", {},
     "sample_infohashes sent again after a timeout (crawl.bep51.sample_retries)."},
    {"sample_retry_answers", &cs::sample_retry_answers, C, "dhtc_crawl_sample_retry_answers_total", {},
     "Retried sample_infohashes that were answered."},
    {"sample_retry_hashes", &cs::sample_retry_hashes, C, "dhtc_crawl_sample_retry_hashes_total", {},
     "Info hashes that answers to retried samples queued for a lookup (what the retries saved)."},
    {"sample_schedule_dropped", &cs::sample_schedule_dropped, C, "dhtc_crawl_sample_schedule_dropped_total", {},
     "sample_infohashes revisits dropped because the schedule was full."},
    {"samples_remembered", &cs::samples_remembered, C, "dhtc_crawl_samples_remembered_total", {},
     "Sampled nodes whose next turn is hours away, remembered outside the sample schedule."},
    {"sample_skipped_remembered", &cs::sample_skipped_remembered, C, "dhtc_crawl_sample_skipped_remembered_total", {},
     "Nodes met again before their sample interval passed, not asked."},
    {"lookups_started", &cs::lookups_started, C, "dhtc_crawl_lookups_started_total", {},
     "get_peers lookups started for sampled hashes."},
    {"lookups_dropped", &cs::lookups_dropped, C, "dhtc_crawl_lookups_dropped_total", {},
     "Lookups dropped because the lookup table was full."},
    {"lookup_peers", &cs::lookup_peers, C, "dhtc_crawl_lookup_peers_total", {}, "Peers found for sampled hashes."},
    {"holder_retries", &cs::holder_retries, C, "dhtc_crawl_holder_retries_total", {},
     "get_peers sent again to a hash's holder after a timeout (crawl.bep51.holder_retries)."},
    {"holder_retry_answers", &cs::holder_retry_answers, C, "dhtc_crawl_holder_retry_answers_total", {},
     "Retried get_peers to holders that were answered."},
    {"holder_retry_peers", &cs::holder_retry_peers, C, "dhtc_crawl_holder_retry_peers_total", {},
     "Peers found by answers to retried get_peers (what the retries saved)."},
    {"lookup_retries", &cs::lookup_retries, C, "dhtc_crawl_lookup_retries_total", {},
     "Lookups that ended on timeouts alone, run again (crawl.bep51.lookup_retries)."},
    {"lookup_retries_found", &cs::lookup_retries_found, C, "dhtc_crawl_lookup_retries_found_total", {},
     "Lookups run again after timeouts alone that found peers (what the retries saved)."},
    {"retry_lookups", &cs::retry_lookups, C, "dhtc_crawl_retry_lookups_total", {},
     "get_peers lookups queued for retries that came due without peers."},
    {"queries_scrape", &cs::queries_scrape, C, "dhtc_crawl_queries_scrape_total", {},
     "get_peers queries with scrape=1 sent (BEP-33)."},
    {"lookup_holders_added", &cs::lookup_holders_added, C, "dhtc_crawl_lookup_holders_added_total", {},
     "Nodes added as holders of a hash already waiting for its lookup (another node sampled it)."},
    {"scrapes_started", &cs::scrapes_started, C, "dhtc_crawl_scrapes_started_total", {}, "Scrapes started."},
    {"scrapes_completed", &cs::scrapes_completed, C, "dhtc_crawl_scrapes_completed_total", {},
     "Scrapes ended (each answered with a scrape event)."},
    {"scrapes_timed_out", &cs::scrapes_timed_out, C, "dhtc_crawl_scrapes_timed_out_total", {},
     "Scrapes ended by crawl.scrape.timeout_secs: no node to ask, or answers missing (also in completed)."},
    {"scrapes_dropped", &cs::scrapes_dropped, C, "dhtc_crawl_scrapes_dropped_total", {},
     "Scrape requests refused because the scrape queue was full."},
    {"bootstrap_rounds", &cs::bootstrap_rounds, C, "dhtc_crawl_bootstrap_rounds_total", {}, "Bootstrap rounds run."},
    {"discoveries_dropped", &cs::discoveries_dropped, C, "dhtc_crawl_discoveries_dropped_total", {},
     "Discovered nodes dropped because the discovery queue was full."},
    {"replies_dropped", &cs::replies_dropped, C, "dhtc_crawl_replies_dropped_total", {},
     "Always 0: replies reach the crawl actor as they arrive, through no queue (kept for stable names)."},
    // Exported scaled: dhtc_crawl_query_rate (queries per second), see walk().
    {"query_rate_millis", &cs::query_rate_millis, G, "", {}, ""},
};

using pc = metadata::pipeline_counters;
constexpr field<pc> pipeline_fields[] = {
    {"hashes_in", &pc::hashes_in, C, "dhtc_metadata_hashes_in_total", {}, "Hash events taken from the ingress."},
    {"already_delivered", &pc::already_delivered, C, "dhtc_metadata_already_delivered_total", {},
     "Hashes skipped: delivered within the filter period."},
    {"merged_in_flight", &pc::merged_in_flight, C, "dhtc_metadata_merged_in_flight_total", {},
     "Peers that joined a fetch job already running."},
    {"pending_refused", &pc::pending_refused, C, "dhtc_metadata_pending_refused_total", {},
     "Hash events the pending queue refused: stale, expired or full."},
    {"gate_rejected", &pc::gate_rejected, C, "dhtc_metadata_gate_rejected_total", {},
     "Hashes the application's gate rejected."},
    {"gate_timeouts", &pc::gate_timeouts, C, "dhtc_metadata_gate_timeouts_total", {},
     "Gate requests unanswered in time (the default applied)."},
    {"jobs_started", &pc::jobs_started, C, "dhtc_metadata_jobs_started_total", {}, "Fetch rounds started."},
    {"attempts", &pc::attempts, C, "dhtc_metadata_attempts_total", {}, "Real peer attempts."},
    {"failure_cache_hits", &pc::failure_cache_hits, C, "dhtc_metadata_failure_cache_hits_total", {},
     "Peers skipped because the failure cache holds them."},
    {"second_chance_fetches", &pc::second_chance_fetches, C, "dhtc_metadata_second_chance_fetches_total", {},
     "Torrents served by a peer on its second chance after a first timeout (metadata.first_timeout_ttl_secs)."},
    {"crowded_refusals", &pc::crowded_refusals, C, "dhtc_metadata_crowded_refusals_total", {},
     "Peer sessions refused while another session of ours to the peer was open or had closed within 3 s: "
     "asked again, not held against the peer."},
    {"crowded_saves", &pc::crowded_saves, C, "dhtc_metadata_crowded_saves_total", {},
     "Torrents delivered by rounds that had such a refusal."},
    {"deadline_extensions", &pc::deadline_extensions, C, "dhtc_metadata_deadline_extensions_total", {},
     "Peer sessions whose measured round trip pushed their deadline back (at most to twice metadata.timeout_secs)."},
    {"deadline_extension_saves", &pc::deadline_extension_saves, C, "dhtc_metadata_deadline_extension_saves_total", {},
     "Peer sessions that succeeded after their first deadline, thanks to the extension."},
    {"dht_rtt_extensions", &pc::dht_rtt_extensions, C, "dhtc_metadata_dht_rtt_extensions_total", {},
     "Peer sessions whose deadline or uTP SYN wait the DHT's round trip to the peer lengthened before the connect."},
    {"dht_rtt_saves", &pc::dht_rtt_saves, C, "dhtc_metadata_dht_rtt_saves_total", {},
     "Of those, sessions that succeeded after the unscaled deadline or connected over uTP after the unscaled SYN wait."},
    {"refetches", &pc::refetches, C, "dhtc_metadata_refetches_total", {},
     "Multi-peer downloads that failed verification and were fetched again from one peer."},
    {"duplicates", &pc::duplicates, C, "dhtc_metadata_duplicates_total", {},
     "Hybrid torrents already delivered under their other key."},
    {"sink_failures", &pc::sink_failures, C, "dhtc_metadata_sink_failures_total", {},
     "Torrents the application could not store (answered retry); fetched again later."},
    {"bytes_fetched", &pc::bytes_fetched, C, "dhtc_metadata_bytes_fetched_total", {},
     "Verified metadata bytes fetched."},
    {"memory_held", &pc::memory_held, G, "dhtc_metadata_memory_held_bytes", {},
     "Metadata bytes charged to the in-flight budget now (leased and received pieces)."},
    {"memory_refused", &pc::memory_refused, C, "dhtc_metadata_memory_refused_total", {},
     "Piece requests held back because the in-flight budget was spent."},
    {"memory_refused_bytes", &pc::memory_refused_bytes, C, "dhtc_metadata_memory_refused_bytes_total", {},
     "Bytes of the piece requests held back by the in-flight budget."},
    {"memory_starved", &pc::memory_starved, C, "dhtc_metadata_memory_starved_total", {},
     "Peer attempts that ran out of time waiting for the in-flight budget (counted as size_limit)."},
    {"in_flight", &pc::in_flight, G, "dhtc_metadata_in_flight", {}, "Fetch jobs running."},
    {"pending", &pc::pending, G, "dhtc_metadata_pending", {}, "Hashes waiting in the pending queue."},
    {"store_done", &pc::store_done, C, "dhtc_metadata_store_done_total", {},
     "Hashes skipped because the retry store knows them as delivered."},
    {"store_busy", &pc::store_busy, C, "dhtc_metadata_store_busy_total", {},
     "Hashes skipped because their lease is held elsewhere (or the claim went unanswered)."},
    {"store_deferred", &pc::store_deferred, C, "dhtc_metadata_store_deferred_total", {},
     "Sightings of dormant hashes not yet due (reactivated instead of fetched)."},
    {"retry_rounds", &pc::retry_rounds, C, "dhtc_metadata_retry_rounds_total", {},
     "Rounds started for due hashes leased from the retry store."},
    {"retry_lookups", &pc::retry_lookups, C, "dhtc_metadata_retry_lookups_total", {},
     "Retries that came due without peers (a get_peers lookup was asked for)."},
    {"retries_in_flight", &pc::retries_in_flight, G, "dhtc_metadata_retries_in_flight", {},
     "Retry rounds running (bounded by retry.budget_share)."},
};

using rc = retry::scheduler_counters;
constexpr field<rc> retry_fields[] = {
    {"claims", &rc::claims, C, "dhtc_retry_claims_total", {}, "Claims answered by the retry store."},
    {"observations", &rc::observations, C, "dhtc_retry_observations_total", {},
     "Observations (get_peers, samples) checked against dormant hashes."},
    {"reactivated", &rc::reactivated, C, "dhtc_retry_reactivated_total", {},
     "Dormant hashes moved closer by a fresh observation."},
    {"failures_recorded", &rc::failures_recorded, C, "dhtc_retry_failures_recorded_total", {},
     "Failed rounds recorded (the hash went dormant)."},
    {"done_recorded", &rc::done_recorded, C, "dhtc_retry_done_recorded_total", {}, "Delivered hashes recorded as done."},
    {"released", &rc::released, C, "dhtc_retry_released_total", {},
     "Leases given back without an attempt (cancelled rounds, gate refusals)."},
    {"leased", &rc::leased, C, "dhtc_retry_leased_total", {}, "Due hashes leased to this crawler."},
    {"leases_expired", &rc::leases_expired, C, "dhtc_retry_leases_expired_total", {},
     "Expired leases recovered (of any crawler)."},
    {"transactions", &rc::transactions, C, "dhtc_retry_transactions_total", {}, "Store transactions committed."},
    {"store_errors", &rc::store_errors, C, "dhtc_retry_store_errors_total", {},
     "Store operations that failed (rolled back)."},
    {"requests_dropped", &rc::requests_dropped, C, "dhtc_retry_requests_dropped_total", {},
     "Claims and outcomes refused by the store thread's full queue."},
    {"observations_dropped", &rc::observations_dropped, C, "dhtc_retry_observations_dropped_total", {},
     "Observations refused by the store thread's full queue."},
    {"due_dropped", &rc::due_dropped, C, "dhtc_retry_due_dropped_total", {},
     "Leased hashes the pipeline's due queue refused (their leases expire)."},
    {"lease_query_micros", &rc::lease_query_micros, G, "dhtc_retry_lease_query_microseconds", {},
     "Duration of the latest query for due work."},
    {"database_bytes", &rc::database_bytes, G, "dhtc_retry_database_bytes", {},
     "Size of the retry store (SQLite file pages, or the PostgreSQL table with its indexes)."},
};

using dc = api::delivery_counters;
constexpr field<dc> delivery_fields[] = {
    {"gates", &dc::gates, C, "dhtc_delivery_gates_total", {}, "Gate callbacks run."},
    {"torrents", &dc::torrents, C, "dhtc_delivery_torrents_total", {}, "Torrent callbacks run."},
    {"completions", &dc::completions, C, "dhtc_delivery_completions_total", {}, "Completion callbacks run."},
    {"observations", &dc::observations, C, "dhtc_delivery_observations_total", {}, "Observation callbacks run."},
    {"observations_dropped", &dc::observations_dropped, C, "dhtc_delivery_observations_dropped_total", {},
     "Observations dropped because their lane was full."},
    {"errors_dropped", &dc::errors_dropped, C, "dhtc_delivery_errors_dropped_total", {},
     "Error messages dropped because the main lane was full."},
    {"callback_exceptions", &dc::callback_exceptions, C, "dhtc_delivery_callback_exceptions_total", {},
     "Exceptions thrown by application callbacks (caught)."},
    {"retry_events", &dc::retry_events, C, "dhtc_delivery_retry_events_total", {}, "Retry events delivered."},
    {"retry_events_dropped", &dc::retry_events_dropped, C, "dhtc_delivery_retry_events_dropped_total", {},
     "Retry events dropped because the main lane was full."},
    {"scrapes", &dc::scrapes, C, "dhtc_delivery_scrapes_total", {}, "Scrape events delivered."},
    {"scrapes_dropped", &dc::scrapes_dropped, C, "dhtc_delivery_scrapes_dropped_total", {},
     "Scrape events dropped because the main lane was full."},
    {"polled", &dc::polled, C, "dhtc_delivery_polled_total", {}, "Events taken by polling."},
    {"answers_timed_out", &dc::answers_timed_out, C, "dhtc_delivery_answers_timed_out_total", {},
     "Polled gates and torrents not answered in time (their defaults applied)."},
};

void walk(const api::crawler& c, collector& out) {
    const auto& dht = c.dht();
    const auto& svc = dht.service();
    const auto& pipe = c.pipeline();
    const auto& ingress = ingress_of(c);

    // UDP: per family, and summed (the sum is JSON-only: PromQL sums by itself).
    const net::udp_counters* fam[2] = {dht.udp_counters(false), dht.udp_counters(true)};
    const std::string_view fam_name[2] = {"v4", "v6"};
    for (int i = 0; i < 2; ++i) out.note({"udp", fam_name[i], "bound"}, fam[i] != nullptr);
    std::uint64_t udp_tx_dropped = 0;
    std::uint64_t udp_rx_oversize = 0;
    for (const auto& f : udp_fields) {
        std::uint64_t total = 0;
        for (int i = 0; i < 2; ++i) {
            const std::uint64_t v = fam[i] ? load(fam[i]->*f.member) : 0;
            total += v;
            // Only bound families get series: a v6 line stuck at zero on a v4-only crawler is noise.
            out.counter({"udp", fam_name[i], f.key}, fam[i] ? f.family : std::string_view{}, {"family", fam_name[i]},
                        f.help, v);
        }
        out.counter({"udp", f.key}, "", {}, "", total);
        if (f.member == &udp::tx_dropped) udp_tx_dropped = total;
        if (f.member == &udp::rx_oversize) udp_rx_oversize = total;
    }

    // DHT: the receive path, the answering path and the response budgets.
    const auto& nc = svc.node_counters();
    emit(out, "dht", nc, node_fields);
    emit(out, "dht", svc.responder_counters(), responder_fields);
    // Not atomics (dht::response_budget belongs to the network thread); see docs/metrics.md.
    const auto& budget = svc.response_budget();
    constexpr std::string_view budget_help = "Answers refused by a response budget, by budget.";
    out.counter({"dht", "budget_refused_source"}, "dhtc_dht_budget_refused_total", {"budget", "source"}, budget_help,
                budget.refused_source());
    out.counter({"dht", "budget_refused_packets"}, "dhtc_dht_budget_refused_total", {"budget", "packets"},
                budget_help, budget.refused_packets());
    out.counter({"dht", "budget_refused_bytes"}, "dhtc_dht_budget_refused_total", {"budget", "bytes"}, budget_help,
                budget.refused_bytes());
    out.counter({"dht", "budget_refused_destination"}, "dhtc_dht_budget_refused_total", {"budget", "destination"},
                budget_help, budget.refused_destination());
    out.counter({"dht", "budget_refused_ip"}, "dhtc_dht_budget_refused_total", {"budget", "ip"}, budget_help,
                budget.refused_ip());
    out.counter({"dht", "trusted_reserve_used"}, "dhtc_dht_trusted_reserve_used_total", {},
                "Answers to trusted sources that only their reserved share could pay for.",
                budget.trusted_reserve_used());
    // The per-node and per-IP table shared by answers and queries (relaxed counters).
    const auto& src = svc.sources().stats();
    constexpr std::string_view sources_help = "Per-node and per-IP source table events, by event.";
    const std::pair<std::string_view, std::uint64_t> source_events[] = {
        {"table_full", src.refused_table_full},
        {"node_table_full", src.refused_node_table_full},
        {"evictions", src.evictions},
        {"lossy_evictions", src.lossy_evictions},
        {"trusted_evictions", src.trusted_evictions},
        {"node_evictions", src.node_evictions},
        {"node_rebinds", src.node_rebinds},
        {"backoffs_rate_limited", src.backoffs_rate_limited},
        {"backoffs_silence", src.backoffs_silence},
        {"query_over_destination", src.refused_query_destination},
        {"query_over_ip", src.refused_query_ip},
        {"query_backoff", src.refused_query_backoff},
        {"rtt_samples", src.rtt_samples},
        {"rtt_lookups", src.rtt_lookups},
        {"rtt_known", src.rtt_known},
    };
    for (const auto& [event, value] : source_events)
        out.counter({"dht", "sources", event}, "dhtc_dht_sources_total", {"event", event}, sources_help, value);
    out.gauge({"dht", "sources", "size"}, "dhtc_dht_sources_size", {}, "IPs tracked by the source table.",
              static_cast<double>(svc.sources().size()));
    out.gauge({"dht", "sources", "nodes"}, "dhtc_dht_sources_nodes", {}, "Nodes tracked by the source table.",
              static_cast<double>(svc.sources().node_count()));
    out.counter({"dht", "announces_refused_by_policy"}, "dhtc_dht_announces_refused_by_policy_total", {},
                "Announces dropped because the announced peer failed the address policy.",
                svc.announces_refused_by_policy());
    out.counter({"dht", "announce_observations_dropped"}, "dhtc_dht_announce_observations_dropped_total", {},
                "Announces not reported as observations: over announce_observations_per_sec.",
                svc.announce_observations_dropped());

    // Crawl actor.
    const auto& cst = svc.crawl_stats();
    emit(out, "crawl", cst, crawl_fields);
    out.gauge({}, "dhtc_crawl_query_rate", {}, "Current crawl query rate limit (queries per second), after pressure.",
              static_cast<double>(load(cst.query_rate_millis)) / 1000.0);
    out.counter({}, "dhtc_crawl_deferred_destination_seconds_total", {},
                "Seconds the parked queries waited for their destination budgets, together.",
                static_cast<double>(load(cst.deferred_micros)) / 1e6);

    // Metadata pipeline.
    const auto& pcn = pipe.counters();
    emit(out, "metadata", pcn, pipeline_fields);
    for (std::size_t i = 0; i < api::failure_class_count; ++i) {
        const auto name = api::to_string(static_cast<api::failure_class>(i));
        out.counter({"metadata", "attempt_failures", name}, "dhtc_metadata_attempt_failures_total", {"class", name},
                    "Failed peer attempts, by failure class.", load(pcn.attempt_failures[i]));
    }
    // Session tries by one dimension's mode (encryption: plaintext/mse; transport: tcp/utp).
    const auto tries_by_mode = [&](std::string_view group, std::string_view what, std::string_view mode, const auto& tries,
                                   const auto& successes, const auto& failures) {
        const std::string metric = "dhtc_metadata_" + std::string(group);
        out.counter({"metadata", group, mode, "tries"}, metric + "_tries_total", {"mode", mode},
                    "Peer session tries, by " + std::string(what) + ".", load(tries));
        out.counter({"metadata", group, mode, "successes"}, metric + "_successes_total", {"mode", mode},
                    "Peer session tries that completed the metadata, by " + std::string(what) + ".", load(successes));
        out.counter({"metadata", group, mode, "failures"}, metric + "_failures_total", {"mode", mode},
                    "Peer session tries that failed, by " + std::string(what) + ".", load(failures));
    };
    for (std::size_t i = 0; i < pcn.encryption_tries.size(); ++i)
        tries_by_mode("encryption", "stream mode (plaintext or MSE)", i == 0 ? "plaintext" : "mse", pcn.encryption_tries[i],
                      pcn.encryption_successes[i], pcn.encryption_failures[i]);
    for (std::size_t i = 0; i < pcn.transport_tries.size(); ++i)
        tries_by_mode("transport", "transport (TCP or uTP)", i == 0 ? "tcp" : "utp", pcn.transport_tries[i],
                      pcn.transport_successes[i], pcn.transport_failures[i]);
    // The same tries crossed, transport x encryption: what the real network's mix is.
    for (std::size_t t = 0; t < api::stream_transport_count; ++t) {
        const auto tr = api::to_string(static_cast<api::stream_transport>(t));
        constexpr std::string_view modes[] = {"plaintext", "mse"};
        for (std::size_t m = 0; m < std::size(modes); ++m) {
            out.counter_by({"metadata", "sessions", tr, "tries", modes[m]}, "dhtc_metadata_session_tries_total",
                           {{"transport", tr}, {"encryption", modes[m]}},
                           "Peer session tries, by transport and the encryption tried (plaintext or MSE).",
                           load(pcn.session_tries[t][m]));
            for (const auto cls : metadata::session_failure_classes) {
                const auto name = api::to_string(cls);
                out.counter_by({"metadata", "sessions", tr, "failures", modes[m], name},
                               "dhtc_metadata_session_failures_total",
                               {{"transport", tr}, {"encryption", modes[m]}, {"class", name}},
                               "Peer session tries that failed, by transport, the encryption tried and failure class.",
                               load(pcn.session_failures[t][m][static_cast<std::size_t>(cls)]));
            }
        }
        constexpr std::string_view streams[] = {"plaintext", "mse_plaintext", "mse_rc4"};
        for (std::size_t s = 0; s < std::size(streams); ++s)
            out.counter_by({"metadata", "sessions", tr, "successes", streams[s]}, "dhtc_metadata_session_successes_total",
                           {{"transport", tr}, {"encryption", streams[s]}},
                           "Peer session tries that completed the metadata, by transport and the stream that served "
                           "(plaintext, MSE with plaintext selected, MSE with RC4).",
                           load(pcn.session_successes[t][s]));
    }
    out.counter({"metadata", "transport", "fallbacks"}, "dhtc_metadata_transport_fallbacks_total", {},
                "Sessions that fell back from TCP to uTP after a failed try.", load(pcn.transport_fallbacks));
    out.counter({"metadata", "encryption", "fallbacks"}, "dhtc_metadata_encryption_fallbacks_total", {},
                "Sessions that fell back to the other mode after a failed first try.", load(pcn.encryption_fallbacks));
    out.counter({"metadata", "encryption", "mse_failures"}, "dhtc_metadata_encryption_mse_failures_total", {},
                "Sessions whose last try's MSE exchange failed on the protocol (counted as encryption_failed).",
                load(pcn.mse_failures));
    out.counter({"metadata", "encryption", "rc4_sessions"}, "dhtc_metadata_encryption_rc4_sessions_total", {},
                "Successful sessions whose peer selected RC4.", load(pcn.rc4_sessions));
    for (std::size_t i = 0; i < pcn.outcomes.size(); ++i) {
        const auto name = api::to_string(static_cast<api::outcome>(i));
        out.counter({"metadata", "outcomes", name}, "dhtc_metadata_outcomes_total", {"outcome", name},
                    "Completed gated rounds, by outcome.", load(pcn.outcomes[i]));
    }
    out.gauge({"metadata", "pending_capacity"}, "dhtc_metadata_pending_capacity", {},
              "Capacity of the pending queue (metadata.max_queue_size).",
              static_cast<std::uint64_t>(pipe.pending_capacity()));
    out.gauge({"metadata", "pressure"}, "dhtc_metadata_pressure", {},
              "How full the pipeline's queues are (0..1); above 0.8 it slows the crawl.", pipe.pressure());
    out.gauge({"metadata", "hash_ingress_depth"}, "dhtc_metadata_hash_ingress_depth", {},
              "Hash events waiting in the ingress queue.", static_cast<std::uint64_t>(ingress.depth()));
    out.gauge({"metadata", "hash_ingress_capacity"}, "dhtc_metadata_hash_ingress_capacity", {},
              "Capacity of the hash ingress queue (hash_queue_capacity).",
              static_cast<std::uint64_t>(ingress.capacity()));
    out.counter({"metadata", "hash_ingress_pushed"}, "dhtc_metadata_hash_ingress_pushed_total", {},
                "Hash events accepted by the ingress queue.", ingress.pushed());
    out.counter({"metadata", "hash_ingress_dropped"}, "dhtc_metadata_hash_ingress_dropped_total", {},
                "Hash events dropped because the ingress queue was full.", ingress.dropped());

    // Retry store (zeros without one: every key is always present).
    static const retry::scheduler_counters no_store{};
    const auto* store = c.retry_store();
    const auto& rcn = store ? store->counters() : no_store;
    emit(out, "retry", rcn, retry_fields);
    for (std::size_t i = 0; i < rcn.claim_results.size(); ++i) {
        const auto name = retry::to_string(static_cast<retry::claim_result>(i));
        out.counter({"retry", "claim_results", name}, "dhtc_retry_claim_results_total", {"result", name},
                    "Claims answered, by result.", load(rcn.claim_results[i]));
    }
    for (std::size_t i = 0; i < rcn.by_state.size(); ++i) {
        const auto name = retry::to_string(static_cast<retry::hash_state>(i));
        out.gauge({"retry", "hashes", name}, "dhtc_retry_hashes", {"state", name},
                  "Hashes in the retry store, by state (refreshed every few seconds).", load(rcn.by_state[i]));
    }

    // Delivery thread.
    const auto& dlc = c.delivery().counters();
    emit(out, "delivery", dlc, delivery_fields);

    // Every place that sheds load, in one family (each also has its own metric above).
    struct drop {
        std::string_view point;
        std::uint64_t value;
    };
    const drop drops[] = {
        {"hash_ingress", ingress.dropped()},
        {"reply_queue", load(nc.reply_queue_dropped)},
        {"discovery_queue", load(cst.discoveries_dropped)},
        {"observations", load(dlc.observations_dropped)},
        {"announce_observations", svc.announce_observations_dropped()},
        {"errors", load(dlc.errors_dropped)},
        {"sample_schedule", load(cst.sample_schedule_dropped)},
        {"lookups", load(cst.lookups_dropped)},
        {"udp_tx", udp_tx_dropped},
        {"udp_rx_oversize", udp_rx_oversize},
        {"replies_over_budget", load(nc.replies_over_budget)},
        {"reply_send_failed", load(nc.replies_send_failed)},
        {"query_send_failed", load(cst.send_failed)},
        {"metadata_pending_refused", load(pcn.pending_refused)},
        {"retry_requests", load(rcn.requests_dropped)},
        {"retry_observations", load(rcn.observations_dropped)},
        {"retry_due", load(rcn.due_dropped)},
        {"retry_events", load(dlc.retry_events_dropped)},
    };
    for (const auto& d : drops) {
        out.counter({"drops", d.point}, "dhtc_drops_total", {"point", d.point},
                    "Items dropped or refused under load, by drop point.", d.value);
    }

    out.histogram("queue_wait_ms", "ms", "dhtc_metadata_queue_wait_seconds",
                  "Time from a hash's arrival in the pending queue to the start of its round.", 1000.0,
                  pcn.queue_wait_ms);
    out.histogram("fetch_duration_ms", "ms", "dhtc_metadata_fetch_duration_seconds",
                  "Time from the first connection of a successful round to verified metadata.", 1000.0,
                  pcn.fetch_duration_ms);
    out.histogram("payload_bytes", "bytes", "dhtc_metadata_payload_bytes", "Size of verified info dicts.", 1.0,
                  pcn.payload_bytes);
}

} // namespace

std::uint64_t bucket_percentile(std::span<const std::uint64_t> bounds, std::span<const std::uint64_t> counts,
                                std::uint64_t overflow, double q) noexcept {
    const std::size_t n = bounds.size() < counts.size() ? bounds.size() : counts.size();
    std::uint64_t total = overflow;
    for (std::size_t i = 0; i < n; ++i) total += counts[i];
    if (total == 0 || n == 0) return 0;
    // Same rank rule as stats::histogram::percentile (a NaN q lands on the last bound).
    const double want = q <= 0 ? 1.0 : q >= 1 ? static_cast<double>(total) : q * static_cast<double>(total);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < n; ++i) {
        seen += counts[i];
        if (static_cast<double>(seen) >= want) return bounds[i];
    }
    return bounds[n - 1];
}

nlohmann::json histogram_json(std::span<const std::uint64_t> bounds, std::span<const std::uint64_t> counts,
                              std::uint64_t overflow, std::uint64_t sum) {
    std::uint64_t count = overflow;
    for (const auto v : counts) count += v;
    json j = json::object();
    j["bounds"] = std::vector<std::uint64_t>(bounds.begin(), bounds.end());
    j["counts"] = std::vector<std::uint64_t>(counts.begin(), counts.end());
    j["overflow"] = overflow;
    j["count"] = count;
    j["sum"] = sum;
    j["p50"] = bucket_percentile(bounds, counts, overflow, 0.50);
    j["p95"] = bucket_percentile(bounds, counts, overflow, 0.95);
    j["p99"] = bucket_percentile(bounds, counts, overflow, 0.99);
    return j;
}

nlohmann::json runtime_snapshot(const api::crawler& c) {
    const auto& dht = c.dht();
    const auto& cst = dht.service().crawl_stats();
    const auto& pipe = c.pipeline();
    const auto& pcn = pipe.counters();
    const auto& ingress = ingress_of(c);
    json j = json::object();
    j["schema"] = snapshot_schema;
    j["node_id"] = dht.node_id().hex();
    json eps = json::array();
    for (const auto& ep : dht.local_endpoints()) eps.push_back(ep.to_string());
    j["endpoints"] = std::move(eps);
    j["node_pool_size"] = load(cst.pool_size);
    j["node_pool_capacity"] = load(cst.pool_capacity);
    j["responsive_nodes"] = load(cst.responsive_size);
    j["in_flight"] = load(cst.in_flight);
    j["metadata_queue_depth"] = load(pcn.pending);
    j["metadata_queue_max"] = static_cast<std::uint64_t>(pipe.pending_capacity());
    j["hash_ingress_depth"] = static_cast<std::uint64_t>(ingress.depth());
    j["hash_ingress_capacity"] = static_cast<std::uint64_t>(ingress.capacity());
    j["metadata_in_flight"] = load(pcn.in_flight);
    j["metadata_pressure"] = pipe.pressure();
    j["query_rate"] = static_cast<double>(load(cst.query_rate_millis)) / 1000.0;
    const auto* store = c.retry_store();
    j["retry_store"] = store ? retry::to_string(store->options().kind) : retry::to_string(retry::store_kind::none);
    j["retry_in_flight"] = load(pcn.retries_in_flight);
    json states = json::object();
    for (std::size_t i = 0; i < retry::hash_state_count; ++i)
        states[std::string(retry::to_string(static_cast<retry::hash_state>(i)))] =
            store ? load(store->counters().by_state[i]) : 0;
    j["retry_hashes"] = states;
    return j;
}

nlohmann::json observability_snapshot(const api::crawler& c) {
    collector out(nullptr);
    walk(c, out);
    out.doc["schema"] = snapshot_schema;
    return std::move(out.doc);
}

std::string prometheus_text(const api::crawler& c) {
    exposition e;
    collector out(&e);
    walk(c, out);
    return e.text();
}

} // namespace dhtc::stats
