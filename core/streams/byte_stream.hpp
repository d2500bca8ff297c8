// The byte stream a peer session talks over: TCP (tcp_stream) or uTP (utp_stream). The
// session's code is the same for both; only connecting and the failure names differ.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>

#include "model/events.hpp"
#include "model/address.hpp"

namespace dhtc::metadata {

class byte_stream {
public:
    virtual ~byte_stream() = default;

    /// Connects to `peer` (from `bind` when set); the error when it failed.
    virtual asio::awaitable<std::error_code> connect(endpoint peer, std::optional<ip_address> bind) = 0;
    /// Writes all of `bytes` (which must stay valid until it returns).
    virtual asio::awaitable<std::error_code> write(std::string_view bytes) = 0;
    /// Reads what is available (at least one byte unless it fails).
    virtual asio::awaitable<std::pair<std::size_t, std::error_code>> read_some(asio::mutable_buffer into) = 0;
    /// Drops the connection at once (TCP: an RST; uTP: a RESET) and aborts what waits on
    /// it. Called from the session's executor only (its watchdog, or the end of a try).
    virtual void close() noexcept = 0;

    virtual api::stream_transport transport() const noexcept = 0;
};

} // namespace dhtc::metadata
