// The one thing protocol code needs from the network: send a datagram. The engine backs it
// with UDP sockets; tests and simulations back it with in-memory delivery.
#pragma once

#include <string_view>

#include "model/address.hpp"

namespace dhtc {

class transport {
public:
    virtual ~transport() = default;
    /// Queues `payload` for `to`. False when it was dropped (queue full, wrong family...).
    virtual bool send(const endpoint& to, std::string_view payload) = 0;
};

} // namespace dhtc
