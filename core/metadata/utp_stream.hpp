// uTP for peer sessions on Asio: utp_host owns the UDP sockets (one per address family,
// opened on first use) and the socket-free multiplexer of core/utp, feeds it what arrives,
// runs its timers, and wakes the streams whose connection something happened to.
// utp_stream is a byte_stream over one of its connections. Everything runs on one
// single-threaded executor (the metadata pipeline's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>

#include "metadata/byte_stream.hpp"
#include "net/clock.hpp"
#include "net/transport.hpp"
#include "utp/multiplexer.hpp"

namespace dhtc::metadata {

/// Counters of a host beside the multiplexer's.
struct utp_host_stats {
    std::uint64_t datagrams_sent = 0;
    std::uint64_t send_failures = 0; ///< the socket refused a datagram (it is lost: uTP resends)
};

class utp_host final : public transport, public std::enable_shared_from_this<utp_host> {
public:
    /// `bind_v4`: the source address of outgoing IPv4 (any when empty).
    static std::shared_ptr<utp_host> create(const asio::any_io_executor& ex, std::optional<ip_address> bind_v4,
                                            const utp::multiplexer_config& cfg = {});

    /// A new outgoing connection (its SYN sent), or null with the reason in `ec`.
    std::shared_ptr<utp::connection> connect(const endpoint& peer, std::error_code& ec);
    /// `wake` is cancelled whenever something happened to `c` (bytes, acks, its end).
    void watch(const utp::connection* c, asio::steady_timer* wake);
    void unwatch(const utp::connection* c) noexcept;
    /// A stream wrote or read: timers may be due earlier.
    void poke();
    /// Closes the sockets and stops the loops (the pipeline's stop).
    void shutdown() noexcept;

    bool send(const endpoint& to, std::string_view payload) override;

    const utp::multiplexer_stats& mux_stats() const noexcept { return mux_.stats(); }
    const utp_host_stats& stats() const noexcept { return stats_; }

    utp_host(const asio::any_io_executor& ex, std::optional<ip_address> bind_v4, const utp::multiplexer_config& cfg);

private:
    // One socket with its own receive buffer: both families may have a receive pending.
    struct endpoint_socket {
        explicit endpoint_socket(const asio::any_io_executor& ex) : socket(ex) {}
        asio::ip::udp::socket socket;
        std::vector<char> buffer;
        asio::ip::udp::endpoint from;
    };

    asio::ip::udp::socket* socket_for(bool v6, std::error_code& ec);
    void receive(endpoint_socket* s);
    void on_received(endpoint_socket& s, std::size_t n);
    void after_batch();
    void arm_timer();
    void wake(const utp::connection* c);

    asio::any_io_executor ex_;
    std::optional<ip_address> bind_v4_;
    steady_clock_source clock_;
    utp::multiplexer mux_;
    endpoint_socket v4_;
    endpoint_socket v6_;
    asio::steady_timer timer_;
    time_point armed_ = time_point::max();
    std::unordered_map<const utp::connection*, asio::steady_timer*> watchers_;
    std::vector<const utp::connection*> touched_;
    bool shut_ = false;
    utp_host_stats stats_;
};

class utp_stream final : public byte_stream {
public:
    utp_stream(const asio::any_io_executor& ex, std::shared_ptr<utp_host> host);
    ~utp_stream() override;

    asio::awaitable<std::error_code> connect(endpoint peer, std::optional<ip_address> bind) override;
    asio::awaitable<std::error_code> write(std::string_view bytes) override;
    asio::awaitable<std::pair<std::size_t, std::error_code>> read_some(asio::mutable_buffer into) override;
    void close() noexcept override;
    api::stream_transport transport() const noexcept override { return api::stream_transport::utp; }

private:
    asio::awaitable<void> wait();
    std::error_code closed_error() const;

    std::shared_ptr<utp_host> host_;
    std::shared_ptr<utp::connection> conn_;
    asio::steady_timer wake_;
    bool closed_ = false;
};

} // namespace dhtc::metadata
