// Bencode encoders: a streaming writer for the hot path (appends to a caller-owned,
// reused buffer) and an owned value tree whose encoding is always canonical.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bencode/decoder.hpp"

namespace dhtc::bencode {

/// Appends bencode to a std::string. Dict keys must be written in ascending byte order
/// (canonical bencode); a key out of order, an unbalanced end() or nesting deeper than
/// max_depth marks the writer as failed (ok() == false) instead of writing bad output.
/// Reuse the target string between messages and nothing allocates once it has grown.
class writer {
public:
    static constexpr std::size_t max_depth = 32;

    explicit writer(std::string& out) noexcept : out_(out) {}

    writer& integer(std::int64_t v);
    writer& string(std::string_view s);
    writer& begin_list();
    writer& begin_dict();
    writer& end();
    /// Writes a dict key; must be greater than the previous key of the same dict.
    writer& key(std::string_view k);

    /// Shorthands for key + value.
    writer& entry(std::string_view k, std::string_view s) { return key(k).string(s); }
    writer& entry(std::string_view k, std::int64_t v) { return key(k).integer(v); }

    /// True while everything written so far is canonical and balanced.
    bool ok() const noexcept { return ok_; }
    /// True when ok() and every list/dict has been closed.
    bool complete() const noexcept { return ok_ && depth_ == 0; }

private:
    struct frame {
        bool dict = false;
        bool expect_value = false; ///< a key was written, its value is due
        std::size_t last_key_at = 0; ///< offset of the previous key's bytes in out_
        std::size_t last_key_len = 0;
        bool has_key = false;
    };
    void before_value();
    void append_string(std::string_view s);

    std::string& out_;
    std::array<frame, max_depth> stack_{};
    std::size_t depth_ = 0;
    bool ok_ = true;
};

/// An owned bencode value. Dicts are std::map, so encoding is canonical by construction.
class entry {
public:
    using list_type = std::vector<entry>;
    using dict_type = std::map<std::string, entry, std::less<>>;

    entry() : v_(std::int64_t{0}) {}
    entry(std::int64_t i) : v_(i) {}
    entry(int i) : v_(std::int64_t{i}) {}
    entry(std::string s) : v_(std::move(s)) {}
    entry(std::string_view s) : v_(std::string(s)) {}
    entry(const char* s) : v_(std::string(s)) {}
    entry(list_type l) : v_(std::move(l)) {}
    entry(dict_type d) : v_(std::move(d)) {}

    static entry list() { return entry(list_type{}); }
    static entry dict() { return entry(dict_type{}); }

    bool is_integer() const noexcept { return std::holds_alternative<std::int64_t>(v_); }
    bool is_string() const noexcept { return std::holds_alternative<std::string>(v_); }
    bool is_list() const noexcept { return std::holds_alternative<list_type>(v_); }
    bool is_dict() const noexcept { return std::holds_alternative<dict_type>(v_); }

    std::int64_t& integer() { return std::get<std::int64_t>(v_); }
    std::string& string() { return std::get<std::string>(v_); }
    list_type& as_list() { return std::get<list_type>(v_); }
    dict_type& as_dict() { return std::get<dict_type>(v_); }
    const std::int64_t& integer() const { return std::get<std::int64_t>(v_); }
    const std::string& string() const { return std::get<std::string>(v_); }
    const list_type& as_list() const { return std::get<list_type>(v_); }
    const dict_type& as_dict() const { return std::get<dict_type>(v_); }

    /// Dict member access, creating the member (and turning *this into a dict if needed).
    entry& operator[](std::string_view key);

    /// Canonical encoding.
    std::string encode() const;
    void encode(writer& w) const;

    /// A deep copy of a decoded value (keys end up sorted; duplicates cannot occur).
    static entry from(const value& v);

    bool operator==(const entry&) const = default;

private:
    std::variant<std::int64_t, std::string, list_type, dict_type> v_;
};

} // namespace dhtc::bencode
