#include "engine/dht_service.hpp"

namespace dhtc::engine {

dht_service::dht_service(const crawl::crawl_options& o, const clock& c, transport& out, const address_policy& policy,
                         crawl::crawl_sink& sink, const id20& own_id, std::string_view version, std::uint64_t seed)
    : actor_(o, c, out, policy, sink, own_id, seed), router_(sink, actor_, c, policy), tokens_(c, seed ^ 0x746f6b656e),
      samples_(o.bep51.store_capacity, 20, std::chrono::seconds(o.bep51.answer_interval_secs), seed ^ 0x73616d70),
      responder_(own_id, version, tokens_, samples_, actor_.close_nodes(), router_, c), budget_(c, o.rate_limit),
      node_(responder_, budget_, out, actor_.replies(), crawl::transaction_table::id_size) {}

} // namespace dhtc::engine
