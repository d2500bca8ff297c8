// UTF-8 validation and repair for strings taken from hostile metadata (torrent names and
// paths), so every string handed to JSON or to a binding is well-formed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dhtc::utf8 {

/// True when `s` is well-formed UTF-8 (Unicode 15, table 3-7): no overlong forms, no
/// surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequences.
/// NUL and other control characters are valid.
bool is_valid(std::string_view s) noexcept;

/// Length of the longest well-formed prefix of `s` (s.size() when valid).
std::size_t valid_prefix(std::string_view s) noexcept;

/// Appends `s` to `out`, replacing each maximal invalid subsequence (a "maximal subpart"
/// in the Unicode sense, the WHATWG decoder's behaviour) with U+FFFD. Valid input is
/// appended unchanged. May throw std::bad_alloc (only).
void append_repaired(std::string& out, std::string_view s);

/// `s` with invalid subsequences replaced by U+FFFD, as append_repaired().
std::string repair(std::string_view s);

/// The replacement character U+FFFD in UTF-8.
inline constexpr std::string_view replacement = "\xEF\xBF\xBD";

} // namespace dhtc::utf8
