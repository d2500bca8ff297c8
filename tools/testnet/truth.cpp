#include "testnet/truth.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "metadata/torrent_json.hpp"

namespace dhtc::testnet {

bool write_truth(const std::string& path, const catalog& torrents, const std::vector<seeder_view>& seeder_views,
                 const std::vector<node_view>& node_views, bool with_first_served, std::string& error) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) {
            error = "cannot write " + tmp;
            return false;
        }
        out << "[\n";
        for (std::size_t i = 0; i < torrents.size(); ++i) {
            const auto& t = torrents.at(i);
            // The parser's form, then our fields, spliced before its closing brace.
            nlohmann::json extra = nlohmann::json::object();
            auto& seeders = extra["seeders"] = nlohmann::json::array();
            for (auto s : t.seeders) seeders.push_back(seeder_views.at(s).endpoint);
            auto& policies = extra["seeder_policies"] = nlohmann::json::array();
            for (auto s : t.seeders) policies.push_back(seeder_views.at(s).policy);
            auto& behaviours = extra["seeder_behaviours"] = nlohmann::json::array();
            for (auto s : t.seeders) behaviours.push_back(seeder_views.at(s).behaviour);
            auto& keys = extra["announce_keys"] = nlohmann::json::array();
            for (const auto& k : t.keys) keys.push_back(k.hex());
            if (torrents.has_holders()) {
                auto& holders = extra["holders"] = nlohmann::json::array();
                auto& shared = extra["holders_shared_ip"] = nlohmann::json::array();
                for (auto n : t.holders) {
                    const auto& v = node_views.at(n);
                    holders.push_back(v.endpoint);
                    if (v.shared_ip) shared.push_back(v.endpoint);
                }
            }
            if (with_first_served) {
                extra["first_served_at"] =
                    t.first_served_at ? nlohmann::json(metadata::to_rfc3339(*t.first_served_at)) : nlohmann::json(nullptr);
            }
            const std::string tail = extra.dump();
            out.write(t.truth.data(), static_cast<std::streamsize>(t.truth.size() - 1));
            out << ',' << std::string_view(tail).substr(1) << (i + 1 < torrents.size() ? ",\n" : "\n");
        }
        out << "]\n";
        out.flush();
        if (!out) {
            error = "write failed: " + tmp;
            return false;
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        error = "rename " + tmp + ": " + ec.message();
        return false;
    }
    return true;
}

} // namespace dhtc::testnet
