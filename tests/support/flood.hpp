// A UDP flood and a friendly node, on loopback, for the flood test and the flood benchmark.
//
// udp_flooder sends datagrams to one target from many loopback source addresses (one
// wildcard socket, the source chosen per datagram with IP_PKTINFO, as tools/testnet does),
// or from one address and many source ports:
// a mix of valid queries, garbage, absurd string lengths, deep nesting and 64 KiB
// datagrams, at a set rate. It counts what it sent and what came back.
//
// friend_node is a well-behaved DHT node on its own address: it answers the crawler's
// queries (so it lands in the crawler's responsive ring), names a few silent nodes in every
// answer (so the crawler's pool fills from answers, as on the real DHT), and pings the
// crawler once a second, counting the answers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::test {

struct flood_options {
    endpoint target;
    std::uint32_t first_source = 0x7f010000u; ///< 127.1.0.0: sources are first_source + i
    std::size_t sources = 50'000;
    double rate_per_sec = 5'000;
    std::size_t datagrams = 100'000;          ///< then it stops
    /// When set, every datagram comes from first_source alone, from a source port rotating
    /// over this many (1024 and up): one address flooding through a NAT's ports. Answers are
    /// then not counted (each port's socket closes once its datagram is out).
    std::size_t source_ports = 0;
    /// Percent of the mix: the rest are valid ping/find_node/get_peers queries.
    unsigned garbage_percent = 10, huge_length_percent = 5, deep_nesting_percent = 5, jumbo_percent = 2;
    std::uint64_t seed = 1;
};

struct flood_counters {
    std::atomic<std::uint64_t> sent{0};
    std::atomic<std::uint64_t> sent_bytes{0};
    std::atomic<std::uint64_t> received{0};       ///< datagrams the target sent back to any source
    std::atomic<std::uint64_t> received_bytes{0};
    std::atomic<std::uint64_t> send_errors{0};
};

class udp_flooder {
public:
    explicit udp_flooder(flood_options o);
    ~udp_flooder(); ///< stops and joins
    udp_flooder(const udp_flooder&) = delete;
    udp_flooder& operator=(const udp_flooder&) = delete;

    void start();
    /// Waits until every datagram was sent (or stop()).
    void join();
    void stop() noexcept { stop_ = true; }
    const flood_counters& counters() const noexcept { return counters_; }
    /// CPU seconds the flooder's own thread used (to tell it apart from the target's).
    double cpu_seconds() const noexcept { return cpu_seconds_.load(); }

private:
    void run();

    flood_options options_;
    int fd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    flood_counters counters_;
    std::atomic<double> cpu_seconds_{0};
};

class friend_node {
public:
    /// Binds UDP on `address` (port chosen by the OS).
    explicit friend_node(const ip_address& address, std::uint64_t seed = 2);
    ~friend_node();
    friend_node(const friend_node&) = delete;
    friend_node& operator=(const friend_node&) = delete;

    endpoint local() const noexcept { return local_; }
    /// Starts answering; pings `crawler` once a second while pinging() is on.
    void start(const endpoint& crawler);
    void set_pinging(bool on) noexcept { pinging_ = on; }
    void stop() noexcept;

    std::uint64_t queries_from_crawler() const noexcept { return queries_.load(); }
    std::uint64_t pings_sent() const noexcept { return pings_sent_.load(); }
    std::uint64_t pings_answered() const noexcept { return pings_answered_.load(); }

private:
    void run();

    int fd_ = -1;
    endpoint local_;
    endpoint crawler_;
    id20 id_;
    std::uint64_t seed_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> pinging_{false};
    std::atomic<std::uint64_t> queries_{0};
    std::atomic<std::uint64_t> pings_sent_{0};
    std::atomic<std::uint64_t> pings_answered_{0};
};

} // namespace dhtc::test
