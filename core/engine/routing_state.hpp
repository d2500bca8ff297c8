// The routing-state policy, in one place: the nodes a crawler knew are loaded at create
// (queried before any bootstrap source), handed back by the engine every few minutes and at
// stop, and never replaced by an empty list; a state that is not ours is ignored with one
// error line. They live in the retry store when the crawler has one, else in
// crawl.state_file, else nowhere.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dhtc::engine {

class dht_engine;

/// A store of saved routing states (the retry store's table, which crawlers of a fleet share).
struct routing_state_store {
    std::vector<std::string> saved;        ///< the states saved so far, encoded (crawl::encode)
    std::string load_error;                ///< why they could not be read, if they could not
    std::function<void(std::string)> save; ///< replaces this crawler's state; must not block
};

/// Seeds `dht` with the saved state and has it save the state it learns: to `store` when
/// there is one, else to `state_file` (when not empty). `error` gets one line per problem.
void keep_routing_state(dht_engine& dht, const routing_state_store* store, const std::string& state_file,
                        const std::function<void(std::string)>& error);

} // namespace dhtc::engine
