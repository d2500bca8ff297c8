// Compact node and peer forms (BEP-5, BEP-32): non-allocating views that read them out of a
// packet, and writers that append them to a caller's buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bencode/decoder.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::krpc {

enum class ip_family : std::uint8_t { v4, v6 };

inline constexpr std::size_t compact_peer_v4_size = 6;  ///< 4-byte address + 2-byte port
inline constexpr std::size_t compact_peer_v6_size = 18; ///< 16-byte address + 2-byte port
inline constexpr std::size_t compact_node_v4_size = 26; ///< 20-byte id + compact v4 peer
inline constexpr std::size_t compact_node_v6_size = 38; ///< 20-byte id + compact v6 peer

/// Size of one compact node entry of that family.
constexpr std::size_t compact_node_size(ip_family f) noexcept {
    return f == ip_family::v4 ? compact_node_v4_size : compact_node_v6_size;
}

/// One node from a `nodes`/`nodes6` string.
struct node_entry {
    id20 id;
    endpoint ep;
    bool operator==(const node_entry&) const = default;
};

/// A 6-byte (v4) or 18-byte (v6) compact endpoint (network order, port last); nothing for
/// any other length. Used for `values` entries and the BEP-42 top-level `ip`.
std::optional<endpoint> parse_compact_endpoint(std::string_view raw) noexcept;

/// The compact form of an endpoint, held on the stack (no allocation).
struct compact_endpoint {
    std::array<char, compact_peer_v6_size> bytes{};
    std::uint8_t length = 0;
    std::string_view view() const noexcept { return {bytes.data(), length}; }
};
compact_endpoint to_compact(const endpoint& ep) noexcept;

/// A view over a `nodes` (26-byte entries) or `nodes6` (38-byte entries) string. Valid as
/// long as the packet bytes it points into.
class compact_nodes {
public:
    /// An empty view of that family.
    explicit compact_nodes(ip_family f = ip_family::v4) noexcept : family_(f) {}

    /// The view, or nothing when `raw.size()` is not a multiple of the entry size.
    static std::optional<compact_nodes> from(std::string_view raw, ip_family f) noexcept;

    ip_family family() const noexcept { return family_; }
    std::size_t size() const noexcept { return raw_.size() / compact_node_size(family_); }
    bool empty() const noexcept { return raw_.empty(); }
    /// The compact bytes, e.g. to forward them unchanged.
    std::string_view raw() const noexcept { return raw_; }
    /// The i-th entry; i must be < size().
    node_entry operator[](std::size_t i) const noexcept;

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = node_entry;
        using difference_type = std::ptrdiff_t;
        using pointer = void;
        using reference = node_entry;

        iterator() = default;
        node_entry operator*() const noexcept { return (*owner_)[index_]; }
        iterator& operator++() noexcept {
            ++index_;
            return *this;
        }
        iterator operator++(int) noexcept {
            auto old = *this;
            ++index_;
            return old;
        }
        bool operator==(const iterator& o) const noexcept { return index_ == o.index_; }

    private:
        friend class compact_nodes;
        iterator(const compact_nodes* o, std::size_t i) noexcept : owner_(o), index_(i) {}
        const compact_nodes* owner_ = nullptr;
        std::size_t index_ = 0;
    };
    iterator begin() const noexcept { return {this, 0}; }
    iterator end() const noexcept { return {this, size()}; }

private:
    compact_nodes(std::string_view raw, ip_family f) noexcept : raw_(raw), family_(f) {}
    std::string_view raw_;
    ip_family family_ = ip_family::v4;
};

/// A view over a get_peers `values` list. Entries are parsed one by one: 6- and 18-byte
/// strings may be mixed (BEP-32); entries of any other size or type are skipped by the
/// iterator and counted in skipped(). Valid as long as the decoded document.
class compact_values {
public:
    compact_values() = default;

    /// The view, or nothing when `list` is not a bencode list. Counts the entries once.
    static std::optional<compact_values> from(const bencode::value& list) noexcept;

    /// Usable entries.
    std::size_t size() const noexcept { return valid_; }
    bool empty() const noexcept { return valid_ == 0; }
    /// Entries that were not a 6- or 18-byte string.
    std::size_t skipped() const noexcept { return skipped_; }

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = endpoint;
        using difference_type = std::ptrdiff_t;
        using pointer = void;
        using reference = endpoint;

        endpoint operator*() const noexcept;
        iterator& operator++() noexcept;
        bool operator==(const iterator& o) const noexcept { return it_ == o.it_; }

    private:
        friend class compact_values;
        iterator(bencode::value::iterator it, bencode::value::iterator end) noexcept : it_(it), end_(end) {
            skip_invalid();
        }
        void skip_invalid() noexcept;
        bencode::value::iterator it_;
        bencode::value::iterator end_;
    };
    iterator begin() const noexcept { return {list_.begin(), list_.end()}; }
    iterator end() const noexcept { return {list_.end(), list_.end()}; }

private:
    bencode::value list_;
    std::size_t valid_ = 0;
    std::size_t skipped_ = 0;
};

/// Appends the 6- or 18-byte compact form of `ep`.
void append_compact_endpoint(std::string& out, const endpoint& ep);
/// Appends one 26-byte (v4) or 38-byte (v6) compact node entry. `nodes` must only get v4
/// entries and `nodes6` only v6 ones: see append_compact_nodes.
void append_compact_node(std::string& out, const id20& id, const endpoint& ep);
/// Appends the entries of `nodes` whose address family is `f`, skipping the others, so one
/// candidate list can fill both `nodes` and `nodes6`. Returns how many were appended.
std::size_t append_compact_nodes(std::string& out, std::span<const node_entry> nodes, ip_family f);

} // namespace dhtc::krpc
