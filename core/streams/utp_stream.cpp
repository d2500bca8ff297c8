#include "streams/utp_stream.hpp"

#include <asio/ip/v6_only.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "streams/tcp_stream.hpp"

namespace dhtc::metadata {

namespace {

// Datagrams read in one go after a wake-up before acks go out and streams are woken.
constexpr int receive_batch = 64;
constexpr std::size_t max_datagram = 64 * 1024;
constexpr int socket_buffer_bytes = 4 << 20;

std::optional<endpoint> from_asio(const asio::ip::udp::endpoint& ep) {
    const auto a = ep.address();
    std::optional<ip_address> ip;
    if (a.is_v4()) {
        ip = ip_address::v4(a.to_v4().to_uint());
    } else {
        const auto v6 = a.to_v6();
        if (v6.is_v4_mapped()) {
            ip = ip_address::v4(asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_uint());
        } else {
            const auto b = v6.to_bytes();
            std::array<std::uint8_t, 16> raw{};
            std::copy(b.begin(), b.end(), raw.begin());
            ip = ip_address::v6(raw);
        }
    }
    return endpoint{*ip, ep.port()};
}

} // namespace

std::shared_ptr<utp_host> utp_host::create(const asio::any_io_executor& ex, std::optional<ip_address> bind_v4,
                                           const utp::multiplexer_config& cfg) {
    return std::make_shared<utp_host>(ex, bind_v4, cfg);
}

utp_host::utp_host(const asio::any_io_executor& ex, std::optional<ip_address> bind_v4,
                   const utp::multiplexer_config& cfg)
    : ex_(ex), bind_v4_(bind_v4), mux_(*this, clock_, cfg), v4_(ex), v6_(ex), wakeups_(ex) {}

asio::ip::udp::socket* utp_host::socket_for(bool v6, std::error_code& ec) {
    endpoint_socket& es = v6 ? v6_ : v4_;
    auto& s = es.socket;
    if (s.is_open()) return &s;
    if (shut_) {
        ec = asio::error::shut_down;
        return nullptr;
    }
    const auto any = v6 ? asio::ip::address(asio::ip::address_v6::any()) : asio::ip::address(asio::ip::address_v4::any());
    const asio::ip::udp::endpoint local(!v6 && bind_v4_ ? to_asio(*bind_v4_) : any, 0);
    s.open(local.protocol(), ec);
    if (!ec && v6) s.set_option(asio::ip::v6_only(true), ec);
    if (!ec) s.bind(local, ec);
    if (!ec) s.non_blocking(true, ec);
    if (!ec) {
        // Every session's pieces arrive on this one socket in bursts (a 16 KiB piece is a
        // dozen datagrams): the default ~200 KiB buffer overflows with a few dozen sessions,
        // and a lost tail costs a retransmission timeout. The kernel caps it (rmem_max).
        std::error_code ignored;
        s.set_option(asio::socket_base::receive_buffer_size(socket_buffer_bytes), ignored);
        s.set_option(asio::socket_base::send_buffer_size(socket_buffer_bytes), ignored);
    }
    if (ec) {
        std::error_code ignored;
        s.close(ignored);
        return nullptr;
    }
    es.buffer.resize(max_datagram);
    receive(&es);
    return &s;
}

std::shared_ptr<utp::connection> utp_host::connect(const endpoint& peer, std::error_code& ec) {
    ec = {};
    if (!socket_for(peer.address.is_v6(), ec)) return nullptr;
    auto c = mux_.connect(peer);
    if (!c) {
        ec = asio::error::no_buffer_space; // at max_connections
        return nullptr;
    }
    arm_timer();
    return c;
}

void utp_wakeups::wake(const utp::connection* c) {
    const auto it = watchers_.find(c);
    if (it != watchers_.end()) it->second->cancel();
}

void utp_wakeups::arm(utp::multiplexer& mux, std::shared_ptr<void> owner) {
    const time_point next = mux.next_timer();
    if (shut_ || next >= armed_) return;
    armed_ = next;
    timer_.expires_at(next);
    timer_.async_wait([this, &mux, owner = std::move(owner)](const std::error_code& ec) {
        if (ec || shut_) return; // re-armed earlier, or shut down
        armed_ = time_point::max();
        mux.tick();
        for (auto& [c, w] : watchers_) w->cancel();
        arm(mux, owner);
    });
}

void utp_wakeups::shutdown() noexcept {
    shut_ = true;
    timer_.cancel();
    for (auto& [c, w] : watchers_) w->cancel();
}

void utp_host::watch(const utp::connection* c, asio::steady_timer* wake) { wakeups_.watch(c, wake); }

void utp_host::unwatch(const utp::connection* c) noexcept { wakeups_.unwatch(c); }

void utp_host::poke() {
    mux_.flush();
    arm_timer();
}

bool utp_host::send(const endpoint& to, std::string_view payload) {
    std::error_code ec;
    auto* s = socket_for(to.address.is_v6(), ec);
    if (!s) {
        ++stats_.send_failures;
        return false;
    }
    s->send_to(asio::buffer(payload.data(), payload.size()),
               asio::ip::udp::endpoint(to_asio(to.address), to.port), 0, ec);
    if (ec) {
        ++stats_.send_failures;
        return false;
    }
    ++stats_.datagrams_sent;
    return true;
}

void utp_host::receive(endpoint_socket* es) {
    es->socket.async_receive_from(
        asio::buffer(es->buffer), es->from, [self = shared_from_this(), es](const std::error_code& ec, std::size_t n) {
            if (self->shut_ || ec == asio::error::operation_aborted || !es->socket.is_open()) return;
            if (!ec) self->on_received(*es, n);
            // Drain what else is queued without waiting, then answer once.
            for (int i = 1; i < receive_batch; ++i) {
                std::error_code e;
                const std::size_t m = es->socket.receive_from(asio::buffer(es->buffer), es->from, 0, e);
                if (e) break;
                self->on_received(*es, m);
            }
            self->after_batch();
            self->receive(es);
        });
}

void utp_host::on_received(endpoint_socket& es, std::size_t n) {
    const auto peer = from_asio(es.from);
    if (!peer) return;
    const utp::connection* c = mux_.on_datagram(*peer, std::string_view(es.buffer.data(), n));
    if (c && (touched_.empty() || touched_.back() != c)) touched_.push_back(c);
}

void utp_host::after_batch() {
    mux_.flush();
    for (const auto* c : touched_) wakeups_.wake(c);
    touched_.clear();
    arm_timer();
}

void utp_host::arm_timer() {
    if (!shut_) wakeups_.arm(mux_, shared_from_this());
}

void utp_host::shutdown() noexcept {
    shut_ = true;
    std::error_code ignored;
    v4_.socket.close(ignored);
    v6_.socket.close(ignored);
    wakeups_.shutdown();
}

utp_stream::utp_stream(const asio::any_io_executor& ex, std::shared_ptr<utp_driver> host)
    : host_(std::move(host)), wake_(ex) {}

utp_stream::utp_stream(const asio::any_io_executor& ex, std::shared_ptr<utp_driver> host,
                       std::shared_ptr<utp::connection> accepted)
    : host_(std::move(host)), conn_(std::move(accepted)), wake_(ex) {
    host_->watch(conn_.get(), &wake_);
}

utp_stream::~utp_stream() { close(); }

asio::awaitable<void> utp_stream::wait() {
    wake_.expires_at(asio::steady_timer::time_point::max());
    std::error_code ignored;
    co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

std::error_code utp_stream::closed_error() const {
    if (closed_ || !conn_) return asio::error::operation_aborted;
    switch (conn_->close_reason()) {
    case utp::close_reason::refused: return asio::error::connection_refused;
    case utp::close_reason::timed_out: return asio::error::timed_out;
    case utp::close_reason::reset: return asio::error::connection_reset;
    case utp::close_reason::finished: return asio::error::eof;
    case utp::close_reason::aborted:
    case utp::close_reason::none: break;
    }
    return asio::error::operation_aborted;
}

asio::awaitable<std::error_code> utp_stream::connect(endpoint peer, std::optional<ip_address>) {
    std::error_code ec;
    conn_ = host_->connect(peer, ec);
    if (!conn_) co_return ec;
    host_->watch(conn_.get(), &wake_);
    while (!closed_ && conn_->state() == utp::conn_state::syn_sent) co_await wait();
    if (closed_ || conn_->state() != utp::conn_state::connected) co_return closed_error();
    co_return std::error_code{};
}

asio::awaitable<std::error_code> utp_stream::write(std::string_view bytes) {
    for (;;) {
        if (closed_ || !conn_ || conn_->state() != utp::conn_state::connected) co_return closed_error();
        bytes.remove_prefix(conn_->write(bytes));
        host_->poke();
        if (bytes.empty()) co_return std::error_code{};
        co_await wait(); // the send buffer is full: acks free it
    }
}

asio::awaitable<std::pair<std::size_t, std::error_code>> utp_stream::read_some(asio::mutable_buffer into) {
    for (;;) {
        if (closed_ || !conn_) co_return std::pair{std::size_t{0}, closed_error()};
        const std::size_t n = conn_->read(static_cast<char*>(into.data()), into.size());
        if (n > 0) {
            host_->poke();
            co_return std::pair{n, std::error_code{}};
        }
        if (conn_->eof()) co_return std::pair{std::size_t{0}, std::error_code(asio::error::eof)};
        if (conn_->state() == utp::conn_state::closed) co_return std::pair{std::size_t{0}, closed_error()};
        co_await wait();
    }
}

void utp_stream::close() noexcept {
    if (closed_) return;
    closed_ = true;
    if (conn_) {
        host_->unwatch(conn_.get());
        conn_->abort();
    }
    wake_.cancel();
}

} // namespace dhtc::metadata
