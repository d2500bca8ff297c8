#include "bencode/decoder.hpp"

#include <algorithm>
#include <new>

namespace dhtc::bencode {

std::string_view to_string(error e) noexcept {
    switch (e) {
    case error::none: return "none";
    case error::empty_input: return "empty_input";
    case error::unexpected_eof: return "unexpected_eof";
    case error::unexpected_byte: return "unexpected_byte";
    case error::leading_zero: return "leading_zero";
    case error::negative_zero: return "negative_zero";
    case error::empty_integer: return "empty_integer";
    case error::integer_overflow: return "integer_overflow";
    case error::string_length_overflow: return "string_length_overflow";
    case error::string_past_end: return "string_past_end";
    case error::non_string_key: return "non_string_key";
    case error::duplicate_key: return "duplicate_key";
    case error::depth_exceeded: return "depth_exceeded";
    case error::token_limit_exceeded: return "token_limit_exceeded";
    case error::size_limit_exceeded: return "size_limit_exceeded";
    case error::trailing_bytes: return "trailing_bytes";
    }
    return "unknown";
}

namespace {

using token = document::token;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

struct frame {
    std::uint32_t token;
    bool dict;
    bool expect_key;     // dict: the next value is a key
    bool unsorted;       // dict: a key was smaller than its predecessor
    std::uint32_t prev_key; // dict: token index of the previous key, or UINT32_MAX
};

// Tokens are built from the input, so their spans are in range: no substr() bounds checks.
std::string_view string_payload(std::string_view in, const token& t) noexcept {
    return {in.data() + t.count, static_cast<std::size_t>(t.integer)};
}

class parser {
public:
    parser(std::string_view in, std::vector<token>& tokens, const limits& lim) noexcept
        : in_(in), tokens_(tokens), lim_(lim) {}

    decode_result run(std::uint32_t& unsorted_dicts) noexcept;

private:
    decode_result fail(error e, std::size_t at) noexcept { return {e, at}; }
    bool push(const token& t) noexcept;
    decode_result parse_integer(token& t) noexcept;
    decode_result parse_string(token& t) noexcept;
    decode_result check_key(frame& f, std::uint32_t key_index) noexcept;
    decode_result check_unsorted_duplicates(const frame& f) noexcept;

    std::string_view in_;
    std::vector<token>& tokens_;
    const limits& lim_;
    std::size_t pos_ = 0;
};

bool parser::push(const token& t) noexcept {
    if (tokens_.size() >= lim_.max_tokens) return false;
    try {
        tokens_.push_back(t);
    } catch (const std::bad_alloc&) {
        return false;
    }
    return true;
}

decode_result parser::parse_integer(token& t) noexcept {
    // in_[pos_] == 'i'
    const std::size_t start = pos_++;
    bool negative = false;
    if (pos_ < in_.size() && in_[pos_] == '-') {
        negative = true;
        ++pos_;
    }
    const std::size_t digits_at = pos_;
    // 19 decimal digits always fit in 64 bits, so the loop needs no overflow arithmetic
    // (no division per digit: this runs for every integer of every packet).
    constexpr std::size_t max_digits = 19;
    std::uint64_t magnitude = 0;
    while (pos_ < in_.size() && is_digit(in_[pos_])) {
        if (pos_ - digits_at == max_digits) return fail(error::integer_overflow, digits_at);
        magnitude = magnitude * 10 + static_cast<std::uint64_t>(in_[pos_] - '0');
        ++pos_;
    }
    const std::uint64_t cap = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
    if (magnitude > cap) return fail(error::integer_overflow, digits_at);
    if (pos_ >= in_.size()) return fail(error::unexpected_eof, pos_);
    if (in_[pos_] != 'e') return fail(error::unexpected_byte, pos_);
    const std::size_t ndigits = pos_ - digits_at;
    if (ndigits == 0) return fail(error::empty_integer, start);
    if (in_[digits_at] == '0' && ndigits > 1) return fail(error::leading_zero, digits_at);
    if (negative && magnitude == 0) return fail(error::negative_zero, start);
    ++pos_; // 'e'
    t.kind = type::integer;
    t.start = static_cast<std::uint32_t>(start);
    t.end = static_cast<std::uint32_t>(pos_);
    t.count = 0;
    t.integer = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
    return {};
}

decode_result parser::parse_string(token& t) noexcept {
    const std::size_t start = pos_;
    // No string can be longer than the largest input we accept, so a prefix beyond that is
    // an overflow; 19 digits always fit in 64 bits, so no per-digit overflow arithmetic.
    constexpr std::size_t max_digits = 19;
    std::uint64_t length = 0;
    while (pos_ < in_.size() && is_digit(in_[pos_])) {
        if (pos_ - start == max_digits) return fail(error::string_length_overflow, start);
        length = length * 10 + static_cast<std::uint64_t>(in_[pos_] - '0');
        ++pos_;
    }
    if (length > lim_.max_size) return fail(error::string_length_overflow, start);
    if (pos_ >= in_.size()) return fail(error::unexpected_eof, pos_);
    if (in_[pos_] != ':') return fail(error::unexpected_byte, pos_);
    if (in_[start] == '0' && pos_ - start > 1) return fail(error::leading_zero, start);
    ++pos_; // ':'
    if (length > in_.size() - pos_) return fail(error::string_past_end, start);
    t.kind = type::string;
    t.start = static_cast<std::uint32_t>(start);
    t.count = static_cast<std::uint32_t>(pos_);
    t.integer = static_cast<std::int64_t>(length);
    pos_ += length;
    t.end = static_cast<std::uint32_t>(pos_);
    return {};
}

decode_result parser::check_key(frame& f, std::uint32_t key_index) noexcept {
    if (f.prev_key != UINT32_MAX) {
        const auto prev = string_payload(in_, tokens_[f.prev_key]);
        const auto cur = string_payload(in_, tokens_[key_index]);
        if (cur == prev) return fail(error::duplicate_key, tokens_[key_index].start);
        if (cur < prev) f.unsorted = true;
    }
    f.prev_key = key_index;
    return {};
}

// Keys out of order may hide a duplicate anywhere in the dict; sorting the keys finds it
// in O(n log n). Only unsorted dicts (rare in practice) pay for this.
decode_result parser::check_unsorted_duplicates(const frame& f) noexcept {
    std::vector<std::uint32_t> keys;
    try {
        keys.reserve(tokens_[f.token].count);
        const std::uint32_t stop = tokens_[f.token].next;
        for (std::uint32_t k = f.token + 1; k < stop; k = tokens_[k + 1].next) keys.push_back(k);
    } catch (const std::bad_alloc&) {
        return fail(error::token_limit_exceeded, tokens_[f.token].start);
    }
    auto key_of = [this](std::uint32_t k) { return string_payload(in_, tokens_[k]); };
    std::sort(keys.begin(), keys.end(), [&](auto a, auto b) { return key_of(a) < key_of(b); });
    for (std::size_t i = 1; i < keys.size(); ++i) {
        if (key_of(keys[i]) == key_of(keys[i - 1])) {
            return fail(error::duplicate_key, tokens_[std::max(keys[i], keys[i - 1])].start);
        }
    }
    return {};
}

decode_result parser::run(std::uint32_t& unsorted_dicts) noexcept {
    if (in_.empty()) return fail(error::empty_input, 0);
    if (in_.size() > lim_.max_size) return fail(error::size_limit_exceeded, lim_.max_size);

    // The explicit stack is bounded by max_depth; a small inline array covers the
    // common case without touching the heap.
    constexpr std::size_t inline_depth = 64;
    frame inline_stack[inline_depth];
    std::vector<frame> heap_stack;
    const std::size_t depth_cap = lim_.max_depth;
    frame* stack = inline_stack;
    if (depth_cap > inline_depth) {
        try {
            heap_stack.resize(depth_cap);
        } catch (const std::bad_alloc&) {
            return fail(error::depth_exceeded, 0);
        }
        stack = heap_stack.data();
    }
    std::size_t depth = 0;

    for (;;) {
        if (pos_ >= in_.size()) return fail(error::unexpected_eof, pos_);
        const char c = in_[pos_];
        frame* top = depth ? &stack[depth - 1] : nullptr;

        if (c == 'e' && top) {
            if (top->dict && !top->expect_key) return fail(error::unexpected_byte, pos_); // key without value
            token& t = tokens_[top->token];
            t.end = static_cast<std::uint32_t>(++pos_);
            t.next = static_cast<std::uint32_t>(tokens_.size());
            if (top->dict && top->unsorted) {
                if (auto r = check_unsorted_duplicates(*top); !r) return r;
                ++unsorted_dicts;
            }
            --depth;
        } else {
            const bool is_key = top && top->dict && top->expect_key;
            if (is_key && !is_digit(c)) return fail(error::non_string_key, pos_);
            token t{};
            const auto index = static_cast<std::uint32_t>(tokens_.size());
            if (c == 'i') {
                if (auto r = parse_integer(t); !r) return r;
            } else if (is_digit(c)) {
                if (auto r = parse_string(t); !r) return r;
            } else if (c == 'l' || c == 'd') {
                if (depth >= depth_cap) return fail(error::depth_exceeded, pos_);
                t.kind = c == 'l' ? type::list : type::dict;
                t.start = static_cast<std::uint32_t>(pos_++);
            } else {
                return fail(error::unexpected_byte, pos_);
            }
            t.next = index + 1;
            if (!push(t)) return fail(error::token_limit_exceeded, t.start);

            if (top) {
                if (!top->dict) {
                    ++tokens_[top->token].count;
                } else if (is_key) {
                    if (auto r = check_key(*top, index); !r) return r;
                    ++tokens_[top->token].count;
                    top->expect_key = false;
                } else {
                    top->expect_key = true;
                }
            }
            if (t.kind == type::list || t.kind == type::dict) {
                stack[depth++] = frame{index, t.kind == type::dict, true, false, UINT32_MAX};
                continue;
            }
        }
        if (depth == 0) break;
    }
    if (pos_ != in_.size()) return fail(error::trailing_bytes, pos_);
    return {};
}

} // namespace

decode_result decode(std::string_view input, document& out, const limits& lim) noexcept {
    out.tokens_.clear();
    out.unsorted_dicts_ = 0;
    out.input_ = input;
    parser p(input, out.tokens_, lim);
    decode_result r = p.run(out.unsorted_dicts_);
    if (!r) {
        out.tokens_.clear();
        out.input_ = {};
    }
    return r;
}

// ---- value ------------------------------------------------------------------------------

type value::kind() const noexcept { return doc_ ? doc_->tokens_[index_].kind : type::none; }

std::int64_t value::as_integer() const noexcept { return is_integer() ? doc_->tokens_[index_].integer : 0; }

std::string_view value::as_string() const noexcept {
    return is_string() ? string_payload(doc_->input_, doc_->tokens_[index_]) : std::string_view{};
}

std::string_view value::raw() const noexcept {
    if (!doc_) return {};
    const auto& t = doc_->tokens_[index_];
    return {doc_->input_.data() + t.start, t.end - t.start};
}

std::size_t value::offset() const noexcept { return doc_ ? doc_->tokens_[index_].start : 0; }

std::size_t value::size() const noexcept {
    const auto k = kind();
    return k == type::list || k == type::dict ? doc_->tokens_[index_].count : 0;
}

value value::at(std::size_t i) const noexcept {
    if (!is_list()) return {};
    for (auto it = begin(); it != end(); ++it, --i) {
        if (i == 0) return (*it).val;
    }
    return {};
}

value value::find(std::string_view key) const noexcept {
    if (!is_dict()) return {};
    for (auto it = begin(); it != end(); ++it) {
        auto e = *it;
        if (e.key == key) return e.val;
    }
    return {};
}

value value::find_string(std::string_view key) const noexcept {
    auto v = find(key);
    return v.is_string() ? v : value{};
}
value value::find_integer(std::string_view key) const noexcept {
    auto v = find(key);
    return v.is_integer() ? v : value{};
}
value value::find_list(std::string_view key) const noexcept {
    auto v = find(key);
    return v.is_list() ? v : value{};
}
value value::find_dict(std::string_view key) const noexcept {
    auto v = find(key);
    return v.is_dict() ? v : value{};
}

value::iterator value::begin() const noexcept {
    const auto k = kind();
    if (k != type::list && k != type::dict) return end();
    return iterator(doc_, index_ + 1, k == type::dict);
}

value::iterator value::end() const noexcept {
    if (!doc_) return iterator(nullptr, 0, false);
    const auto k = kind();
    const std::uint32_t stop = (k == type::list || k == type::dict) ? doc_->tokens_[index_].next : index_;
    return iterator(doc_, stop, k == type::dict);
}

value::entry value::iterator::operator*() const noexcept {
    if (!dict_) return {std::string_view{}, value(doc_, index_)};
    return {string_payload(doc_->input_, doc_->tokens_[index_]), value(doc_, index_ + 1)};
}

value::iterator& value::iterator::operator++() noexcept {
    // A dict entry is a key token (a string, so its subtree is itself) then the value.
    index_ = dict_ ? doc_->tokens_[index_ + 1].next : doc_->tokens_[index_].next;
    return *this;
}

} // namespace dhtc::bencode
