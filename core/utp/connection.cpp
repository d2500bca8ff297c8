#include "utp/connection.hpp"

#include <algorithm>

namespace dhtc::utp {

namespace {

using std::chrono::microseconds;

// LEDBAT's gain: at most this many bytes of window growth per round trip when there is no
// queuing delay at all (scaled down linearly as the delay nears the target).
constexpr double max_cwnd_increase_per_rtt = 3000.0;
// The base delay (the smallest one-way delay seen) is forgotten this often, so a clock drift
// between the ends or a route change does not pin it.
constexpr auto base_delay_lifetime = std::chrono::minutes(2);
// Duplicate acks (or packets selectively acked past a hole) that mean the hole was lost.
constexpr unsigned loss_ack_threshold = 3;
// Packets in the send queue at most, whatever their size (tiny writes make tiny packets).
constexpr std::size_t max_outbuf_packets = 1024;

} // namespace

std::string_view to_string(close_reason r) noexcept {
    switch (r) {
    case close_reason::none: return "none";
    case close_reason::finished: return "finished";
    case close_reason::refused: return "refused";
    case close_reason::reset: return "reset";
    case close_reason::timed_out: return "timed_out";
    case close_reason::aborted: return "aborted";
    }
    return "none";
}

connection::connection(transport& out, const clock& clk, const endpoint& peer, std::uint16_t recv_id,
                       std::uint16_t seq, const connection_config& cfg)
    : out_(out), clock_(clk), peer_(peer), cfg_(cfg), recv_id_(recv_id),
      send_id_(static_cast<std::uint16_t>(recv_id + 1)), seq_nr_(seq), acked_seq_(static_cast<std::uint16_t>(seq - 1)),
      cwnd_(2.0 * static_cast<double>(cfg.max_payload)), ssthresh_(static_cast<double>(cfg.send_buffer)),
      rto_(std::chrono::duration_cast<microseconds>(cfg.initial_rto)), last_received_(clk.now()) {}

connection connection::accept(transport& out, const clock& clk, const endpoint& peer, const packet_view& syn,
                              std::uint16_t seq, const connection_config& cfg) {
    connection c(out, clk, peer, static_cast<std::uint16_t>(syn.h.connection_id + 1), seq, cfg);
    c.send_id_ = syn.h.connection_id;
    c.ack_nr_ = syn.h.seq_nr;
    c.peer_wnd_ = syn.h.wnd_size;
    c.state_ = conn_state::connected;
    c.reply_micro_ = c.now_us() - syn.h.timestamp_us;
    // The STATE carries the sequence number of our first DATA without consuming it.
    c.send_control(packet_type::state);
    return c;
}

void connection::connect() {
    if (state_ != conn_state::syn_sent || syn_sent_count_ != 0) return;
    send_control(packet_type::syn);
    ++seq_nr_;
    arm_rto();
}

std::uint32_t connection::now_us() const noexcept {
    return static_cast<std::uint32_t>(
        std::chrono::duration_cast<microseconds>(clock_.now().time_since_epoch()).count());
}

std::uint32_t connection::receive_window() const noexcept {
    const std::size_t used = buffered_receive();
    return used >= cfg_.receive_buffer ? 0 : static_cast<std::uint32_t>(cfg_.receive_buffer - used);
}

void connection::fill_sack(std::string& mask) const {
    mask.clear();
    for (const auto& [seq, held] : held_) {
        const auto bit = static_cast<std::uint16_t>(seq - ack_nr_ - 2);
        if (bit >= max_sack_bytes * 8) continue;
        const std::size_t bytes = (bit / 8 / 4 + 1) * 4;
        if (mask.size() < bytes) mask.resize(bytes, '\0');
        mask[bit / 8] = static_cast<char>(static_cast<unsigned char>(mask[bit / 8]) | 1u << (bit % 8));
    }
}

header connection::make_header(packet_type type, std::uint16_t seq) const noexcept {
    header h;
    h.type = type;
    // A SYN names the id the peer must use to reach us; everything else the peer's id.
    h.connection_id = type == packet_type::syn ? recv_id_ : send_id_;
    h.timestamp_us = now_us();
    h.timestamp_diff_us = reply_micro_;
    h.wnd_size = receive_window();
    h.seq_nr = seq;
    h.ack_nr = ack_nr_;
    return h;
}

void connection::send_control(packet_type type) {
    const header h = make_header(type, seq_nr_);
    std::string sack;
    if (type == packet_type::state) fill_sack(sack);
    std::string datagram;
    write_packet(datagram, h, sack, {});
    window_was_closed_ = h.wnd_size < cfg_.max_payload;
    if (type == packet_type::syn) {
        if (++syn_sent_count_ > 1) ++stats_.retransmits;
    }
    ++stats_.packets_sent;
    ack_due_ = false;
    out_.send(peer_, datagram);
}

void connection::send_data_packet(std::uint16_t seq, sent_packet& sp) {
    const header h = make_header(sp.fin ? packet_type::fin : packet_type::data, seq);
    std::string sack;
    fill_sack(sack);
    std::string datagram;
    write_packet(datagram, h, sack, sp.payload);
    window_was_closed_ = h.wnd_size < cfg_.max_payload;
    sp.sent_at = clock_.now();
    if (++sp.transmissions > 1) ++stats_.retransmits;
    sp.need_resend = false;
    in_flight_ += sp.payload.size();
    ++stats_.packets_sent;
    ack_due_ = false;
    if (rto_deadline_ == time_point::max()) arm_rto();
    arm_tail_probe();
    out_.send(peer_, datagram);
}

void connection::try_send() {
    if (state_ != conn_state::connected) return;
    const double window = std::min(cwnd_, static_cast<double>(peer_wnd_));
    // Whether a packet of `size` bytes may go now. With nothing in flight one packet always
    // may if the peer has room for it (a window below one packet must not stall us), and
    // even without room when the probe timer fired.
    auto may_send = [&](std::size_t size) {
        if (static_cast<double>(in_flight_ + size) <= window) return true;
        if (in_flight_ > 0) return false;
        if (size <= peer_wnd_) return true;
        if (probe_due_) {
            probe_due_ = false;
            return true;
        }
        if (rto_deadline_ == time_point::max()) arm_rto();
        return false;
    };
    for (std::size_t i = 0; i < outbuf_.size(); ++i) {
        sent_packet& sp = outbuf_[i];
        if (!sp.need_resend || sp.acked) continue;
        if (!may_send(sp.payload.size())) return;
        send_data_packet(static_cast<std::uint16_t>(acked_seq_ + 1 + i), sp);
    }
    while (pending_begin_ < pending_.size() && outbuf_.size() < max_outbuf_packets) {
        const std::size_t size = std::min(cfg_.max_payload, pending_.size() - pending_begin_);
        if (!may_send(size)) break;
        sent_packet sp;
        sp.payload.assign(pending_, pending_begin_, size);
        pending_begin_ += size;
        unacked_bytes_ += size;
        outbuf_.push_back(std::move(sp));
        send_data_packet(seq_nr_++, outbuf_.back());
    }
    if (pending_begin_ == pending_.size()) {
        pending_.clear();
        pending_begin_ = 0;
    } else if (pending_begin_ > pending_.size() / 2) {
        pending_.erase(0, pending_begin_);
        pending_begin_ = 0;
    }
    if (close_requested_ && !fin_sent_ && pending_.empty() && outbuf_.size() < max_outbuf_packets) {
        sent_packet fin;
        fin.fin = true;
        outbuf_.push_back(std::move(fin));
        fin_sent_ = true;
        send_data_packet(seq_nr_++, outbuf_.back());
    }
}

void connection::arm_rto() noexcept { rto_deadline_ = clock_.now() + rto_; }

void connection::arm_tail_probe() noexcept {
    // Only with a round-trip sample: before one, the timeout is all we know.
    if (srtt_.count() == 0 || tail_probe_sent_ || in_flight_ == 0) return;
    tail_probe_deadline_ =
        clock_.now() + std::max<microseconds>(2 * srtt_, std::chrono::duration_cast<microseconds>(cfg_.tail_probe_floor));
}

void connection::send_tail_probe() {
    tail_probe_deadline_ = time_point::max();
    for (std::size_t i = 0; i < outbuf_.size(); ++i) {
        sent_packet& sp = outbuf_[i];
        if (sp.acked || sp.need_resend) continue;
        tail_probe_sent_ = true;
        ++stats_.tail_probes;
        in_flight_ -= sp.payload.size(); // sent again: counted again below
        send_data_packet(static_cast<std::uint16_t>(acked_seq_ + 1 + i), sp);
        return;
    }
}

void connection::ack_one(sent_packet& sp, time_point now, std::size_t& bytes_acked) {
    if (sp.acked) return;
    const std::size_t size = sp.payload.size();
    if (!sp.need_resend) in_flight_ -= size;
    unacked_bytes_ -= size;
    bytes_acked += size;
    // Karn: a resent packet's ack may answer either transmission.
    if (sp.transmissions == 1) {
        const auto r = std::chrono::duration_cast<microseconds>(now - sp.sent_at);
        if (srtt_.count() == 0) {
            srtt_ = r;
            rttvar_ = r / 2;
        } else {
            const auto err = srtt_ > r ? srtt_ - r : r - srtt_;
            rttvar_ = (3 * rttvar_ + err) / 4;
            srtt_ = (7 * srtt_ + r) / 8;
        }
        const auto rto = srtt_ + std::max(4 * rttvar_, microseconds(1000));
        rto_ = std::clamp(rto, std::chrono::duration_cast<microseconds>(cfg_.min_rto),
                          std::chrono::duration_cast<microseconds>(cfg_.max_rto));
    }
    sp.acked = true;
    sp.need_resend = false;
    std::string().swap(sp.payload);
}

void connection::on_congestion(std::size_t bytes_acked, std::uint32_t delay_us) {
    const time_point now = clock_.now();
    double queuing = 0;
    if (delay_us != 0) {
        if (base_delay_us_ == 0xffffffff || now - base_delay_reset_ >= base_delay_lifetime) {
            base_delay_us_ = delay_us;
            base_delay_reset_ = now;
        }
        base_delay_us_ = std::min(base_delay_us_, delay_us);
        queuing = static_cast<double>(delay_us - base_delay_us_);
    }
    const auto target = static_cast<double>(cfg_.target_delay.count());
    const auto acked = static_cast<double>(bytes_acked);
    if (slow_start_) {
        cwnd_ += acked;
        if (cwnd_ >= ssthresh_ || queuing > target / 2) slow_start_ = false;
    } else {
        const double off_target = std::clamp((target - queuing) / target, -1.0, 1.0);
        cwnd_ += max_cwnd_increase_per_rtt * off_target * acked / cwnd_;
    }
    cwnd_ = std::clamp(cwnd_, static_cast<double>(cfg_.max_payload), static_cast<double>(cfg_.send_buffer));
}

void connection::on_loss(bool timeout) {
    const auto one = static_cast<double>(cfg_.max_payload);
    if (timeout) {
        ssthresh_ = std::max(cwnd_ / 2, 2 * one);
        cwnd_ = one;
        slow_start_ = true;
    } else {
        cwnd_ = std::max(cwnd_ / 2, one);
        ssthresh_ = cwnd_;
        slow_start_ = false;
    }
}

void connection::handle_ack(const packet_view& p) {
    peer_wnd_ = p.h.wnd_size;
    const auto distance = static_cast<std::uint16_t>(p.h.ack_nr - acked_seq_);
    if (distance > outbuf_.size()) {
        // An old ack (reordered) says nothing new; one of a packet never sent is a bad peer.
        if (!seq_less(p.h.ack_nr, acked_seq_)) ++stats_.bad_acks;
        return;
    }
    const time_point now = clock_.now();
    std::size_t bytes_acked = 0;
    for (std::uint16_t i = 0; i < distance; ++i) {
        ack_one(outbuf_.front(), now, bytes_acked);
        outbuf_.pop_front();
    }
    acked_seq_ = p.h.ack_nr;

    // Selective ack: bit i is ack_nr + 2 + i, which is outbuf_[i + 1] now.
    std::size_t acked_past_hole = 0;
    for (std::size_t bit = 0; bit < p.sack.size() * 8; ++bit) {
        if (!(static_cast<unsigned char>(p.sack[bit / 8]) >> (bit % 8) & 1)) continue;
        if (bit + 1 >= outbuf_.size()) break;
        ack_one(outbuf_[bit + 1], now, bytes_acked);
        ++acked_past_hole;
    }

    bool lost = false;
    if (distance > 0) {
        dup_acks_ = 0;
        consecutive_timeouts_ = 0;
        rto_deadline_ = time_point::max();
        if (!outbuf_.empty()) arm_rto();
        tail_probe_sent_ = false;
        tail_probe_deadline_ = time_point::max();
        arm_tail_probe();
    } else if (p.h.type == packet_type::state && in_flight_ > 0 && bytes_acked == 0) {
        lost = ++dup_acks_ >= loss_ack_threshold;
    }
    if (acked_past_hole >= loss_ack_threshold) lost = true;
    if (bytes_acked > 0) on_congestion(bytes_acked, p.h.timestamp_diff_us);
    if (lost && !outbuf_.empty() && !outbuf_.front().acked && !outbuf_.front().fast_resent) {
        sent_packet& hole = outbuf_.front();
        hole.fast_resent = true;
        if (!hole.need_resend) in_flight_ -= hole.payload.size();
        ++stats_.fast_retransmits;
        on_loss(false);
        send_data_packet(static_cast<std::uint16_t>(acked_seq_ + 1), hole);
    }
    if (fin_sent_ && outbuf_.empty()) finish(close_reason::finished);
}

void connection::handle_data(const packet_view& p) {
    const std::uint16_t seq = p.h.seq_nr;
    const auto distance = static_cast<std::uint16_t>(seq - ack_nr_);
    const bool fin = p.h.type == packet_type::fin;
    ack_due_ = true; // every DATA is answered, a duplicate too (our ack may have been lost)
    if (distance == 0 || distance >= 0x8000 || held_.count(seq)) {
        ++stats_.duplicates_received;
        return;
    }
    if (fin_received_) return; // nothing follows a FIN
    const std::size_t size = p.payload.size();
    if (buffered_receive() + size > cfg_.receive_buffer) {
        ++stats_.dropped_window;
        return;
    }
    if (distance == 1) {
        rx_.append(p.payload);
        ack_nr_ = seq;
        fin_received_ = fin;
        deliver_in_order();
        return;
    }
    if (distance > cfg_.max_reorder_packets || held_.size() >= cfg_.max_reorder_packets) {
        ++stats_.dropped_window;
        return;
    }
    held_.emplace(seq, held_packet{std::string(p.payload), fin});
    held_bytes_ += size;
}

void connection::deliver_in_order() {
    while (!fin_received_ && !held_.empty()) {
        const auto it = held_.find(static_cast<std::uint16_t>(ack_nr_ + 1));
        if (it == held_.end()) return;
        rx_.append(it->second.payload);
        held_bytes_ -= it->second.payload.size();
        fin_received_ = it->second.fin;
        ack_nr_ = it->first;
        held_.erase(it);
    }
    if (fin_received_) {
        for (const auto& [seq, held] : held_) held_bytes_ -= held.payload.size();
        held_.clear();
    }
}

void connection::on_packet(const packet_view& p) {
    if (state_ == conn_state::closed) return;
    ++stats_.packets_received;
    last_received_ = clock_.now();
    reply_micro_ = now_us() - p.h.timestamp_us;
    switch (p.h.type) {
    case packet_type::reset:
        finish(state_ == conn_state::syn_sent ? close_reason::refused : close_reason::reset);
        return;
    case packet_type::syn:
        // The peer did not get our STATE: answer again.
        if (state_ == conn_state::connected && p.h.seq_nr == ack_nr_) ack_due_ = true;
        return;
    default: break;
    }
    if (state_ == conn_state::syn_sent) {
        // The answer to our SYN acks it; a STATE carries the peer's next sequence number
        // without consuming it, so the last one received is the one before.
        if (p.h.ack_nr != acked_seq_ + 1) return;
        if (syn_sent_count_ == 1) {
            sent_packet syn;
            syn.transmissions = 1;
            syn.sent_at = rto_deadline_ - rto_;
            std::size_t ignored = 0;
            ack_one(syn, last_received_, ignored);
        }
        acked_seq_ = p.h.ack_nr;
        ack_nr_ = static_cast<std::uint16_t>(p.h.seq_nr - 1);
        peer_wnd_ = p.h.wnd_size;
        state_ = conn_state::connected;
        rto_deadline_ = time_point::max();
        consecutive_timeouts_ = 0;
        if (p.h.type == packet_type::state) {
            try_send();
            return;
        }
    }
    handle_ack(p);
    if (state_ == conn_state::closed) return;
    if (p.h.type == packet_type::data || p.h.type == packet_type::fin) handle_data(p);
    try_send();
}

void connection::flush() {
    if (state_ == conn_state::connected && ack_due_) send_control(packet_type::state);
}

void connection::tick() {
    if (state_ == conn_state::closed) return;
    const time_point now = clock_.now();
    if (state_ == conn_state::connected && now - last_received_ >= cfg_.idle_timeout) {
        finish(close_reason::timed_out);
        return;
    }
    if (state_ == conn_state::connected && now >= tail_probe_deadline_ && now < rto_deadline_) send_tail_probe();
    if (now >= rto_deadline_) {
        tail_probe_deadline_ = time_point::max();
        ++stats_.timeouts;
        rto_ = std::min(rto_ * 2, std::chrono::duration_cast<microseconds>(cfg_.max_rto));
        if (state_ == conn_state::syn_sent) {
            if (syn_sent_count_ >= cfg_.syn_attempts) {
                finish(close_reason::timed_out);
                return;
            }
            --seq_nr_; // the SYN keeps its sequence number
            send_control(packet_type::syn);
            ++seq_nr_;
            arm_rto();
            return;
        }
        if (++consecutive_timeouts_ > cfg_.max_timeouts) {
            finish(close_reason::timed_out);
            return;
        }
        rto_deadline_ = time_point::max();
        bool resend = false;
        for (sent_packet& sp : outbuf_) {
            if (sp.acked || sp.need_resend) continue;
            sp.need_resend = true;
            in_flight_ -= sp.payload.size();
            resend = true;
        }
        if (resend) {
            on_loss(true);
        } else if (pending_begin_ < pending_.size()) {
            probe_due_ = true; // the peer's window stayed closed: its update may be lost
        }
        try_send();
        if (rto_deadline_ == time_point::max() && !outbuf_.empty()) arm_rto();
    }
    flush();
}

time_point connection::next_timer() const noexcept {
    if (state_ == conn_state::closed) return time_point::max();
    time_point t = rto_deadline_;
    if (state_ == conn_state::connected) t = std::min({t, tail_probe_deadline_, last_received_ + cfg_.idle_timeout});
    return t;
}

std::size_t connection::write(std::string_view bytes) {
    if (state_ == conn_state::closed || close_requested_) return 0;
    const std::size_t n = std::min(bytes.size(), writable());
    pending_.append(bytes.substr(0, n));
    try_send();
    return n;
}

std::size_t connection::writable() const noexcept {
    const std::size_t used = send_buffered();
    return used >= cfg_.send_buffer ? 0 : cfg_.send_buffer - used;
}

std::size_t connection::read(char* dst, std::size_t n) {
    n = std::min(n, readable());
    std::copy_n(rx_.data() + rx_begin_, n, dst);
    rx_begin_ += n;
    if (rx_begin_ == rx_.size()) {
        rx_.clear();
        rx_begin_ = 0;
    } else if (rx_begin_ > rx_.size() / 2) {
        rx_.erase(0, rx_begin_);
        rx_begin_ = 0;
    }
    // The peer stopped sending for want of room: tell it there is room again.
    if (n > 0 && state_ == conn_state::connected && window_was_closed_ && receive_window() >= cfg_.max_payload)
        send_control(packet_type::state);
    return n;
}

void connection::close() {
    if (state_ == conn_state::closed || close_requested_) return;
    if (state_ == conn_state::syn_sent) {
        finish(close_reason::aborted);
        return;
    }
    close_requested_ = true;
    try_send();
}

void connection::abort() {
    if (state_ == conn_state::closed) return;
    if (state_ == conn_state::connected) send_control(packet_type::reset);
    finish(close_reason::aborted);
}

void connection::finish(enum close_reason r) noexcept {
    state_ = conn_state::closed;
    reason_ = r;
    rto_deadline_ = time_point::max();
    tail_probe_deadline_ = time_point::max();
    outbuf_.clear();
    pending_.clear();
    pending_begin_ = 0;
    unacked_bytes_ = 0;
    in_flight_ = 0;
}

} // namespace dhtc::utp
