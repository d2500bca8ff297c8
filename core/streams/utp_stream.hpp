// uTP for peer sessions on Asio: utp_host owns the UDP sockets (one per address family,
// opened on first use) and the socket-free multiplexer of core/utp, feeds it what arrives,
// runs its timers, and wakes the streams whose connection something happened to.
// utp_stream is a byte_stream over one connection of a utp_driver (utp_host, or the test
// network's seeders, which share the DHT's UDP socket). Everything runs on one
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

#include "streams/byte_stream.hpp"
#include "util/clock.hpp"
#include "net/transport.hpp"
#include "utp/multiplexer.hpp"

namespace dhtc::metadata {

/// Counters of a host beside the multiplexer's.
struct utp_host_stats {
    std::uint64_t datagrams_sent = 0;
    std::uint64_t send_failures = 0; ///< the socket refused a datagram (it is lost: uTP resends)
};

/// What a utp_stream needs from whoever drives its multiplexer.
class utp_driver {
public:
    virtual ~utp_driver() = default;
    /// A new outgoing connection (its SYN sent), or null with the reason in `ec`.
    virtual std::shared_ptr<utp::connection> connect(const endpoint& peer, std::error_code& ec) = 0;
    /// `wake` is cancelled whenever something happened to `c` (bytes, acks, its end).
    virtual void watch(const utp::connection* c, asio::steady_timer* wake) = 0;
    virtual void unwatch(const utp::connection* c) noexcept = 0;
    /// A stream wrote or read: acks are due and timers may be due earlier.
    virtual void poke() = 0;
};

/// What every utp_driver does alike: the streams' wake-up timers and the multiplexer's
/// timer loop.
class utp_wakeups {
public:
    explicit utp_wakeups(const asio::any_io_executor& ex) : timer_(ex) {}
    void watch(const utp::connection* c, asio::steady_timer* wake) { watchers_[c] = wake; }
    void unwatch(const utp::connection* c) noexcept { watchers_.erase(c); }
    /// Wakes the stream of `c`, if one watches it.
    void wake(const utp::connection* c);
    /// Arms the timer for mux.next_timer() unless it is armed earlier already. When it
    /// fires, the multiplexer ticks, every stream wakes (timers end connections and
    /// resend) and it re-arms. `owner` owns `mux` and this object and stays alive while armed.
    void arm(utp::multiplexer& mux, std::shared_ptr<void> owner);
    /// Stops the loop and wakes every stream, so each sees the end.
    void shutdown() noexcept;

private:
    asio::steady_timer timer_;
    time_point armed_ = time_point::max();
    std::unordered_map<const utp::connection*, asio::steady_timer*> watchers_;
    bool shut_ = false;
};

class utp_host final : public transport, public utp_driver, public std::enable_shared_from_this<utp_host> {
public:
    /// `bind_v4`: the source address of outgoing IPv4 (any when empty).
    static std::shared_ptr<utp_host> create(const asio::any_io_executor& ex, std::optional<ip_address> bind_v4,
                                            const utp::multiplexer_config& cfg = {});

    std::shared_ptr<utp::connection> connect(const endpoint& peer, std::error_code& ec) override;
    void watch(const utp::connection* c, asio::steady_timer* wake) override;
    void unwatch(const utp::connection* c) noexcept override;
    void poke() override;
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

    asio::any_io_executor ex_;
    std::optional<ip_address> bind_v4_;
    steady_clock_source clock_;
    utp::multiplexer mux_;
    endpoint_socket v4_;
    endpoint_socket v6_;
    utp_wakeups wakeups_;
    std::vector<const utp::connection*> touched_;
    bool shut_ = false;
    utp_host_stats stats_;
};

class utp_stream final : public byte_stream {
public:
    /// For connect().
    utp_stream(const asio::any_io_executor& ex, std::shared_ptr<utp_driver> host);
    /// Over an accepted incoming connection (connect() is not called).
    utp_stream(const asio::any_io_executor& ex, std::shared_ptr<utp_driver> host,
               std::shared_ptr<utp::connection> accepted);
    ~utp_stream() override;

    asio::awaitable<std::error_code> connect(endpoint peer, std::optional<ip_address> bind) override;
    asio::awaitable<std::error_code> write(std::string_view bytes) override;
    asio::awaitable<std::pair<std::size_t, std::error_code>> read_some(asio::mutable_buffer into) override;
    void close() noexcept override;
    api::stream_transport transport() const noexcept override { return api::stream_transport::utp; }

private:
    asio::awaitable<void> wait();
    std::error_code closed_error() const;

    std::shared_ptr<utp_driver> host_;
    std::shared_ptr<utp::connection> conn_;
    asio::steady_timer wake_;
    bool closed_ = false;
};

} // namespace dhtc::metadata
