#include "krpc/reply_encoder.hpp"

#include <charconv>
#include <cstring>
#include <span>

#include "krpc/compact.hpp"
#include "krpc/message.hpp"

namespace dhtc::krpc {

namespace {

std::size_t decimal_digits(std::size_t n) noexcept {
    std::size_t d = 1;
    for (; n >= 10; n /= 10) ++d;
    return d;
}

// The size of `s` written as a bencoded string.
std::size_t encoded_size(std::string_view s) noexcept { return decimal_digits(s.size()) + 1 + s.size(); }

// Writes into space already reserved, so no step checks capacity.
class cursor {
public:
    explicit cursor(char* at) noexcept : at_(at) {}
    void raw(std::string_view s) noexcept {
        std::memcpy(at_, s.data(), s.size());
        at_ += s.size();
    }
    void string(std::string_view s) noexcept {
        at_ = std::to_chars(at_, at_ + 20, s.size()).ptr;
        *at_++ = ':';
        raw(s);
    }

private:
    char* at_;
};

bool valid_transaction(std::string_view t) noexcept { return !t.empty() && t.size() <= max_transaction_size; }

bool whole_entries(std::string_view nodes, ip_family f) noexcept { return nodes.size() % compact_node_size(f) == 0; }

} // namespace

reply_encoder::reply_encoder(const id20& own_id, std::string_view version) {
    id_part_ = "1:rd2:id20:";
    id_part_.append(own_id.view());
    if (!version.empty()) {
        tail_ = "1:v" + std::to_string(version.size()) + ":";
        tail_.append(version);
    }
    tail_ += "1:y1:re";
}

void reply_encoder::fields::add_nodes(std::string_view nodes, std::string_view nodes6, bool with_nodes6) noexcept {
    add("5:nodes", nodes);
    if (with_nodes6 || !nodes6.empty()) add("6:nodes6", nodes6);
}

// The layout of every reply: {ip, r: {id, fields...}, t, v?, y: r}, keys in canonical order.
bool reply_encoder::write(std::string& out, std::string_view transaction, const endpoint& requester,
                          const fields& body) const noexcept {
    if (!valid_transaction(transaction)) return false;
    const compact_endpoint ip = to_compact(requester);
    const auto entries = std::span(body.items.data(), body.count);
    std::size_t size = 1 + 4 + encoded_size(ip.view()) + id_part_.size() + 1 + 3 + encoded_size(transaction) +
                       tail_.size();
    for (const field& f : entries) size += f.encoded_key.size() + encoded_size(f.value);

    const std::size_t old = out.size();
    try {
        out.resize(old + size);
    } catch (...) {
        return false;
    }
    cursor c(out.data() + old);
    c.raw("d2:ip");
    c.string(ip.view());
    c.raw(id_part_);
    for (const field& f : entries) {
        c.raw(f.encoded_key);
        c.string(f.value);
    }
    c.raw("e1:t");
    c.string(transaction);
    c.raw(tail_);
    return true;
}

bool reply_encoder::ping(std::string& out, std::string_view transaction, const endpoint& requester) const noexcept {
    return write(out, transaction, requester, {});
}

bool reply_encoder::find_node(std::string& out, std::string_view transaction, const endpoint& requester,
                              std::string_view nodes, std::string_view nodes6, bool with_nodes6) const noexcept {
    if (!whole_entries(nodes, ip_family::v4) || !whole_entries(nodes6, ip_family::v6)) return false;
    fields body;
    body.add_nodes(nodes, nodes6, with_nodes6);
    return write(out, transaction, requester, body);
}

bool reply_encoder::get_peers(std::string& out, std::string_view transaction, const endpoint& requester,
                              std::string_view token, std::string_view nodes, std::string_view nodes6,
                              bool with_nodes6) const noexcept {
    if (token.size() > max_token_size || !whole_entries(nodes, ip_family::v4) || !whole_entries(nodes6, ip_family::v6))
        return false;
    fields body;
    body.add_nodes(nodes, nodes6, with_nodes6);
    body.add("5:token", token);
    return write(out, transaction, requester, body);
}

} // namespace dhtc::krpc
