// The events the library's parts hand each other and the application: what the DHT side
// learns (hash events, observations), how a fetch round ends (completions), the torrents
// themselves, and what the retry store made of a round. Crawl, metadata and retry meet
// only through these types; core/api/event_json.hpp gives each its JSON envelope.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/failure.hpp"
#include "model/torrent_info.hpp"
#include "model/address.hpp"
#include "util/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::api {

// ---- From the DHT side -----------------------------------------------------------------------

enum class hash_source : std::uint8_t {
    announce,    ///< an announce_peer to us with a valid token: the peer holds the torrent
                 ///< (a hash event for the pipeline, and an observation for the application)
    sample,      ///< a BEP-51 sample whose get_peers lookup found this peer
    get_peers,   ///< someone looked the hash up (observation only; no peer)
    bep51_sample ///< a hash in a sample_infohashes reply (observation only; no peer)
};
std::string_view to_string(hash_source s) noexcept;

/// The round trip the DHT side measured to a peer's IP (the smoothed time its KRPC replies
/// took, dht/source_table.hpp), carried with the peer to the metadata side, whose deadlines
/// scale with it (issue 32). Whole milliseconds, 1..65535 (rounded up, so a known round trip
/// is never 0); 0 means unknown. Two bytes: it rides in every pending peer.
struct peer_rtt {
    std::uint16_t millis = 0;

    bool known() const noexcept { return millis != 0; }
    std::chrono::milliseconds value() const noexcept { return std::chrono::milliseconds(millis); }
    static peer_rtt of(duration d) noexcept {
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
        if (us <= 0) return peer_rtt{1};
        const auto ms = (us + 999) / 1000;
        return peer_rtt{static_cast<std::uint16_t>(ms > 65535 ? 65535 : ms)};
    }
    static peer_rtt of(const std::optional<duration>& d) noexcept { return d ? of(*d) : peer_rtt{}; }
    friend bool operator==(peer_rtt, peer_rtt) = default;
};

/// A hash with a peer that should have its metadata: the input of the metadata pipeline.
struct hash_event {
    id20 info_hash;
    endpoint peer;   ///< where to fetch from
    endpoint source; ///< the DHT node that told us
    hash_source kind = hash_source::announce;
    time_point at{};
    peer_rtt rtt{};  ///< the DHT's round trip to peer's IP, when it has one
};

/// A hash seen by the DHT side, for the application: looked up, sampled, or announced.
struct observation {
    id20 info_hash;
    endpoint source; ///< the DHT node that queried (get_peers, announce) or answered us (a sample)
    hash_source kind = hash_source::get_peers;
    time_point at{};
    std::uint16_t port = 0; ///< announce: the port announced (the peer is source's IP at it)
    std::chrono::system_clock::time_point seen_at{}; ///< wall time, stamped by the crawler's sink
};

/// The answer to a scrape request (BEP-33): the swarm's size estimated from the bloom
/// filters of the nodes closest to the hash. `responders` 0: nobody knew the swarm (the
/// estimates are then 0 and mean "unknown"). Every request is answered, at the latest after
/// crawl.scrape.timeout_secs (`timed_out`).
struct scrape_event {
    id20 info_hash;
    std::uint64_t seeders = 0;
    std::uint64_t leechers = 0;
    std::uint32_t responders = 0; ///< nodes whose reply described the swarm
    std::uint32_t queried = 0;    ///< get_peers (scrape=1) queries sent
    bool timed_out = false;       ///< the deadline ended it: no node to ask, or answers missing
    std::chrono::system_clock::time_point at{}; ///< when the scrape ended
};

// ---- From the metadata side ------------------------------------------------------------------

/// The application's answer to a torrent (the C ABI's dhtc_answer has the same values).
enum class answer : std::uint8_t {
    reject = 0, ///< not wanted: the hash is done
    accept = 1, ///< every sink holds it: the hash is done
    retry = 2,  ///< wanted but not stored (a sink failed): fetch it again later
};
/// The C ABI's int answer: 0 reject, 2 retry, anything else accepts.
answer answer_from_int(int value) noexcept;

/// The one completion of a gated round.
enum class outcome : std::uint8_t {
    accepted,          ///< fetched, verified, parsed, and the application took it
    fetch_failed,      ///< every peer attempt failed (see failure and attempts)
    delivery_rejected, ///< fetched, but the application rejected it (or no torrent callback)
    cancelled,         ///< shut down while in flight (not an attempt)
    sink_failed,       ///< fetched, but the application could not store it: fetched again later
};
inline constexpr std::size_t outcome_count = 5;
std::string_view to_string(outcome o) noexcept;

/// Which stream carried a fetch: plaintext (no MSE, or MSE with a plaintext select) or RC4.
enum class stream_encryption : std::uint8_t { plaintext = 0, rc4 = 1 };
inline constexpr std::size_t stream_encryption_count = 2;
inline std::string_view to_string(stream_encryption e) noexcept { return e == stream_encryption::rc4 ? "rc4" : "plaintext"; }

/// Which transport carried a fetch: TCP or uTP (BEP-29).
enum class stream_transport : std::uint8_t { tcp = 0, utp = 1 };
inline constexpr std::size_t stream_transport_count = 2;
inline std::string_view to_string(stream_transport t) noexcept { return t == stream_transport::utp ? "utp" : "tcp"; }

struct completion {
    id20 info_hash;
    outcome result = outcome::accepted;
    failure_class failure = failure_class::none; ///< fetch_failed: the class of the last attempt
    unsigned attempts = 0;                       ///< real peer attempts (cache hits excluded)
    std::optional<endpoint> peer;                ///< the peer that served the metadata, if any
    std::optional<stream_encryption> encryption; ///< set with peer: the stream that served it
    std::optional<stream_transport> transport;   ///< set with peer: the transport that served it
    std::uint32_t round = 0; ///< retry store: failed rounds before this one (0: a first round)
};

/// A verified, parsed torrent on its way to the application.
struct delivery {
    metadata::torrent_info info;
    std::string raw; ///< the info dict exactly as received
    endpoint peer;
    std::chrono::system_clock::time_point discovered_at;
    stream_encryption encryption = stream_encryption::plaintext; ///< the stream that served it
    stream_transport transport = stream_transport::tcp;          ///< the transport that served it
};

// ---- From the retry store --------------------------------------------------------------------

/// What the retry store made of a round, after it committed it.
enum class retry_state : std::uint8_t { dormant, done };
std::string_view to_string(retry_state s) noexcept;

struct retry_event {
    id20 info_hash;
    retry_state state = retry_state::dormant;
    std::uint32_t attempts = 0;                  ///< failed rounds so far
    failure_class failure = failure_class::none; ///< dormant: the class that failed the round
    std::int64_t next_retry_at = 0;              ///< dormant: Unix seconds
};

} // namespace dhtc::api
