#include "engine/routing_state.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>

#include "crawl/saved_nodes.hpp"
#include "engine/dht_engine.hpp"

namespace dhtc::engine {

namespace {

std::int64_t unix_now() noexcept {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

void keep_routing_state(dht_engine& dht, const routing_state_store* store, const std::string& state_file,
                        const std::function<void(std::string)>& error) {
    std::vector<krpc::node_entry> saved;
    const auto add = [&](const crawl::saved_nodes& s) {
        for (const auto& n : s.nodes)
            if (saved.size() < crawl::max_saved_nodes) saved.push_back(n);
    };
    if (store) {
        if (!store->load_error.empty()) error(store->load_error);
        for (const auto& bytes : store->saved) {
            if (const auto s = crawl::decode_saved_nodes(bytes)) add(*s);
            else error("a saved DHT routing state in the retry store is not ours or damaged (ignored)");
        }
        dht.on_routing_state([save = store->save](std::vector<krpc::node_entry> nodes) {
            if (nodes.empty()) return; // never replace a good state with an empty one
            save(crawl::encode({unix_now(), std::move(nodes)}));
        });
    } else if (!state_file.empty()) {
        std::string why;
        if (const auto s = crawl::read_state_file(state_file, why)) add(*s);
        else if (std::filesystem::exists(state_file)) error(why);
        // A 40 KB write every 5 minutes and at stop, on the network thread.
        dht.on_routing_state([state_file, error](std::vector<krpc::node_entry> nodes) {
            std::string why;
            if (nodes.empty()) return; // never replace a good state with an empty one
            if (!crawl::write_state_file(state_file, {unix_now(), std::move(nodes)}, why)) error(why);
        });
    }
    dht.seed_saved_nodes(saved);
}

} // namespace dhtc::engine
