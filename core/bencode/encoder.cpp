#include "bencode/encoder.hpp"

#include <charconv>

namespace dhtc::bencode {

void writer::before_value() {
    if (depth_ == 0) return;
    frame& f = stack_[depth_ - 1];
    if (f.dict) {
        if (!f.expect_value) ok_ = false; // a dict value with no key before it
        f.expect_value = false;
    }
}

writer& writer::integer(std::int64_t v) {
    before_value();
    char buf[24];
    buf[0] = 'i';
    auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 1, v);
    (void)ec;
    *end++ = 'e';
    out_.append(buf, static_cast<std::size_t>(end - buf)); // (ptr, len): one capacity check, one copy
    return *this;
}

void writer::append_string(std::string_view s) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, s.size());
    (void)ec;
    *end++ = ':';
    out_.append(buf, static_cast<std::size_t>(end - buf));
    out_.append(s.data(), s.size());
}

writer& writer::string(std::string_view s) {
    before_value();
    append_string(s);
    return *this;
}

writer& writer::begin_list() {
    before_value();
    if (depth_ >= max_depth) {
        ok_ = false;
        return *this;
    }
    stack_[depth_++] = frame{};
    out_.push_back('l');
    return *this;
}

writer& writer::begin_dict() {
    before_value();
    if (depth_ >= max_depth) {
        ok_ = false;
        return *this;
    }
    stack_[depth_++] = frame{true, false, 0, 0, false};
    out_.push_back('d');
    return *this;
}

writer& writer::end() {
    if (depth_ == 0 || stack_[depth_ - 1].expect_value) {
        ok_ = false;
        return *this;
    }
    --depth_;
    out_.push_back('e');
    return *this;
}

writer& writer::key(std::string_view k) {
    if (depth_ == 0 || !stack_[depth_ - 1].dict || stack_[depth_ - 1].expect_value) {
        ok_ = false;
        return *this;
    }
    frame& f = stack_[depth_ - 1];
    if (f.has_key && std::string_view(out_).substr(f.last_key_at, f.last_key_len) >= k) ok_ = false;
    append_string(k);
    f.has_key = true;
    f.last_key_len = k.size();
    f.last_key_at = out_.size() - k.size();
    f.expect_value = true;
    return *this;
}

entry& entry::operator[](std::string_view key) {
    if (!is_dict()) v_ = dict_type{};
    auto& d = as_dict();
    auto it = d.find(key);
    if (it == d.end()) it = d.emplace(std::string(key), entry{}).first;
    return it->second;
}

void entry::encode(writer& w) const {
    std::visit(
        [&w](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::int64_t>) {
                w.integer(v);
            } else if constexpr (std::is_same_v<T, std::string>) {
                w.string(v);
            } else if constexpr (std::is_same_v<T, list_type>) {
                w.begin_list();
                for (const auto& e : v) e.encode(w);
                w.end();
            } else {
                w.begin_dict();
                for (const auto& [k, e] : v) {
                    w.key(k);
                    e.encode(w);
                }
                w.end();
            }
        },
        v_);
}

std::string entry::encode() const {
    std::string out;
    writer w(out);
    encode(w);
    return out;
}

entry entry::from(const value& v) {
    switch (v.kind()) {
    case type::integer: return entry(v.as_integer());
    case type::string: return entry(v.as_string());
    case type::list: {
        list_type l;
        l.reserve(v.size());
        for (auto e : v) l.push_back(from(e.val));
        return entry(std::move(l));
    }
    case type::dict: {
        dict_type d;
        for (auto e : v) d.emplace(std::string(e.key), from(e.val));
        return entry(std::move(d));
    }
    case type::none: break;
    }
    return entry();
}

} // namespace dhtc::bencode
