#include "dht/node.hpp"

#include <algorithm>

#include "krpc/query_fast_path.hpp"

namespace dhtc::dht {

namespace {
void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

// Answers that keep us in other nodes' routing tables get the reserved share.
crawl::traffic_class class_of(krpc::method m) noexcept {
    return m == krpc::method::ping || m == krpc::method::get_peers ? crawl::traffic_class::priority
                                                                    : crawl::traffic_class::normal;
}
} // namespace

namespace {
crawl::reserved_share_bucket share_of(const clock& c, double total, unsigned percent) {
    const double rate = total * percent / 100.0;
    return crawl::reserved_share_bucket(c, rate, rate, 10);
}
} // namespace

response_budget::response_budget(const clock& c, const crawl::rate_limit_options& o, crawl::source_table& sources)
    : clock_(c), sources_(sources),
      shared_{share_of(c, o.max_response_rate_per_sec, 100 - std::min(o.trusted_response_percent, 100u)),
              share_of(c, o.max_response_bytes_per_sec, 100 - std::min(o.trusted_response_percent, 100u))},
      trusted_{share_of(c, o.max_response_rate_per_sec, std::min(o.trusted_response_percent, 100u)),
               share_of(c, o.max_response_bytes_per_sec, std::min(o.trusted_response_percent, 100u))} {}

bool response_budget::allow(const endpoint& to, const id20& id, krpc::method m, std::size_t bytes) {
    const auto cls = class_of(m);
    const time_point now = clock_.now(); // one read for every budget
    // The per-source and per-destination checks come first and take nothing: one flooding
    // IP must not drain the global budgets with answers its own budget then refuses.
    const auto check = sources_.check_answer(to, id, now);
    if (check.verdict != crawl::send_verdict::ok) return false;
    if (!shared_.take(bytes, cls, now)) {
        if (!check.trusted || !trusted_.take(bytes, cls, now)) return false;
        ++trusted_reserve_used_;
    }
    sources_.commit_answer(check);
    return true;
}

std::uint64_t response_budget::refused_packets() const noexcept {
    std::uint64_t n = 0;
    for (const auto* b : {&shared_.packets, &trusted_.packets})
        n += b->refused(crawl::traffic_class::normal) + b->refused(crawl::traffic_class::priority);
    return n;
}

std::uint64_t response_budget::refused_bytes() const noexcept {
    std::uint64_t n = 0;
    for (const auto* b : {&shared_.bytes, &trusted_.bytes})
        n += b->refused(crawl::traffic_class::normal) + b->refused(crawl::traffic_class::priority);
    return n;
}

node::node(responder& r, response_budget& budget, transport& out, reply_handler& replies, std::size_t transaction_size)
    : responder_(r), budget_(budget), out_(out), replies_(replies), transaction_size_(transaction_size) {
    reply_.reserve(1500);
}

void node::handle(const endpoint& from, std::string_view payload) {
    // Most datagrams are queries in canonical form: those are parsed straight from the
    // bytes. The fast path gives exactly what the generic one would, or declines.
    if (krpc::parse_query_fast(payload, msg_)) {
        bump(counters_.rx_queries);
        if (responder_.answer(msg_, from, reply_)) answer(from, msg_.id, msg_.query.kind);
        return;
    }
    if (!bencode::decode(payload, doc_, krpc::packet_limits)) {
        bump(counters_.rx_bad_bencode);
        return;
    }
    msg_ = krpc::message{};
    const auto parsed = krpc::parse(doc_.root(), msg_);
    const bool is_query = parsed ? msg_.type == krpc::message_type::query
                                 : parsed.query_method != krpc::method::none;
    if (is_query) {
        bump(counters_.rx_queries);
        const bool have_reply = parsed ? responder_.answer(msg_, from, reply_)
                                       : responder_.answer_malformed(msg_, parsed, from, reply_);
        if (!parsed) bump(counters_.rx_bad_krpc);
        if (have_reply) answer(from, parsed ? msg_.id : id20{}, parsed.query_method);
        return;
    }
    // A reply. Only the actor knows our transactions, but any `t` of the wrong length
    // cannot be ours: drop it here (never answer replies: protocol.md a).
    if (msg_.transaction.size() != transaction_size_) {
        bump(parsed ? counters_.foreign_transactions : counters_.rx_bad_krpc);
        return;
    }
    bump(counters_.rx_replies);
    // Handled now, while `payload` and doc_ are intact: no copy, and no second decode.
    replies_.on_reply(from, msg_, static_cast<bool>(parsed));
}

void node::answer(const endpoint& from, const id20& id, krpc::method m) {
    if (!budget_.allow(from, id, m, reply_.size())) {
        bump(counters_.replies_over_budget);
        return;
    }
    if (out_.send(from, reply_)) {
        bump(counters_.replies_sent);
    } else {
        bump(counters_.replies_send_failed);
    }
}

} // namespace dhtc::dht
