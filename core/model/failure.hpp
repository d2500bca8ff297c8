// Why a fetch failed: the library's one failure vocabulary. The peer wire, the peer
// sessions, the pipeline's completions, the retry policy's class table and the events all
// speak it, so nothing translates between enums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dhtc::api {

/// Precise on purpose: retries are planned by it. The values are stored (the retry store
/// packs per-class counters and the recent classes by value, see retry_row), so existing
/// values never change and new ones are appended; there are at most 32 (the recent classes
/// are 5 bits each), and the retry store has counter slots for 15 non-none classes (it
/// gives `cancelled`, never a recorded failure, none).
enum class failure_class : std::uint8_t {
    none = 0,
    connect_refused,      ///< the connect failed before the deadline (refused, unreachable, bind error)
    connect_timeout,      ///< the deadline passed before the TCP connection was established
    handshake_failed,     ///< the BitTorrent handshake was malformed or named another torrent
    no_extension_support, ///< the peer does not speak BEP-10
    no_metadata_support,  ///< the peer's extension handshake offers no ut_metadata
    rejected,             ///< the peer rejected a request (ut_metadata msg_type 2)
    timeout,              ///< connected, but the deadline passed before the metadata was complete
    size_limit,           ///< the peer claimed a metadata size over the limit, a message was too long, or the
                          ///< attempt timed out waiting for the metadata memory budget (metadata.max_in_flight_bytes)
    hash_mismatch,        ///< the assembled metadata does not hash to the info hash
    parse_error,          ///< verified bytes that are not a valid info dict
    no_peers,             ///< no peer could be tried (none known, or all in the failure cache)
    protocol_error,       ///< the peer broke BEP-9/10 rules after the handshake
    disconnected,         ///< the peer closed the connection before the metadata was complete
    sink_failed,          ///< fetched and verified, but the application could not store it
    cancelled,            ///< the owner stopped the attempt (shutdown); not a failure of the peer
    /// The MSE/PE exchange of the last try failed: no common method, no VC or req1 within the
    /// pad window, a bad key or select, RC4 unavailable here, or the peer closed or reset the
    /// connection during the exchange (unless it also closed a plaintext try of the session:
    /// it refuses us either way, handshake_failed). A plaintext handshake the peer closes
    /// stays handshake_failed: a peer forcing PE, one without the torrent and one refusing
    /// TCP look the same on the wire.
    encryption_failed,
    /// The last try was uTP and the peer went silent: the SYN was never answered (before the
    /// deadline or uTP's own connect timeout), or an established connection lost the peer
    /// (uTP's retransmission timeout gave up). A uTP connection that answers but is too slow
    /// for the deadline is `timeout`, as over TCP.
    utp_timeout,
};
inline constexpr std::size_t failure_class_count = 18;

/// "none", "connect_refused", ...
std::string_view to_string(failure_class c) noexcept;

/// timeout, connect_timeout and utp_timeout: the peer never answered in time (a lost
/// datagram or a slow path as likely as a peer gone). A round whose peers all failed so
/// is retried sooner (retry.policy.timeout_retries).
constexpr bool is_timeout(failure_class c) noexcept {
    return c == failure_class::timeout || c == failure_class::connect_timeout || c == failure_class::utp_timeout;
}

} // namespace dhtc::api
