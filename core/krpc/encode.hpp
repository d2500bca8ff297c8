// KRPC encoders: every query we send and every reply we give, written as canonical bencode
// (ascending keys) with bencode::writer into a caller-owned, reused buffer.
//
// Each function appends one complete message to `out` and returns true; on invalid
// arguments (see each function) or allocation failure it returns false and leaves `out` as
// it was. Once `out` has capacity for a message nothing allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "krpc/compact.hpp"
#include "krpc/message.hpp"
#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::krpc {

/// KRPC error codes (BEP-5).
inline constexpr std::int64_t error_generic = 201;
inline constexpr std::int64_t error_server = 202;
inline constexpr std::int64_t error_protocol = 203;
inline constexpr std::int64_t error_method_unknown = 204;

/// Fields common to the queries we send. We never send `ro` (BEP-43: libtorrent would not
/// add us to its table), so there is no parameter for it.
struct query_header {
    std::string_view transaction; ///< 1..max_transaction_size bytes
    id20 id;                      ///< our node id
    std::string_view version;     ///< `v`, omitted when empty
};

/// Fields common to the replies we give.
struct reply_header {
    std::string_view transaction;      ///< the query's `t`, echoed; 1..max_transaction_size bytes
    id20 id;                           ///< the id we answer with
    std::optional<endpoint> requester; ///< BEP-42 top-level `ip`: the querier's address as we see it
    std::string_view version;          ///< `v`, omitted when empty
};

/// ping query.
bool encode_ping(std::string& out, const query_header& h) noexcept;
/// find_node query; `want` is omitted when want::none.
bool encode_find_node(std::string& out, const query_header& h, const id20& target, want w = want::none) noexcept;
/// get_peers query; `want` is omitted when want::none; `scrape` asks for BEP-33's BFsd/BFpe.
bool encode_get_peers(std::string& out, const query_header& h, const id20& info_hash, want w = want::none,
                      bool scrape = false) noexcept;
/// announce_peer query. `port` must be non-zero unless `implied_port`; the token must be at
/// most max_token_size bytes. implied_port and seed are written only when true.
bool encode_announce_peer(std::string& out, const query_header& h, const id20& info_hash, std::uint16_t port,
                          std::string_view token, bool implied_port, bool seed = false) noexcept;
/// BEP-51 sample_infohashes query.
bool encode_sample_infohashes(std::string& out, const query_header& h, const id20& target,
                              want w = want::none) noexcept;

/// Reply to ping: {id}.
bool encode_ping_response(std::string& out, const reply_header& h) noexcept;
/// Reply to announce_peer: {id}, the same shape as a ping reply.
inline bool encode_announce_response(std::string& out, const reply_header& h) noexcept {
    return encode_ping_response(out, h);
}
/// Reply to find_node (and to unknown methods carrying a target). `nodes` / `nodes6` are
/// compact bytes (append_compact_nodes), multiples of 26 / 38. BEP-5 requires `nodes`, so it
/// is always written, possibly empty; `nodes6` when not empty or when `with_nodes6` (the
/// querier asked for it with `want`).
bool encode_find_node_response(std::string& out, const reply_header& h, std::string_view nodes,
                               std::string_view nodes6, bool with_nodes6 = false) noexcept;
/// Reply to get_peers: the token always, `values` when `values` is not empty (v4 and v6
/// entries may be mixed), nodes and nodes6 as for find_node.
bool encode_get_peers_response(std::string& out, const reply_header& h, std::string_view token,
                               std::span<const endpoint> values, std::string_view nodes,
                               std::string_view nodes6, bool with_nodes6 = false) noexcept;
/// BEP-51 reply: interval (0..max_sample_interval), num (>= 0), samples (always present,
/// possibly empty), nodes and nodes6 as for find_node.
bool encode_sample_infohashes_response(std::string& out, const reply_header& h, std::int64_t interval,
                                       std::int64_t num, std::span<const id20> samples, std::string_view nodes,
                                       std::string_view nodes6, bool with_nodes6 = false) noexcept;
/// Error message: {e: [code, message]}, with the BEP-42 `ip` when `requester` is set.
bool encode_error(std::string& out, std::string_view transaction, std::int64_t code, std::string_view message,
                  const std::optional<endpoint>& requester = std::nullopt, std::string_view version = {}) noexcept;

} // namespace dhtc::krpc
