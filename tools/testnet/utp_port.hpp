// One uTP seeder's side of the shared UDP socket: libtorrent serves uTP on its DHT port, so
// the hub hands the datagrams that are not KRPC (uTP's first byte has version 1 in its low
// nibble; a KRPC message starts with 'd') for this seeder's address to its utp_port. It
// drives core/utp's multiplexer (accepting, bounded) on the testnet's io_context and is the
// utp_driver the seeder's utp_streams wait on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "streams/utp_stream.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"
#include "utp/multiplexer.hpp"

namespace dhtc::testnet {

class network;

/// True when `bytes` can be a uTP datagram rather than KRPC.
bool looks_like_utp(std::string_view bytes) noexcept;

class utp_port final : public transport, public metadata::utp_driver, public std::enable_shared_from_this<utp_port> {
public:
    using incoming_handler = std::function<void(std::shared_ptr<utp::connection>)>;

    utp_port(asio::io_context& io, network& net, std::uint32_t ip, const utp::multiplexer_config& cfg,
             incoming_handler on_incoming);

    /// A datagram from from_ip:from_port to this seeder.
    void on_datagram(std::uint32_t from_ip, std::uint16_t from_port, std::string_view bytes);
    /// Aborts nothing by itself (the seeder closes its streams); stops the timer and wakes
    /// every stream so it sees the end.
    void shutdown() noexcept;

    // utp_driver: a seeder only accepts.
    std::shared_ptr<utp::connection> connect(const endpoint& peer, std::error_code& ec) override;
    void watch(const utp::connection* c, asio::steady_timer* wake) override;
    void unwatch(const utp::connection* c) noexcept override;
    void poke() override;
    // transport: out through the hub, from this seeder's address.
    bool send(const endpoint& to, std::string_view payload) override;

    const utp::multiplexer_stats& stats() const noexcept { return mux_.stats(); }

private:
    void after_batch();

    asio::io_context& io_;
    network& net_;
    std::uint32_t ip_;
    steady_clock_source clock_;
    utp::multiplexer mux_;
    incoming_handler on_incoming_;
    metadata::utp_wakeups wakeups_;
    std::vector<const utp::connection*> touched_;
    bool batch_posted_ = false;
    bool shut_ = false;
};

} // namespace dhtc::testnet
