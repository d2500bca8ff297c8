// Fuzz target: arbitrary bytes as an info dict. parse_info must never crash; whatever it
// accepts must serialise to JSON without throwing, as well-formed UTF-8, and keep the
// parser's invariants (totals, counts, limits).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/torrent_info.hpp"
#include "metadata/torrent_json.hpp"
#include "util/utf8.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace md = dhtc::metadata;
    const std::string_view raw(reinterpret_cast<const char*>(data), size);
    md::torrent_info info;
    const auto r = md::parse_info(raw, dhtc::id20{}, info);
    if (!r) {
        if (!info.files.empty() || !info.name.empty() || md::to_string(r.code) == "unknown") std::abort();
        return 0;
    }
    std::uint64_t total = 0;
    for (const auto& f : info.files) {
        if (!dhtc::utf8::is_valid(f.path) || f.path.empty()) std::abort();
        total += f.size;
    }
    if (total != info.total_size || total > md::max_safe_integer) std::abort();
    if (info.files.empty() || info.name.empty() || !dhtc::utf8::is_valid(info.name)) std::abort();
    if (info.sha1 != md::sha1(raw) || info.sha256 != md::sha256(raw)) std::abort();
    try {
        const auto line = md::to_json_line(info);
        if (!dhtc::utf8::is_valid(line)) std::abort();
    } catch (...) {
        std::abort(); // only bad_alloc is allowed, and the fuzzer's inputs are far too small for it
    }
    return 0;
}
