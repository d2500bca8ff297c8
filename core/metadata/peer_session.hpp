// One conversation (over TCP or uTP, see byte_stream.hpp) with one peer that fetches metadata pieces: the BEP-3 handshake, the
// BEP-10 extension handshake and BEP-9 ut_metadata requests, under a single end-to-end
// deadline. Pieces come from and go to a piece_source, so several sessions can share the
// pieces of one info dict. The bytes are not verified here: the job hashes the assembled
// dict and penalises peers.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

#include <asio/awaitable.hpp>

#include "model/events.hpp"
#include "metadata/mse.hpp"
#include "metadata/piece_source.hpp"
#include "metadata/wire.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::metadata {

/// How a session ended. Stable names (to_string) for logs and counters.
/// How a session ended: the library's one failure vocabulary (none: the piece source is
/// complete; cancelled: the owner cancelled the coroutine).
using session_failure = api::failure_class;

/// The most leases one session holds at once.
inline constexpr std::uint32_t max_pipeline = 16;
/// Our ut_metadata id in the extension handshake: the peer addresses us with it.
inline constexpr std::uint8_t our_ut_metadata_id = 1;
/// How often an idle session (nothing to request, job not complete) looks for work again.
inline constexpr std::chrono::milliseconds idle_poll_interval{20};

/// Whether a session speaks MSE/PE (metadata.encryption). With a prefer_* policy a first try
/// that fails before the BitTorrent handshake (the peer closed, the MSE exchange failed, or
/// the first try's half of the time ran out) is followed by one try in the other mode, on a
/// new connection, inside the same deadline. require and disable never fall back.
enum class encryption_policy : std::uint8_t {
    prefer_plaintext, ///< plaintext first, then MSE offering RC4 and plaintext
    prefer_encrypted, ///< MSE first (offering RC4 and plaintext), then plaintext
    require,          ///< MSE with RC4 only
    disable,          ///< plaintext only
};
std::string_view to_string(encryption_policy p) noexcept;
std::optional<encryption_policy> parse_encryption_policy(std::string_view s) noexcept;

/// Which stream carried the session (after an MSE plaintext select: plaintext).
using api::stream_encryption;
using api::stream_transport;

/// Which transports a session uses (metadata.transports). With both, TCP goes first and
/// uTP follows once, inside the same deadline, after a refused connect, a TCP connect
/// still silent at half the remaining time, or a connection the peer closed before its
/// BitTorrent handshake (when the encryption fallback, which goes first, is used up).
/// utp_first is the reverse, as libtorrent connects out: uTP, then TCP once, after a RESET,
/// a SYN unanswered for utp_first_connect_limit, or an early close.
enum class transport_policy : std::uint8_t { tcp, utp, both, utp_first };
/// How long a first uTP connect may stay silent before TCP is tried (libtorrent's
/// utp_connect_timeout): a peer without uTP never answers a SYN, and the SYN's own
/// retransmissions would spend the deadline.
inline constexpr std::chrono::seconds utp_first_connect_limit{3};
std::string_view to_string(transport_policy p) noexcept;
std::optional<transport_policy> parse_transport_policy(std::string_view s) noexcept;

class utp_host;

/// Round trips a session may still need after a connect (the MSE exchange, the BitTorrent and
/// extension handshakes, the pieces), and slack for one retransmission timeout on the way:
/// at a 300 ms round trip the deadline becomes at least connect + 4 s.
inline constexpr unsigned deadline_rtts = 10;
inline constexpr std::chrono::milliseconds deadline_loss_slack{1000};

/// With the DHT's round trip to the peer known before any connect (session_request::dht_rtt,
/// issue 32), a session plans for this many of them: its connect, one fallback's connect and
/// the deadline_rtts after it. Its deadline becomes at least start + dht_plan_rtts round trips
/// + deadline_loss_slack, and a uTP-first SYN wait clamp(dht_plan_rtts round trips,
/// utp_first_connect_limit, utp_first_connect_limit_max), no longer halved: a longer wait
/// covers uTP's SYN resent at 1 s and 3 s and the last one's answer. At the default 4 s
/// neither changes below a 250 ms round trip. The deadline then also leaves the TCP
/// fallback its connect and the deadline_rtts after it. Both stay within deadline_limit.
inline constexpr unsigned dht_plan_rtts = deadline_rtts + 2;
inline constexpr std::chrono::seconds utp_first_connect_limit_max{6};

/// A session tries at most this often: the first try, one encryption fallback and one
/// transport fallback.
inline constexpr std::size_t max_tries = 3;

/// The classes a session (one try) ends with; the others (none, no_peers, hash_mismatch,
/// parse_error, sink_failed) belong to the job, and cancelled is no failure. The metrics
/// per transport and encryption count failures by these (docs/metrics.md).
inline constexpr api::failure_class session_failure_classes[] = {
    api::failure_class::connect_refused,      api::failure_class::connect_timeout,
    api::failure_class::utp_timeout,          api::failure_class::handshake_failed,
    api::failure_class::encryption_failed,    api::failure_class::no_extension_support,
    api::failure_class::no_metadata_support,  api::failure_class::rejected,
    api::failure_class::timeout,              api::failure_class::size_limit,
    api::failure_class::protocol_error,       api::failure_class::disconnected,
};
/// Bits of session_result::try_modes.
inline constexpr std::uint8_t try_mse = 1;
inline constexpr std::uint8_t try_utp = 2;

/// What to fetch, from whom, and within which limits.
struct session_request {
    id20 info_hash;   ///< the 20-byte key we saw (v1, or a truncated v2 hash)
    endpoint peer;
    id20 peer_id;     ///< random per connection; supplied by the caller
    /// One deadline for the whole attempt: connect, handshakes and every piece ...
    std::chrono::steady_clock::time_point deadline;
    /// ... which the round trip each connect measured may push back, up to this (issue 32):
    /// to the connect's end + deadline_rtts round trips + deadline_loss_slack. Not later
    /// than `deadline` (the default): never pushed back.
    std::chrono::steady_clock::time_point deadline_limit{};
    /// The DHT's round trip to the peer's IP, when known: the session plans with it until a
    /// connect measures its own (plan_session, deadline_after_connect).
    api::peer_rtt dht_rtt{};
    std::size_t max_metadata_size = wire::default_max_metadata_size;
    /// Source address for the connection (port chosen by the OS); the default route when empty.
    std::optional<ip_address> bind_address;
    /// Cap on one framed message of any kind (bitfields can be large). ut_metadata messages
    /// are capped much lower (max_ut_metadata_message) whatever this says.
    std::size_t max_message = wire::default_max_message;
    /// Leases held (requests in flight) at once: 1..max_pipeline (clamped).
    std::uint32_t pipeline = 4;
    encryption_policy encryption = encryption_policy::prefer_plaintext;
    transport_policy transports = transport_policy::tcp;
    /// The uTP sockets (needed unless transports is tcp); on the session's executor.
    std::shared_ptr<utp_host> utp;
};

/// A ut_metadata message is at most its dict (wire::ut_metadata_dict_limits) plus one
/// 16 KiB piece, after the message id and the extended id.
inline constexpr std::size_t max_ut_metadata_message =
    2 + wire::ut_metadata_dict_limits.max_size + wire::metadata_piece_size;

/// The outcome of one session.
struct session_result {
    session_failure failure = session_failure::none;
    wire::wire_error error = wire::wire_error::none; ///< the precise cause when it was the wire
    std::error_code net_error;    ///< the socket error behind connect_refused / disconnected
    bool connected = false;       ///< the last try's connection was established
    std::size_t metadata_size = 0; ///< what the peer advertised (0 before its extension handshake)
    std::uint32_t pieces_received = 0; ///< pieces the source accepted from this peer
    std::uint64_t bytes_received = 0;  ///< every byte read from the socket
    std::chrono::steady_clock::duration elapsed{};
    /// The stream of the last try (the one that served the fetch when it succeeded).
    stream_encryption encryption = stream_encryption::plaintext;
    bool used_mse = false;     ///< the last try spoke MSE (RC4 or plaintext selected)
    stream_transport transport = stream_transport::tcp; ///< the transport of the last try
    std::uint8_t tries = 0;    ///< 1 to max_tries (each fallback adds one)
    /// Each try's mode (try_mse | try_utp bits), the first `tries` entries.
    std::array<std::uint8_t, max_tries> try_modes{};
    /// Each try's failure, the first `tries` entries (the last one is `failure`).
    std::array<session_failure, max_tries> try_failures{};
    /// Why the MSE exchange failed on the protocol (the failure is then encryption_failed;
    /// none when the peer closed during the exchange, also encryption_failed).
    metadata::mse::mse_error mse_error = metadata::mse::mse_error::none;

    bool deadline_extended = false;  ///< a slow round trip pushed the deadline back
    bool saved_by_extension = false; ///< ... and the session succeeded after the first deadline
    /// The DHT's round trip lengthened the deadline or the uTP-first SYN wait (plan_session) ...
    bool dht_rtt_extended = false;
    /// ... and the session succeeded after the unscaled deadline, or its uTP connect after
    /// the unscaled SYN wait (it may count as saved_by_extension too).
    bool saved_by_dht_rtt = false;

    bool ok() const noexcept { return failure == session_failure::none; }
};

/// What a session plans before its first connect, from its request and start (pure: unit
/// tests give it any instant).
struct session_plan {
    std::chrono::steady_clock::time_point deadline;
    /// A uTP-first connect's limit before TCP is tried; `scaled`: longer than
    /// utp_first_connect_limit, and not halved like the unscaled one.
    std::chrono::steady_clock::duration utp_syn_wait = utp_first_connect_limit;
    bool syn_wait_scaled = false;
    bool extended = false; ///< the DHT's round trip lengthened the deadline or the SYN wait
};
session_plan plan_session(const session_request& req, std::chrono::steady_clock::time_point start) noexcept;

/// The deadline once a connect ending at `now` measured `rtt`: now + deadline_rtts round trips
/// + deadline_loss_slack, within [req.deadline, req.deadline_limit]. The later measurement
/// wins: it replaces whatever the DHT's round trip planned, shorter or longer.
std::chrono::steady_clock::time_point deadline_after_connect(const session_request& req,
                                                             std::chrono::steady_clock::time_point now,
                                                             std::chrono::steady_clock::duration rtt) noexcept;

/// Runs one session to its end; never throws (except std::bad_alloc from the coroutine
/// machinery itself). Success means source.complete(), whoever fetched the pieces.
///
/// Threading: run it on a single-threaded io_context or a strand; `source` is called only
/// from there. `source` must outlive the coroutine (also its destruction: release() runs
/// in the frame's destructor when the io_context is destroyed with the session suspended).
///
/// Ending early: the coroutine honours terminal cancellation through its cancellation slot
/// (co_spawn with asio::bind_cancellation_slot, or an enclosing awaitable operator) and
/// then returns `cancelled` promptly. Stopping the io_context suspends it; destroying the io_context destroys it
/// (the socket is closed and release() is called, but no result is produced).
///
/// `request` is taken by value: a coroutine keeps reference parameters as references,
/// which would dangle once the caller's temporary is gone.
asio::awaitable<session_result> run_peer_session(session_request request, piece_source& source,
                                                 std::uint32_t session_slot);

} // namespace dhtc::metadata
