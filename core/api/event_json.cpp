#include "api/event_json.hpp"

#include <nlohmann/json.hpp>

#include "metadata/torrent_json.hpp"

namespace dhtc::api {

namespace {

using nlohmann::json;

json envelope(const char* type) { return json{{"type", type}, {"schema", event_schema}}; }

// Messages may quote a peer's bytes: never fail on invalid UTF-8.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json or_null(bool present, json value) { return present ? std::move(value) : json(nullptr); }

std::int64_t unix_seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

} // namespace

std::string completion_json(const completion& c) {
    auto j = envelope("completion");
    j["info_hash"] = c.info_hash.hex();
    j["outcome"] = to_string(c.result);
    j["failure"] = or_null(c.result == outcome::fetch_failed, to_string(c.failure));
    j["attempts"] = c.attempts;
    j["peer"] = or_null(c.peer.has_value(), c.peer ? c.peer->to_string() : std::string());
    j["encryption"] = or_null(c.encryption.has_value(), c.encryption ? std::string(to_string(*c.encryption)) : std::string());
    j["transport"] = or_null(c.transport.has_value(), c.transport ? std::string(to_string(*c.transport)) : std::string());
    j["round"] = c.round;
    return dump(j);
}

std::string retry_json(const retry_event& e) {
    const bool dormant = e.state == retry_state::dormant;
    auto j = envelope("retry");
    j["info_hash"] = e.info_hash.hex();
    j["state"] = to_string(e.state);
    j["attempts"] = e.attempts;
    j["failure"] = or_null(dormant, to_string(e.failure));
    j["next_retry_at"] = or_null(dormant, e.next_retry_at);
    return dump(j);
}

std::string error_json(const std::string& message) {
    auto j = envelope("error");
    j["message"] = message;
    return dump(j);
}

std::string observation_json(const observation& o) {
    auto j = envelope("observation");
    j["info_hash"] = o.info_hash.hex();
    j["source"] = o.source.to_string();
    j["kind"] = to_string(o.kind);
    j["port"] = or_null(o.kind == hash_source::announce, o.port);
    j["at"] = unix_seconds(o.seen_at);
    return dump(j);
}

std::string scrape_json(const scrape_event& e) {
    auto j = envelope("scrape");
    j["info_hash"] = e.info_hash.hex();
    j["seeders"] = e.seeders;
    j["leechers"] = e.leechers;
    j["responders"] = e.responders;
    j["queried"] = e.queried;
    j["timed_out"] = e.timed_out;
    j["at"] = unix_seconds(e.at);
    return dump(j);
}

std::string gate_json(std::uint64_t id, const id20& info_hash) {
    auto j = envelope("gate");
    j["id"] = id;
    j["info_hash"] = info_hash.hex();
    return dump(j);
}

std::string torrent_json(const delivery& d) {
    return metadata::to_json_line(d.info, metadata::delivery_details{d.peer, d.discovered_at, to_string(d.encryption), to_string(d.transport)});
}

std::string torrent_envelope_json(std::uint64_t id, const delivery& d) {
    // The torrent form is written once, by its own writer; the envelope wraps it as is.
    return R"({"type":"torrent","schema":)" + std::to_string(event_schema) + R"(,"id":)" + std::to_string(id) +
           R"(,"torrent":)" + torrent_json(d) + "}";
}

} // namespace dhtc::api
