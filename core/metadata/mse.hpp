// Message Stream Encryption (MSE/PE, the obfuscation handshake Vuze, libtorrent and
// Transmission speak) as socket-free state machines: bytes in, bytes out. The initiator is
// what a metadata session uses; the responder serves tests (and a test network seeder).
//
// The exchange (A = initiator, B = responder, HASH = SHA-1, S = DH secret, SKEY = info hash):
//   A->B  Ya (96 bytes) PadA (0..512 random)
//   B->A  Yb (96 bytes) PadB (0..512 random)
//   A->B  HASH('req1',S)  HASH('req2',SKEY) xor HASH('req3',S)
//         RC4_A(VC, crypto_provide, len(PadC), PadC, len(IA)), RC4_A(IA)
//   B->A  RC4_B(VC, crypto_select, len(PadD), PadD), then the payload stream
// RC4_A is keyed HASH('keyA',S,SKEY), RC4_B HASH('keyB',S,SKEY), each with its first 1024
// keystream bytes discarded. After a plaintext select both payload streams are plain.
//
// Every byte the peer sends is hostile: padding is at most 512 bytes, the initiator finds B's
// VC within PadB + VC = 520 bytes after Yb, the responder finds HASH('req1',S) within
// PadA + 20 = 532 bytes after Ya (628 bytes from the start of A's stream), and neither side buffers
// more than max_handshake_bytes before it is done. The deadline is the caller's: the
// machine holds no clock (peer_session bounds the MSE phase by its own timer).
//
// RC4 needs OpenSSL's legacy provider on OpenSSL 3. rc4_status() loads it (and the default
// provider, which an explicit load would otherwise displace) once per process; when it
// cannot be loaded every handshake fails with mse_error::rc4_unavailable and the message
// says why (see docs/options.md, metadata.encryption).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/id20.hpp"

namespace dhtc::metadata::mse {

inline constexpr std::size_t key_size = 96;       ///< a DH public key, big-endian
inline constexpr std::size_t max_pad = 512;       ///< PadA, PadB, PadC, PadD
inline constexpr std::size_t vc_size = 8;
inline constexpr std::size_t max_ia = 1024;       ///< our cap on len(IA) from a peer
/// The most either side buffers before the handshake is done (Y, the longest pad, the
/// fixed fields, the longest PadC/PadD and IA).
inline constexpr std::size_t max_handshake_bytes = key_size + max_pad + 20 + 20 + vc_size + 6 + max_pad + 2 + max_ia;

inline constexpr std::uint32_t crypto_plaintext = 0x01;
inline constexpr std::uint32_t crypto_rc4 = 0x02;

enum class mse_error : std::uint8_t {
    none = 0,
    rc4_unavailable,   ///< OpenSSL could not give us RC4 (the legacy provider is missing)
    crypto_failure,    ///< a big-number or cipher call failed (allocation)
    bad_public_key,    ///< the peer's key is not in 2..P-2
    vc_not_found,      ///< no VC within the pad window (initiator)
    req1_not_found,    ///< no HASH('req1',S) within the pad window (responder)
    unknown_skey,      ///< HASH('req2',SKEY) xor HASH('req3',S) names another torrent
    bad_vc,            ///< the decrypted VC is not zero (responder)
    bad_select,        ///< crypto_select is not exactly one method we offered
    no_common_method,  ///< the initiator offers nothing the responder allows
    pad_too_long,      ///< a len(Pad) field over 512
    ia_too_long,       ///< len(IA) over max_ia
};
std::string_view to_string(mse_error e) noexcept;

/// Whether RC4 can be had. Loads OpenSSL's legacy and default providers once per process.
/// `why` is empty when it can, else a sentence for logs and errors.
bool rc4_available(std::string* why = nullptr);

/// One direction's RC4 keystream (the first 1024 bytes already discarded).
class rc4 {
public:
    /// Null when RC4 is unavailable or an allocation failed.
    static std::unique_ptr<rc4> make(const std::array<std::uint8_t, 20>& key);
    ~rc4();
    rc4(const rc4&) = delete;
    rc4& operator=(const rc4&) = delete;
    /// In place; the keystream advances by n.
    void apply(void* data, std::size_t n) noexcept;

private:
    rc4() = default;
    void* ctx_ = nullptr; // EVP_CIPHER_CTX
};

/// Fills n bytes with randomness (private keys, pad lengths and pad bytes). The default is
/// OpenSSL's RAND_bytes; tests and fuzzers inject a deterministic one.
using random_source = std::function<void(void* out, std::size_t n)>;

/// A deterministic source (xorshift64) for tests and fuzzers, so every failure reproduces.
/// Never for real connections.
inline random_source seeded_random(std::uint64_t seed) {
    return [state = seed | 1](void* out, std::size_t n) mutable {
        auto* p = static_cast<unsigned char*>(out);
        for (std::size_t i = 0; i < n; ++i) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            p[i] = static_cast<unsigned char>(state);
        }
    };
}

enum class status : std::uint8_t { need_more, done, failed };

/// What a finished handshake hands the session: the ciphers (both null after a plaintext
/// select) and the payload bytes that arrived with the handshake, already decrypted.
struct outcome {
    std::uint32_t selected = 0;   ///< crypto_plaintext or crypto_rc4
    std::unique_ptr<rc4> encrypt; ///< our outgoing stream
    std::unique_ptr<rc4> decrypt; ///< the peer's incoming stream
    std::string payload;          ///< initiator: after PadD; responder: IA and what followed
};

class dh_key; // private key and public key (OpenSSL BIGNUM)

/// The outgoing side. Construct, send start(), then feed() what the peer sends until done.
class initiator {
public:
    /// `provide`: crypto_plaintext | crypto_rc4 (non-zero). `ia`: the initial payload (our
    /// BitTorrent handshake), always sent RC4-encrypted inside the handshake.
    initiator(const id20& skey, std::uint32_t provide, std::string ia, random_source rng = {});
    ~initiator();
    initiator(const initiator&) = delete;
    initiator& operator=(const initiator&) = delete;

    /// Appends Ya and PadA to `out`. failed: error() says why (rc4_unavailable...).
    status start(std::string& out);
    /// Takes bytes from the peer; appends to `out` what must be sent next.
    status feed(std::string_view in, std::string& out);
    mse_error error() const noexcept { return error_; }
    /// After done: the ciphers and payload (once).
    outcome take() noexcept { return std::move(outcome_); }

private:
    status fail(mse_error e) noexcept;
    enum class phase : std::uint8_t { init, wait_key, sync_vc, select, pad_d, done, failed };

    id20 skey_;
    std::uint32_t provide_;
    std::string ia_;
    random_source rng_;
    std::unique_ptr<dh_key> key_;
    phase phase_ = phase::init;
    mse_error error_ = mse_error::none;
    std::string buf_;                   // peer bytes not yet consumed
    std::array<std::uint8_t, vc_size> vc_pattern_{};
    std::size_t scanned_ = 0;           // bytes after Yb already passed while syncing
    std::size_t pad_d_ = 0;
    outcome outcome_;
};

/// HASH('req2', SKEY): what an initiator's SKEY field hides, once HASH('req3', S) is
/// taken off. A responder holding many torrents keys them by it.
std::array<std::uint8_t, 20> req2_hash(const id20& skey) noexcept;

/// Finds the SKEY (info hash) whose req2_hash() is `req2`, if the caller holds it.
using skey_finder = std::function<std::optional<id20>(const std::array<std::uint8_t, 20>& req2)>;

/// The incoming side. `allowed`: what we accept; with both, `prefer_rc4` decides
/// (libtorrent's prefer_rc4).
class responder {
public:
    /// For one SKEY: any other fails with unknown_skey.
    responder(const id20& skey, std::uint32_t allowed, bool prefer_rc4, random_source rng = {});
    /// For whichever SKEY `find` knows (a seeder with many torrents); skey() says which.
    responder(skey_finder find, std::uint32_t allowed, bool prefer_rc4, random_source rng = {});
    ~responder();
    responder(const responder&) = delete;
    responder& operator=(const responder&) = delete;

    status feed(std::string_view in, std::string& out);
    mse_error error() const noexcept { return error_; }
    /// The SKEY the initiator named (valid once past its SKEY field, e.g. after done).
    const id20& skey() const noexcept { return skey_; }
    outcome take() noexcept { return std::move(outcome_); }

private:
    status fail(mse_error e) noexcept;
    enum class phase : std::uint8_t { wait_key, sync_req1, skey, fixed, pad_c, ia_len, ia, done, failed };

    id20 skey_;
    skey_finder find_; // empty: only skey_
    std::uint32_t allowed_;
    bool prefer_rc4_;
    random_source rng_;
    std::unique_ptr<dh_key> key_;
    phase phase_ = phase::wait_key;
    mse_error error_ = mse_error::none;
    std::string buf_;
    std::array<std::uint8_t, key_size> secret_{};
    std::array<std::uint8_t, 20> req1_{};
    std::array<std::uint8_t, 20> req3_{};
    std::size_t scanned_ = 0;
    std::uint32_t provide_ = 0;
    std::size_t pad_c_ = 0;
    std::size_t ia_len_ = 0;
    outcome outcome_;
};

} // namespace dhtc::metadata::mse
