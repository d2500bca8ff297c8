// Which addresses the crawler may talk to. Node lists from the DHT are hostile input: they
// carry private, loopback, multicast and documentation addresses (leaks from NATs, typos and
// deliberate reflection attempts), and our own endpoint. Nothing reaches the node pool, the
// responsive ring or a socket without passing `address_policy`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/address.hpp"

namespace dhtc {

/// What kind of address an `ip_address` is (IANA special-purpose registries, condensed).
enum class address_class : std::uint8_t {
    global,      ///< publicly routable unicast (including 6to4 and Teredo)
    private_use, ///< 10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7
    loopback,    ///< 127/8, ::1
    link_local,  ///< 169.254/16, fe80::/10
    multicast,   ///< 224/4, ff00::/8
    unspecified, ///< 0/8, ::
    broadcast,   ///< 255.255.255.255
    reserved,    ///< documentation, benchmarking, 240/4, 192.0.0/24, and IPv6 outside 2000::/3
};

/// "public", "private", "loopback", "link_local", "multicast", "unspecified", "broadcast", "reserved".
std::string_view to_string(address_class c) noexcept;

/// Classifies `a`. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is classified by its IPv4 part.
address_class classify(const ip_address& a) noexcept;

/// True for ::ffff:a.b.c.d.
bool is_v4_mapped(const ip_address& a) noexcept;
/// The IPv4 address inside an IPv4-mapped address, anything else unchanged. Every crawl
/// structure keys on the canonical form, so ::ffff:1.2.3.4 and 1.2.3.4 are one node.
ip_address canonical(const ip_address& a) noexcept;
/// `ep` with its address made canonical.
endpoint canonical(const endpoint& ep) noexcept;

/// Why an endpoint is or is not admitted. Counters index arrays by this value.
enum class admission_verdict : std::uint8_t {
    ok,
    own,         ///< one of our own addresses or endpoints
    port_zero,
    private_use, ///< see address_class::private_use
    loopback,
    link_local,
    multicast,
    unspecified,
    broadcast,
    reserved,
};
/// Number of admission_verdict values (for counter arrays).
inline constexpr std::size_t admission_verdict_count = 10;

/// "ok", "own", "port_zero", "private", "loopback", ... (matching to_string(address_class)).
std::string_view to_string(admission_verdict v) noexcept;

struct address_policy_options {
    /// Admit private and loopback addresses (labs, tests, a LAN-only DHT). Link-local,
    /// multicast, unspecified, broadcast and reserved addresses stay refused regardless.
    bool allow_private_addresses = false;
};

/// The admission rule for remote endpoints.
///
/// Thread rules: verdict() is const and may run on several threads at once, but the own
/// lists must not change meanwhile: configure them before sharing the policy, or keep the
/// policy inside the crawl actor.
class address_policy {
public:
    /// Own addresses and own endpoints kept at most (a host has a handful).
    static constexpr std::size_t max_own = 16;

    explicit address_policy(address_policy_options options = {}) noexcept : options_(options) {}

    /// Never admit `a` on any port (e.g. our external address learnt from BEP-42 `ip`).
    /// False when the list is full; a repeat is accepted and stored once.
    bool add_own_address(const ip_address& a) noexcept;
    /// Never admit exactly `ep` (e.g. our bound socket when others share the IP).
    /// False when the list is full; a repeat is accepted and stored once.
    bool add_own_endpoint(const endpoint& ep) noexcept;
    void clear_own() noexcept;

    /// Why `ep` is (not) admissible. Order: own, port 0, then the address class.
    admission_verdict verdict(const endpoint& ep) const noexcept;
    /// verdict(ep) == ok.
    bool admissible(const endpoint& ep) const noexcept { return verdict(ep) == admission_verdict::ok; }

    const address_policy_options& options() const noexcept { return options_; }

private:
    address_policy_options options_;
    std::array<ip_address, max_own> own_addresses_{};
    std::array<endpoint, max_own> own_endpoints_{};
    std::size_t own_address_count_ = 0;
    std::size_t own_endpoint_count_ = 0;
};

/// The subnet an address belongs to for per-subnet limits: /24 for IPv4, /64 for IPv6,
/// packed in 8 bytes. IPv4 keys live at 0000:0001::/32 of the IPv6 key space, inside
/// 0::/8, which classify() calls reserved, so they never collide with an admissible /64.
struct subnet_key {
    std::uint64_t value = 0;
    friend bool operator==(subnet_key, subnet_key) = default;
};

/// The /24 or /64 of `a` (of its canonical form).
subnet_key subnet_of(const ip_address& a) noexcept;

/// A mixing hash for subnet keys (the keys are highly structured, so std::hash's identity
/// would cluster in power-of-two tables). Not keyed: where outsiders choose the keys and
/// probe lengths matter, use a keyed hash instead (the crawl tables do).
struct subnet_key_hash {
    std::size_t operator()(subnet_key k) const noexcept {
        std::uint64_t z = k.value + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<std::size_t>(z ^ (z >> 31));
    }
};

} // namespace dhtc
