// A byte_stream over one TCP connection.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>

#include "streams/byte_stream.hpp"

namespace dhtc::metadata {

class tcp_stream final : public byte_stream {
public:
    explicit tcp_stream(const asio::any_io_executor& ex) : socket_(ex) {}
    /// Over an accepted connection (connect() is not called).
    explicit tcp_stream(asio::ip::tcp::socket accepted) : socket_(std::move(accepted)) {}

    asio::awaitable<std::error_code> connect(endpoint peer, std::optional<ip_address> bind) override;
    asio::awaitable<std::error_code> write(std::string_view bytes) override;
    asio::awaitable<std::pair<std::size_t, std::error_code>> read_some(asio::mutable_buffer into) override;
    void close() noexcept override;
    api::stream_transport transport() const noexcept override { return api::stream_transport::tcp; }

private:
    asio::ip::tcp::socket socket_;
};

/// The Asio form of an address (shared by the streams).
asio::ip::address to_asio(const ip_address& a);

} // namespace dhtc::metadata
