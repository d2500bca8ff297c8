// Bencode decoder: parses received bytes into a flat token array of views into the
// caller's buffer. Nothing is copied, nothing throws, and every limit is explicit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dhtc::bencode {

/// Why a decode failed. `offset` in decode_result says where.
enum class error : std::uint8_t {
    none = 0,
    empty_input,          ///< no bytes at all
    unexpected_eof,       ///< input ended inside a value
    unexpected_byte,      ///< a byte that cannot start or continue a value
    leading_zero,         ///< i03e or 05:...
    negative_zero,        ///< i-0e
    empty_integer,        ///< ie, i-e
    integer_overflow,     ///< does not fit in int64
    string_length_overflow, ///< length prefix does not fit in the limits
    string_past_end,      ///< length prefix runs past the end of the input
    non_string_key,       ///< a dict key that is not a string
    duplicate_key,        ///< the same key twice in one dict
    depth_exceeded,       ///< nesting deeper than limits::max_depth
    token_limit_exceeded, ///< more values than limits::max_tokens
    size_limit_exceeded,  ///< input longer than limits::max_size
    trailing_bytes,       ///< bytes after the top-level value
};

/// A stable, human-readable name for an error ("leading_zero", ...).
std::string_view to_string(error e) noexcept;

struct limits {
    std::uint32_t max_depth = 32;        ///< lists and dicts nested at most this deep
    std::uint32_t max_tokens = 4096;     ///< values (including keys) in one document
    std::size_t max_size = 1u << 24;     ///< input bytes
};

/// Outcome of decode(): error::none, or the error and the byte offset where it was found.
struct decode_result {
    error code = error::none;
    std::size_t offset = 0;
    explicit operator bool() const noexcept { return code == error::none; }
};

enum class type : std::uint8_t { none, integer, string, list, dict };

class document;

/// A value inside a decoded document: a cheap handle (document pointer + token index).
/// Valid as long as the document and the input buffer it was decoded from.
/// Accessors on the wrong type return an empty/zero result rather than failing.
class value {
public:
    value() = default;

    type kind() const noexcept;
    bool is_integer() const noexcept { return kind() == type::integer; }
    bool is_string() const noexcept { return kind() == type::string; }
    bool is_list() const noexcept { return kind() == type::list; }
    bool is_dict() const noexcept { return kind() == type::dict; }
    explicit operator bool() const noexcept { return doc_ != nullptr; }

    std::int64_t as_integer() const noexcept;    ///< 0 unless an integer
    std::string_view as_string() const noexcept; ///< empty unless a string

    /// The exact bytes this value occupied in the input (e.g. an info dict, for hashing).
    std::string_view raw() const noexcept;
    /// Offset of the value's first byte in the input.
    std::size_t offset() const noexcept;

    /// Number of elements of a list, or of key/value pairs of a dict; 0 otherwise.
    std::size_t size() const noexcept;
    /// i-th element of a list (linear in i); empty value when out of range or not a list.
    value at(std::size_t i) const noexcept;
    /// Lookup in a dict by key (linear in the dict size); empty value when absent.
    value find(std::string_view key) const noexcept;
    /// Typed lookups: the value only if present with that type.
    value find_string(std::string_view key) const noexcept;
    value find_integer(std::string_view key) const noexcept;
    value find_list(std::string_view key) const noexcept;
    value find_dict(std::string_view key) const noexcept;

    /// Forward iteration over list elements, or over dict entries (key, value).
    class iterator;
    struct entry;
    iterator begin() const noexcept;
    iterator end() const noexcept;

private:
    friend class document;
    value(const document* d, std::uint32_t i) noexcept : doc_(d), index_(i) {}
    const document* doc_ = nullptr;
    std::uint32_t index_ = 0;
};

/// One element of a list (key empty) or one key/value pair of a dict.
struct value::entry {
    std::string_view key;
    value val;
};

class value::iterator {
public:
    entry operator*() const noexcept;
    iterator& operator++() noexcept;
    bool operator==(const iterator& o) const noexcept { return index_ == o.index_; }

private:
    friend class value;
    iterator(const document* d, std::uint32_t i, bool dict) noexcept : doc_(d), index_(i), dict_(dict) {}
    const document* doc_ = nullptr;
    std::uint32_t index_ = 0;
    bool dict_ = false;
};

/// Holds the tokens of one decoded input. Reusable: decode() clears it, and the token
/// storage keeps its capacity, so decoding packet after packet does not allocate.
class document {
public:
    document() = default;

    /// The top-level value (empty before a successful decode).
    value root() const noexcept { return tokens_.empty() ? value{} : value{this, 0}; }
    /// How many dicts in the input had keys out of canonical (sorted) order. Accepted,
    /// because old torrents and some clients produce them; counted so callers can report it.
    std::uint32_t unsorted_dicts() const noexcept { return unsorted_dicts_; }
    std::size_t token_count() const noexcept { return tokens_.size(); }
    std::string_view input() const noexcept { return input_; }

    struct token {
        std::uint32_t start;      ///< offset of the value's first byte
        std::uint32_t end;        ///< one past the value's last byte
        std::uint32_t next;       ///< index of the next sibling token (one past the subtree)
        std::uint32_t count;      ///< list elements / dict pairs; string payload offset
        std::int64_t integer;     ///< integer value; string payload length
        type kind;
    };

private:
    friend class value;
    friend class value::iterator;
    friend decode_result decode(std::string_view, document&, const limits&) noexcept;
    std::vector<token> tokens_;
    std::string_view input_;
    std::uint32_t unsorted_dicts_ = 0;
};

/// Decodes exactly one bencoded value spanning all of `input` into `out`.
/// On failure `out` holds no value (root() is empty). Never throws: if the token storage
/// cannot grow, the result is token_limit_exceeded.
decode_result decode(std::string_view input, document& out, const limits& lim = {}) noexcept;

inline decode_result decode(std::span<const std::uint8_t> input, document& out, const limits& lim = {}) noexcept {
    return decode(std::string_view(reinterpret_cast<const char*>(input.data()), input.size()), out, lim);
}

} // namespace dhtc::bencode
