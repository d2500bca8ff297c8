// What the DHT side hands to the rest of the library: captured (info hash, peer) pairs for
// the metadata pipeline, and observed hashes for applications that subscribe to them.
#pragma once

#include <cstdint>
#include <string_view>

#include "net/address.hpp"
#include "net/clock.hpp"
#include "util/id20.hpp"

namespace dhtc::crawl {

enum class hash_source : std::uint8_t {
    announce,    ///< an announce_peer to us with a valid token: the peer holds the torrent
    sample,      ///< a BEP-51 sample whose get_peers lookup found this peer
    get_peers,   ///< someone looked the hash up (observation only; no peer)
    bep51_sample ///< a hash in a sample_infohashes reply (observation only; no peer)
};
std::string_view to_string(hash_source s) noexcept;

/// A hash with a peer that should have its metadata: the input of the metadata pipeline.
struct hash_event {
    id20 info_hash;
    endpoint peer;   ///< where to fetch from
    endpoint source; ///< the DHT node that told us
    hash_source kind = hash_source::announce;
    time_point at{};
};

/// A hash seen without a peer to fetch from.
struct observation {
    id20 info_hash;
    endpoint source;
    hash_source kind = hash_source::get_peers;
    time_point at{};
};

/// Where the crawl side delivers events. Called on the network thread: implementations push
/// onto bounded queues and never block.
class crawl_sink {
public:
    virtual ~crawl_sink() = default;
    virtual void on_hash(const hash_event& e) = 0;
    virtual void on_observation(const observation& o) = 0;
    /// 0.0 (idle) .. 1.0 (full): how deep the metadata pipeline's queue is, for the
    /// query-rate feedback.
    virtual double metadata_pressure() const = 0;
};

/// A sink that keeps nothing: for the DHT side on its own (benchmarks, engine tests).
class null_sink final : public crawl_sink {
public:
    void on_hash(const hash_event&) override {}
    void on_observation(const observation&) override {}
    double metadata_pressure() const override { return 0.0; }
};

inline std::string_view to_string(hash_source s) noexcept {
    switch (s) {
    case hash_source::announce: return "announce";
    case hash_source::sample: return "sample";
    case hash_source::get_peers: return "get_peers";
    case hash_source::bep51_sample: return "bep51_sample";
    }
    return "unknown";
}

} // namespace dhtc::crawl
