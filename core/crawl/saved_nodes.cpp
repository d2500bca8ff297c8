#include "crawl/saved_nodes.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <system_error>
#include <filesystem>

namespace dhtc::crawl {

namespace {

constexpr std::string_view magic = "DHTCRT1\n";
constexpr std::size_t header_size = magic.size() + 8 + 4;
constexpr std::size_t max_state_bytes = header_size + max_saved_nodes * (1 + 20 + 16 + 2);

void put(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::uint64_t get(std::string_view in, std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<std::uint8_t>(in[at + static_cast<std::size_t>(i)]);
    return v;
}

} // namespace

std::string encode(const saved_nodes& s) {
    std::string out(magic);
    const std::size_t n = std::min(s.nodes.size(), max_saved_nodes);
    put(out, static_cast<std::uint64_t>(s.saved_at), 8);
    put(out, n, 4);
    for (std::size_t i = 0; i < n; ++i) {
        const auto& e = s.nodes[i];
        const bool v6 = e.ep.address.is_v6();
        out.push_back(v6 ? '\x06' : '\x04');
        out.append(e.id.view());
        out.append(reinterpret_cast<const char*>(e.ep.address.raw().data()), v6 ? 16 : 4);
        put(out, e.ep.port, 2);
    }
    return out;
}

std::optional<saved_nodes> decode_saved_nodes(std::string_view in) {
    if (in.size() < header_size || in.size() > max_state_bytes || in.substr(0, magic.size()) != magic)
        return std::nullopt;
    saved_nodes s;
    s.saved_at = static_cast<std::int64_t>(get(in, magic.size(), 8));
    const std::uint64_t n = get(in, magic.size() + 8, 4);
    if (n > max_saved_nodes) return std::nullopt;
    std::size_t at = header_size;
    s.nodes.reserve(static_cast<std::size_t>(n));
    for (std::uint64_t i = 0; i < n; ++i) {
        if (at >= in.size()) return std::nullopt;
        const char family = in[at++];
        const std::size_t addr = family == '\x04' ? 4 : family == '\x06' ? 16 : 0;
        if (addr == 0 || in.size() - at < 20 + addr + 2) return std::nullopt;
        krpc::node_entry e;
        std::copy_n(in.data() + at, 20, reinterpret_cast<char*>(e.id.bytes.data()));
        at += 20;
        if (addr == 4) {
            e.ep.address = ip_address::v4(std::array<std::uint8_t, 4>{
                static_cast<std::uint8_t>(in[at]), static_cast<std::uint8_t>(in[at + 1]),
                static_cast<std::uint8_t>(in[at + 2]), static_cast<std::uint8_t>(in[at + 3])});
        } else {
            std::array<std::uint8_t, 16> b;
            std::copy_n(in.data() + at, 16, reinterpret_cast<char*>(b.data()));
            e.ep.address = ip_address::v6(b);
        }
        at += addr;
        e.ep.port = static_cast<std::uint16_t>(get(in, at, 2));
        at += 2;
        s.nodes.push_back(e);
    }
    if (at != in.size()) return std::nullopt;
    return s;
}

std::optional<saved_nodes> read_state_file(const std::string& path, std::string& why) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        why = "no state file " + path;
        return std::nullopt;
    }
    std::string bytes(max_state_bytes + 1, '\0');
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(f.gcount()));
    auto s = decode_saved_nodes(bytes);
    if (!s) why = "state file " + path + " is not a dhtcrawler routing state (ignored)";
    return s;
}

bool write_state_file(const std::string& path, const saved_nodes& s, std::string& why) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        const std::string bytes = encode(s);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        f.flush();
        if (!f) {
            why = "cannot write state file " + tmp;
            return false;
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        why = "cannot replace state file " + path + ": " + ec.message();
        return false;
    }
    return true;
}

} // namespace dhtc::crawl
