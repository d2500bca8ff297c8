// The DHT side on real sockets: binds UDP (IPv4, IPv6 or both) when created, then runs the
// dht_service on its own network thread, with an actor turn every few milliseconds and
// bootstrap names resolved in the background.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "crawl/events.hpp"
#include "crawl/options.hpp"
#include "engine/dht_service.hpp"
#include "net/udp_socket.hpp"

namespace dhtc::engine {

enum class netmode : std::uint8_t { ipv4, ipv6, dual };

struct dht_engine_options {
    crawl::crawl_options crawl;
    std::uint16_t port = 6881; ///< 0: any free port (the bound ports are in local_endpoints())
    netmode mode = netmode::ipv4;
    std::string bind_v4 = "0.0.0.0";
    std::string bind_v6 = "::";
    std::optional<id20> node_id; ///< default: random
    std::optional<std::uint64_t> seed; ///< default: from std::random_device (tests fix it)
};

class dht_engine {
public:
    /// Binds the sockets. On failure returns nullptr with `error` saying what failed.
    static std::unique_ptr<dht_engine> create(const dht_engine_options& o, crawl::crawl_sink& sink,
                                              std::string& error);
    ~dht_engine();

    /// Nodes an earlier run saved: queried before any bootstrap source. Before start().
    void seed_saved_nodes(const std::vector<krpc::node_entry>& nodes);
    /// Where the routing state to keep goes: every routing_save_interval and once more when
    /// stop() begins, on the network thread (keep it short: hand it on). Before start().
    void on_routing_state(std::function<void(std::vector<krpc::node_entry>)> sink);
    static constexpr std::chrono::minutes routing_save_interval{5};

    /// Starts the network thread. Once only.
    void start();
    /// Stops the network thread and closes the sockets; thread-safe and idempotent. Nothing
    /// of the engine runs after it returns.
    void stop();

    /// Asks for a get_peers lookup of `info_hash` (any thread); false when the queue is full.
    bool request_lookup(const id20& info_hash);
    /// Asks for a BEP-33 scrape of `info_hash` (any thread); false when the queue is full.
    /// The answer reaches the crawl sink's on_scrape().
    bool request_scrape(const id20& info_hash);

    std::vector<endpoint> local_endpoints() const;
    const id20& node_id() const noexcept;
    /// Counters; any thread.
    const dht_service& service() const noexcept;
    const net::udp_counters* udp_counters(bool v6) const noexcept;

private:
    struct impl;
    explicit dht_engine(std::unique_ptr<impl> p);
    std::unique_ptr<impl> impl_;
};

} // namespace dhtc::engine
