#include "metadata/torrent_json.hpp"

#include <cstdio>

namespace dhtc::metadata {

namespace {

std::string dump_line(const nlohmann::json& j) {
    // Strings are repaired UTF-8 already; replace mode is the second line of defence,
    // so a future field holding raw bytes still cannot make dump() throw.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

nlohmann::json to_json(const torrent_info& info) {
    nlohmann::json j = nlohmann::json::object();
    j["schema"] = torrent_json_schema;
    j["info_hash"] = info.info_hash.hex();
    j["info_hash_v1"] = info.has_v1() ? nlohmann::json(to_id20(info.sha1).hex()) : nlohmann::json(nullptr);
    j["info_hash_v2"] = info.has_v2()
        ? nlohmann::json(to_hex(std::string_view(reinterpret_cast<const char*>(info.sha256.data()), info.sha256.size())))
        : nlohmann::json(nullptr);
    j["name"] = info.name;
    j["version"] = std::string(to_string(info.version));
    j["total_size"] = info.total_size;
    j["num_files"] = info.num_files();
    j["piece_length"] = info.piece_length;
    j["private"] = info.is_private;
    nlohmann::json files = nlohmann::json::array();
    files.get_ref<nlohmann::json::array_t&>().reserve(info.files.size());
    for (const auto& f : info.files) files.push_back({{"path", f.path}, {"size", f.size}});
    j["files"] = std::move(files);
    return j;
}

nlohmann::json to_json(const torrent_info& info, const delivery_details& details) {
    nlohmann::json j = to_json(info);
    if (details.peer) j["peer"] = details.peer->to_string();
    if (details.discovered_at) j["discovered_at"] = to_rfc3339(*details.discovered_at);
    if (details.encryption) j["encryption"] = std::string(*details.encryption);
    if (details.transport) j["transport"] = std::string(*details.transport);
    return j;
}

nlohmann::json to_json(const torrent_info& info, const endpoint& peer,
                       std::chrono::system_clock::time_point discovered_at) {
    return to_json(info, delivery_details{peer, discovered_at, std::nullopt, std::nullopt});
}

std::string to_json_line(const torrent_info& info) { return dump_line(to_json(info)); }

std::string to_json_line(const torrent_info& info, const delivery_details& details) {
    return dump_line(to_json(info, details));
}

std::string to_json_line(const torrent_info& info, const endpoint& peer,
                         std::chrono::system_clock::time_point discovered_at) {
    return dump_line(to_json(info, peer, discovered_at));
}

std::string to_rfc3339(std::chrono::system_clock::time_point t) {
    using namespace std::chrono;
    // floor, not duration_cast: a time before 1970 must round down to its own second.
    const auto secs = floor<seconds>(t);
    const auto days = floor<std::chrono::days>(secs);
    const year_month_day ymd{days};
    const hh_mm_ss<seconds> hms{secs - days};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()));
    return buf;
}

} // namespace dhtc::metadata
