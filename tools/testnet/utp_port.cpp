#include "testnet/utp_port.hpp"

#include <asio/error.hpp>
#include <asio/post.hpp>

#include "testnet/network.hpp"
#include "utp/packet.hpp"

namespace dhtc::testnet {

bool looks_like_utp(std::string_view bytes) noexcept {
    return bytes.size() >= utp::header_size && bytes[0] != 'd' &&
           (static_cast<std::uint8_t>(bytes[0]) & 0x0f) == utp::protocol_version;
}

utp_port::utp_port(asio::io_context& io, network& net, std::uint32_t ip, const utp::multiplexer_config& cfg,
                   incoming_handler on_incoming)
    : io_(io), net_(net), ip_(ip), mux_(*this, clock_, cfg), on_incoming_(std::move(on_incoming)), wakeups_(io.get_executor()) {}

void utp_port::on_datagram(std::uint32_t from_ip, std::uint16_t from_port, std::string_view bytes) {
    if (shut_) return;
    const utp::connection* c = mux_.on_datagram(endpoint{ip_address::v4(from_ip), from_port}, bytes);
    if (c && (touched_.empty() || touched_.back() != c)) touched_.push_back(c);
    // The hub delivers a batch at a time: acks and wake-ups once, after it.
    if (!batch_posted_) {
        batch_posted_ = true;
        asio::post(io_, [self = shared_from_this()] {
            self->batch_posted_ = false;
            self->after_batch();
        });
    }
}

void utp_port::after_batch() {
    if (shut_) return;
    mux_.flush();
    for (const auto* c : touched_) wakeups_.wake(c);
    touched_.clear();
    while (auto c = mux_.take_incoming()) on_incoming_(std::move(c));
    wakeups_.arm(mux_, shared_from_this());
}

void utp_port::shutdown() noexcept {
    shut_ = true;
    wakeups_.shutdown();
}

std::shared_ptr<utp::connection> utp_port::connect(const endpoint&, std::error_code& ec) {
    ec = asio::error::operation_not_supported;
    return nullptr;
}

void utp_port::watch(const utp::connection* c, asio::steady_timer* wake) { wakeups_.watch(c, wake); }

void utp_port::unwatch(const utp::connection* c) noexcept { wakeups_.unwatch(c); }

void utp_port::poke() {
    if (shut_) return;
    mux_.flush();
    wakeups_.arm(mux_, shared_from_this());
}

bool utp_port::send(const endpoint& to, std::string_view payload) {
    if (!to.address.is_v4()) return false;
    net_.send_datagram(ip_, to.address.to_v4_uint(), to.port, payload);
    return true;
}

} // namespace dhtc::testnet
