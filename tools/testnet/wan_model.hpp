// The wide-area network between two addresses, as the test network (and the TUN link in
// tools/wanlink) applies it to each packet: a round-trip time per pair of addresses, drawn
// once from a distribution by a keyed hash of the pair and the seed (so it is the same for
// the whole run and for every transport), jitter per packet, and loss per packet, i.i.d. or
// in bursts (a Gilbert–Elliott chain per direction of each pair). Pure logic on a given
// clock: no sockets, no timers, so tests drive it with counts and chosen instants.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "testnet/rng.hpp"

namespace dhtc::testnet::wan {

using clock = std::chrono::steady_clock;
using duration = std::chrono::nanoseconds;

enum class rtt_distribution : std::uint8_t {
    uniform,   ///< uniform between the bounds
    lognormal, ///< log-normal, median at the bounds' geometric mean, the bounds at ±2σ; redrawn outside them
};

/// A Gilbert–Elliott chain: two states, a loss probability in each, a transition
/// probability out of each, stepped once per packet.
struct gilbert_elliott {
    double good_to_bad = 0;
    double bad_to_good = 1;
    double loss_good = 0;
    double loss_bad = 1;
    /// The share of packets it loses in the long run.
    double mean_loss() const noexcept;
    /// Gilbert's special case: every packet lost in the bad state, none in the good one,
    /// bursts of `mean_burst` packets on average, `loss` of all packets lost.
    static gilbert_elliott bursts(double loss, double mean_burst) noexcept;
};

struct options {
    bool enabled = false;
    double rtt_min_ms = 50;
    double rtt_max_ms = 350;
    rtt_distribution distribution = rtt_distribution::uniform;
    double jitter_ms = 20;  ///< each packet's one-way delay gets U(0, jitter) more
    double loss = 0.02;     ///< per packet, each way
    /// Burst loss instead of i.i.d. (the chain's mean loss replaces `loss`).
    std::optional<gilbert_elliott> bursts;
    /// Set by the "burst" option: bursts of this many packets on average with `loss`'s mean,
    /// made a Gilbert chain by finish_options() (0: none).
    double mean_burst = 0;
    std::uint64_t seed = 1;

    /// What `--libtorrent-like` turns on (see tools/testnet/README.md for why these).
    static options libtorrent_like(std::uint64_t seed);
    /// The share of packets lost each way, whichever loss model is on.
    double mean_loss() const noexcept { return bursts ? bursts->mean_loss() : loss; }
    /// Empty when the options are consistent, else what is wrong.
    std::string check() const;
    /// One JSON object naming the model, e.g. {"wan":true,"rtt_ms":[50,350],...}; {"wan":false} when off.
    std::string to_json() const;
};

/// The command-line options of both tools that apply the model, without their prefix (the
/// test network's "--wan-", the TUN link's "--"): rtt, rtt-dist, jitter, loss, burst, ge.
enum class parse_result { not_an_option, ok, bad_value };
parse_result parse_option(std::string_view name, std::string_view value, options& o);
/// After the last option: "burst" becomes its chain; empty, or what is wrong (check()).
std::string finish_options(options& o);
/// Their --help lines, each option name with `prefix` before it.
std::string options_help(std::string_view prefix);
/// A tool's usage text with those lines in place of its line "{wan options}".
std::string usage_with_options(std::string_view usage, std::string_view prefix);

/// "50-350" (milliseconds, min <= max).
bool parse_range(std::string_view s, double& lo, double& hi);
/// "uniform" or "lognormal".
std::optional<rtt_distribution> parse_distribution(std::string_view s);
/// "P_GB,P_BG,LOSS_GOOD,LOSS_BAD" (each in 0..1, P_GB + P_BG > 0).
std::optional<gilbert_elliott> parse_gilbert_elliott(std::string_view s);

struct stats {
    std::uint64_t packets = 0;  ///< packets judged
    std::uint64_t lost = 0;     ///< of them, dropped
    std::uint64_t link_evictions = 0; ///< a link's state overwritten by another's (see model)
};

/// What happened to one packet.
struct verdict {
    bool lost = false;
    duration delay{};   ///< from now until it arrives (when not lost)
};

class model {
public:
    explicit model(const options& o);

    const options& settings() const noexcept { return opt_; }

    /// The pair's round-trip time: the same whichever way round and all run long.
    duration rtt(std::uint32_t a, std::uint32_t b) const noexcept;
    /// One datagram from `from` to `to` (IPv4, host order) sent at `now`: lost, or the delay
    /// until it arrives: half the pair's RTT plus U(0, jitter), never earlier than the
    /// previous datagram of that direction arrives (links do not reorder).
    verdict datagram(std::uint32_t from, std::uint32_t to, clock::time_point now);
    /// One loss draw for the direction from -> to (the same chain datagram() steps).
    bool lose(std::uint32_t from, std::uint32_t to);
    /// U(0, jitter).
    duration jitter();

    // TCP, which the kernel carries: what the test network can add on its side of a
    // connection (see wan_stream).
    /// What a lost segment costs: one retransmission timeout, RFC 6298 after one RTT sample
    /// (SRTT = R, RTTVAR = R/2: R + 4·R/2 = 3R), at least Linux's 200 ms.
    duration tcp_retransmit(std::uint32_t a, std::uint32_t b) const noexcept;
    /// The handshake a connection needs before its first byte can arrive: one RTT, plus
    /// Linux's SYN retransmissions (1 s, 2 s, 4 s, ...) for each SYN or SYN-ACK lost.
    duration tcp_handshake(std::uint32_t client, std::uint32_t server);

    const stats& counters() const noexcept { return stats_; }

private:
    /// A direction's state: the last arrival it scheduled, and its chain's state. Kept in a
    /// direct-mapped table: bounded memory whatever the number of pairs; two directions
    /// that hash to one slot take turns (counted), which at worst reorders a pair of
    /// datagrams or restarts a chain in its stationary state.
    struct link_state {
        std::uint64_t key = 0; // 0: empty
        clock::time_point last_arrival{};
        bool bad = false;
    };
    link_state& link(std::uint32_t from, std::uint32_t to);
    bool step_loss(link_state& l);

    static constexpr std::size_t table_size = std::size_t{1} << 18; // 6 MiB

    options opt_;
    rng rng_;
    std::vector<link_state> links_;
    stats stats_;
};

} // namespace dhtc::testnet::wan
