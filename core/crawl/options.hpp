// Every option of the DHT side: the seed's crawl.* tables with their defaults, plus ours
// (address policy, BEP-51 sampling). The C ABI's JSON options map onto these structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dht/rate_limit_options.hpp"

namespace dhtc::crawl {

struct pool_options {
    std::size_t capacity = 100'000;
    unsigned recent_probe_ttl_secs = 600;
    std::size_t responsive_capacity = 16'384;
    unsigned responsive_ttl_secs = 900;
    std::size_t low_watermark = 10'000;
    /// Nodes learned only from their queries to us may hold at most this share of the pool,
    /// and enter it at most this fast (and one per /24 or /64 per turn): a flood of queriers
    /// cannot fill the pool.
    unsigned max_querier_percent = 10;
    double max_querier_admissions_per_sec = 50;
    /// While fewer nodes than this have answered us (the responsive ring, which is all our
    /// answers may offer), an admitted querier is pinged at once instead of waiting its turn
    /// in the pool, so a fresh or small network fills our answers quickly. 0 never pings.
    std::size_t thin_table_nodes = 64;
};

struct bootstrap_options {
    unsigned interval_secs = 300;
    std::size_t max_nodes_per_round = 3;
    unsigned source_backoff_base_secs = 300;
    unsigned source_backoff_max_secs = 3600;
    /// "host:port" (a name or an address; IPv6 as "[addr]:port").
    std::vector<std::string> sources = {"router.bittorrent.com:6881", "dht.transmissionbt.com:6881",
                                        "router.utorrent.com:6881", "dht.aelitis.com:6881"};
};

struct target_options {
    unsigned random_walk_percent = 70;
    unsigned sparse_bucket_percent = 30;
    bool neighbor_sender_id = true;
};

struct scheduler_options {
    std::size_t priority_event_channel_capacity = 8192;   ///< replies to our queries
    std::size_t discovery_event_channel_capacity = 16384; ///< nodes that queried us
    std::size_t event_batch_limit = 256;                  ///< events handled per actor turn and channel
    std::size_t node_batch_limit = 4096;                  ///< pool pops per actor turn at most
    std::size_t routing_snapshot_size = 4096;
    unsigned snapshot_refresh_millis = 1000;
};

/// BEP-51 sampling and the get_peers lookups that find peers for sampled hashes.
struct bep51_options {
    bool enabled = true;
    double max_sample_rate_per_sec = 50;      ///< sample_infohashes queries, drawn from the query budget
    unsigned min_interval_secs = 60;          ///< floor under a node's advertised interval
    double max_lookup_rate_per_sec = 50;      ///< get_peers lookups started per second (most cost one query)
    std::size_t max_concurrent_lookups = 16;
    std::size_t lookup_queue_capacity = 1024; ///< sampled hashes waiting for a lookup
    std::size_t queries_per_lookup = 12;      ///< get_peers queries one lookup may send
    /// One dropped datagram must not cost a torrent (issue 32): the queries a hash's discovery
    /// hangs on are sent again when unanswered within crawl.rate_limit.request_timeout_secs.
    /// Crawl-frontier find_node stays send-once (the pool has plenty of others to ask).
    unsigned sample_retries = 1; ///< more sample_infohashes to a node whose sample timed out
    unsigned holder_retries = 1; ///< more get_peers to a hash's holder (a node that sampled it)
    /// A lookup that found no peer and got no answer at all (every query timed out) runs again
    /// after lookup_retry_secs, then 4 times as long, up to lookup_retries times: minutes, not
    /// the retry ladder's first step. 0 retries: never.
    unsigned lookup_retries = 2;
    unsigned lookup_retry_secs = 60;
    std::size_t store_capacity = 4096;        ///< announced hashes kept for our own answers
    unsigned answer_interval_secs = 300;      ///< `interval` we advertise
};

/// BEP-33 scrapes the application asks for (crawl/scrapes.hpp).
struct scrape_options {
    std::size_t max_concurrent = 4;      ///< scrapes running at once
    std::size_t queue_capacity = 4096;   ///< requests waiting for a slot
    std::size_t queries_per_scrape = 24; ///< get_peers sent per scrape, at most
    /// A scrape ends this long after it was requested, whatever it has: one that had no node
    /// to ask, or whose nodes never answered, ends with zero responders.
    unsigned timeout_secs = 30;
};

struct crawl_options {
    rate_limit_options rate_limit;
    pool_options pool;
    bootstrap_options bootstrap;
    target_options target;
    scheduler_options scheduler;
    bep51_options bep51;
    scrape_options scrape;
    /// Admit private and loopback ranges (labs and tests); off for the real DHT.
    bool allow_private_addresses = false;
    /// Announces reported to the application as observations (kind announce), per second
    /// (burst: one second's worth); the rest are counted and not reported. 0: none. Every
    /// announce still reaches the metadata side.
    double announce_observations_per_sec = 100;
    /// Where the routing state is kept across restarts when there is no retry store (with
    /// one, it lives there). Empty: not kept.
    std::string state_file;
};

} // namespace dhtc::crawl
