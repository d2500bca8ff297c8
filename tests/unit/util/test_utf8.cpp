// UTF-8 validation and repair: the classic cases (Markus Kuhn's stress test, Unicode's
// table 3-8 example), each asserted on the exact repaired bytes.
#include <doctest/doctest.h>

#include <string>

#include "util/utf8.hpp"

using namespace std::string_literals;
namespace utf8 = dhtc::utf8;

namespace {
// U+FFFD repeated n times.
std::string fffd(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += utf8::replacement;
    return s;
}
} // namespace

TEST_SUITE("utf8") {

TEST_CASE("well-formed input is valid and repaired unchanged") {
    const std::string cases[] = {
        ""s,
        "plain ascii"s,
        "with\0nul"s,                 // NUL is a valid code point
        "\x7f"s,                      // last one-byte
        "\xc2\x80"s,                  // U+0080, first two-byte
        "caf\xc3\xa9"s,               // é
        "\xdf\xbf"s,                  // U+07FF
        "\xe0\xa0\x80"s,              // U+0800, first three-byte
        "\xe2\x82\xac"s,              // €
        "\xed\x9f\xbf"s,              // U+D7FF, just below the surrogates
        "\xee\x80\x80"s,              // U+E000, just above them
        "\xef\xbf\xbd"s,              // U+FFFD itself
        "\xef\xbf\xbf"s,              // U+FFFF (a noncharacter, but well-formed)
        "\xf0\x90\x80\x80"s,          // U+10000, first four-byte
        "\xf0\x9d\x84\x9e"s,          // 𝄞
        "\xf4\x8f\xbf\xbf"s,          // U+10FFFF, the last code point
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"s, // 日本語
    };
    for (const auto& s : cases) {
        CAPTURE(s);
        CHECK(utf8::is_valid(s));
        CHECK(utf8::valid_prefix(s) == s.size());
        CHECK(utf8::repair(s) == s);
    }
}

TEST_CASE("overlong forms are rejected, one U+FFFD per maximal subpart") {
    // C0 and C1 can only start overlongs: each byte is its own subpart.
    CHECK_FALSE(utf8::is_valid("\xc0\xaf"s));
    CHECK(utf8::repair("\xc0\xaf"s) == fffd(2));
    CHECK(utf8::repair("\xc1\xbf"s) == fffd(2));
    // E0 needs A0..BF next; E0 80 is not a prefix of anything valid.
    CHECK_FALSE(utf8::is_valid("\xe0\x80\xaf"s));
    CHECK(utf8::repair("\xe0\x80\xaf"s) == fffd(3));
    CHECK(utf8::repair("\xe0\x9f\xbf"s) == fffd(3));
    // F0 needs 90..BF next.
    CHECK_FALSE(utf8::is_valid("\xf0\x80\x80\xaf"s));
    CHECK(utf8::repair("\xf0\x80\x80\xaf"s) == fffd(4));
    CHECK(utf8::repair("\xf0\x8f\xbf\xbf"s) == fffd(4));
    // The overlong NUL.
    CHECK(utf8::repair("a\xc0\x80z"s) == "a"s + fffd(2) + "z");
}

TEST_CASE("surrogates are rejected") {
    CHECK_FALSE(utf8::is_valid("\xed\xa0\x80"s)); // U+D800
    CHECK_FALSE(utf8::is_valid("\xed\xbf\xbf"s)); // U+DFFF
    CHECK(utf8::repair("\xed\xa0\x80"s) == fffd(3));
    // A CESU-8 style surrogate pair for U+10000.
    CHECK(utf8::repair("\xed\xa0\x80\xed\xb0\x80"s) == fffd(6));
}

TEST_CASE("code points above U+10FFFF and bytes that never occur are rejected") {
    CHECK_FALSE(utf8::is_valid("\xf4\x90\x80\x80"s)); // U+110000
    CHECK(utf8::repair("\xf4\x90\x80\x80"s) == fffd(4));
    CHECK(utf8::repair("\xf5\x80\x80\x80"s) == fffd(4));
    CHECK(utf8::repair("\xf8\x88\x80\x80\x80"s) == fffd(5)); // old 5-byte form
    CHECK(utf8::repair("\xfc\x84\x80\x80\x80\x80"s) == fffd(6));
    CHECK(utf8::repair("\xfe"s) == fffd(1));
    CHECK(utf8::repair("\xff"s) == fffd(1));
}

TEST_CASE("lone continuation bytes and truncated sequences") {
    CHECK(utf8::repair("\x80"s) == fffd(1));
    CHECK(utf8::repair("\x80\xbf\x80"s) == fffd(3));
    // A truncated sequence is one subpart however many of its bytes are present.
    CHECK(utf8::repair("\xe2\x82"s) == fffd(1));
    CHECK(utf8::repair("\xf0\x9d\x84"s) == fffd(1));
    CHECK(utf8::repair("\xe2\x82" "A"s) == fffd(1) + "A");
    CHECK(utf8::repair("\xc3" "A"s) == fffd(1) + "A");
    // ... and the byte that broke it starts again: here a valid é.
    CHECK(utf8::repair("\xe2\xc3\xa9"s) == fffd(1) + "\xc3\xa9");
    CHECK(utf8::valid_prefix("ab\xe2\x82"s) == 2);
    CHECK(utf8::valid_prefix("\xc3\xa9\xff"s) == 2);
}

TEST_CASE("Unicode table 3-8: U+FFFD for maximal subparts") {
    const auto in = "\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64"s;
    CHECK_FALSE(utf8::is_valid(in));
    CHECK(utf8::repair(in) == "a"s + fffd(3) + "b" + fffd(1) + "c" + fffd(2) + "d");
}

TEST_CASE("Latin-1 names, the usual real-world case, become one U+FFFD per byte") {
    CHECK(utf8::repair("Caf\xe9 M\xfcller"s) == "Caf"s + fffd(1) + " M" + fffd(1) + "ller");
}

TEST_CASE("append_repaired appends to what is there") {
    std::string out = "dir/";
    utf8::append_repaired(out, "f\xffile"s);
    CHECK(out == "dir/f"s + fffd(1) + "ile");
}

TEST_CASE("repaired output is always valid") {
    // Every two-byte combination, and each followed by a continuation byte.
    for (int a = 0; a < 256; ++a) {
        for (int b = 0; b < 256; ++b) {
            const std::string s{static_cast<char>(a), static_cast<char>(b), '\x80'};
            REQUIRE(utf8::is_valid(utf8::repair(s)));
        }
    }
}

} // TEST_SUITE
