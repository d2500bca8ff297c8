#include "util/utf8.hpp"

#include <cstdint>

namespace dhtc::utf8 {

namespace {

// Length of the well-formed sequence at s[i], or 0 when there is none; in that case
// `bad` is set to the length of the maximal subpart to replace (at least 1). The second
// byte's range depends on the lead byte: that is what excludes overlongs (E0, F0),
// surrogates (ED) and code points above U+10FFFF (F4); later bytes are plain 80..BF.
std::size_t sequence_at(std::string_view s, std::size_t i, std::size_t& bad) noexcept {
    const auto b0 = static_cast<std::uint8_t>(s[i]);
    bad = 1;
    if (b0 < 0x80) return 1;
    std::size_t need;
    std::uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0; // 80..C1 (continuation or overlong lead), F5..FF
    }
    std::size_t k = 1;
    for (; k < need; ++k) {
        if (i + k >= s.size()) break;
        const auto b = static_cast<std::uint8_t>(s[i + k]);
        if (b < lo || b > hi) break;
        lo = 0x80;
        hi = 0xBF;
    }
    if (k == need) return need;
    bad = k;
    return 0;
}

} // namespace

std::size_t valid_prefix(std::string_view s) noexcept {
    std::size_t i = 0, bad = 0;
    while (i < s.size()) {
        // ASCII runs are the common case in names and paths.
        if (static_cast<std::uint8_t>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const std::size_t n = sequence_at(s, i, bad);
        if (n == 0) return i;
        i += n;
    }
    return i;
}

bool is_valid(std::string_view s) noexcept { return valid_prefix(s) == s.size(); }

void append_repaired(std::string& out, std::string_view s) {
    std::size_t i = 0, bad = 0;
    while (i < s.size()) {
        const std::size_t ok = valid_prefix(s.substr(i));
        out.append(s.substr(i, ok));
        i += ok;
        if (i >= s.size()) break;
        sequence_at(s, i, bad);
        out.append(replacement);
        i += bad;
    }
}

std::string repair(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    append_repaired(out, s);
    return out;
}

} // namespace dhtc::utf8
