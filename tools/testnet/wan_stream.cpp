#include "testnet/wan_stream.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <string>

namespace dhtc::testnet {

using wan::clock;

namespace {

struct chunk {
    clock::time_point due;
    std::string bytes;
    std::size_t taken = 0;
};

/// Waits on `t` until `at`, or until someone cancels `t` to say "look again".
asio::awaitable<void> wait_until(asio::steady_timer& t, clock::time_point at) {
    t.expires_at(at);
    std::error_code ignored;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

} // namespace

/// Shared by the stream and its two pumps, so that a pump can finish (flush, close) after
/// the seeder dropped the stream. One thread: no locks.
struct wan_stream::state {
    state(asio::io_context& io, std::unique_ptr<metadata::byte_stream> in, wan::model& m, std::uint32_t l, std::uint32_t r)
        : inner(std::move(in)), model(m), local(l), remote(r), rx_wake(io), rx_room(io), tx_wake(io), tx_room(io) {}

    std::unique_ptr<metadata::byte_stream> inner;
    wan::model& model;
    std::uint32_t local, remote;
    clock::time_point handshake_done; ///< no byte reaches the seeder before this

    /// When a chunk sent now from -> to arrives: half the RTT plus jitter, a retransmission
    /// timeout more when the model loses it, never before the one sent before it.
    clock::time_point arrival(std::uint32_t from, std::uint32_t to, clock::time_point& last) {
        const auto now = clock::now();
        auto at = now + model.rtt(from, to) / 2 + model.jitter();
        if (model.lose(from, to)) at += model.tcp_retransmit(from, to);
        last = std::max(at, last);
        return last;
    }

    // From the peer to the seeder.
    std::deque<chunk> rx;
    std::size_t rx_held = 0;
    clock::time_point rx_last{};
    bool rx_ended = false;
    std::error_code rx_end;
    asio::steady_timer rx_wake; // the seeder's read waits on it
    asio::steady_timer rx_room; // the read pump waits on it while rx is full

    // From the seeder to the peer.
    std::deque<chunk> tx;
    std::size_t tx_held = 0;
    clock::time_point tx_last{};
    std::error_code tx_error;
    bool tx_pump_running = false;
    asio::steady_timer tx_wake; // the write pump waits on it
    asio::steady_timer tx_room; // the seeder's write waits on it while tx is full

    bool closing = false;
};

wan_stream::wan_stream(asio::io_context& io, std::unique_ptr<metadata::byte_stream> inner, wan::model& model,
                       std::uint32_t local, std::uint32_t remote)
    : s_(std::make_shared<state>(io, std::move(inner), model, local, remote)) {
    // A byte the peer sent as soon as its connect() returned (at once, on loopback) would have
    // arrived after the handshake and its own half round trip.
    s_->handshake_done = clock::now() + model.tcp_handshake(remote, local) + model.rtt(remote, local) / 2;
    s_->rx_last = s_->handshake_done;
    asio::co_spawn(io, read_pump(s_), asio::detached);
}

wan_stream::~wan_stream() { close(); }

asio::awaitable<std::error_code> wan_stream::connect(endpoint, std::optional<ip_address>) {
    co_return asio::error::operation_not_supported;
}

asio::awaitable<std::error_code> wan_stream::write(std::string_view bytes) {
    auto s = s_;
    while (!s->closing && !s->tx_error && s->tx_held >= max_held) co_await wait_until(s->tx_room, clock::time_point::max());
    if (s->closing) co_return asio::error::operation_aborted;
    if (s->tx_error) co_return s->tx_error;
    const auto due = s->arrival(s->local, s->remote, s->tx_last);
    s->tx.push_back({due, std::string(bytes), 0});
    s->tx_held += bytes.size();
    if (!s->tx_pump_running) {
        s->tx_pump_running = true;
        asio::co_spawn(s->tx_wake.get_executor(), write_pump(s), asio::detached);
    }
    s->tx_wake.cancel();
    co_return std::error_code{};
}

asio::awaitable<std::pair<std::size_t, std::error_code>> wan_stream::read_some(asio::mutable_buffer into) {
    auto s = s_;
    for (;;) {
        if (s->closing) co_return std::pair{std::size_t{0}, std::error_code(asio::error::operation_aborted)};
        const auto now = clock::now();
        if (!s->rx.empty()) {
            auto& c = s->rx.front();
            if (c.due <= now) {
                const std::size_t n = std::min(into.size(), c.bytes.size() - c.taken);
                std::memcpy(into.data(), c.bytes.data() + c.taken, n);
                c.taken += n;
                s->rx_held -= n;
                if (c.taken == c.bytes.size()) s->rx.pop_front();
                s->rx_room.cancel();
                co_return std::pair{n, std::error_code{}};
            }
            co_await wait_until(s->rx_wake, c.due);
        } else if (s->rx_ended) {
            // The end (FIN, RST) travels like the bytes before it.
            if (s->rx_last <= now) co_return std::pair{std::size_t{0}, s->rx_end};
            co_await wait_until(s->rx_wake, s->rx_last);
        } else {
            co_await wait_until(s->rx_wake, clock::time_point::max());
        }
    }
}

void wan_stream::close() noexcept {
    if (!s_ || s_->closing) return;
    s_->closing = true;
    s_->rx_wake.cancel();
    s_->rx_room.cancel();
    s_->tx_room.cancel();
    if (!s_->tx_pump_running) {
        s_->tx_pump_running = true;
        try {
            asio::co_spawn(s_->tx_wake.get_executor(), write_pump(s_), asio::detached);
        } catch (...) {
            s_->inner->close(); // no memory for the pump: close at once
        }
    }
    s_->tx_wake.cancel();
}

asio::awaitable<void> wan_stream::read_pump(std::shared_ptr<state> s) {
    std::array<char, 16384> buf;
    for (;;) {
        while (!s->closing && s->rx_held >= wan_stream::max_held) co_await wait_until(s->rx_room, clock::time_point::max());
        if (s->closing) co_return;
        auto [n, ec] = co_await s->inner->read_some(asio::buffer(buf));
        if (s->closing) co_return;
        const auto due = s->arrival(s->remote, s->local, s->rx_last);
        if (ec || n == 0) {
            s->rx_ended = true;
            s->rx_end = ec ? ec : std::error_code(asio::error::eof);
            s->rx_wake.cancel();
            co_return;
        }
        s->rx.push_back({due, std::string(buf.data(), n), 0});
        s->rx_held += n;
        s->rx_wake.cancel();
    }
}

asio::awaitable<void> wan_stream::write_pump(std::shared_ptr<state> s) {
    for (;;) {
        if (s->tx.empty()) {
            if (!s->closing) break;
            // Closing: the FIN (or RST) leaves after the last byte, and travels as long.
            const auto at = std::max({s->tx_last, clock::now() + s->model.rtt(s->local, s->remote) / 2, s->handshake_done});
            while (clock::now() < at) co_await wait_until(s->tx_wake, at);
            s->inner->close();
            break;
        }
        auto& c = s->tx.front();
        if (c.due > clock::now()) {
            co_await wait_until(s->tx_wake, c.due);
            continue;
        }
        const auto ec = co_await s->inner->write(c.bytes);
        s->tx_held -= c.bytes.size();
        s->tx.pop_front();
        s->tx_room.cancel();
        if (ec) {
            s->tx_error = ec;
            s->tx.clear();
            s->tx_held = 0;
            if (s->closing) s->inner->close();
            break;
        }
    }
    s->tx_pump_running = false;
}

} // namespace dhtc::testnet
