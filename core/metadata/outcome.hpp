// How a fetch round ends, in words shared by the pipeline, the callbacks, the statistics
// and (later) the retry scheduler, which plans retries by failure class.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "metadata/peer_session.hpp"
#include "metadata/torrent_info.hpp"
#include "net/address.hpp"
#include "util/id20.hpp"

namespace dhtc::metadata {

/// Why a round (or one peer attempt) failed. Precise on purpose: retries are planned by it.
enum class failure_class : std::uint8_t {
    none = 0,
    connect_refused,
    connect_timeout,
    handshake_failed,
    no_extension_support,
    no_metadata_support,
    rejected,
    timeout,
    size_limit,
    hash_mismatch,
    parse_error,
    no_peers,       ///< no peer could be tried (none known, or all in the failure cache)
    protocol_error, ///< the peer broke BEP-9/10 rules after the handshake
    disconnected,   ///< the peer closed the connection before the metadata was complete
};
inline constexpr std::size_t failure_class_count = 14;
std::string_view to_string(failure_class c) noexcept;
/// The class of a failed peer session (cancelled and none map to none).
failure_class from_session(session_failure f) noexcept;

/// The one completion of a gated round.
enum class outcome : std::uint8_t {
    accepted,          ///< fetched, verified, parsed, and the application accepted it
    fetch_failed,      ///< every peer attempt failed (see failure and attempts)
    delivery_rejected, ///< fetched, but the application rejected it (or no torrent callback)
    cancelled,         ///< shut down while in flight (not an attempt)
};
std::string_view to_string(outcome o) noexcept;

struct completion {
    id20 info_hash;
    outcome result = outcome::accepted;
    failure_class failure = failure_class::none; ///< fetch_failed: the class of the last attempt
    unsigned attempts = 0;                       ///< real peer attempts (cache hits excluded)
    std::optional<endpoint> peer;                ///< the peer that served the metadata, if any
    std::uint32_t round = 0; ///< retry store: failed rounds before this one (0: a first round)
};

/// A verified, parsed torrent on its way to the application.
struct delivery {
    torrent_info info;
    std::string raw; ///< the info dict exactly as received
    endpoint peer;
    std::chrono::system_clock::time_point discovered_at;
};

} // namespace dhtc::metadata
