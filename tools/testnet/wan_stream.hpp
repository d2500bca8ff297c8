// A seeder's side of one accepted TCP connection under the WAN model. The kernel carries
// TCP over loopback at once, so this side does what the wide-area path would have done to
// it: each chunk read from the peer is handed to the seeder half the pair's RTT (plus
// jitter) after it arrived, each chunk written is held as long before it goes out, a chunk
// "lost" on the way costs a retransmission timeout, and the order of the bytes is kept
// (a late chunk holds back the ones behind it, as TCP's in-order delivery does). The
// handshake is on the first byte: it reaches the seeder a handshake (one RTT, more per
// SYN lost) plus half an RTT after it was sent. Closing is delayed too: the bytes written
// leave first, then the connection is closed half an RTT later.
//
// Not modelled: the peer's connect() completes at once (its own handshake wait is on the
// first answer instead); window, slow start and congestion (the metadata exchange is a few
// KiB per round trip); segments: a chunk is what one read or one write moved.
#pragma once

#include <asio/io_context.hpp>

#include <cstdint>
#include <memory>

#include "streams/byte_stream.hpp"
#include "testnet/wan_model.hpp"

namespace dhtc::testnet {

class wan_stream final : public metadata::byte_stream {
public:
    /// `inner`: a connection accepted on `local` (a seeder's address) from `remote`. The
    /// model must outlive the io_context's run.
    wan_stream(asio::io_context& io, std::unique_ptr<metadata::byte_stream> inner, wan::model& model,
               std::uint32_t local, std::uint32_t remote);
    ~wan_stream() override;

    /// Accepted connections only: operation_not_supported.
    asio::awaitable<std::error_code> connect(endpoint peer, std::optional<ip_address> bind) override;
    /// Queues a copy (at most a bounded number of bytes wait; beyond, it waits for room).
    asio::awaitable<std::error_code> write(std::string_view bytes) override;
    asio::awaitable<std::pair<std::size_t, std::error_code>> read_some(asio::mutable_buffer into) override;
    /// Aborts a pending read at once; what was written still leaves at its time, then the
    /// connection is closed.
    void close() noexcept override;
    api::stream_transport transport() const noexcept override { return api::stream_transport::tcp; }

    /// Bytes one direction may hold back (the peer's writes beyond it wait in the kernel).
    static constexpr std::size_t max_held = 256 * 1024;

private:
    struct state;
    // The two pumps own the state with the stream: they move the bytes at their times.
    static asio::awaitable<void> read_pump(std::shared_ptr<state> s);
    static asio::awaitable<void> write_pump(std::shared_ptr<state> s);

    std::shared_ptr<state> s_;
};

} // namespace dhtc::testnet
