#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/snapshot.hpp"
#include "bencode/decoder.hpp"
#include "api/crawler.hpp"
#include "krpc/encode.hpp"
#include "stats/histogram.hpp"
#include "support/loopback_crawler.hpp"
#include "support/ports.hpp"

using namespace dhtc;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// ---- a plain UDP client on loopback ----

class udp_client {
public:
    udp_client() {
        fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        timeval tv{0, 200'000};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    ~udp_client() { ::close(fd_); }
    udp_client(const udp_client&) = delete;
    udp_client& operator=(const udp_client&) = delete;

    void send_to(std::uint16_t port, std::string_view payload) const {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        ::sendto(fd_, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    /// The next datagram whose `t` is `transaction` (others, e.g. the crawler's own
    /// find_node queries to us, are skipped), within `wait`.
    std::optional<std::string> reply(std::string_view transaction, std::chrono::milliseconds wait = 3000ms) const {
        const auto deadline = std::chrono::steady_clock::now() + wait;
        char buf[2048];
        while (std::chrono::steady_clock::now() < deadline) {
            const auto n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) continue;
            std::string bytes(buf, static_cast<std::size_t>(n));
            bencode::document doc;
            if (!bencode::decode(bytes, doc, {})) continue;
            if (doc.root().find_string("t").as_string() == transaction) return bytes;
        }
        return std::nullopt;
    }

private:
    int fd_ = -1;
};

id20 make_id(std::uint8_t fill) {
    id20 id;
    id.bytes.fill(fill);
    return id;
}

std::string query(std::string_view t, const std::function<bool(std::string&, const krpc::query_header&)>& enc) {
    std::string out;
    REQUIRE(enc(out, krpc::query_header{t, make_id(0x42), {}}));
    return out;
}

std::string ping(std::string_view t) {
    return query(t, [](std::string& o, const krpc::query_header& h) { return krpc::encode_ping(o, h); });
}

std::unique_ptr<api::crawler> make_crawler() {
    auto o = test::loopback_crawler(); // never the real DHT
    o.dht.seed = 7;
    std::string error;
    auto c = api::crawler::create(o, api::event_handlers{}, error);
    REQUIRE_MESSAGE(c, error);
    c->start();
    return c;
}

std::uint16_t port_of(const api::crawler& c) { return c.dht().local_endpoints().at(0).port; }

/// Polls `cond` on fresh observability snapshots until it holds or `wait` passes.
json wait_for(const api::crawler& c, const std::function<bool(const json&)>& cond, std::chrono::seconds wait = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    json j = stats::observability_snapshot(c);
    while (!cond(j) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
        j = stats::observability_snapshot(c);
    }
    return j;
}

// ---- the documented shapes ----

const std::vector<std::string> runtime_uint_keys = {
    "node_pool_size",       "node_pool_capacity",  "responsive_nodes",      "in_flight",
    "metadata_queue_depth", "metadata_queue_max",  "hash_ingress_depth",    "hash_ingress_capacity",
    "metadata_in_flight",
};

const std::vector<std::string> udp_keys = {"rx_packets", "rx_bytes",   "rx_oversize", "rx_truncated",
                                           "tx_packets", "tx_bytes",   "tx_dropped", "tx_errors",
                                           "rx_calls",   "tx_calls",   "rx_waits",   "rx_yields"};

const std::vector<std::string> dht_keys = {
    "rx_bad_bencode", "rx_bad_krpc", "rx_queries", "rx_replies", "replies_sent", "replies_over_budget",
    "replies_send_failed", "foreign_transactions", "reply_queue_dropped", "ping", "find_node", "get_peers",
    "announce_peer", "sample_infohashes", "unknown_answered", "unknown_refused", "malformed", "bad_token", "own_id",
    "bootstrap_lookups", "budget_refused_source", "budget_refused_packets", "budget_refused_bytes",
    "announces_refused_by_policy", "announce_observations_dropped"};

const std::vector<std::string> crawl_keys = {
    "pool_size", "pool_capacity", "responsive_size", "in_flight", "queries_find_node", "queries_bootstrap",
    "queries_sample", "queries_get_peers", "replies", "reply_errors", "reply_malformed", "reply_unmatched",
    "reply_own_id", "timeouts", "send_failed", "rate_limited_turns", "refused_new_destination", "refused_subnet",
    "refused_in_flight", "refused_policy", "skipped_recent", "skipped_zero_id", "pool_accepted", "pool_replaced",
    "pool_duplicate", "pool_bogon", "pool_over_budget", "pool_family_full", "samples_received",
    "sample_schedule_dropped", "samples_remembered", "sample_skipped_remembered", "lookups_started", "lookups_dropped", "lookup_peers",
    "scrapes_completed", "scrapes_timed_out", "bootstrap_rounds",
    "discoveries_dropped", "replies_dropped", "query_rate_millis"};

const std::vector<std::string> metadata_keys = {
    "hashes_in", "already_delivered", "merged_in_flight", "pending_refused", "gate_rejected", "gate_timeouts",
    "jobs_started", "attempts", "failure_cache_hits", "crowded_refusals", "crowded_saves", "refetches", "duplicates", "bytes_fetched", "in_flight",
    "pending", "pending_capacity", "hash_ingress_depth", "hash_ingress_capacity", "hash_ingress_pushed",
    "hash_ingress_dropped"};

const std::vector<std::string> failure_classes = {
    "none", "connect_refused", "connect_timeout", "handshake_failed", "no_extension_support",
    "no_metadata_support", "rejected", "timeout", "size_limit", "hash_mismatch", "parse_error", "no_peers",
    "protocol_error", "disconnected", "sink_failed", "cancelled", "encryption_failed", "utp_timeout"};

// What a session (one try) ends with: the classes of the crossed transport x encryption view.
const std::vector<std::string> session_classes = {
    "connect_refused", "connect_timeout", "utp_timeout", "handshake_failed", "encryption_failed",
    "no_extension_support", "no_metadata_support", "rejected", "timeout", "size_limit", "protocol_error",
    "disconnected"};

const std::vector<std::string> outcomes = {"accepted", "fetch_failed", "delivery_rejected", "cancelled",
                                           "sink_failed"};

const std::vector<std::string> delivery_keys = {"gates", "torrents", "completions", "observations",
                                                "observations_dropped", "errors_dropped", "callback_exceptions"};

const std::vector<std::string> drop_keys = {
    "hash_ingress", "reply_queue", "discovery_queue", "observations", "announce_observations", "errors",
    "sample_schedule", "lookups",
    "udp_tx", "udp_rx_oversize", "replies_over_budget", "reply_send_failed", "query_send_failed",
    "metadata_pending_refused"};

const std::vector<std::string> histogram_keys = {"queue_wait_ms", "fetch_duration_ms", "payload_bytes"};

void check_uints(const json& section, const std::vector<std::string>& keys, const char* where) {
    REQUIRE_MESSAGE(section.is_object(), where);
    for (const auto& k : keys) {
        INFO(where << "." << k);
        REQUIRE(section.contains(k));
        CHECK(section.at(k).is_number_unsigned());
    }
}

void check_histogram_shape(const json& h, std::size_t buckets) {
    for (const char* k : {"overflow", "count", "sum", "p50", "p95", "p99"}) {
        INFO(k);
        REQUIRE(h.contains(k));
        CHECK(h.at(k).is_number_unsigned());
    }
    REQUIRE(h.at("bounds").is_array());
    REQUIRE(h.at("counts").is_array());
    CHECK(h.at("bounds").size() == buckets);
    CHECK(h.at("counts").size() == buckets);
    CHECK(h.at("unit").is_string());
    std::uint64_t total = h.at("overflow").get<std::uint64_t>();
    for (const auto& v : h.at("counts")) total += v.get<std::uint64_t>();
    CHECK(total == h.at("count").get<std::uint64_t>());
}

void check_observability_shape(const json& j) {
    REQUIRE(j.is_object());
    CHECK(j.at("schema") == 1);
    check_uints(j.at("udp"), udp_keys, "udp");
    for (const char* fam : {"v4", "v6"}) {
        check_uints(j.at("udp").at(fam), udp_keys, fam);
        CHECK(j.at("udp").at(fam).at("bound").is_boolean());
    }
    check_uints(j.at("dht"), dht_keys, "dht");
    check_uints(j.at("crawl"), crawl_keys, "crawl");
    check_uints(j.at("metadata"), metadata_keys, "metadata");
    CHECK(j.at("metadata").at("pressure").is_number());
    check_uints(j.at("metadata").at("attempt_failures"), failure_classes, "attempt_failures");
    CHECK(j.at("metadata").at("attempt_failures").size() == failure_classes.size());
    check_uints(j.at("metadata").at("outcomes"), outcomes, "outcomes");
    CHECK(j.at("metadata").at("outcomes").size() == outcomes.size());
    // transport x encryption: a fixed grid, every cell present.
    const auto& sessions = j.at("metadata").at("sessions");
    CHECK(sessions.size() == 2);
    for (const char* tr : {"tcp", "utp"}) {
        INFO(tr);
        const auto& t = sessions.at(tr);
        check_uints(t.at("tries"), {"plaintext", "mse"}, "tries");
        check_uints(t.at("successes"), {"plaintext", "mse_plaintext", "mse_rc4"}, "successes");
        CHECK(t.at("successes").size() == 3);
        for (const char* mode : {"plaintext", "mse"}) {
            check_uints(t.at("failures").at(mode), session_classes, "failures");
            CHECK(t.at("failures").at(mode).size() == session_classes.size());
        }
    }
    check_uints(j.at("delivery"), delivery_keys, "delivery");
    check_uints(j.at("drops"), drop_keys, "drops");
    check_histogram_shape(j.at("histograms").at("queue_wait_ms"), 8);
    check_histogram_shape(j.at("histograms").at("fetch_duration_ms"), 7);
    check_histogram_shape(j.at("histograms").at("payload_bytes"), 8);
}

void check_runtime_shape(const json& j) {
    REQUIRE(j.is_object());
    CHECK(j.at("schema") == 1);
    REQUIRE(j.at("node_id").is_string());
    CHECK(j.at("node_id").get<std::string>().size() == 40);
    REQUIRE(j.at("endpoints").is_array());
    for (const auto& e : j.at("endpoints")) CHECK(e.is_string());
    for (const auto& k : runtime_uint_keys) {
        INFO(k);
        REQUIRE(j.contains(k));
        CHECK(j.at(k).is_number_unsigned());
    }
    CHECK(j.at("metadata_pressure").is_number());
    CHECK(j.at("query_rate").is_number());
}

// ---- a Prometheus 0.0.4 text checker ----

bool valid_metric_name(std::string_view n) {
    if (n.empty()) return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char ch = n[i];
        const bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':';
        if (!alpha && !(i > 0 && ch >= '0' && ch <= '9')) return false;
    }
    return true;
}

bool valid_label_name(std::string_view n) { return valid_metric_name(n) && n.find(':') == std::string_view::npos; }

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct exposition {
    std::map<std::string, std::string> types;        ///< family -> type
    std::vector<sample> samples;                     ///< in order
    std::map<std::string, double> series;            ///< "name{l=v,...}" -> value
    std::vector<std::string> errors;

    double at(const std::string& key) const {
        const auto it = series.find(key);
        return it == series.end() ? -1 : it->second;
    }
};

double parse_value(const std::string& v, bool& ok) {
    ok = true;
    if (v == "+Inf") return INFINITY;
    if (v == "-Inf") return -INFINITY;
    if (v == "NaN") return NAN;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    ok = !v.empty() && end == v.c_str() + v.size();
    return d;
}

exposition check_exposition(const std::string& text) {
    exposition e;
    auto fail = [&](const std::string& line, const std::string& why) { e.errors.push_back(why + ": " + line); };
    if (text.empty() || text.back() != '\n') e.errors.push_back("text must end with a newline");
    std::set<std::string> helps;
    std::set<std::string> closed; // families whose group has ended
    std::string current;          // family of the previous line
    auto enter = [&](const std::string& family, const std::string& line) {
        if (family == current) return;
        if (closed.count(family)) fail(line, "family lines not contiguous");
        if (!current.empty()) closed.insert(current);
        current = family;
    };
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        if (line.rfind("# ", 0) == 0) {
            std::istringstream words(line.substr(2));
            std::string keyword, name, rest;
            words >> keyword >> name;
            std::getline(words, rest);
            if (keyword != "HELP" && keyword != "TYPE") continue;
            if (!valid_metric_name(name)) fail(line, "bad family name");
            enter(name, line);
            if (keyword == "HELP") {
                if (!helps.insert(name).second) fail(line, "second HELP");
                if (e.types.count(name)) fail(line, "HELP after TYPE");
            } else {
                const auto type = rest.empty() ? rest : rest.substr(1);
                if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
                    type != "untyped")
                    fail(line, "bad type");
                if (!e.types.emplace(name, type).second) fail(line, "second TYPE");
            }
            continue;
        }
        if (line[0] == '#') continue;
        sample s;
        std::size_t i = 0;
        while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
        s.name = line.substr(0, i);
        if (!valid_metric_name(s.name)) fail(line, "bad metric name");
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (i < line.size() && line[i] != '}') {
                const auto eq = line.find('=', i);
                if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
                    fail(line, "bad label");
                    break;
                }
                const std::string lname = line.substr(i, eq - i);
                if (!valid_label_name(lname) || lname.rfind("__", 0) == 0) fail(line, "bad label name");
                std::string lvalue;
                std::size_t k = eq + 2;
                bool closed_quote = false;
                while (k < line.size()) {
                    if (line[k] == '\\') {
                        if (k + 1 >= line.size()) break;
                        const char esc = line[k + 1];
                        if (esc == 'n') lvalue += '\n';
                        else if (esc == '\\' || esc == '"') lvalue += esc;
                        else fail(line, "bad escape");
                        k += 2;
                    } else if (line[k] == '"') {
                        closed_quote = true;
                        ++k;
                        break;
                    } else {
                        lvalue += line[k++];
                    }
                }
                if (!closed_quote) fail(line, "unterminated label value");
                if (!s.labels.emplace(lname, lvalue).second) fail(line, "repeated label");
                i = k;
                if (i < line.size() && line[i] == ',') ++i;
            }
            if (i >= line.size() || line[i] != '}') fail(line, "unterminated labels");
            ++i;
        }
        if (i >= line.size() || line[i] != ' ') {
            fail(line, "no value");
            continue;
        }
        bool ok = false;
        s.value = parse_value(line.substr(i + 1), ok);
        if (!ok) fail(line, "bad value");

        // The family: the name itself, or a histogram's base name.
        std::string family = s.name;
        if (!e.types.count(family)) {
            for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                if (ends_with(s.name, suffix)) {
                    const auto base = s.name.substr(0, s.name.size() - std::string_view(suffix).size());
                    if (e.types.count(base) && e.types.at(base) == "histogram") family = base;
                }
            }
        }
        if (!e.types.count(family)) {
            fail(line, "sample without a TYPE line");
        } else {
            const auto& type = e.types.at(family);
            if (type == "histogram" && family == s.name) fail(line, "histogram sample without suffix");
            if (type == "counter" && !ends_with(family, "_total")) fail(line, "counter not named _total");
            if (type != "counter" && ends_with(family, "_total")) fail(line, "non-counter named _total");
            if (type == "counter" && !(s.value >= 0)) fail(line, "negative counter");
        }
        if (family.rfind("dhtc_", 0) != 0) fail(line, "not in the dhtc_ namespace");
        enter(family, line);

        std::string key = s.name;
        if (!s.labels.empty()) {
            key += '{';
            bool first = true;
            for (const auto& [k, v] : s.labels) {
                if (!first) key += ',';
                first = false;
                key += k + "=\"" + v + "\"";
            }
            key += '}';
        }
        if (!e.series.emplace(key, s.value).second) fail(line, "duplicate series");
        e.samples.push_back(std::move(s));
    }

    // Histograms: buckets in increasing `le`, cumulative, ending in +Inf == _count.
    for (const auto& [family, type] : e.types) {
        if (type != "histogram") continue;
        double last_le = -INFINITY;
        double last_count = 0;
        bool saw_inf = false;
        for (const auto& s : e.samples) {
            if (s.name != family + "_bucket") continue;
            const auto le = s.labels.find("le");
            if (le == s.labels.end()) {
                e.errors.push_back(family + ": bucket without le");
                continue;
            }
            bool ok = false;
            const double bound = parse_value(le->second, ok);
            if (!ok || !(bound > last_le)) e.errors.push_back(family + ": le not increasing at " + le->second);
            if (s.value < last_count) e.errors.push_back(family + ": buckets not cumulative at " + le->second);
            last_le = bound;
            last_count = s.value;
            saw_inf = std::isinf(bound);
        }
        if (!saw_inf) e.errors.push_back(family + ": last bucket is not +Inf");
        if (!e.series.count(family + "_count") || !e.series.count(family + "_sum")) {
            e.errors.push_back(family + ": _count or _sum missing");
        } else if (e.series.at(family + "_count") != last_count) {
            e.errors.push_back(family + ": +Inf bucket differs from _count");
        }
    }
    return e;
}

void require_valid(const exposition& e) {
    for (const auto& err : e.errors) FAIL_CHECK(err);
    CHECK(e.errors.empty());
}

std::string read_docs() {
    std::ifstream f(std::string(DHTC_FIXTURE_DIR) + "/../../docs/metrics.md");
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

} // namespace

TEST_SUITE("snapshot") {

TEST_CASE("histogram: bucket edges, overflow and percentiles are bucket upper bounds") {
    stats::histogram<3> h({10, 100, 1000});
    CHECK(h.percentile(0.5) == 0); // empty
    h.record(0);
    h.record(10);   // == bound: that bucket
    h.record(11);   // next bucket
    h.record(1000); // last bucket, not overflow
    h.record(1001); // overflow
    CHECK(h.count(0) == 2);
    CHECK(h.count(1) == 1);
    CHECK(h.count(2) == 1);
    CHECK(h.overflow() == 1);
    CHECK(h.total() == 5);
    CHECK(h.sum() == 0 + 10 + 11 + 1000 + 1001);
    CHECK(h.percentile(0.0) == 10);
    CHECK(h.percentile(0.4) == 10);   // rank 2 of 5
    CHECK(h.percentile(0.5) == 100);  // rank 2.5 -> the third value
    CHECK(h.percentile(0.8) == 1000); // rank 4
    CHECK(h.percentile(0.99) == 1000); // in the overflow: the last bound, never more
    CHECK(h.percentile(1.0) == 1000);

    const json j = stats::histogram_json(h);
    CHECK(j.at("bounds") == json::array({10, 100, 1000}));
    CHECK(j.at("counts") == json::array({2, 1, 1})); // non-cumulative
    CHECK(j.at("overflow") == 1);
    CHECK(j.at("count") == 5);
    CHECK(j.at("sum") == 2022);
    CHECK(j.at("p50") == 100);
    CHECK(j.at("p95") == 1000);
    CHECK(j.at("p99") == 1000);
    for (double q : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0, 2.0, -1.0}) {
        std::array<std::uint64_t, 3> counts{h.count(0), h.count(1), h.count(2)};
        CHECK(stats::bucket_percentile(h.bounds(), counts, h.overflow(), q) == h.percentile(q));
    }
}

TEST_CASE("histogram: only overflow, and the seed's bucket sets") {
    stats::fetch_duration_histogram f{stats::fetch_duration_bounds_ms};
    f.record(60'000);
    f.record(60'000);
    const json j = stats::histogram_json(f);
    CHECK(j.at("count") == 2);
    CHECK(j.at("overflow") == 2);
    CHECK(j.at("p50") == 10'000); // bounded approximation: the last bound
    CHECK(j.at("p99") == 10'000);
    CHECK(stats::queue_wait_bounds_ms.back() == 5000);
    CHECK(stats::payload_size_bounds_bytes.front() == 16 * 1024);
    CHECK(stats::payload_size_bounds_bytes.back() == 10 * 1024 * 1024);

    const std::array<std::uint64_t, 2> bounds{1, 2};
    const std::array<std::uint64_t, 2> none{0, 0};
    const json empty = stats::histogram_json(bounds, none, 0, 0);
    CHECK(empty.at("count") == 0);
    CHECK(empty.at("p50") == 0);
}

TEST_CASE("snapshots of an idle crawler: every documented key, valid Prometheus text") {
    auto c = make_crawler();
    const json rt = stats::runtime_snapshot(*c);
    check_runtime_shape(rt);
    CHECK(rt.at("node_id") == c->dht().node_id().hex());
    REQUIRE(rt.at("endpoints").size() == 1);
    CHECK(rt.at("endpoints").at(0) == "127.0.0.1:" + std::to_string(port_of(*c)));
    CHECK(rt.at("metadata_queue_max") == 10'000);
    CHECK(rt.at("hash_ingress_capacity") == 10'000);

    const json ob = stats::observability_snapshot(*c);
    check_observability_shape(ob);
    CHECK(ob.at("udp").at("v4").at("bound") == true);
    CHECK(ob.at("udp").at("v6").at("bound") == false);

    const auto text = stats::prometheus_text(*c);
    const auto e = check_exposition(text);
    require_valid(e);
    // Every family is documented, and so is every JSON key.
    const auto docs = read_docs();
    REQUIRE_FALSE(docs.empty());
    for (const auto& [family, type] : e.types) {
        INFO(family);
        CHECK(docs.find("`" + family + "`") != std::string::npos);
    }
    std::function<void(const json&)> documented = [&](const json& node) {
        for (const auto& [k, v] : node.items()) {
            INFO(k);
            CHECK(docs.find("`" + k + "`") != std::string::npos);
            if (v.is_object()) documented(v);
        }
    };
    documented(ob);
    documented(rt);
    // Histograms: all their buckets, in base units.
    CHECK(e.types.at("dhtc_metadata_queue_wait_seconds") == "histogram");
    CHECK(e.at("dhtc_metadata_queue_wait_seconds_bucket{le=\"0.01\"}") == 0);
    CHECK(e.at("dhtc_metadata_queue_wait_seconds_bucket{le=\"5\"}") == 0);
    CHECK(e.at("dhtc_metadata_fetch_duration_seconds_bucket{le=\"0.25\"}") == 0);
    CHECK(e.at("dhtc_metadata_fetch_duration_seconds_bucket{le=\"10\"}") == 0);
    CHECK(e.at("dhtc_metadata_payload_bytes_bucket{le=\"16384\"}") == 0);
    CHECK(e.at("dhtc_metadata_payload_bytes_bucket{le=\"10485760\"}") == 0);
    CHECK(e.at("dhtc_metadata_payload_bytes_bucket{le=\"+Inf\"}") == 0);
    // Labelled series exist even at zero; unbound families have none.
    CHECK(e.at("dhtc_metadata_attempt_failures_total{class=\"timeout\"}") == 0);
    CHECK(e.at("dhtc_metadata_outcomes_total{outcome=\"accepted\"}") == 0);
    // The checker keys a series by its labels sorted by name.
    CHECK(e.at("dhtc_metadata_session_tries_total{encryption=\"mse\",transport=\"utp\"}") == 0);
    CHECK(e.at("dhtc_metadata_session_successes_total{encryption=\"mse_rc4\",transport=\"tcp\"}") == 0);
    CHECK(e.at("dhtc_metadata_session_failures_total{class=\"utp_timeout\",encryption=\"mse\",transport=\"utp\"}") == 0);
    std::size_t crossed = 0;
    for (const auto& [series, v] : e.series)
        if (series.rfind("dhtc_metadata_session_", 0) == 0) ++crossed;
    CHECK(crossed == 2 * 2 + 2 * 3 + 2 * 2 * session_classes.size()); // fixed cardinality
    CHECK(e.at("dhtc_drops_total{point=\"hash_ingress\"}") == 0);
    CHECK(e.series.count("dhtc_udp_rx_packets_total{family=\"v4\"}") == 1);
    CHECK(e.series.count("dhtc_udp_rx_packets_total{family=\"v6\"}") == 0);
    CHECK(e.types.at("dhtc_crawl_pool_size") == "gauge");
    CHECK(e.types.at("dhtc_crawl_query_rate") == "gauge");
    c->close(std::nullopt);
}

TEST_CASE("the checker itself rejects broken expositions") {
    CHECK(check_exposition("# TYPE a_total counter\na_total 1\n").errors.empty() == false); // not dhtc_
    CHECK(check_exposition("dhtc_x_total 1\n").errors.size() == 1);                         // no TYPE
    CHECK_FALSE(check_exposition("# TYPE dhtc_x_total counter\ndhtc_x_total 1\ndhtc_x_total 2\n").errors.empty());
    CHECK_FALSE(check_exposition("# TYPE dhtc_x gauge\n# TYPE dhtc_x gauge\ndhtc_x 1\n").errors.empty());
    CHECK_FALSE(check_exposition("# TYPE dhtc_h histogram\ndhtc_h_bucket{le=\"1\"} 2\n"
                                 "dhtc_h_bucket{le=\"+Inf\"} 1\ndhtc_h_sum 0\ndhtc_h_count 1\n")
                    .errors.empty());
    CHECK_FALSE(check_exposition("# TYPE dhtc_h histogram\ndhtc_h_bucket{le=\"1\"} 1\n"
                                 "dhtc_h_bucket{le=\"+Inf\"} 1\ndhtc_h_sum 0\ndhtc_h_count 2\n")
                    .errors.empty());
    CHECK_FALSE(check_exposition("# TYPE dhtc_a gauge\ndhtc_a{l=\"x\"} 1\n# TYPE dhtc_b gauge\ndhtc_b 1\n"
                                 "dhtc_a{l=\"y\"} 1\n")
                    .errors.empty());
    CHECK_FALSE(check_exposition("# TYPE dhtc_a gauge\ndhtc_a{l=\"x\\q\"} 1\n").errors.empty());
    const auto good = check_exposition("# HELP dhtc_a_total a \\\\ b\n# TYPE dhtc_a_total counter\n"
                                       "dhtc_a_total{l=\"q\\\"uote\\\\back\\nline\"} 3\n"
                                       "# TYPE dhtc_h histogram\ndhtc_h_bucket{le=\"0.5\"} 1\n"
                                       "dhtc_h_bucket{le=\"+Inf\"} 2\ndhtc_h_sum 1.5\ndhtc_h_count 2\n");
    CHECK(good.errors.empty());
    CHECK(good.at("dhtc_a_total{l=\"q\"uote\\back\nline\"}") == 3);
}

TEST_CASE("counters follow KRPC traffic and a failed metadata round") {
    auto c = make_crawler();
    const auto port = port_of(*c);
    udp_client client;

    client.send_to(port, ping("p1"));
    REQUIRE(client.reply("p1"));
    client.send_to(port, query("f1", [](std::string& o, const krpc::query_header& h) {
                       return krpc::encode_find_node(o, h, make_id(0x10));
                   }));
    REQUIRE(client.reply("f1"));
    const id20 info_hash = make_id(0x77);
    client.send_to(port, query("g1", [&](std::string& o, const krpc::query_header& h) {
                       return krpc::encode_get_peers(o, h, info_hash);
                   }));
    const auto gp = client.reply("g1");
    REQUIRE(gp);
    bencode::document doc;
    REQUIRE(bencode::decode(*gp, doc, {}));
    const std::string token(doc.root().find_dict("r").find_string("token").as_string());
    REQUIRE_FALSE(token.empty());
    client.send_to(port, "this is not bencode");
    client.send_to(port, std::string(3000, 'x')); // over the 1500-byte datagram limit
    client.send_to(port, std::string(65'507, 'y')); // the largest UDP payload: counted at its length

    // An announce for a peer where nothing listens: one round, one refused attempt.
    const auto peer_port = test::unused_loopback_port(SOCK_STREAM); // nothing listens
    client.send_to(port, query("a1", [&](std::string& o, const krpc::query_header& h) {
                       return krpc::encode_announce_peer(o, h, info_hash, peer_port, token, false);
                   }));
    REQUIRE(client.reply("a1"));

    const json j = wait_for(*c, [](const json& s) {
        const auto& m = s.at("metadata");
        return s.at("dht").at("rx_bad_bencode") >= 1 && s.at("udp").at("rx_oversize") >= 2 &&
               m.at("outcomes").at("fetch_failed") >= 1;
    });
    check_observability_shape(j);
    const auto& udp = j.at("udp");
    CHECK(udp.at("v4").at("rx_packets") >= 5);
    CHECK(udp.at("v4").at("tx_packets") >= 4);
    CHECK(udp.at("rx_packets") == udp.at("v4").at("rx_packets")); // v6 unbound: the sum is v4
    CHECK(udp.at("v6").at("rx_packets") == 0);
    CHECK(udp.at("rx_oversize") >= 2);
    CHECK(udp.at("rx_truncated") >= 2); // both were longer than the receive buffer
    CHECK(udp.at("rx_bytes") >= 3000 + 65'507); // real lengths, not the buffer's
    CHECK(j.at("drops").at("udp_rx_oversize") == udp.at("rx_oversize"));
    const auto& dht = j.at("dht");
    CHECK(dht.at("rx_queries") >= 4);
    CHECK(dht.at("ping") >= 1);
    CHECK(dht.at("find_node") >= 1);
    CHECK(dht.at("get_peers") >= 1);
    CHECK(dht.at("announce_peer") >= 1);
    CHECK(dht.at("bad_token") == 0);
    CHECK(dht.at("rx_bad_bencode") >= 1);
    CHECK(dht.at("replies_sent") >= 4);
    const auto& m = j.at("metadata");
    CHECK(m.at("hashes_in") >= 1);
    CHECK(m.at("hash_ingress_pushed") >= 1);
    CHECK(m.at("jobs_started") >= 1);
    CHECK(m.at("attempts") >= 1);
    CHECK(m.at("attempt_failures").at("connect_refused") >= 1);
    CHECK(m.at("outcomes").at("fetch_failed") >= 1);
    // The crossed view saw the same refused plaintext TCP try.
    CHECK(m.at("sessions").at("tcp").at("tries").at("plaintext") >= 1);
    CHECK(m.at("sessions").at("tcp").at("failures").at("plaintext").at("connect_refused") >= 1);
    CHECK(m.at("sessions").at("tcp").at("successes").at("plaintext") == 0);
    CHECK(m.at("sessions").at("utp").at("tries").at("plaintext") == 0);
    CHECK(j.at("delivery").at("completions") >= 1);
    // The round's wait in the pending queue was recorded.
    const auto& qw = j.at("histograms").at("queue_wait_ms");
    CHECK(qw.at("count") >= 1);
    CHECK(qw.at("p50") >= 10);
    // The querier became a crawl candidate: with our table empty, it was pinged at once.
    CHECK(j.at("crawl").at("queries_ping") >= 1);

    // Stopped, nothing moves: the Prometheus text must say exactly what the JSON says.
    c->close(std::nullopt);
    const json s = stats::observability_snapshot(*c);
    const auto e = check_exposition(stats::prometheus_text(*c));
    require_valid(e);
    CHECK(e.at("dhtc_udp_rx_packets_total{family=\"v4\"}") == s.at("udp").at("v4").at("rx_packets").get<double>());
    CHECK(e.at("dhtc_dht_queries_total{method=\"ping\"}") == s.at("dht").at("ping").get<double>());
    CHECK(e.at("dhtc_dht_rx_queries_total") == s.at("dht").at("rx_queries").get<double>());
    CHECK(e.at("dhtc_metadata_attempt_failures_total{class=\"connect_refused\"}") ==
          s.at("metadata").at("attempt_failures").at("connect_refused").get<double>());
    CHECK(e.at("dhtc_metadata_outcomes_total{outcome=\"fetch_failed\"}") ==
          s.at("metadata").at("outcomes").at("fetch_failed").get<double>());
    CHECK(e.at("dhtc_metadata_session_failures_total{class=\"connect_refused\",encryption=\"plaintext\",transport=\"tcp\"}") ==
          s.at("metadata").at("sessions").at("tcp").at("failures").at("plaintext").at("connect_refused").get<double>());
    CHECK(e.at("dhtc_metadata_session_tries_total{encryption=\"plaintext\",transport=\"tcp\"}") ==
          s.at("metadata").at("sessions").at("tcp").at("tries").at("plaintext").get<double>());
    // The grid adds up to the per-dimension counters.
    const auto& grid = s.at("metadata").at("sessions");
    CHECK(grid.at("tcp").at("tries").at("plaintext").get<std::uint64_t>() +
              grid.at("utp").at("tries").at("plaintext").get<std::uint64_t>() ==
          s.at("metadata").at("encryption").at("plaintext").at("tries").get<std::uint64_t>());
    CHECK(grid.at("tcp").at("tries").at("plaintext").get<std::uint64_t>() +
              grid.at("tcp").at("tries").at("mse").get<std::uint64_t>() ==
          s.at("metadata").at("transport").at("tcp").at("tries").get<std::uint64_t>());
    CHECK(e.at("dhtc_crawl_pool_size") == s.at("crawl").at("pool_size").get<double>());
    CHECK(e.at("dhtc_crawl_query_rate") == s.at("crawl").at("query_rate_millis").get<double>() / 1000.0);
    for (const auto& [point, v] : s.at("drops").items()) {
        INFO(point);
        CHECK(e.at("dhtc_drops_total{point=\"" + point + "\"}") == v.get<double>());
    }
    // Histogram: cumulative buckets in seconds, _count and _sum from the JSON's counts.
    const auto& h = s.at("histograms").at("queue_wait_ms");
    double cumulative = 0;
    for (std::size_t i = 0; i < h.at("bounds").size(); ++i) {
        cumulative += h.at("counts").at(i).get<double>();
        std::ostringstream le;
        le << h.at("bounds").at(i).get<double>() / 1000.0;
        INFO(le.str());
        CHECK(e.at("dhtc_metadata_queue_wait_seconds_bucket{le=\"" + le.str() + "\"}") == cumulative);
    }
    CHECK(e.at("dhtc_metadata_queue_wait_seconds_count") == h.at("count").get<double>());
    CHECK(e.at("dhtc_metadata_queue_wait_seconds_bucket{le=\"+Inf\"}") == h.at("count").get<double>());
    CHECK(e.at("dhtc_metadata_queue_wait_seconds_sum") == doctest::Approx(h.at("sum").get<double>() / 1000.0));

    // The runtime view agrees with the full one.
    const json rt = stats::runtime_snapshot(*c);
    check_runtime_shape(rt);
    CHECK(rt.at("node_pool_size") == s.at("crawl").at("pool_size"));
    CHECK(rt.at("metadata_queue_depth") == s.at("metadata").at("pending"));
    CHECK(rt.at("metadata_in_flight") == s.at("metadata").at("in_flight"));
    CHECK(rt.at("hash_ingress_capacity") == s.at("metadata").at("hash_ingress_capacity"));
}

TEST_CASE("snapshots from 4 threads while queries flow") {
    auto c = make_crawler();
    const auto port = port_of(*c);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> reads{0};
    std::atomic<int> bad{0};

    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
        readers.emplace_back([&, t] {
            while (!stop.load()) {
                switch (t % 3) {
                case 0:
                    if (!stats::runtime_snapshot(*c).contains("node_pool_size")) ++bad;
                    break;
                case 1:
                    if (!stats::observability_snapshot(*c).contains("histograms")) ++bad;
                    break;
                default:
                    if (stats::prometheus_text(*c).find("dhtc_udp_rx_packets_total") == std::string::npos) ++bad;
                    break;
                }
                ++reads;
            }
        });
    }
    // About 25 queries a second from one address: under the per-source answer budget (40/s).
    udp_client client;
    std::uint64_t sent = 0;
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < until) {
        for (int k = 0; k < 5; ++k) {
            const std::string t = "c" + std::to_string(sent++);
            if (k % 2 == 0) {
                client.send_to(port, ping(t));
            } else {
                client.send_to(port, query(t, [](std::string& o, const krpc::query_header& h) {
                                   return krpc::encode_find_node(o, h, make_id(0x33));
                               }));
            }
        }
        std::this_thread::sleep_for(200ms);
    }
    const json j = wait_for(*c, [&](const json& s) { return s.at("dht").at("rx_queries") >= sent; }, 5s);
    stop = true;
    for (auto& r : readers) r.join();
    CHECK(bad == 0);
    CHECK(reads > 4);
    CHECK(j.at("dht").at("rx_queries") >= sent);
    CHECK(j.at("dht").at("budget_refused_source") == 0);
    // Counters never go backwards between snapshots.
    const json later = stats::observability_snapshot(*c);
    CHECK(later.at("udp").at("rx_packets") >= j.at("udp").at("rx_packets"));
    c->close(std::nullopt);
    require_valid(check_exposition(stats::prometheus_text(*c)));
}

} // TEST_SUITE
