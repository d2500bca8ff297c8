// Hostile bytes through the MSE/PE handshake machines. The first byte picks the mode:
//   0: the initiator fed raw bytes (a peer that sends anything after its "key");
//   1: the responder fed raw bytes;
//   2: initiator against a genuine responder whose stream is corrupted by the input
//      (xor mask and a cut), so the fuzzer reaches the phases behind the DH exchange;
//   3: the same with the roles swapped.
// The second byte sets the delivery chunk size. Randomness is deterministic.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metadata/mse.hpp"

using namespace dhtc;
using namespace dhtc::metadata::mse;

namespace {

void require(bool ok) {
    if (!ok) std::abort();
}

id20 skey() {
    id20 id;
    for (std::size_t i = 0; i < id20::size; ++i) id.bytes[i] = static_cast<std::uint8_t>(i * 13 + 1);
    return id;
}

template <class M>
void check_end(M& m, status st, std::uint32_t offered) {
    if (st == status::failed) {
        require(m.error() != mse_error::none);
        require(!to_string(m.error()).empty());
    }
    if (st == status::done) {
        outcome o = m.take();
        require(o.selected == crypto_plaintext || o.selected == crypto_rc4);
        require((o.selected & offered) != 0);
        require((o.selected == crypto_rc4) == static_cast<bool>(o.encrypt));
        require((o.selected == crypto_rc4) == static_cast<bool>(o.decrypt));
    }
}

// Feeds `data` in chunks; the machine's output is dropped (bounded by the handshake).
template <class M>
status feed_all(M& m, std::string_view data, std::size_t chunk, std::string& out) {
    status st = status::need_more;
    while (!data.empty() && st == status::need_more) {
        const std::string_view piece = data.substr(0, chunk);
        data.remove_prefix(piece.size());
        st = m.feed(piece, out);
        require(out.size() <= 2 * max_handshake_bytes);
        out.clear();
    }
    return st;
}

// Applies the input as an xor mask over `stream`, then cuts it at the mask's last byte
// when that byte is odd.
std::string corrupt(std::string stream, std::string_view mask) {
    for (std::size_t i = 0; i < mask.size() && i < stream.size(); ++i) stream[i] = static_cast<char>(stream[i] ^ mask[i]);
    if (!mask.empty() && (static_cast<unsigned char>(mask.back()) & 1)) stream.resize(stream.size() * static_cast<unsigned char>(mask.back()) / 256);
    return stream;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    const unsigned mode = data[0] & 3;
    const std::uint32_t methods = 1 + (data[0] >> 2) % 3; // 1, 2 or 3
    const bool prefer_rc4 = (data[0] & 0x80) != 0;
    const std::size_t chunk = 1 + data[1];
    const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
    std::string out;

    switch (mode) {
    case 0: {
        initiator a(skey(), methods, "IA-bytes", seeded_random(1));
        require(a.start(out) == status::need_more);
        out.clear();
        const status st = feed_all(a, rest, chunk, out);
        check_end(a, st, methods);
        break;
    }
    case 1: {
        responder b(skey(), methods, prefer_rc4, seeded_random(2));
        const status st = feed_all(b, rest, chunk, out);
        check_end(b, st, methods);
        break;
    }
    case 2: {
        initiator a(skey(), methods, "IA", seeded_random(3));
        responder b(skey(), 3, prefer_rc4, seeded_random(4));
        std::string to_b, to_a;
        a.start(to_b);
        b.feed(to_b, to_a); // Yb + PadB
        to_b.clear();
        status sa = feed_all(a, corrupt(to_a.substr(0, key_size + 520), rest), chunk, to_b);
        std::string tail;
        if (b.feed(to_b, tail) == status::done && sa == status::need_more)
            sa = feed_all(a, corrupt(tail, rest.substr(std::min(rest.size(), to_a.size()))), chunk, out);
        check_end(a, sa, methods);
        break;
    }
    default: {
        initiator a(skey(), methods, "IA", seeded_random(5));
        responder b(skey(), 3, prefer_rc4, seeded_random(6));
        std::string to_b, to_a;
        a.start(to_b);
        std::string to_b2;
        b.feed(corrupt(to_b, rest), to_a);
        const status sa = a.feed(to_a, to_b2);
        std::string ignored;
        const status sb = feed_all(b, corrupt(to_b2, rest.substr(std::min(rest.size(), to_b.size()))), chunk, ignored);
        check_end(b, sb, 3);
        (void)sa;
        break;
    }
    }
    return 0;
}
