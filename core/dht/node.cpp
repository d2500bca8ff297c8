#include "dht/node.hpp"

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

response_budget::response_budget(const clock& c, const crawl::rate_limit_options& o)
    : clock_(c),
      per_source_(c, crawl::per_source_options{o.max_response_rate_per_source, o.max_response_rate_per_source, 8192, 0}),
      packets_(c, o.max_response_rate_per_sec, o.max_response_rate_per_sec, 10),
      bytes_(c, o.max_response_bytes_per_sec, o.max_response_bytes_per_sec, 10) {}

bool response_budget::allow(const ip_address& to, krpc::method m, std::size_t bytes) {
    const auto cls = class_of(m);
    const time_point now = clock_.now(); // one read for all three budgets
    return per_source_.try_acquire(to, 1, now) && packets_.try_acquire(1, cls, now) &&
           bytes_.try_acquire(static_cast<double>(bytes), cls, now);
}

std::uint64_t response_budget::refused_packets() const noexcept {
    return packets_.refused(crawl::traffic_class::normal) + packets_.refused(crawl::traffic_class::priority);
}

std::uint64_t response_budget::refused_bytes() const noexcept {
    return bytes_.refused(crawl::traffic_class::normal) + bytes_.refused(crawl::traffic_class::priority);
}

node::node(responder& r, response_budget& budget, transport& out, bounded_queue<inbound_reply>& replies,
           std::size_t transaction_size)
    : responder_(r), budget_(budget), out_(out), replies_(replies), transaction_size_(transaction_size) {
    reply_.reserve(1500);
}

void node::handle(const endpoint& from, std::string_view payload) {
    // Most datagrams are queries in canonical form: those are parsed straight from the
    // bytes. The fast path gives exactly what the generic one would, or declines.
    if (krpc::parse_query_fast(payload, msg_)) {
        bump(counters_.rx_queries);
        if (responder_.answer(msg_, from, reply_)) answer(from, msg_.query.kind);
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
        if (have_reply) answer(from, parsed.query_method);
        return;
    }
    // A reply. Only the actor knows our transactions, but any `t` of the wrong length
    // cannot be ours: drop it here (never answer replies: protocol.md a).
    if (msg_.transaction.size() != transaction_size_) {
        bump(parsed ? counters_.foreign_transactions : counters_.rx_bad_krpc);
        return;
    }
    bump(counters_.rx_replies);
    if (!replies_.try_push(inbound_reply{from, std::string(payload)})) bump(counters_.reply_queue_dropped);
}

void node::answer(const endpoint& from, krpc::method m) {
    if (!budget_.allow(from.address, m, reply_.size())) {
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
