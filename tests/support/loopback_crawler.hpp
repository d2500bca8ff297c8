// The crawler options every loopback test starts from.
#pragma once

#include <optional>

#include "api/crawler.hpp"
#include "model/address.hpp"

namespace dhtc::test {

/// Any port on 127.0.0.1 for the DHT and for metadata connections, loopback peers allowed,
/// and bootstrap from `bootstrap` only: never the real DHT (no bootstrap when empty).
/// Peer sessions are plaintext over TCP, what the tests' own fake peers speak (the default,
/// uTP first with MSE, would wait out a silent SYN and an MSE close before every fetch);
/// tests of the other policies, and of the defaults, set their own.
inline api::crawler_options loopback_crawler(const std::optional<endpoint>& bootstrap = std::nullopt) {
    api::crawler_options o;
    o.dht.port = 0;
    o.dht.bind_v4 = "127.0.0.1";
    o.dht.crawl.allow_private_addresses = true;
    o.dht.crawl.bootstrap.sources.clear();
    if (bootstrap) o.dht.crawl.bootstrap.sources = {bootstrap->to_string()};
    o.metadata.bind_v4 = ip_address::parse("127.0.0.1");
    o.metadata.encryption = metadata::encryption_policy::prefer_plaintext;
    o.metadata.transports = metadata::transport_policy::tcp;
    return o;
}

} // namespace dhtc::test
