#include "utp/multiplexer.hpp"

#include <algorithm>
#include <string>

namespace dhtc::utp {

namespace {
// Connections waiting for flush() at most; past it the acks go out early.
constexpr std::size_t max_touched = 64;
} // namespace

multiplexer::multiplexer(transport& out, const clock& clk, const multiplexer_config& cfg)
    : out_(out), clock_(clk), cfg_(cfg), rng_(static_cast<std::mt19937::result_type>(cfg.seed ^ (cfg.seed >> 32))) {}

std::shared_ptr<connection> multiplexer::connect(const endpoint& peer) {
    forget_finished();
    if (connections_.size() >= cfg_.max_connections) {
        ++stats_.connect_refused;
        return nullptr;
    }
    // Our receive id and the send id (one more) must both be free for this peer: the
    // peer's packets to us carry the first.
    std::uint16_t id = random16();
    for (int i = 0; i < 64 && connections_.count({peer, id}); ++i) id = random16();
    if (connections_.count({peer, id})) {
        ++stats_.connect_refused;
        return nullptr;
    }
    auto c = std::make_shared<connection>(out_, clock_, peer, id, random16(), cfg_.connection);
    connections_.emplace(key{peer, id}, c);
    ++stats_.connections_opened;
    c->connect();
    return c;
}

std::shared_ptr<connection> multiplexer::take_incoming() {
    if (incoming_.empty()) return nullptr;
    auto c = std::move(incoming_.front());
    incoming_.pop_front();
    return c;
}

void multiplexer::send_reset(const endpoint& to, const packet_view& p) {
    header h;
    h.type = packet_type::reset;
    h.connection_id = p.h.connection_id;
    h.timestamp_us = static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(clock_.now().time_since_epoch()).count());
    h.seq_nr = 0;
    h.ack_nr = p.h.seq_nr;
    std::string datagram;
    write_packet(datagram, h, {}, {});
    ++stats_.resets_sent;
    out_.send(to, datagram);
}

connection* multiplexer::on_datagram(const endpoint& from, std::string_view datagram) {
    ++stats_.datagrams_received;
    packet_view p;
    if (parse_packet(datagram, p) != parse_error::none) {
        ++stats_.malformed;
        return nullptr;
    }
    if (p.h.type == packet_type::syn) {
        const auto recv_id = static_cast<std::uint16_t>(p.h.connection_id + 1);
        if (auto it = connections_.find({from, recv_id}); it != connections_.end()) {
            it->second->on_packet(p); // a repeated SYN: the connection answers it again
            it->second->flush();
            return it->second.get();
        }
        forget_finished();
        if (!cfg_.accept_incoming || connections_.size() >= cfg_.max_connections ||
            incoming_.size() >= cfg_.max_accept_queue) {
            ++stats_.syn_refused;
            send_reset(from, p);
            return nullptr;
        }
        auto c = std::make_shared<connection>(
            connection::accept(out_, clock_, from, p, random16(), cfg_.connection));
        connections_.emplace(key{from, recv_id}, c);
        incoming_.push_back(c);
        ++stats_.connections_opened;
        return nullptr;
    }
    const auto it = connections_.find({from, p.h.connection_id});
    if (it == connections_.end()) {
        ++stats_.unknown_connection;
        if (p.h.type != packet_type::reset) send_reset(from, p);
        return nullptr;
    }
    it->second->on_packet(p);
    if (touched_.empty() || touched_.back() != it->second) touched_.push_back(it->second);
    if (touched_.size() >= max_touched) flush(); // a long batch gets its acks on the way
    return it->second.get();
}

void multiplexer::flush() {
    for (auto& c : touched_) c->flush();
    touched_.clear();
}

void multiplexer::tick() {
    flush();
    const time_point now = clock_.now();
    for (auto& [k, c] : connections_)
        if (c->next_timer() <= now) c->tick();
    forget_finished();
}

time_point multiplexer::next_timer() const noexcept {
    time_point t = time_point::max();
    for (const auto& [k, c] : connections_) t = std::min(t, c->next_timer());
    return t;
}

void multiplexer::forget_finished() {
    // A connection stays while its owner holds it (it may still read what arrived) or while
    // it is still open (a released connection finishes sending its FIN).
    for (auto it = connections_.begin(); it != connections_.end();) {
        const bool released = it->second.use_count() == 1;
        if (released && it->second->state() != conn_state::connected && it->second->state() != conn_state::syn_sent) {
            it = connections_.erase(it);
            ++stats_.connections_closed;
        } else if (released && it->second->state() == conn_state::syn_sent) {
            it->second->close();
            it = connections_.erase(it);
            ++stats_.connections_closed;
        } else {
            ++it;
        }
    }
}

} // namespace dhtc::utp
