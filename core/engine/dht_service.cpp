#include "engine/dht_service.hpp"

namespace dhtc::engine {

namespace {
crawl::source_table_options source_options(const crawl::crawl_options& o, std::uint64_t seed) {
    crawl::source_table_options s;
    s.answer_rate = o.rate_limit.max_response_rate_per_source;
    s.node_rate = o.rate_limit.max_packets_per_destination_per_sec;
    s.node_burst = o.rate_limit.destination_burst;
    s.ip_rate = o.rate_limit.max_packets_per_ip_per_sec;
    s.ip_burst = o.rate_limit.ip_burst;
    s.capacity = o.rate_limit.tracked_sources;
    s.trust_ttl = std::chrono::seconds(o.pool.responsive_ttl_secs);
    s.hash_seed = seed ^ 0x736f75726365;
    return s;
}
} // namespace

dht_service::dht_service(const crawl::crawl_options& o, const clock& c, transport& out, const address_policy& policy,
                         crawl::crawl_sink& sink, const id20& own_id, std::string_view version, std::uint64_t seed)
    : sources_(source_options(o, seed)), actor_(o, c, out, policy, sink, sources_, own_id, seed), router_(sink, actor_, sources_, c, policy, o.announce_observations_per_sec), tokens_(c, seed ^ 0x746f6b656e),
      samples_(o.bep51.store_capacity, 20, std::chrono::seconds(o.bep51.answer_interval_secs), seed ^ 0x73616d70),
      responder_(own_id, version, tokens_, samples_, actor_.close_nodes(), router_, c), budget_(c, o.rate_limit, sources_),
      node_(responder_, budget_, out, actor_, crawl::transaction_table::id_size) {}

} // namespace dhtc::engine
