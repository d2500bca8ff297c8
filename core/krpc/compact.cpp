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

namespace {

// One compact node entry at `p`; with the address size known at compile time every copy
// is a couple of moves.
template <std::size_t AddressSize>
void write_compact_node(char* p, const node_entry& e) noexcept {
    std::memcpy(p, e.id.bytes.data(), id20::size);
    std::memcpy(p + id20::size, e.ep.address.raw().data(), AddressSize);
    p[id20::size + AddressSize] = static_cast<char>(e.ep.port >> 8);
    p[id20::size + AddressSize + 1] = static_cast<char>(e.ep.port & 0xff);
}

template <std::size_t AddressSize>
std::size_t append_nodes_of_family(std::string& out, std::span<const node_entry> nodes, bool v6) {
    constexpr std::size_t entry_size = id20::size + AddressSize + 2;
    std::size_t n = 0;
    for (const auto& e : nodes) n += e.ep.address.is_v6() == v6;
    std::size_t at = out.size();
    out.resize(at + n * entry_size);
    for (const auto& e : nodes) {
        if (e.ep.address.is_v6() != v6) continue;
        write_compact_node<AddressSize>(out.data() + at, e);
        at += entry_size;
    }
    return n;
}

} // namespace

// Sized once and written in place: this runs for every find_node and get_peers answer,
// where one append per field would cost more than the bytes it copies.
std::size_t append_compact_nodes(std::string& out, std::span<const node_entry> nodes, ip_family f) {
    static_assert(compact_node_v4_size == id20::size + 4 + 2 && compact_node_v6_size == id20::size + 16 + 2);
    return f == ip_family::v6 ? append_nodes_of_family<16>(out, nodes, true)
                              : append_nodes_of_family<4>(out, nodes, false);
}

} // namespace dhtc::krpc
