// The one JSON form of a torrent, used by every event, binding and example. The form
// only ever gains fields; `schema` says which revision produced it. Described in
// docs/torrent-json.md, with a JSON Schema in docs/torrent.schema.json.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/torrent_info.hpp"
#include "model/address.hpp"

namespace dhtc::metadata {

/// Revision of the JSON form; raised only when fields are added.
inline constexpr int torrent_json_schema = 1;

/// Where and when a torrent was obtained; both optional.
struct delivery_details {
    std::optional<endpoint> peer;                                     ///< the peer that served the metadata
    std::optional<std::chrono::system_clock::time_point> discovered_at; ///< when it was verified
    std::optional<std::string_view> encryption; ///< "plaintext" or "rc4": the stream that served it
    std::optional<std::string_view> transport;  ///< "tcp" or "utp": the transport that served it
};

/// The JSON form of a parsed torrent (see docs/torrent-json.md). Throws only
/// std::bad_alloc. Strings in `info` are valid UTF-8 by construction.
nlohmann::json to_json(const torrent_info& info);
/// The same with `peer` and/or `discovered_at` added when set in `details`.
nlohmann::json to_json(const torrent_info& info, const delivery_details& details);

/// Shorthand for the usual case: both details known.
nlohmann::json to_json(const torrent_info& info, const endpoint& peer, std::chrono::system_clock::time_point discovered_at);

/// Compact one-line dump of to_json() (no trailing newline). Invalid UTF-8 can never make
/// it throw (replacement mode); throws only std::bad_alloc.
std::string to_json_line(const torrent_info& info);
std::string to_json_line(const torrent_info& info, const delivery_details& details);
std::string to_json_line(const torrent_info& info, const endpoint& peer,
                         std::chrono::system_clock::time_point discovered_at);

/// RFC 3339 UTC with whole seconds, e.g. "2026-12-02T18:00:00Z" (sub-seconds truncated).
std::string to_rfc3339(std::chrono::system_clock::time_point t);

} // namespace dhtc::metadata
