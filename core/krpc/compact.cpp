#include "krpc/compact.hpp"

#include <cstring>

namespace dhtc::krpc {

namespace {

std::uint16_t read_port(const char* p) noexcept {
    return static_cast<std::uint16_t>(static_cast<std::uint8_t>(p[0]) << 8 | static_cast<std::uint8_t>(p[1]));
}

bool is_compact_endpoint(const bencode::value& v) noexcept {
    if (!v.is_string()) return false;
    const auto n = v.as_string().size();
    return n == compact_peer_v4_size || n == compact_peer_v6_size;
}

} // namespace

std::optional<endpoint> parse_compact_endpoint(std::string_view raw) noexcept {
    if (raw.size() != compact_peer_v4_size && raw.size() != compact_peer_v6_size) return std::nullopt;
    const std::size_t addr_len = raw.size() - 2;
    auto addr = ip_address::from_bytes(raw.substr(0, addr_len));
    if (!addr) return std::nullopt;
    return endpoint{*addr, read_port(raw.data() + addr_len)};
}

compact_endpoint to_compact(const endpoint& ep) noexcept {
    compact_endpoint c;
    const auto a = ep.address.bytes();
    std::memcpy(c.bytes.data(), a.data(), a.size());
    c.bytes[a.size()] = static_cast<char>(ep.port >> 8);
    c.bytes[a.size() + 1] = static_cast<char>(ep.port & 0xff);
    c.length = static_cast<std::uint8_t>(a.size() + 2);
    return c;
}

std::optional<compact_nodes> compact_nodes::from(std::string_view raw, ip_family f) noexcept {
    if (raw.size() % compact_node_size(f) != 0) return std::nullopt;
    return compact_nodes(raw, f);
}

node_entry compact_nodes::operator[](std::size_t i) const noexcept {
    const std::size_t n = compact_node_size(family_);
    const std::string_view e = raw_.substr(i * n, n);
    node_entry out;
    std::memcpy(out.id.bytes.data(), e.data(), id20::size);
    // The length is exact by construction, so the endpoint always parses.
    if (auto ep = parse_compact_endpoint(e.substr(id20::size))) out.ep = *ep;
    return out;
}

std::optional<compact_values> compact_values::from(const bencode::value& list) noexcept {
    if (!list.is_list()) return std::nullopt;
    compact_values v;
    v.list_ = list;
    for (auto e : list) {
        if (is_compact_endpoint(e.val))
            ++v.valid_;
        else
            ++v.skipped_;
    }
    return v;
}

endpoint compact_values::iterator::operator*() const noexcept {
    if (auto ep = parse_compact_endpoint((*it_).val.as_string())) return *ep;
    return {};
}

compact_values::iterator& compact_values::iterator::operator++() noexcept {
    ++it_;
    skip_invalid();
    return *this;
}

void compact_values::iterator::skip_invalid() noexcept {
    while (!(it_ == end_) && !is_compact_endpoint((*it_).val)) ++it_;
}

void append_compact_endpoint(std::string& out, const endpoint& ep) { out.append(to_compact(ep).view()); }

void append_compact_node(std::string& out, const id20& id, const endpoint& ep) {
    out.append(id.view());
    append_compact_endpoint(out, ep);
}

// Sized once and written in place: this runs for every find_node and get_peers answer,
// where one append per field would cost more than the bytes it copies.
std::size_t append_compact_nodes(std::string& out, std::span<const node_entry> nodes, ip_family f) {
    const bool v6 = f == ip_family::v6;
    std::size_t n = 0;
    for (const auto& e : nodes) n += e.ep.address.is_v6() == v6;
    std::size_t at = out.size();
    out.resize(at + n * compact_node_size(f));
    for (const auto& e : nodes) {
        if (e.ep.address.is_v6() != v6) continue;
        const compact_endpoint ep = to_compact(e.ep);
        std::memcpy(out.data() + at, e.id.bytes.data(), id20::size);
        std::memcpy(out.data() + at + id20::size, ep.bytes.data(), ep.length);
        at += id20::size + ep.length;
    }
    return n;
}

} // namespace dhtc::krpc
