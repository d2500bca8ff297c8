#include "streams/tcp_stream.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace dhtc::metadata {

using asio::ip::tcp;

asio::ip::address to_asio(const ip_address& a) {
    if (a.is_v6()) {
        asio::ip::address_v6::bytes_type b;
        std::memcpy(b.data(), a.raw().data(), 16);
        return asio::ip::address_v6(b);
    }
    return asio::ip::address_v4(a.to_v4_uint());
}

asio::awaitable<std::error_code> tcp_stream::connect(endpoint peer, std::optional<ip_address> bind) {
    std::error_code ec;
    const tcp::endpoint ep(to_asio(peer.address), peer.port);
    socket_.open(ep.protocol(), ec);
    if (!ec && bind) {
        // Without this, bind() takes a local port for the address alone, and closed
        // connections keep theirs in TIME_WAIT for a minute: at hundreds of fetches a
        // second the ephemeral range runs dry. With it the port is picked at connect(),
        // unique only per destination.
        const int one = 1;
        ::setsockopt(socket_.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        socket_.bind(tcp::endpoint(to_asio(*bind), 0), ec);
    }
    if (ec) co_return ec;
    co_await socket_.async_connect(ep, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return ec;
    std::error_code ignored;
    // Requests are tiny and each waits for the previous piece: Nagle would hold them.
    socket_.set_option(tcp::no_delay(true), ignored);
    co_return ec;
}

asio::awaitable<std::error_code> tcp_stream::write(std::string_view bytes) {
    std::error_code ec;
    co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()),
                               asio::redirect_error(asio::use_awaitable, ec));
    co_return ec;
}

asio::awaitable<std::pair<std::size_t, std::error_code>> tcp_stream::read_some(asio::mutable_buffer into) {
    std::error_code ec;
    const std::size_t n = co_await socket_.async_read_some(into, asio::redirect_error(asio::use_awaitable, ec));
    co_return std::pair{n, ec};
}

void tcp_stream::close() noexcept {
    std::error_code ignored;
    // An abortive close (RST): the session is over either way, and a crawler closing
    // hundreds of connections a second would otherwise keep each local port in TIME_WAIT
    // for a minute, which makes every later connect() search longer for a free port.
    if (socket_.is_open()) socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    socket_.close(ignored);
}

} // namespace dhtc::metadata
