// The peer-wire codec for fetching metadata: the BEP-3 handshake, length-prefixed message
// framing, the BEP-10 extension handshake and BEP-9 ut_metadata messages, plus the buffer
// that assembles metadata pieces. Pure functions over bytes: no sockets, no clocks, nothing
// throws. The peer connection (a coroutine) owns the socket and calls these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/failure.hpp"
#include "bencode/decoder.hpp"
#include "util/id20.hpp"

namespace dhtc::wire {

/// Size of a BEP-3 handshake: pstrlen, "BitTorrent protocol", 8 reserved bytes, info hash, peer id.
inline constexpr std::size_t handshake_size = 68;
/// The only protocol string accepted and sent.
inline constexpr std::string_view protocol_string = "BitTorrent protocol";
/// BEP-10 extended message id; the extension handshake is extended id 0 inside it.
inline constexpr std::uint8_t msg_extended = 20;
inline constexpr std::uint8_t ext_handshake_id = 0;
/// BEP-9 metadata pieces are 16 KiB, except the last.
inline constexpr std::size_t metadata_piece_size = 16384;
/// Default cap on an advertised metadata_size (info dicts beyond this are refused).
inline constexpr std::size_t default_max_metadata_size = std::size_t{10} << 20;
/// Default cap on one framed message (length field value: id + payload). Large enough for
/// the bitfield of a torrent with 8M pieces, far above any metadata message (~16.5 KiB).
inline constexpr std::size_t default_max_message = std::size_t{1} << 20;

/// Decode limits for a peer's extension handshake (a flat dict with one nested dict `m`,
/// but clients add keys freely: yourip, ipv6, complete_ago, lt_donthave, ...).
inline constexpr bencode::limits ext_handshake_limits{8, 512, 16384};
/// Limits for the bencoded dict that starts a ut_metadata message
/// ({msg_type, piece, total_size} and possibly a few unknown keys).
inline constexpr bencode::limits ut_metadata_dict_limits{4, 64, 1024};

/// Precise reasons for a failure; classify() maps them to coarse failure classes.
enum class wire_error : std::uint8_t {
    none = 0,
    // handshake_failed
    short_handshake,        ///< fewer than 68 bytes (peer closed early)
    bad_pstrlen,            ///< first byte is not 19
    bad_protocol,           ///< not "BitTorrent protocol"
    info_hash_mismatch,     ///< the peer answered with another info hash (e.g. a v2-truncated one)
    own_peer_id,            ///< the peer id is ours: we connected to ourselves
    // no_extension_support
    no_extension_bit,       ///< reserved[5] & 0x10 clear: no BEP-10, so no ut_metadata
    // no_metadata_support
    no_ut_metadata,         ///< m (or m.ut_metadata) missing
    ut_metadata_disabled,   ///< m.ut_metadata == 0
    no_metadata_size,       ///< metadata_size missing: the peer cannot serve metadata (yet)
    // rejected
    rejected,               ///< the peer sent ut_metadata msg_type 2
    // size_limit
    metadata_too_large,     ///< metadata_size over the caller's cap
    message_too_large,      ///< a framed message longer than the caller's cap
    // protocol_error
    not_extended,           ///< parse_extended() on a message whose id is not 20
    short_extended_message, ///< an extended message without its extended id (length 1)
    bad_ext_handshake,      ///< extension handshake payload is not a valid bencoded dict
    bad_ext_m,              ///< m present but not a dict
    bad_ut_metadata_id,     ///< m.ut_metadata not an integer in 0..255
    bad_metadata_size,      ///< metadata_size not an integer, zero or negative
    bad_ut_metadata_dict,   ///< the ut_metadata payload does not start with a valid bencoded dict
    bad_msg_type,           ///< msg_type missing or not an integer; or not the kind expected
    bad_piece,              ///< piece missing, not an integer or negative
    piece_out_of_range,     ///< piece >= number of pieces
    unrequested_piece,      ///< a data piece we did not ask for
    bad_total_size,         ///< total_size missing, not an integer, or != metadata_size
    bad_piece_length,       ///< a non-last piece not 16 KiB, or a last piece short of the remainder
    missing_data,           ///< msg_type 1 with no data bytes (a reject sent as data)
    trailing_bytes,         ///< bytes after a request/reject dict, or past the total size
};

/// Stable name of an error ("bad_pstrlen", ...).
std::string_view to_string(wire_error e) noexcept;

/// The coarse classes the fetch pipeline reports and counts.
/// Failures speak the library's one vocabulary (model/failure.hpp).
using api::failure_class;
/// Maps a precise error to its class (none → none).
failure_class classify(wire_error e) noexcept;

// ---- handshake -----------------------------------------------------------------------------

/// A parsed handshake. Views nothing: all fields are copies.
struct handshake {
    std::uint8_t reserved[8]{};
    id20 info_hash;
    id20 peer_id;
    bool supports_extensions = false; ///< reserved[5] & 0x10 (BEP-10)
    bool supports_v2 = false;         ///< reserved[7] & 0x10 (BEP-52 upgrade bit)
};

/// Appends our 68-byte handshake to `out`: extension bit set, v2 bit clear (setting it on a
/// v1-only torrent makes libtorrent disconnect). Returns false only if `out` cannot grow
/// (then `out` is unchanged).
bool build_handshake(std::string& out, const id20& info_hash, const id20& peer_id) noexcept;

/// Parses the first 68 bytes of `in` (bytes after them belong to the message stream).
/// Checks what a prefix already shows first, so a wrong pstrlen or protocol string is
/// reported even before 68 bytes arrived: bad_pstrlen, bad_protocol, then short_handshake.
wire_error parse_handshake(std::string_view in, handshake& out) noexcept;

/// Judges a parsed handshake against the connection: own_peer_id if the peer id is ours,
/// info_hash_mismatch if the hash is not the one we asked for (libtorrent may answer a
/// hybrid with its other key), no_extension_bit if BEP-10 is not offered; else none.
wire_error check_handshake(const handshake& h, const id20& info_hash, const id20& our_peer_id) noexcept;

// ---- framing ---------------------------------------------------------------------------------

enum class frame_status : std::uint8_t {
    need_more,  ///< not a whole message yet: read more and call again
    message,    ///< `out` holds one message
    keep_alive, ///< a zero-length message; out.consumed == 4 (the caller may count floods)
    too_large,  ///< the length field exceeds max_message: drop the connection
};

std::string_view to_string(frame_status s) noexcept;

/// One framed message, viewing the caller's buffer.
struct message_view {
    std::uint8_t id = 0;
    std::string_view payload; ///< the bytes after the id
    std::size_t consumed = 0; ///< bytes to drop from the front of the buffer
    std::uint32_t length = 0; ///< the length field (also set for too_large)
};

/// Reads the message at the front of `buffered`. `max_message` caps the length field.
frame_status next_message(std::string_view buffered, std::size_t max_message, message_view& out) noexcept;

/// An extended (id 20) message split into its extended id and payload.
struct extended_view {
    std::uint8_t ext_id = 0;
    std::string_view payload;
};

/// not_extended if m.id != 20, short_extended_message if the extended id is missing.
wire_error parse_extended(const message_view& m, extended_view& out) noexcept;

/// Appends a framed extended message: length, 20, ext_id, payload. False if the payload does
/// not fit a length field or `out` cannot grow (then `out` is unchanged).
bool build_extended(std::string& out, std::uint8_t ext_id, std::string_view payload) noexcept;

// ---- BEP-10 extension handshake -----------------------------------------------------------

/// What we advertise. We never send upload_only, metadata_size, a bitfield or have_all.
struct ext_handshake_options {
    std::uint8_t ut_metadata_id = 1; ///< our id for ut_metadata: the peer addresses us with it
    std::string_view client;         ///< `v`, omitted when empty
    std::uint32_t reqq = 0;          ///< `reqq`, omitted when 0
};

/// Appends our framed extension handshake. False if ut_metadata_id is 0 or `out` cannot grow.
bool build_ext_handshake(std::string& out, const ext_handshake_options& opt) noexcept;

/// A peer's extension handshake. Views point into the parsed payload.
struct ext_handshake {
    std::uint8_t ut_metadata = 0;   ///< the id to address the peer's ut_metadata with; 0 = none
    std::size_t metadata_size = 0;  ///< valid when parse returned none
    std::string_view client;        ///< `v` when a string
    std::int64_t reqq = 0;          ///< `reqq` when an integer
    bool upload_only = false;       ///< upload_only integer != 0
    bencode::decode_result decode;  ///< the decoder's verdict when bad_ext_handshake
};

/// Parses the payload of extended message 0. Fields that parsed are filled even when an
/// error is returned (a repeated handshake may carry new ids but no metadata_size; the caller
/// keeps the latest ids). Checked in order: bad_ext_handshake, bad_ext_m, bad_ut_metadata_id,
/// no_ut_metadata / ut_metadata_disabled, no_metadata_size, bad_metadata_size,
/// metadata_too_large. `scratch` is the caller's reusable token storage.
wire_error parse_ext_handshake(std::string_view payload, bencode::document& scratch, ext_handshake& out,
                               std::size_t max_metadata_size = default_max_metadata_size) noexcept;

// ---- BEP-9 ut_metadata ------------------------------------------------------------------

enum class ut_kind : std::uint8_t {
    request = 0,
    data = 1,
    reject = 2,
    ignore, ///< an unknown msg_type: BEP-9 says to ignore it
};

/// A parsed ut_metadata message. `data` views the payload.
struct ut_metadata_message {
    ut_kind kind = ut_kind::ignore;
    std::int64_t msg_type = -1;
    std::int64_t piece = -1;
    std::int64_t total_size = -1; ///< data only
    std::string_view data;        ///< data only: the raw bytes after the dict
    bencode::decode_result decode; ///< the dict's problem when bad_ut_metadata_dict
};

/// Appends a framed request {msg_type 0, piece}, addressed with the PEER's ut_metadata id.
bool build_metadata_request(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece) noexcept;
/// Appends a framed data message {msg_type 1, piece, total_size} + data (the serving side;
/// used by tests and simulations).
bool build_metadata_data(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece,
                         std::size_t total_size, std::string_view data) noexcept;
/// Appends a framed reject {msg_type 2, piece}: our answer to any request.
bool build_metadata_reject(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece) noexcept;

/// Finds where the bencoded value at the start of `in` ends (by structure, with the depth,
/// token and size limits of `lim`) and validates exactly that prefix with bencode::decode
/// into `scratch`. On success `end` is its length and scratch.root() the value.
bencode::decode_result decode_prefix(std::string_view in, bencode::document& scratch, std::size_t& end,
                                     const bencode::limits& lim) noexcept;

/// Parses the payload of a ut_metadata extended message. The dict's end is found by parsing.
/// Unknown msg_type → kind ignore and none (nothing else checked). Errors:
/// bad_ut_metadata_dict, bad_msg_type, bad_piece, missing_data and bad_total_size (data),
/// trailing_bytes (bytes after a request or reject).
wire_error parse_ut_metadata(std::string_view payload, bencode::document& scratch, ut_metadata_message& out) noexcept;

/// Passed as expected_piece to check_data() by a caller that tracks several outstanding
/// requests itself (it must still check membership).
inline constexpr std::int64_t any_piece = -1;

/// Number of metadata pieces: ceil(size / 16384).
std::size_t piece_count(std::size_t metadata_size) noexcept;
/// Expected length of piece `piece` (0 when out of range).
std::size_t piece_length(std::size_t metadata_size, std::size_t piece) noexcept;

/// Validates a parsed data message against what we expect. Checked in order: rejected (a
/// reject), bad_msg_type (a request or ignored message: dispatch on kind first), bad_piece (negative), piece_out_of_range, unrequested_piece, bad_total_size,
/// then the length: trailing_bytes for a last piece longer than the remainder, else
/// bad_piece_length when not exactly 16 KiB (or the remainder).
wire_error check_data(const ut_metadata_message& m, std::size_t metadata_size, std::int64_t expected_piece) noexcept;

// ---- assembly -------------------------------------------------------------------------------

/// Collects the pieces of one metadata blob. Memory follows what arrived, never the claimed
/// size: each piece is kept in its own exact-length block until the last one arrives, then
/// they are joined into one buffer (the blocks are freed as they are copied). reset()
/// allocates nothing but the per-piece bookkeeping (9 bytes per 16 KiB piece).
/// Not thread-safe; owned by whoever schedules the pieces.
class metadata_buffer {
public:
    /// Forgets all pieces and sets the size. bad_metadata_size for 0, metadata_too_large
    /// above `max_metadata_size` or when the bookkeeping cannot be allocated.
    wire_error reset(std::size_t metadata_size, std::size_t max_metadata_size = default_max_metadata_size) noexcept;

    std::size_t size() const noexcept { return size_; }
    std::size_t pieces() const noexcept { return present_.size(); }
    std::size_t received() const noexcept { return received_; }
    bool has(std::size_t piece) const noexcept { return piece < present_.size() && present_[piece]; }
    bool complete() const noexcept { return size_ != 0 && received_ == present_.size(); }
    /// The first missing piece at or after `from`, or pieces() when none.
    std::size_t next_missing(std::size_t from = 0) const noexcept;

    /// Copies a piece in. piece_out_of_range, or bad_piece_length / trailing_bytes when the
    /// length is not exactly piece_length(); metadata_too_large when the copy cannot be
    /// allocated. A piece already present is kept (first copy wins; the hash check settles
    /// disputes) and none is returned.
    wire_error store(std::size_t piece, std::string_view data) noexcept;

    /// The assembled bytes once complete(); empty before.
    std::string_view bytes() const noexcept;
    /// Bytes of piece data held now (the sum of the received pieces' lengths).
    std::size_t held_bytes() const noexcept { return held_; }

private:
    std::string buf_;                               // the joined dict, once complete
    std::vector<std::unique_ptr<char[]>> chunks_;   // received pieces until then
    std::vector<bool> present_;
    std::size_t size_ = 0;
    std::size_t received_ = 0;
    std::size_t held_ = 0;
};

} // namespace dhtc::wire
