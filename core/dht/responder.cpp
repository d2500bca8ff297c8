#include "dht/responder.hpp"


namespace dhtc::dht {

namespace {
void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
} // namespace

responder::responder(const id20& own_id, std::string_view version, token_manager& tokens, sample_store& samples,
                     const close_nodes_source& nodes, query_observer& observer, const clock& clk)
    : own_id_(own_id), version_(version), replies_(own_id, version), tokens_(tokens), samples_(samples),
      nodes_source_(nodes), observer_(observer), clock_(clk) {
    nodes_.reserve(close_nodes * krpc::compact_node_v4_size);
    nodes6_.reserve(close_nodes * krpc::compact_node_v6_size);
}

krpc::reply_header responder::header(const krpc::message& q, const endpoint& from) const noexcept {
    return krpc::reply_header{q.transaction, own_id_, from, version_};
}

void responder::collect_nodes(const id20& target, const krpc::message& q, const endpoint& from) {
    nodes_.clear();
    nodes6_.clear();
    // BEP-32: without `want`, a querier gets nodes of the family it asked over.
    const bool v6_query = from.address.is_v6();
    const bool want4 = q.query.has_want ? krpc::has(q.query.wants, krpc::want::n4) : !v6_query;
    const bool want6 = q.query.has_want ? krpc::has(q.query.wants, krpc::want::n6) : v6_query;
    want6_ = want6;
    if (want4) {
        const auto n = nodes_source_.closest(target, krpc::ip_family::v4, scratch_);
        krpc::append_compact_nodes(nodes_, std::span(scratch_.data(), n), krpc::ip_family::v4);
    }
    if (want6) {
        const auto n = nodes_source_.closest(target, krpc::ip_family::v6, scratch_);
        krpc::append_compact_nodes(nodes6_, std::span(scratch_.data(), n), krpc::ip_family::v6);
    }
}

bool responder::answer(const krpc::message& q, const endpoint& from, std::string& out) {
    out.clear();
    if (q.type != krpc::message_type::query) return false;
    // Someone using our id is either confused or probing for a reflection: stay silent.
    if (q.id == own_id_) {
        bump(counters_.own_id);
        return false;
    }
    if (!q.read_only) observer_.on_querier(q.id, from);

    switch (q.query.kind) {
    case krpc::method::ping:
        bump(counters_.ping);
        return replies_.ping(out, q.transaction, from);
    case krpc::method::find_node:
        bump(counters_.find_node);
        collect_nodes(q.query.target, q, from);
        return replies_.find_node(out, q.transaction, from, nodes_, nodes6_, want6_);
    case krpc::method::get_peers: {
        bump(counters_.get_peers);
        if (is_bootstrap_lookup(q.query.info_hash, q.id)) {
            bump(counters_.bootstrap_lookups);
        } else {
            observer_.on_get_peers(q.query.info_hash, from);
        }
        collect_nodes(q.query.info_hash, q, from);
        const auto token = tokens_.make(from.address);
        return replies_.get_peers(out, q.transaction, from, std::string_view(token.data(), token.size()), nodes_,
                                  nodes6_, want6_);
    }
    case krpc::method::announce_peer:
        return announce(q, from, out);
    case krpc::method::sample_infohashes: {
        bump(counters_.sample_infohashes);
        collect_nodes(q.query.target, q, from);
        const auto samples = samples_.samples(clock_.now());
        return krpc::encode_sample_infohashes_response(out, header(q, from), samples_.interval().count(),
                                                       static_cast<std::int64_t>(samples_.size()), samples, nodes_,
                                                       nodes6_, want6_);
    }
    case krpc::method::unknown:
        // Forward compatibility (libtorrent does the same): a query naming a target is
        // answered like find_node; anything else gets "method unknown".
        if (q.query.has_target || q.query.has_info_hash) {
            bump(counters_.unknown_answered);
            collect_nodes(q.query.has_target ? q.query.target : q.query.info_hash, q, from);
            return replies_.find_node(out, q.transaction, from, nodes_, nodes6_, want6_);
        }
        bump(counters_.unknown_refused);
        return krpc::encode_error(out, q.transaction, krpc::error_method_unknown, "Method Unknown", from, version_);
    case krpc::method::none:
        break;
    }
    return false;
}

bool responder::announce(const krpc::message& q, const endpoint& from, std::string& out) {
    if (!tokens_.check(from.address, q.query.token)) {
        bump(counters_.bad_token);
        return krpc::encode_error(out, q.transaction, krpc::error_protocol, "Bad Token", from, version_);
    }
    bump(counters_.announce_peer);
    const endpoint peer{from.address, q.query.implied_port ? from.port : q.query.port};
    if (peer.port != 0 && !is_bootstrap_lookup(q.query.info_hash, q.id)) {
        samples_.add(q.query.info_hash);
        observer_.on_announce(q.query.info_hash, peer, from);
    }
    return replies_.ping(out, q.transaction, from); // the same shape as a ping reply
}

bool responder::answer_malformed(const krpc::message& partial, const krpc::parse_result& why, const endpoint& from,
                                 std::string& out) {
    out.clear();
    // Only queries get error replies, and only when we can echo their transaction id;
    // never answer malformed responses (that would let anyone bounce traffic off us).
    if (why.query_method == krpc::method::none || partial.transaction.empty()) return false;
    bump(counters_.malformed);
    return krpc::encode_error(out, partial.transaction, krpc::error_protocol, krpc::to_string(why.code), from,
                              version_);
}

} // namespace dhtc::dht
