#include "metadata/mse.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <dlfcn.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

namespace dhtc::metadata::mse {

namespace {

using sha1_t = std::array<std::uint8_t, 20>;

constexpr const char* prime_hex =
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A63A36210000000000090563";
constexpr std::size_t private_key_bytes = 20; // 160 bits: the spec's 128..180
constexpr std::size_t rc4_discard = 1024;

// A release bundle (wheel, jar, SDK) carries OpenSSL's legacy provider with the OpenSSL it
// was built against: ossl-modules/legacy.so beside this library or this program, one level
// up (the wheel's _bin/, the SDK's bin/) or in ../lib (the SDK). Its absolute path, when there
// is one and OPENSSL_MODULES does not say otherwise; else "legacy", which OpenSSL looks up in
// OPENSSL_MODULES or its built-in modules directory.
std::string legacy_provider_name() {
    if (std::getenv("OPENSSL_MODULES")) return "legacy";
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&legacy_provider_name), &self) == 0 || !self.dli_fname) return "legacy";
    // A program started through PATH knows itself only by its bare name.
    const char* self_name = std::strchr(self.dli_fname, '/') ? self.dli_fname : "/proc/self/exe";
    char* resolved = realpath(self_name, nullptr);
    if (!resolved) return "legacy";
    std::string dir = resolved;
    std::free(resolved);
    dir.erase(dir.find_last_of('/'));
    for (const char* sub : {"/ossl-modules/legacy.so", "/../ossl-modules/legacy.so", "/../lib/ossl-modules/legacy.so"}) {
        std::string candidate = dir + sub;
        if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
    return "legacy";
}

// OpenSSL state loaded once: the providers, RC4 and the prime.
struct crypto_globals {
    EVP_CIPHER* rc4 = nullptr;
    BIGNUM* prime = nullptr;
    BIGNUM* prime_minus_one = nullptr;
    std::string why; // empty when RC4 is usable
};

const crypto_globals& globals() {
    static crypto_globals g;
    static std::once_flag once;
    std::call_once(once, [] {
        // Loading any provider explicitly stops OpenSSL from loading the default one
        // implicitly, so both are loaded. They stay loaded for the life of the process.
        OSSL_PROVIDER* legacy = OSSL_PROVIDER_load(nullptr, legacy_provider_name().c_str());
        OSSL_PROVIDER* deflt = OSSL_PROVIDER_load(nullptr, "default");
        (void)deflt;
        g.rc4 = EVP_CIPHER_fetch(nullptr, "RC4", nullptr);
        if (!g.rc4) {
            g.why = legacy ? "OpenSSL's legacy provider loaded but offers no RC4"
                           : "RC4 needs OpenSSL's legacy provider (legacy.so under OPENSSL_MODULES), "
                             "which could not be loaded: MSE/PE encryption is unavailable";
        }
        BN_hex2bn(&g.prime, prime_hex);
        g.prime_minus_one = BN_dup(g.prime);
        if (g.prime_minus_one) BN_sub_word(g.prime_minus_one, 1);
        if (!g.prime || !g.prime_minus_one) g.why = "OpenSSL could not allocate the MSE prime";
    });
    return g;
}

sha1_t hash(std::initializer_list<std::string_view> parts) noexcept {
    sha1_t out{};
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    unsigned len = 0;
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1;
    for (std::string_view p : parts) ok = ok && EVP_DigestUpdate(ctx, p.data(), p.size()) == 1;
    ok = ok && EVP_DigestFinal_ex(ctx, out.data(), &len) == 1;
    if (!ok) out.fill(0);
    EVP_MD_CTX_free(ctx);
    return out;
}

std::string_view as_view(const sha1_t& h) noexcept { return {reinterpret_cast<const char*>(h.data()), h.size()}; }

void default_random(void* out, std::size_t n) {
    if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
        std::memset(out, 0, n); // only when the RNG is broken; the handshake still completes
}

std::size_t random_pad_length(const random_source& rng) {
    std::uint16_t r = 0;
    rng(&r, sizeof r);
    return r % (max_pad + 1);
}

void append_random(std::string& out, std::size_t n, const random_source& rng) {
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n) rng(out.data() + at, n);
}

void put_u32(std::string& out, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}
void put_u16(std::string& out, std::uint16_t v) {
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v & 0xff));
}
std::uint32_t get_u32(const char* p) noexcept {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) | u[3];
}
std::uint16_t get_u16(const char* p) noexcept {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return static_cast<std::uint16_t>((u[0] << 8) | u[1]);
}

} // namespace

// ---------------------------------------------------------------------------------------

class dh_key {
public:
    // Null members on failure: ok() says.
    explicit dh_key(const random_source& rng) {
        const crypto_globals& g = globals();
        std::array<unsigned char, private_key_bytes> raw{};
        rng(raw.data(), raw.size());
        raw[0] |= 0x80; // a full 160-bit exponent
        priv_ = BN_bin2bn(raw.data(), static_cast<int>(raw.size()), nullptr);
        BIGNUM* pub = BN_new();
        BIGNUM* two = BN_new();
        BN_CTX* ctx = BN_CTX_new();
        ok_ = priv_ && pub && two && ctx && g.prime && BN_set_word(two, 2) == 1 &&
              BN_mod_exp(pub, two, priv_, g.prime, ctx) == 1 &&
              BN_bn2binpad(pub, public_.data(), static_cast<int>(key_size)) == static_cast<int>(key_size);
        BN_free(pub);
        BN_free(two);
        BN_CTX_free(ctx);
    }
    ~dh_key() { BN_clear_free(priv_); }
    dh_key(const dh_key&) = delete;
    dh_key& operator=(const dh_key&) = delete;

    bool ok() const noexcept { return ok_; }
    std::string_view public_key() const noexcept {
        return {reinterpret_cast<const char*>(public_.data()), public_.size()};
    }

    // S = Y^x mod P as 96 big-endian bytes. Fails (bad_public_key) unless 1 < Y < P-1.
    mse_error secret(std::string_view peer, std::array<std::uint8_t, key_size>& s) const {
        const crypto_globals& g = globals();
        BIGNUM* y = BN_bin2bn(reinterpret_cast<const unsigned char*>(peer.data()), static_cast<int>(peer.size()), nullptr);
        BIGNUM* r = BN_new();
        BN_CTX* ctx = BN_CTX_new();
        mse_error e = mse_error::none;
        if (!y || !r || !ctx) {
            e = mse_error::crypto_failure;
        } else if (BN_is_zero(y) || BN_is_one(y) || BN_cmp(y, g.prime_minus_one) >= 0) {
            e = mse_error::bad_public_key;
        } else if (BN_mod_exp(r, y, priv_, g.prime, ctx) != 1 ||
                   BN_bn2binpad(r, s.data(), static_cast<int>(key_size)) != static_cast<int>(key_size)) {
            e = mse_error::crypto_failure;
        }
        BN_free(y);
        BN_clear_free(r);
        BN_CTX_free(ctx);
        return e;
    }

private:
    BIGNUM* priv_ = nullptr;
    std::array<std::uint8_t, key_size> public_{};
    bool ok_ = false;
};

// ---------------------------------------------------------------------------------------

std::string_view to_string(mse_error e) noexcept {
    switch (e) {
    case mse_error::none: return "none";
    case mse_error::rc4_unavailable: return "rc4_unavailable";
    case mse_error::crypto_failure: return "crypto_failure";
    case mse_error::bad_public_key: return "bad_public_key";
    case mse_error::vc_not_found: return "vc_not_found";
    case mse_error::req1_not_found: return "req1_not_found";
    case mse_error::unknown_skey: return "unknown_skey";
    case mse_error::bad_vc: return "bad_vc";
    case mse_error::bad_select: return "bad_select";
    case mse_error::no_common_method: return "no_common_method";
    case mse_error::pad_too_long: return "pad_too_long";
    case mse_error::ia_too_long: return "ia_too_long";
    }
    return "unknown";
}

bool rc4_available(std::string* why) {
    const crypto_globals& g = globals();
    if (why) *why = g.why;
    return g.why.empty();
}

std::unique_ptr<rc4> rc4::make(const std::array<std::uint8_t, 20>& key) {
    const crypto_globals& g = globals();
    if (!g.rc4) return nullptr;
    std::unique_ptr<rc4> r(new (std::nothrow) rc4());
    if (!r) return nullptr;
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    r->ctx_ = ctx;
    if (!ctx || EVP_CipherInit_ex(ctx, g.rc4, nullptr, nullptr, nullptr, 1) != 1 ||
        EVP_CIPHER_CTX_set_key_length(ctx, static_cast<int>(key.size())) != 1 ||
        EVP_CipherInit_ex(ctx, nullptr, nullptr, key.data(), nullptr, 1) != 1)
        return nullptr;
    std::array<unsigned char, rc4_discard> discard{};
    r->apply(discard.data(), discard.size());
    return r;
}

rc4::~rc4() { EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(ctx_)); }

void rc4::apply(void* data, std::size_t n) noexcept {
    auto* p = static_cast<unsigned char*>(data);
    auto* ctx = static_cast<EVP_CIPHER_CTX*>(ctx_);
    // EVP takes an int length; RC4 encrypts in place.
    while (n > 0) {
        const int chunk = static_cast<int>(std::min<std::size_t>(n, 1u << 30));
        int out = 0;
        EVP_CipherUpdate(ctx, p, &out, p, chunk);
        p += chunk;
        n -= static_cast<std::size_t>(chunk);
    }
}

// ---------------------------------------------------------------------------------------
// Initiator

initiator::initiator(const id20& skey, std::uint32_t provide, std::string ia, random_source rng)
    : skey_(skey), provide_(provide & (crypto_plaintext | crypto_rc4)), ia_(std::move(ia)),
      rng_(rng ? std::move(rng) : random_source(default_random)) {}

initiator::~initiator() = default;

status initiator::fail(mse_error e) noexcept {
    error_ = e;
    phase_ = phase::failed;
    buf_.clear();
    return status::failed;
}

status initiator::start(std::string& out) {
    if (phase_ != phase::init) return phase_ == phase::failed ? status::failed : status::need_more;
    if (!rc4_available()) return fail(mse_error::rc4_unavailable);
    if (provide_ == 0 || ia_.size() > 0xffff) return fail(mse_error::bad_select);
    key_ = std::make_unique<dh_key>(rng_);
    if (!key_->ok()) return fail(mse_error::crypto_failure);
    out.append(key_->public_key());
    append_random(out, random_pad_length(rng_), rng_);
    phase_ = phase::wait_key;
    return status::need_more;
}

status initiator::feed(std::string_view in, std::string& out) {
    if (phase_ == phase::failed) return status::failed;
    if (phase_ == phase::done) {
        outcome_.payload.append(in); // payload that arrived late is the caller's; kept for safety
        if (outcome_.decrypt) outcome_.decrypt->apply(outcome_.payload.data() + outcome_.payload.size() - in.size(), in.size());
        return status::done;
    }
    if (phase_ == phase::init) return fail(mse_error::crypto_failure); // start() first
    // The handshake is bounded; anything past its longest form is payload that will be
    // consumed below once the handshake completes.
    buf_.append(in);
    std::size_t pos = 0;
    for (;;) {
        const std::size_t have = buf_.size() - pos;
        switch (phase_) {
        case phase::wait_key: {
            if (have < key_size) goto need_more;
            std::array<std::uint8_t, key_size> s{};
            if (auto e = key_->secret(std::string_view(buf_).substr(pos, key_size), s); e != mse_error::none)
                return fail(e);
            pos += key_size;
            const std::string_view sv(reinterpret_cast<const char*>(s.data()), s.size());
            const std::string_view sk = skey_.view();
            outcome_.encrypt = rc4::make(hash({"keyA", sv, sk}));
            outcome_.decrypt = rc4::make(hash({"keyB", sv, sk}));
            if (!outcome_.encrypt || !outcome_.decrypt) return fail(mse_error::crypto_failure);
            // B's encrypted VC is the keystream's next 8 bytes: decrypting them here leaves
            // the incoming stream positioned just after VC, where it must be once found.
            vc_pattern_.fill(0);
            outcome_.decrypt->apply(vc_pattern_.data(), vc_pattern_.size());

            const sha1_t req1 = hash({"req1", sv});
            sha1_t req2 = hash({"req2", sk});
            const sha1_t req3 = hash({"req3", sv});
            for (std::size_t i = 0; i < req2.size(); ++i) req2[i] ^= req3[i];
            out.append(as_view(req1));
            out.append(as_view(req2));
            const std::size_t enc_at = out.size();
            out.append(vc_size, '\0');
            put_u32(out, provide_);
            put_u16(out, 0); // len(PadC): we send none
            put_u16(out, static_cast<std::uint16_t>(ia_.size()));
            out.append(ia_);
            outcome_.encrypt->apply(out.data() + enc_at, out.size() - enc_at);
            ia_.clear();
            ia_.shrink_to_fit();
            phase_ = phase::sync_vc;
            break;
        }
        case phase::sync_vc: {
            // The VC may start at any of PadB's 0..512 offsets.
            const std::string_view window = std::string_view(buf_).substr(pos, std::min(have, max_pad + vc_size));
            const std::string_view pattern(reinterpret_cast<const char*>(vc_pattern_.data()), vc_size);
            const std::size_t at = window.find(pattern, scanned_);
            if (at == std::string_view::npos) {
                if (have >= max_pad + vc_size) return fail(mse_error::vc_not_found);
                scanned_ = have >= vc_size ? have - vc_size + 1 : 0;
                goto need_more;
            }
            pos += at + vc_size;
            phase_ = phase::select;
            break;
        }
        case phase::select: {
            if (have < 6) goto need_more;
            outcome_.decrypt->apply(buf_.data() + pos, 6);
            const std::uint32_t select = get_u32(buf_.data() + pos);
            pad_d_ = get_u16(buf_.data() + pos + 4);
            pos += 6;
            if ((select != crypto_plaintext && select != crypto_rc4) || (select & provide_) == 0)
                return fail(mse_error::bad_select);
            if (pad_d_ > max_pad) return fail(mse_error::pad_too_long);
            outcome_.selected = select;
            phase_ = phase::pad_d;
            break;
        }
        case phase::pad_d: {
            if (have < pad_d_) goto need_more;
            outcome_.decrypt->apply(buf_.data() + pos, pad_d_);
            pos += pad_d_;
            outcome_.payload.assign(buf_, pos, std::string::npos);
            buf_.clear();
            buf_.shrink_to_fit();
            if (outcome_.selected == crypto_plaintext) {
                outcome_.encrypt.reset();
                outcome_.decrypt.reset();
            } else {
                outcome_.decrypt->apply(outcome_.payload.data(), outcome_.payload.size());
            }
            key_.reset();
            phase_ = phase::done;
            return status::done;
        }
        default: return fail(mse_error::crypto_failure);
        }
    }
need_more:
    buf_.erase(0, pos);
    if (buf_.size() > max_handshake_bytes) return fail(mse_error::pad_too_long); // unreachable by the bounds above
    return status::need_more;
}

// ---------------------------------------------------------------------------------------
// Responder

std::array<std::uint8_t, 20> req2_hash(const id20& skey) noexcept { return hash({"req2", skey.view()}); }

responder::responder(const id20& skey, std::uint32_t allowed, bool prefer_rc4, random_source rng)
    : skey_(skey), allowed_(allowed & (crypto_plaintext | crypto_rc4)), prefer_rc4_(prefer_rc4),
      rng_(rng ? std::move(rng) : random_source(default_random)) {}

responder::responder(skey_finder find, std::uint32_t allowed, bool prefer_rc4, random_source rng)
    : skey_(), find_(std::move(find)), allowed_(allowed & (crypto_plaintext | crypto_rc4)), prefer_rc4_(prefer_rc4),
      rng_(rng ? std::move(rng) : random_source(default_random)) {}

responder::~responder() = default;

status responder::fail(mse_error e) noexcept {
    error_ = e;
    phase_ = phase::failed;
    buf_.clear();
    return status::failed;
}

status responder::feed(std::string_view in, std::string& out) {
    if (phase_ == phase::failed) return status::failed;
    if (phase_ == phase::done) {
        const std::size_t at = outcome_.payload.size();
        outcome_.payload.append(in);
        if (outcome_.decrypt) outcome_.decrypt->apply(outcome_.payload.data() + at, in.size());
        return status::done;
    }
    buf_.append(in);
    std::size_t pos = 0;
    for (;;) {
        const std::size_t have = buf_.size() - pos;
        switch (phase_) {
        case phase::wait_key: {
            if (have < key_size) goto need_more;
            if (!rc4_available()) return fail(mse_error::rc4_unavailable);
            key_ = std::make_unique<dh_key>(rng_);
            if (!key_->ok()) return fail(mse_error::crypto_failure);
            std::array<std::uint8_t, key_size> s{};
            if (auto e = key_->secret(std::string_view(buf_).substr(pos, key_size), s); e != mse_error::none)
                return fail(e);
            pos += key_size;
            secret_ = s;
            const std::string_view sv(reinterpret_cast<const char*>(s.data()), s.size());
            req1_ = hash({"req1", sv});
            req3_ = hash({"req3", sv});
            out.append(key_->public_key());
            append_random(out, random_pad_length(rng_), rng_);
            phase_ = phase::sync_req1;
            break;
        }
        case phase::sync_req1: {
            const std::string_view window = std::string_view(buf_).substr(pos, std::min(have, max_pad + 20));
            const std::size_t at = window.find(as_view(req1_), scanned_);
            if (at == std::string_view::npos) {
                if (have >= max_pad + 20) return fail(mse_error::req1_not_found);
                scanned_ = have >= 20 ? have - 20 + 1 : 0;
                goto need_more;
            }
            pos += at + 20;
            phase_ = phase::skey;
            break;
        }
        case phase::skey: {
            if (have < 20) goto need_more;
            sha1_t req2{};
            for (std::size_t i = 0; i < req2.size(); ++i)
                req2[i] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(buf_[pos + i]) ^ req3_[i]);
            if (find_) {
                const auto found = find_(req2);
                if (!found) return fail(mse_error::unknown_skey);
                skey_ = *found;
            } else if (req2 != req2_hash(skey_)) {
                return fail(mse_error::unknown_skey);
            }
            pos += 20;
            const std::string_view sv(reinterpret_cast<const char*>(secret_.data()), secret_.size());
            outcome_.decrypt = rc4::make(hash({"keyA", sv, skey_.view()}));
            outcome_.encrypt = rc4::make(hash({"keyB", sv, skey_.view()}));
            if (!outcome_.encrypt || !outcome_.decrypt) return fail(mse_error::crypto_failure);
            phase_ = phase::fixed;
            break;
        }
        case phase::fixed: {
            if (have < vc_size + 6) goto need_more;
            char* p = buf_.data() + pos;
            outcome_.decrypt->apply(p, vc_size + 6);
            if (std::any_of(p, p + vc_size, [](char c) { return c != 0; })) return fail(mse_error::bad_vc);
            provide_ = get_u32(p + vc_size);
            pad_c_ = get_u16(p + vc_size + 4);
            pos += vc_size + 6;
            if (pad_c_ > max_pad) return fail(mse_error::pad_too_long);
            phase_ = phase::pad_c;
            break;
        }
        case phase::pad_c: {
            if (have < pad_c_ + 2) goto need_more;
            outcome_.decrypt->apply(buf_.data() + pos, pad_c_ + 2);
            ia_len_ = get_u16(buf_.data() + pos + pad_c_);
            pos += pad_c_ + 2;
            if (ia_len_ > max_ia) return fail(mse_error::ia_too_long);
            phase_ = phase::ia;
            break;
        }
        case phase::ia: {
            if (have < ia_len_) goto need_more;
            outcome_.decrypt->apply(buf_.data() + pos, ia_len_);
            const std::uint32_t common = provide_ & allowed_;
            std::uint32_t select = 0;
            if ((common & crypto_rc4) && (prefer_rc4_ || !(common & crypto_plaintext)))
                select = crypto_rc4;
            else if (common & crypto_plaintext)
                select = crypto_plaintext;
            else if (common & crypto_rc4)
                select = crypto_rc4;
            if (select == 0) return fail(mse_error::no_common_method);
            outcome_.selected = select;
            const std::size_t enc_at = out.size();
            out.append(vc_size, '\0');
            put_u32(out, select);
            const std::size_t pad_d = random_pad_length(rng_);
            put_u16(out, static_cast<std::uint16_t>(pad_d));
            append_random(out, pad_d, rng_);
            outcome_.encrypt->apply(out.data() + enc_at, out.size() - enc_at);
            // IA is always encrypted; what follows it only under RC4.
            outcome_.payload.assign(buf_, pos, std::string::npos);
            if (select == crypto_rc4) {
                outcome_.decrypt->apply(outcome_.payload.data() + ia_len_, outcome_.payload.size() - ia_len_);
            } else {
                outcome_.encrypt.reset();
                outcome_.decrypt.reset();
            }
            buf_.clear();
            key_.reset();
            secret_.fill(0);
            phase_ = phase::done;
            return status::done;
        }
        default: return fail(mse_error::crypto_failure);
        }
    }
need_more:
    buf_.erase(0, pos);
    if (buf_.size() > max_handshake_bytes) return fail(mse_error::pad_too_long);
    return status::need_more;
}

} // namespace dhtc::metadata::mse
