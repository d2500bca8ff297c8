#include "metadata/peer_session.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include <asio/cancellation_state.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "bencode/decoder.hpp"
#include "streams/tcp_stream.hpp"
#include "streams/utp_stream.hpp"

namespace dhtc::metadata {

namespace {

using clock = std::chrono::steady_clock;

// Enough for the handshakes and small messages; the buffer grows once to a metadata
// piece (~16.5 KiB) and beyond only for a peer that sends a large bitfield.
constexpr std::size_t initial_read_buffer = 4096;

// The stream of the current try and the timers that end it. The timers' handlers hold
// only a weak_ptr: one may already be queued when the session ends and the frame is gone.
struct connection {
    explicit connection(const asio::any_io_executor& ex) : executor(ex), watchdog(ex), idle(ex), connect_limit(ex) {}
    asio::any_io_executor executor;
    std::unique_ptr<byte_stream> stream;
    asio::steady_timer watchdog;
    asio::steady_timer idle;
    asio::steady_timer connect_limit; ///< a first try's connect, when another transport may follow
    std::weak_ptr<connection> self; ///< for the timers' handlers
    bool expired = false;
    bool connect_expired = false;

    void close_stream() noexcept {
        if (stream) stream->close();
    }

    // One timer for the whole attempt: on expiry it closes the socket, which aborts whatever
    // the session is waiting for, so no phase can extend the deadline (only the measured
    // round trip does, by arming it again: the earlier wait then ends cancelled).
    void arm_watchdog(clock::time_point at) {
        watchdog.expires_at(at);
        watchdog.async_wait([weak = self](const std::error_code& ec) {
            if (ec) return;
            if (auto c = weak.lock()) {
                c->expired = true;
                c->close_stream();
                c->idle.cancel();
                c->connect_limit.cancel();
            }
        });
    }
};

// The one receive buffer of a session: bytes [begin_, end_) are unread.
class read_buffer {
public:
    std::string_view pending() const noexcept { return {data_.get() + begin_, end_ - begin_}; }

    void consume(std::size_t n) noexcept {
        begin_ += n;
        if (begin_ == end_) begin_ = end_ = 0;
    }

    // Makes room toward `need` unread bytes (and at least one more byte can be read). The
    // buffer grows with what was read, never from a length field alone: at most doubling
    // what is buffered (from initial_read_buffer), so a peer announcing a 1 MiB message
    // costs 1 MiB only once it has sent about half of it. The caller reads again until its
    // message is whole. Views into pending() are invalid afterwards. False when the
    // allocation failed.
    bool prepare(std::size_t need) noexcept {
        const std::size_t have = end_ - begin_;
        const std::size_t target = std::max(std::min(need, std::max(2 * have, initial_read_buffer)), have + 1);
        if (cap_ - begin_ >= target) return true;
        if (cap_ >= target) {
            std::memmove(data_.get(), data_.get() + begin_, have);
        } else {
            const std::size_t cap = std::max({target, initial_read_buffer, std::min(cap_ * 2, hard_cap_)});
            std::unique_ptr<char[]> grown(new (std::nothrow) char[cap]);
            if (!grown) return false;
            if (have) std::memcpy(grown.get(), data_.get() + begin_, have);
            data_ = std::move(grown);
            cap_ = cap;
        }
        begin_ = 0;
        end_ = have;
        return true;
    }

    asio::mutable_buffer free_space() noexcept { return {data_.get() + end_, cap_ - end_}; }
    void commit(std::size_t n) noexcept { end_ += n; }
    void set_hard_cap(std::size_t cap) noexcept { hard_cap_ = cap; }

private:
    std::unique_ptr<char[]> data_;
    std::size_t cap_ = 0;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
    std::size_t hard_cap_ = 0; // doubling stops here; a single need may still exceed it
};

// release() must run on every exit, including the frame being destroyed unresumed.
struct release_guard {
    piece_source& source;
    std::uint32_t slot;
    ~release_guard() { source.release(slot); }
};

class session {
public:
    session(const session_request& req, const session_plan& plan, piece_source& source, std::uint32_t slot,
            connection& conn, const asio::cancellation_state& cancel)
        : req_(req), plan_(plan), deadline_(plan.deadline), source_(source), slot_(slot), conn_(conn), cancel_(cancel),
          pipeline_(std::clamp<std::uint32_t>(req.pipeline, 1, max_pipeline)) {
        rx_.set_hard_cap(req.max_message + 4);
    }

    // Tries until one works, with at most one fallback per dimension (encryption, then
    // transport), each on a new connection inside the same deadline.
    asio::awaitable<void> run() {
        const encryption_policy policy = req_.encryption;
        bool use_mse = policy == encryption_policy::prefer_encrypted || policy == encryption_policy::require;
        encryption_fallback_left_ =
            policy == encryption_policy::prefer_plaintext || policy == encryption_policy::prefer_encrypted;
        if (use_mse && policy == encryption_policy::prefer_encrypted && !mse::rc4_available()) use_mse = false;
        bool use_utp = req_.transports == transport_policy::utp || req_.transports == transport_policy::utp_first;
        transport_fallback_left_ =
            req_.transports == transport_policy::both || req_.transports == transport_policy::utp_first;
        for (std::size_t attempt = 0; attempt < max_tries; ++attempt) {
            result.tries = static_cast<std::uint8_t>(attempt + 1);
            result.used_mse = use_mse;
            result.transport = use_utp ? api::stream_transport::utp : api::stream_transport::tcp;
            result.try_modes[attempt] = static_cast<std::uint8_t>((use_mse ? try_mse : 0) | (use_utp ? try_utp : 0));
            const bool ok = co_await try_once(use_mse, use_utp);
            result.try_failures[attempt] = result.failure;
            if (ok) co_return;
            if (!use_mse && closed_before_handshake()) plaintext_closed_ = true;
            switch (next_fallback(use_mse)) {
            case fallback::none: co_return;
            case fallback::encryption:
                encryption_fallback_left_ = false;
                use_mse = !use_mse;
                break;
            case fallback::transport:
                transport_fallback_left_ = false;
                use_utp = !use_utp;
                // Both modes were closed on the old transport: that says nothing about
                // encryption, and MSE is what peers forcing it and peers merely allowing
                // it both accept.
                if (!encryption_fallback_left_ && policy != encryption_policy::disable && mse::rc4_available())
                    use_mse = true;
                break;
            }
            reset_for_retry();
        }
    }

    session_result result;
    /// A uTP-first connect succeeded after the unscaled SYN wait would have ended it.
    bool connected_past_unscaled_wait = false;

private:
    // One try: connect, (MSE), handshakes, conversation. True when the session is over
    // for good (success or a failure after the BitTorrent handshake).
    asio::awaitable<bool> try_once(bool use_mse, bool use_utp) {
        // GCC 12 miscompiles co_await inside an if condition: every await is a statement.
        bool ok = co_await connect(use_utp);
        if (!ok) co_return false;
        if (use_mse) {
            ok = co_await mse_exchange();
            if (!ok) co_return false;
        }
        ok = co_await exchange_handshakes(use_mse);
        if (!ok) co_return false;
        co_await converse();
        co_return true;
    }

    enum class fallback : std::uint8_t { none, encryption, transport };

    // What the next try changes, if anything. A refused or silent connect: the transport
    // (a uTP-only peer refuses or ignores TCP; another encryption would not help). The peer
    // closed before its BitTorrent handshake, or MSE failed (encryption_failed): the
    // encryption first (the commoner cause: a peer forcing or refusing PE), then the
    // transport (libtorrent without incoming TCP accepts and closes). Never after a cancel, the deadline, or a
    // failure after the handshake.
    fallback next_fallback(bool use_mse) const noexcept {
        if (handshake_done_) return fallback::none;
        if (cancel_.cancelled() != asio::cancellation_type::none) return fallback::none;
        if (conn_.expired || clock::now() >= deadline_) return fallback::none;
        if (!result.connected) {
            const bool connect_failed = result.failure == session_failure::connect_refused ||
                                        result.failure == session_failure::connect_timeout ||
                                        result.failure == session_failure::utp_timeout;
            return connect_failed && transport_fallback_left_ ? fallback::transport : fallback::none;
        }
        const bool closed_early = result.failure == session_failure::encryption_failed || closed_before_handshake();
        if (!closed_early) return fallback::none;
        if (encryption_fallback_left_ && (use_mse || mse::rc4_available())) return fallback::encryption;
        if (transport_fallback_left_) return fallback::transport;
        return fallback::none;
    }

    bool closed_before_handshake() const noexcept {
        return result.failure == session_failure::handshake_failed && result.error == wire::wire_error::short_handshake;
    }

    void reset_for_retry() noexcept {
        conn_.close_stream();
        conn_.connect_expired = false;
        rx_.consume(rx_.pending().size());
        encrypt_.reset();
        decrypt_.reset();
        result.failure = session_failure::none;
        result.error = wire::wire_error::none;
        result.net_error = {};
        result.connected = false;
        result.mse_error = mse::mse_error::none;
        result.encryption = stream_encryption::plaintext;
        in_mse_ = false;
    }

    // The MSE exchange; our BitTorrent handshake rides in IA. Afterwards reads and writes
    // go through the RC4 layer when the peer selected it.
    asio::awaitable<bool> mse_exchange() {
        std::string ia;
        if (!wire::build_handshake(ia, req_.info_hash, req_.peer_id)) {
            fail_wire(wire::wire_error::message_too_large);
            co_return false;
        }
        const std::uint32_t provide = req_.encryption == encryption_policy::require
                                          ? mse::crypto_rc4
                                          : (mse::crypto_rc4 | mse::crypto_plaintext);
        mse::initiator m(req_.info_hash, provide, std::move(ia));
        tx_.clear();
        if (m.start(tx_) == mse::status::failed) {
            fail_mse(m.error());
            co_return false;
        }
        // The peer closing or resetting the connection now refuses our encryption (fail_net).
        in_mse_ = true;
        bool ok = co_await write_tx();
        if (!ok) co_return false;
        for (;;) {
            ok = co_await read_more(1);
            if (!ok) co_return false;
            tx_.clear();
            const mse::status st = m.feed(rx_.pending(), tx_);
            rx_.consume(rx_.pending().size());
            if (st == mse::status::failed) {
                fail_mse(m.error());
                co_return false;
            }
            if (!tx_.empty()) {
                ok = co_await write_tx();
                if (!ok) co_return false;
            }
            if (st == mse::status::done) break;
        }
        in_mse_ = false;
        mse::outcome o = m.take();
        result.encryption = o.selected == mse::crypto_rc4 ? stream_encryption::rc4 : stream_encryption::plaintext;
        // The payload that came with the handshake, already decrypted, goes back in front.
        if (!o.payload.empty()) {
            if (!rx_.prepare(o.payload.size())) {
                fail_wire(wire::wire_error::message_too_large);
                co_return false;
            }
            const asio::mutable_buffer space = rx_.free_space();
            std::memcpy(space.data(), o.payload.data(), o.payload.size());
            rx_.commit(o.payload.size());
        }
        encrypt_ = std::move(o.encrypt);
        decrypt_ = std::move(o.decrypt);
        co_return true;
    }

    void fail_mse(mse::mse_error e) noexcept {
        result.mse_error = e;
        fail(session_failure::encryption_failed);
    }

    void fail(session_failure f, wire::wire_error e = wire::wire_error::none) noexcept {
        result.failure = f;
        result.error = e;
    }
    void fail_wire(wire::wire_error e) noexcept { fail(wire::classify(e), e); }

    // The socket failed for a reason of the peer's (closed, reset, refused...). Over uTP a
    // timed_out is uTP's own verdict that the peer went silent (SYN or data unanswered).
    void fail_net(const std::error_code& ec) noexcept {
        result.net_error = ec;
        if (on_utp() && ec == asio::error::timed_out)
            fail(session_failure::utp_timeout);
        else if (!result.connected)
            fail(ec == asio::error::timed_out ? session_failure::connect_timeout : session_failure::connect_refused);
        else if (in_mse_ && !plaintext_closed_)
            fail(session_failure::encryption_failed);
        else if (!handshake_done_)
            fail(session_failure::handshake_failed, wire::wire_error::short_handshake);
        else
            fail(session_failure::disconnected);
    }

    bool on_utp() const noexcept { return result.transport == api::stream_transport::utp; }

    // Checked after every suspension, before the operation's own error: the watchdog and
    // the owner end an operation by aborting it, and the abort must not pass for the peer's.
    bool interrupted() noexcept {
        if (conn_.expired || clock::now() >= deadline_) {
            if (result.connected)
                fail(session_failure::timeout);
            else
                fail(on_utp() ? session_failure::utp_timeout : session_failure::connect_timeout);
            return true;
        }
        if (cancel_.cancelled() != asio::cancellation_type::none) {
            fail(session_failure::cancelled);
            return true;
        }
        return false;
    }

    // A new stream of the chosen transport, connected. When another transport may follow,
    // this connect gets half of what is left of the deadline, so a silent peer leaves time
    // for the other.
    asio::awaitable<bool> connect(bool use_utp) {
        if (use_utp && !req_.utp) {
            fail(session_failure::connect_refused); // no uTP host configured
            co_return false;
        }
        if (use_utp)
            conn_.stream = std::make_unique<utp_stream>(conn_.executor, req_.utp);
        else
            conn_.stream = std::make_unique<tcp_stream>(conn_.executor);
        const bool limited = transport_fallback_left_;
        if (limited) {
            const clock::time_point now = clock::now();
            auto limit = (deadline_ - now) / 2;
            if (use_utp) limit = std::min<clock::duration>(limit, utp_first_connect_limit);
            // The DHT's round trip planned a longer SYN wait, and room for TCP after it.
            if (use_utp && plan_.syn_wait_scaled) limit = std::min<clock::duration>(plan_.utp_syn_wait, deadline_ - now);
            conn_.connect_limit.expires_at(now + limit);
            conn_.connect_limit.async_wait([weak = conn_.self](const std::error_code& ec) {
                if (ec) return; // cancelled: the connect finished first
                if (auto c = weak.lock()) {
                    c->connect_expired = true;
                    c->close_stream();
                }
            });
        }
        const clock::time_point began = clock::now();
        const std::error_code ec = co_await conn_.stream->connect(req_.peer, req_.bind_address);
        if (limited) conn_.connect_limit.cancel();
        if (interrupted()) co_return false;
        if (conn_.connect_expired) {
            fail(session_failure::connect_timeout);
            co_return false;
        }
        if (ec) {
            fail_net(ec);
            co_return false;
        }
        result.connected = true;
        const clock::time_point now = clock::now();
        if (use_utp && plan_.syn_wait_scaled &&
            now - began > std::min<clock::duration>((req_.deadline - began) / 2, utp_first_connect_limit))
            connected_past_unscaled_wait = true;
        extend_deadline(now, now - began);
        co_return true;
    }

    // The connect took one round trip (TCP's SYN, uTP's SYN and STATE; a lost SYN makes it
    // look longer, which is right: that path loses packets). What is left of the exchange
    // takes several more: the MSE exchange, both handshakes, the pieces. Measured here, the
    // round trip replaces the DHT's plan; connects never shorten each other's deadline.
    void extend_deadline(clock::time_point now, clock::duration rtt) {
        connect_deadline_ = std::max(connect_deadline_, deadline_after_connect(req_, now, rtt));
        if (connect_deadline_ > req_.deadline) result.deadline_extended = true;
        if (connect_deadline_ == deadline_) return;
        deadline_ = connect_deadline_;
        conn_.arm_watchdog(deadline_);
    }

    asio::awaitable<bool> write_tx() {
        if (encrypt_) encrypt_->apply(tx_.data(), tx_.size());
        const std::error_code ec = co_await conn_.stream->write(tx_);
        if (interrupted()) co_return false;
        if (ec) {
            fail_net(ec);
            co_return false;
        }
        co_return true;
    }

    // Reads whatever the socket has, making room for `need` unread bytes first.
    asio::awaitable<bool> read_more(std::size_t need) {
        if (!rx_.prepare(need)) {
            fail_wire(wire::wire_error::message_too_large);
            co_return false;
        }
        const auto [n, ec] = co_await conn_.stream->read_some(rx_.free_space());
        if (decrypt_ && n) decrypt_->apply(static_cast<char*>(rx_.free_space().data()), n);
        rx_.commit(n);
        result.bytes_received += n;
        if (interrupted()) co_return false;
        if (ec) {
            fail_net(ec);
            co_return false;
        }
        co_return true;
    }

    asio::awaitable<bool> exchange_handshakes(bool handshake_sent) {
        // Our extension handshake goes out with the handshake: it saves a round trip, and a
        // peer without BEP-10 is dropped anyway. After MSE the handshake went in IA.
        tx_.clear();
        if ((!handshake_sent && !wire::build_handshake(tx_, req_.info_hash, req_.peer_id)) ||
            !wire::build_ext_handshake(tx_, wire::ext_handshake_options{our_ut_metadata_id, {}, 0})) {
            fail_wire(wire::wire_error::message_too_large); // only an allocation failure gets here
            co_return false;
        }
        const bool sent = co_await write_tx();
        if (!sent) co_return false;
        for (;;) {
            wire::handshake h;
            wire::wire_error e = wire::parse_handshake(rx_.pending(), h);
            if (e == wire::wire_error::none) {
                rx_.consume(wire::handshake_size);
                // A hybrid may set the v2 bit in its reply; only the key matters.
                e = wire::check_handshake(h, req_.info_hash, req_.peer_id);
                if (e != wire::wire_error::none) {
                    fail_wire(e);
                    co_return false;
                }
                handshake_done_ = true;
                co_return true;
            }
            if (e != wire::wire_error::short_handshake) {
                fail_wire(e);
                co_return false;
            }
            const bool more = co_await read_more(wire::handshake_size);
            if (!more) co_return false;
        }
    }

    // The next non-keep-alive message. Its views stay valid until the next read.
    asio::awaitable<bool> next_message(wire::message_view& m) {
        for (;;) {
            const std::string_view p = rx_.pending();
            const wire::frame_status st = wire::next_message(p, req_.max_message, m);
            // ut_metadata messages are small whatever the general cap: refuse a large one as
            // soon as its header shows, before buffering toward it.
            if (p.size() >= 6 && static_cast<std::uint8_t>(p[4]) == wire::msg_extended &&
                static_cast<std::uint8_t>(p[5]) == our_ut_metadata_id && m.length > max_ut_metadata_message) {
                fail_wire(wire::wire_error::message_too_large);
                co_return false;
            }
            switch (st) {
            case wire::frame_status::message: rx_.consume(m.consumed); co_return true;
            case wire::frame_status::keep_alive: rx_.consume(m.consumed); continue;
            case wire::frame_status::too_large: fail_wire(wire::wire_error::message_too_large); co_return false;
            case wire::frame_status::need_more: break;
            }
            const std::size_t need = p.size() < 4 ? std::size_t{4} : std::size_t{4} + m.length;
            const bool more = co_await read_more(need);
            if (!more) co_return false;
        }
    }

    asio::awaitable<bool> idle_wait() {
        const clock::time_point wake = std::min(clock::now() + idle_poll_interval, deadline_);
        conn_.idle.expires_at(wake);
        std::error_code ec;
        co_await conn_.idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return !interrupted();
    }

    // A peer's extension handshake; a repeated one may change its ut_metadata id.
    bool on_ext_handshake(std::string_view payload) {
        wire::ext_handshake eh;
        const wire::wire_error e = wire::parse_ext_handshake(payload, doc_, eh, req_.max_metadata_size);
        if (!have_ext_) {
            if (e != wire::wire_error::none) {
                fail_wire(e);
                return false;
            }
            peer_ut_ = eh.ut_metadata;
            metadata_size_ = eh.metadata_size;
            result.metadata_size = metadata_size_;
            have_ext_ = true;
            if (!source_.on_metadata_size(metadata_size_)) {
                fail_wire(wire::wire_error::bad_metadata_size);
                return false;
            }
            return true;
        }
        // BEP-10: a later m only lists changes, so a missing ut_metadata or metadata_size
        // keeps the earlier one; 0 disables it, and a new size contradicts the first.
        switch (e) {
        case wire::wire_error::none:
        case wire::wire_error::no_ut_metadata:
        case wire::wire_error::no_metadata_size: break;
        default: fail_wire(e); return false;
        }
        if (eh.ut_metadata != 0) peer_ut_ = eh.ut_metadata;
        if (eh.metadata_size != 0 && eh.metadata_size != metadata_size_) {
            fail_wire(wire::wire_error::bad_metadata_size);
            return false;
        }
        return true;
    }

    // A data message for one of our outstanding requests.
    bool on_data(const wire::ut_metadata_message& um) {
        if (!have_ext_) {
            fail_wire(wire::wire_error::unrequested_piece);
            return false;
        }
        if (auto e = wire::check_data(um, metadata_size_, wire::any_piece); e != wire::wire_error::none) {
            fail_wire(e);
            return false;
        }
        const auto piece = static_cast<std::uint32_t>(um.piece); // < piece_count: fits
        const auto end = outstanding_.begin() + outstanding_count_;
        const auto it = std::find(outstanding_.begin(), end, piece);
        if (it == end) {
            fail_wire(wire::wire_error::unrequested_piece);
            return false;
        }
        *it = outstanding_[--outstanding_count_];
        // False means the lease was taken back: the bytes are simply not ours to give.
        if (source_.deliver(slot_, piece, um.data)) ++result.pieces_received;
        return true;
    }

    // Leases pieces up to the pipeline depth and sends their requests in one write.
    asio::awaitable<bool> request_more() {
        tx_.clear();
        while (outstanding_count_ < pipeline_) {
            const std::optional<std::uint32_t> piece = source_.acquire(slot_);
            if (!piece) break;
            outstanding_[outstanding_count_++] = *piece;
            if (!wire::build_metadata_request(tx_, peer_ut_, *piece)) {
                fail_wire(wire::wire_error::message_too_large); // allocation failure only
                co_return false;
            }
        }
        if (tx_.empty()) co_return true;
        co_return co_await write_tx();
    }

    asio::awaitable<void> converse() {
        for (;;) {
            if (have_ext_) {
                if (source_.complete()) co_return; // success, whoever fetched the pieces
                const bool requested = co_await request_more();
                if (!requested) co_return;
                if (outstanding_count_ == 0) {
                    // Others hold the remaining leases: wait for them to finish or give up.
                    const bool awake = co_await idle_wait();
                    if (!awake) co_return;
                    continue;
                }
            }
            wire::message_view m;
            const bool got = co_await next_message(m);
            if (!got) co_return;
            if (m.id != wire::msg_extended) continue; // bitfield, have, have_all, port, ...
            wire::extended_view x;
            if (auto e = wire::parse_extended(m, x); e != wire::wire_error::none) {
                fail_wire(e);
                co_return;
            }
            if (x.ext_id == wire::ext_handshake_id) {
                if (!on_ext_handshake(x.payload)) co_return;
                continue;
            }
            if (x.ext_id != our_ut_metadata_id) continue; // nothing else was advertised
            wire::ut_metadata_message um;
            if (auto e = wire::parse_ut_metadata(x.payload, doc_, um); e != wire::wire_error::none) {
                fail_wire(e);
                co_return;
            }
            switch (um.kind) {
            case wire::ut_kind::ignore: break;
            case wire::ut_kind::reject: fail_wire(wire::wire_error::rejected); co_return;
            case wire::ut_kind::data:
                if (!on_data(um)) co_return;
                break;
            case wire::ut_kind::request:
                // We serve nothing, but an unanswered request stalls a libtorrent peer's
                // queue. Before its extension handshake there is no id to answer with.
                if (peer_ut_ != 0 && um.piece <= std::numeric_limits<std::uint32_t>::max()) {
                    tx_.clear();
                    if (wire::build_metadata_reject(tx_, peer_ut_, static_cast<std::uint32_t>(um.piece))) {
                        const bool sent = co_await write_tx();
                        if (!sent) co_return;
                    }
                }
                break;
            }
        }
    }

    const session_request& req_;
    const session_plan plan_;
    clock::time_point deadline_; ///< the plan's, then the connects' (extend_deadline)
    clock::time_point connect_deadline_ = req_.deadline; ///< the latest the connects measured for
    piece_source& source_;
    const std::uint32_t slot_;
    connection& conn_;
    const asio::cancellation_state& cancel_;
    const std::uint32_t pipeline_;

    read_buffer rx_;
    std::string tx_;
    bencode::document doc_;
    bool handshake_done_ = false;
    bool in_mse_ = false; // between our first MSE bytes and the exchange's end
    // A plaintext try was closed before the peer's handshake: when MSE is closed too, the
    // peer refuses us either way, and encryption is not what failed (handshake_failed).
    bool plaintext_closed_ = false;
    bool encryption_fallback_left_ = false;
    bool transport_fallback_left_ = false;
    std::unique_ptr<mse::rc4> encrypt_; // set after an MSE exchange that selected RC4
    std::unique_ptr<mse::rc4> decrypt_;
    bool have_ext_ = false;
    std::uint8_t peer_ut_ = 0;
    std::size_t metadata_size_ = 0;
    std::array<std::uint32_t, max_pipeline> outstanding_{};
    std::uint32_t outstanding_count_ = 0;
};

} // namespace

std::string_view to_string(encryption_policy p) noexcept {
    switch (p) {
    case encryption_policy::prefer_plaintext: return "prefer_plaintext";
    case encryption_policy::prefer_encrypted: return "prefer_encrypted";
    case encryption_policy::require: return "require";
    case encryption_policy::disable: return "disable";
    }
    return "prefer_plaintext";
}

std::optional<encryption_policy> parse_encryption_policy(std::string_view s) noexcept {
    for (auto p : {encryption_policy::prefer_plaintext, encryption_policy::prefer_encrypted, encryption_policy::require,
                   encryption_policy::disable})
        if (to_string(p) == s) return p;
    return std::nullopt;
}

std::string_view to_string(transport_policy p) noexcept {
    switch (p) {
    case transport_policy::tcp: return "tcp";
    case transport_policy::utp: return "utp";
    case transport_policy::both: return "both";
    case transport_policy::utp_first: return "utp_first";
    }
    return "tcp";
}

std::optional<transport_policy> parse_transport_policy(std::string_view s) noexcept {
    for (auto p : {transport_policy::tcp, transport_policy::utp, transport_policy::both, transport_policy::utp_first})
        if (to_string(p) == s) return p;
    return std::nullopt;
}

session_plan plan_session(const session_request& req, clock::time_point start) noexcept {
    session_plan p;
    p.deadline = req.deadline;
    if (!req.dht_rtt.known()) return p;
    const clock::duration rtt = req.dht_rtt.value();
    const clock::time_point limit = std::max(req.deadline, req.deadline_limit);
    // After a connect: its round trips and one retransmission (as deadline_after_connect).
    const clock::duration after_connect = (deadline_rtts + 1) * rtt + deadline_loss_slack;
    clock::time_point want = start + dht_plan_rtts * rtt + deadline_loss_slack;
    clock::duration wait = utp_first_connect_limit;
    if (req.transports == transport_policy::utp_first) {
        wait = std::clamp<clock::duration>(dht_plan_rtts * rtt, utp_first_connect_limit, utp_first_connect_limit_max);
        if (wait > utp_first_connect_limit) want = std::max(want, start + wait + after_connect);
    }
    const clock::time_point to = std::min(want, limit);
    if (to > p.deadline) {
        p.deadline = to;
        p.extended = true;
    }
    // The wait never takes what TCP needs after it; with too little room it stays unscaled.
    wait = std::min(wait, p.deadline - start - after_connect);
    if (wait > utp_first_connect_limit) {
        p.utp_syn_wait = wait;
        p.syn_wait_scaled = true;
        p.extended = true;
    }
    return p;
}

clock::time_point deadline_after_connect(const session_request& req, clock::time_point now,
                                         clock::duration rtt) noexcept {
    const clock::time_point want = now + deadline_rtts * rtt + deadline_loss_slack;
    return std::max(req.deadline, std::min(want, req.deadline_limit));
}

asio::awaitable<session_result> run_peer_session(session_request request, piece_source& source,
                                                 std::uint32_t session_slot) {
    const clock::time_point start = clock::now();
    release_guard guard{source, session_slot};
    // The state is not reset: that would change the filter of a coroutine awaiting this one.
    const asio::cancellation_state cancel = co_await asio::this_coro::cancellation_state;

    const asio::any_io_executor ex = co_await asio::this_coro::executor;
    auto conn = std::make_shared<connection>(ex);
    conn->self = conn;
    const session_plan plan = plan_session(request, start);
    conn->arm_watchdog(plan.deadline);

    session s(request, plan, source, session_slot, *conn, cancel);
    co_await s.run();

    conn->watchdog.cancel();
    conn->connect_limit.cancel();
    conn->close_stream(); // abortive: the session is over either way (see the streams)
    s.result.elapsed = clock::now() - start;
    const bool late = clock::now() > request.deadline;
    s.result.saved_by_extension = s.result.deadline_extended && s.result.ok() && late;
    s.result.dht_rtt_extended = plan.extended;
    s.result.saved_by_dht_rtt = plan.extended && s.result.ok() && (late || s.connected_past_unscaled_wait);
    co_return s.result;
}

} // namespace dhtc::metadata
