// A scripted BitTorrent peer for the metadata session tests: an Asio TCP server on
// 127.0.0.1 in its own thread that serves one info dict over ut_metadata the way
// libtorrent does (its handshake after reading ours, its extension handshake with
// ut_metadata 2 and metadata_size, data messages, rejects for out-of-range pieces), or
// misbehaves in one selectable way. It records what each connection sent, so tests can
// assert what the session put on the wire. Also: a simple piece_source for tests.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metadata/piece_source.hpp"
#include "metadata/wire.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::test {

/// What the fake peer does wrong (serve: nothing).
enum class peer_mode : std::uint8_t {
    serve,                  ///< libtorrent-like
    refuse,                 ///< the port is bound but not listening: connects are refused
    full_backlog,           ///< listening with a full backlog and never accepting: connects hang
    silent,                 ///< accepts and reads, never sends a byte
    close_after_handshake,  ///< sends its handshake, then closes
    short_handshake,        ///< sends 30 bytes of a handshake, then closes
    bad_pstrlen,            ///< handshake starting with 18
    bad_protocol,           ///< "BitTorrent protocoX"
    wrong_info_hash,        ///< replies with an unrelated key
    v2_key_reply,           ///< replies with SHA-256(info)[:20] and the v2 bit set
    echo_peer_id,           ///< replies with the session's own peer id
    no_extension_bit,       ///< reserved bytes all zero (and no extension handshake)
    ext_handshake_not_dict, ///< extension handshake payload "i1e"
    no_ut_metadata,         ///< m without ut_metadata
    ut_metadata_zero,       ///< m.ut_metadata = 0
    wrong_metadata_size,    ///< advertises the size + 1 (serves the real bytes)
    oversize_claim,         ///< metadata_size = 2^31
    huge_length,            ///< after the handshakes, a length field of `script.length_value`
    keepalive_flood,        ///< after the handshakes, keep-alives until the connection closes
    short_extended,         ///< after the handshakes, an extended message of length 1
    rehandshake,            ///< after the first piece, a new extension handshake moving ut_metadata to 3
    reject_all,             ///< answers every request with a reject
    reject_as_data,         ///< answers requests with {msg_type 1, piece} and no data
    stall_mid_piece,        ///< sends half of the data message for `target_piece`, then nothing
    corrupt_piece,          ///< flips the bytes of piece `target_piece`
    total_size_mismatch,    ///< data messages claim total_size = size + 1
    data_dict_past_payload, ///< the data dict holds a string running past the payload
    unrequested_piece,      ///< answers the first request with piece `target_piece` instead
    short_piece,            ///< non-last pieces one byte short
    long_last_piece,        ///< the last piece one byte too long
    ignore_requests,        ///< serves the handshakes, never answers a request
    huge_claim_silent,      ///< advertises metadata_size = 10 MiB, then never answers a request
};

/// MSE/PE on the fake peer's side (libtorrent's in_enc_policy / allowed_enc_level).
enum class peer_encryption : std::uint8_t {
    plaintext_only,   ///< pe_disabled: MSE bytes fail the handshake parse and the peer closes
    forced_rc4,       ///< pe_forced + pe_rc4: a plaintext handshake is dropped at once
    forced_plaintext, ///< pe_forced + pe_both: MSE required, plaintext selected when offered
    either,           ///< pe_enabled + pe_both: plaintext or MSE (plaintext selected when offered)
};

/// How one fake peer behaves on every connection it accepts.
struct peer_script {
    peer_mode mode = peer_mode::serve;
    peer_encryption encryption = peer_encryption::plaintext_only;
    std::chrono::milliseconds delay{0}; ///< before every message it sends (a slow peer)
    std::uint8_t ut_metadata_id = 2;    ///< its ut_metadata id (libtorrent uses 2)
    bool v2_bit = false;                ///< set the v2 bit in a reply carrying the right key (hybrid)
    /// Before serving: bitfield, have, have_all, port, an unknown message id, keep-alives, an
    /// extended message with an unknown id, and a ut_metadata message with msg_type 7.
    bool noise = false;
    bool ask_us = false;                ///< sends the session a ut_metadata request for piece 0
    std::uint32_t target_piece = 0;     ///< for stall/corrupt/unrequested
    std::uint32_t length_value = 0xFFFFFFFFu; ///< for huge_length
    /// Replaces the extension handshake payload (a raw bencoded value) when set.
    std::optional<std::string> ext_handshake_raw;
    /// Raw bytes sent right after the extension handshake (framing tests).
    std::string raw_after_ext;
    /// Replaces the ut_metadata payload of the first answer (dict + data) when set.
    std::optional<std::string> first_answer_raw;
    /// More info dicts served besides the first, under their v1 keys (plaintext only).
    std::vector<std::string> also_serves;
    /// A connection that arrives while another is open has its handshake read, then is
    /// closed: libtorrent refusing a second connection from us while it serves one.
    bool refuse_while_busy = false;
    /// A connection that arrives less than this long after the last one closed is refused
    /// the same way: libtorrent still holding our previous connection, whose close has not
    /// reached it yet (a round trip, at a few hundred milliseconds of latency).
    std::chrono::milliseconds refuse_after_close{0};
};

/// What one connection received from the session under test.
struct conversation {
    bool got_handshake = false;
    std::array<std::uint8_t, 8> reserved{};
    id20 info_hash;
    id20 peer_id;
    std::vector<std::uint8_t> message_ids; ///< every message id after the handshake, in order
    std::vector<std::string> ext_handshakes; ///< payloads of the session's extension handshakes
    std::vector<std::uint8_t> ext_ids;     ///< extended ids of its non-handshake extended messages
    std::vector<std::uint32_t> requests;   ///< pieces requested, in order
    std::vector<std::uint32_t> rejects;    ///< pieces the session rejected (answers to ask_us)
    bool ended = false;                    ///< the connection is over (closed by either side)
    bool mse = false;                      ///< the session completed an MSE exchange
    std::uint32_t mse_selected = 0;        ///< 1 plaintext, 2 RC4
};

class fake_peer {
public:
    /// Starts serving `info_dict` at once on 127.0.0.1 (port chosen by the OS).
    explicit fake_peer(std::string info_dict, peer_script script = {});
    ~fake_peer();
    fake_peer(const fake_peer&) = delete;
    fake_peer& operator=(const fake_peer&) = delete;

    endpoint local_endpoint() const noexcept { return local_; }
    /// SHA-1 of the info dict: the key to connect with.
    const id20& info_hash() const noexcept { return v1_key_; }
    /// SHA-256 of the info dict truncated to 20 bytes.
    const id20& v2_key() const noexcept { return v2_key_; }
    const std::string& info_dict() const noexcept { return info_; }

    /// A copy of every connection's record so far.
    std::vector<conversation> conversations() const;
    /// Waits until at least `n` connections have ended; false on timeout.
    bool wait_ended(std::size_t n, std::chrono::milliseconds timeout) const;
    /// Stops the server thread and closes every connection. Idempotent.
    void stop();

    struct impl;

private:
    std::string info_;
    peer_script script_;
    id20 v1_key_;
    id20 v2_key_;
    endpoint local_;
    std::unique_ptr<impl> impl_;
};

/// A bencoded info dict of exactly `size` bytes (a single-file torrent padded in `pieces`
/// -- not a valid torrent, which the session does not care about), deterministic in `seed`.
std::string make_info_dict(std::size_t size, std::uint32_t seed = 1);

/// A piece_source for tests: leases the first free missing piece, assembles into a
/// wire::metadata_buffer, and records who delivered what. Not thread-safe (one io_context).
class simple_piece_source : public metadata::piece_source {
public:
    /// `known_size` != 0: the job already knows the size (as from an earlier peer).
    explicit simple_piece_source(std::size_t known_size = 0);

    bool on_metadata_size(std::size_t size) override;
    std::optional<std::uint32_t> acquire(std::uint32_t session) override;
    bool deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) override;
    void release(std::uint32_t session) override;
    bool complete() const override;

    /// The assembled bytes once complete.
    std::string_view bytes() const noexcept { return buf_.bytes(); }
    std::size_t size() const noexcept { return buf_.size(); }
    std::size_t pieces_by(std::uint32_t session) const;
    std::size_t releases_of(std::uint32_t session) const;
    std::size_t max_held(std::uint32_t session) const;
    std::size_t held(std::uint32_t session) const;
    /// Called after every successful deliver (tests use it to act mid-transfer).
    std::function<void(std::uint32_t session, std::uint32_t piece)> on_deliver;

private:
    wire::metadata_buffer buf_;
    std::vector<std::int64_t> owner_; // session holding each piece's lease, -1 when none
    std::map<std::uint32_t, std::size_t> delivered_;
    std::map<std::uint32_t, std::size_t> releases_;
    std::map<std::uint32_t, std::size_t> max_held_;
};

} // namespace dhtc::test
