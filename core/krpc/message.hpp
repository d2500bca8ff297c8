// The typed KRPC message model (BEP-5 with BEP-32/33/42/43/51 fields), parsed from a decoded
// bencode document in one pass without allocating: strings are views into the packet.
//
// The parser checks only what a single packet can tell: shapes, sizes and ranges. Whether
// the transaction id is one we issued, whether the sender id is our own, whether a token
// is valid and which node entries are worth keeping are the node's decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "bencode/decoder.hpp"
#include "krpc/compact.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::krpc {

/// Decoder limits for one DHT datagram: no legitimate KRPC message comes close to them.
inline constexpr bencode::limits packet_limits{16, 512, 1500};
/// Longest accepted `t`. libtorrent sends 2 bytes; anything long is junk or an attack.
inline constexpr std::size_t max_transaction_size = 64;
/// Longest accepted `token` (libtorrent: 4 bytes, others up to 20).
inline constexpr std::size_t max_token_size = 64;
/// Longest accepted query name `q`.
inline constexpr std::size_t max_method_size = 64;
/// BEP-51: the largest `interval` a responder may ask for, in seconds.
inline constexpr std::int64_t max_sample_interval = 21600;
/// BEP-33: the size of a `BFsd` / `BFpe` bloom filter.
inline constexpr std::size_t scrape_filter_size = 256;

enum class message_type : std::uint8_t { query, response, error };

enum class method : std::uint8_t {
    none, ///< not a query
    ping,
    find_node,
    get_peers,
    announce_peer,
    sample_infohashes,
    unknown, ///< any other name: see query_args::name, has_target, has_info_hash
};
std::string_view to_string(method m) noexcept;
/// The method a query's `q` names (`unknown` for any other name).
method classify_method(std::string_view q) noexcept;

/// Why a packet is not a usable KRPC message. Stable names from to_string().
enum class error : std::uint8_t {
    none = 0,
    not_a_dict,          ///< top level is not a dict
    missing_transaction, ///< no `t`
    bad_transaction,     ///< `t` not a string, empty, or longer than max_transaction_size
    missing_type,        ///< no `y`
    bad_type,            ///< `y` not one of "q", "r", "e"
    missing_method,      ///< a query without `q`
    bad_method,          ///< `q` not a string, empty, or longer than max_method_size
    missing_args,        ///< a query without `a`, or a response without `r`
    bad_args,            ///< `a` / `r` is not a dict
    missing_id,          ///< no `id` in `a` / `r`
    bad_id,              ///< `id` not a 20-byte string
    missing_target,      ///< find_node / sample_infohashes without `target`
    bad_target,          ///< `target` not a 20-byte string
    missing_info_hash,   ///< get_peers / announce_peer without `info_hash`
    bad_info_hash,       ///< `info_hash` not a 20-byte string
    missing_port,        ///< announce_peer without `port`
    bad_port,            ///< `port` not an integer, or outside 1..65535 without implied_port
    bad_implied_port,    ///< `implied_port` not an integer
    missing_token,       ///< announce_peer without `token`
    bad_token,           ///< `token` not a string or longer than max_token_size
    bad_nodes,           ///< `nodes` not a string whose size is a multiple of 26
    bad_nodes6,          ///< `nodes6` not a string whose size is a multiple of 38
    bad_values,          ///< `values` not a list
    missing_error,       ///< an error message without `e`
    bad_error,           ///< `e` not a list starting with [integer, string]
    bad_want,            ///< `want` not a list of strings
    bad_ip,              ///< top-level `ip` not a 6- or 18-byte string
    bad_ro,              ///< `ro` not an integer
    bad_samples,         ///< `samples` not a string whose size is a multiple of 20
    bad_interval,        ///< `interval` not an integer in 0..max_sample_interval
    bad_num,             ///< `num` not a non-negative integer
};
std::string_view to_string(error e) noexcept;

/// BEP-32 `want` as a bit set.
enum class want : std::uint8_t { none = 0, n4 = 1, n6 = 2, both = 3 };
constexpr want operator|(want a, want b) noexcept {
    return static_cast<want>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool has(want set, want flag) noexcept {
    return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(flag)) != 0;
}

/// Fields of `a` in a query. Only the fields the method uses are validated; the others are
/// ignored, as BEP-5 asks of unknown keys.
struct query_args {
    method kind = method::none;
    std::string_view name; ///< `q` exactly as sent (useful for method::unknown)

    /// find_node, sample_infohashes; for unknown methods set only when 20 bytes were sent.
    id20 target;
    bool has_target = false;
    /// get_peers, announce_peer; for unknown methods set only when 20 bytes were sent.
    id20 info_hash;
    bool has_info_hash = false;

    /// announce_peer: the port to store, 0 when implied_port is set (use the UDP source port).
    std::uint16_t port = 0;
    bool implied_port = false;
    std::string_view token; ///< announce_peer

    /// BEP-32; when has_want is false the querier wants its own family only.
    want wants = want::none;
    bool has_want = false;

    bool seed = false;      ///< announce_peer, BEP-33
    bool noseed = false;    ///< get_peers, BEP-33
    bool scrape = false;    ///< get_peers, BEP-33
    bool bootstrap = false; ///< get_peers `bs` (libtorrent's bootstrap lookup: never fetch it)
};

/// Fields of `r` in a response. Which ones must be present depends on the query it answers,
/// which only the transaction table knows; the parser validates whatever is present.
struct response_args {
    compact_nodes nodes{ip_family::v4};
    bool has_nodes = false;
    compact_nodes nodes6{ip_family::v6};
    bool has_nodes6 = false;
    compact_values values; ///< get_peers; skipped() counts malformed entries
    bool has_values = false;
    std::string_view token;
    bool has_token = false;

    /// BEP-51. `num` is reported as sent: a `num` below the sample count is tolerated (the
    /// samples are still real info hashes and num is only the responder's estimate of its
    /// store); use std::max(num, sample_count()) when a total is needed.
    std::string_view samples;
    bool has_samples = false;
    std::int64_t interval = 0;
    bool has_interval = false;
    std::int64_t num = 0;
    bool has_num = false;

    /// BEP-33 `BFsd` / `BFpe` (answers to get_peers with scrape=1): exactly
    /// scrape_filter_size bytes when present, else empty (a filter of another size is ignored).
    std::string_view seeds_filter;
    std::string_view peers_filter;

    std::size_t sample_count() const noexcept { return samples.size() / id20::size; }
    /// The i-th sample; i must be < sample_count().
    id20 sample(std::size_t i) const noexcept;
};

/// `e` of an error message. Elements after the first two are ignored.
struct error_args {
    std::int64_t code = 0;
    std::string_view message;
};

/// One parsed KRPC message. Views point into the packet buffer and the bencode document it
/// was decoded into; keep both alive while the message is used.
struct message {
    message_type type = message_type::query;
    std::string_view transaction; ///< `t`, echoed verbatim in replies
    std::string_view version;     ///< `v` when it is a string (binary; often "LT" + 2 bytes)
    std::optional<endpoint> ip;   ///< BEP-42 top-level `ip`: how the sender sees us
    bool read_only = false;       ///< BEP-43 `ro` non-zero
    id20 id;                      ///< sender id (`a.id` / `r.id`); zero for error messages

    query_args query;       ///< type == query
    response_args response; ///< type == response
    error_args err;         ///< type == error
};

/// Outcome of parse(). `offset` is the input offset of the offending value (or of the
/// enclosing dict when a key is missing). For queries, `query_method` is set as soon as
/// `q` is read, so a node can answer a malformed query with error 203.
struct parse_result {
    error code = error::none;
    method query_method = method::none;
    std::size_t offset = 0;
    explicit operator bool() const noexcept { return code == error::none; }
};

/// Fills `out` from a decoded packet. Single pass over the top-level dict and over `a`/`r`,
/// no allocation, no exceptions. On failure `out` holds what was read before the error:
/// at least `transaction` once `t` was valid (so an error reply can echo it).
parse_result parse(const bencode::value& root, message& out) noexcept;

} // namespace dhtc::krpc
