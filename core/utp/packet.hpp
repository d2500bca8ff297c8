// The uTP (BEP-29) datagram: a 20-byte header (version 1), a chain of extensions (of which
// only selective ack, type 1, is understood; others are skipped), then the payload. Every
// datagram is hostile input: parse_packet() checks each length against the bytes it has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dhtc::utp {

enum class packet_type : std::uint8_t { data = 0, fin = 1, state = 2, reset = 3, syn = 4 };
std::string_view to_string(packet_type t) noexcept;

inline constexpr std::uint8_t protocol_version = 1;
inline constexpr std::size_t header_size = 20;
inline constexpr std::uint8_t extension_none = 0;
inline constexpr std::uint8_t extension_selective_ack = 1;
/// More extensions than this in one datagram is not a real peer.
inline constexpr std::size_t max_extensions = 8;
/// The selective-ack bitmask we send and read: 32 bytes cover 256 packets after ack_nr + 1.
inline constexpr std::size_t max_sack_bytes = 32;

struct header {
    packet_type type = packet_type::data;
    std::uint16_t connection_id = 0;
    std::uint32_t timestamp_us = 0;      ///< the sender's clock when it sent the packet
    std::uint32_t timestamp_diff_us = 0; ///< the sender's view of our one-way delay
    std::uint32_t wnd_size = 0;          ///< bytes the sender can still receive
    std::uint16_t seq_nr = 0;
    std::uint16_t ack_nr = 0;
};

/// A parsed datagram. Views point into the datagram.
struct packet_view {
    header h;
    /// The selective-ack bitmask (a multiple of 4 bytes, at most max_sack_bytes are kept:
    /// a longer mask is cut, which only forgets acks); empty when absent. Bit i (byte i / 8,
    /// least significant bit first) acknowledges ack_nr + 2 + i.
    std::string_view sack;
    std::string_view payload;
};

enum class parse_error : std::uint8_t {
    none,
    too_short,            ///< fewer than 20 bytes
    bad_version,          ///< the low nibble of the first byte is not 1
    bad_type,             ///< the high nibble is not 0..4
    truncated_extension,  ///< an extension's header or body runs past the datagram
    bad_sack_length,      ///< a selective ack that is not a non-zero multiple of 4 bytes
    too_many_extensions,  ///< more than max_extensions
    payload_not_allowed,  ///< bytes after the header of a SYN, STATE or RESET
};
std::string_view to_string(parse_error e) noexcept;

/// Parses one datagram. On an error `out` is unspecified.
parse_error parse_packet(std::string_view datagram, packet_view& out) noexcept;

/// Appends one datagram to `out`: the header, a selective ack when `sack` is not empty
/// (its size must be a multiple of 4, at most max_sack_bytes), then `payload`.
void write_packet(std::string& out, const header& h, std::string_view sack, std::string_view payload);

/// Sequence numbers wrap at 2^16: a precedes b when the forward distance from a to b is
/// below half the space.
inline bool seq_less(std::uint16_t a, std::uint16_t b) noexcept {
    return a != b && static_cast<std::uint16_t>(b - a) < 0x8000;
}

} // namespace dhtc::utp
