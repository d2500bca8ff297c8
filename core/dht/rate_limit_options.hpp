// crawl.rate_limit: every budget of what we send (our queries, our answers, per node, per
// IP). Its own header because the answering node (dht/node) and the crawl actor both spend
// these budgets, and dht/ sits below crawl/.
#pragma once

#include <cstddef>

namespace dhtc::crawl {

struct rate_limit_options {
    double max_find_node_rate_per_sec = 200; ///< all our queries together
    double burst = 40;
    std::size_t max_in_flight = 512;
    unsigned request_timeout_secs = 2;
    double max_new_destinations_per_minute = 10'000;
    double max_replacements_per_minute = 25'000;
    double max_response_rate_per_sec = 500;
    double max_response_bytes_per_sec = 1'048'576;
    double max_response_rate_per_source = 40;
    /// Share of the two answer budgets above kept for sources that answered our queries
    /// within crawl.pool.responsive_ttl_secs: a flood of strangers cannot take it.
    unsigned trusted_response_percent = 20;
    /// Every KRPC datagram to one node (IP and port; queries and answers): libtorrent's
    /// blocker, one per session, ignores an IP for 5 minutes past 5 packets/s over 10 s.
    /// rate x 10 s + burst = 30 in any 10 s; answers first (dht/source_table.hpp).
    double max_packets_per_destination_per_sec = 2;
    double destination_burst = 10;
    /// Every KRPC datagram to one IP, all its nodes together (CGNAT, a seedbox host): 8 nodes'
    /// worth, what one address can draw from us.
    double max_packets_per_ip_per_sec = 16;
    double ip_burst = 80;
    /// IPs whose budgets are tracked, and as many nodes (they cost what is used).
    std::size_t tracked_sources = 16'384;
    unsigned metadata_pressure_floor_percent = 25;
    std::size_t max_in_flight_per_subnet = 8;
};

} // namespace dhtc::crawl
