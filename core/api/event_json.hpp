// The JSON envelope of every event (docs/events.md): "type" and "schema" first, and the
// forms only ever gain fields. One place, used by polling and by every binding's callbacks.
#pragma once

#include <cstdint>
#include <string>

#include "model/events.hpp"

namespace dhtc::api {

inline constexpr int event_schema = 1;

std::string completion_json(const completion& c);
std::string retry_json(const retry_event& e);
std::string error_json(const std::string& message);
std::string observation_json(const observation& o);
std::string scrape_json(const scrape_event& e);
/// Polling only: a gate to answer by `id`.
std::string gate_json(std::uint64_t id, const id20& info_hash);
/// The torrent JSON form (docs/torrent-json.md) with `peer` and `discovered_at`.
std::string torrent_json(const delivery& d);
/// Polling only: {"type":"torrent","id":...,"torrent":<torrent_json>}.
std::string torrent_envelope_json(std::uint64_t id, const delivery& d);

} // namespace dhtc::api
