// Fuzzes the bencode decoder, then checks what it accepted: walking every value stays in
// bounds, and a canonical re-encoding decodes again to the same tree.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bencode/decoder.hpp"
#include "bencode/encoder.hpp"

using namespace dhtc::bencode;

namespace {
std::size_t walk(const value& v, int depth) {
    std::size_t n = 1;
    if (depth > 64) std::abort(); // deeper than the limit allows
    for (auto e : v) {
        n += walk(e.val, depth + 1) + (v.is_dict() ? 1 : 0); // a dict entry's key is a token too
    }
    (void)v.raw();
    (void)v.as_string();
    return n;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static document doc;
    limits lim;
    lim.max_depth = 32;
    lim.max_tokens = 4096;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (!decode(in, doc, lim)) return 0;
    if (doc.root().raw() != in) std::abort();
    if (walk(doc.root(), 0) != doc.token_count()) std::abort();

    const entry tree = entry::from(doc.root());
    const std::string canonical = tree.encode();
    document again;
    if (!decode(std::string_view(canonical), again, lim)) std::abort();
    if (again.unsorted_dicts() != 0) std::abort();
    if (!(entry::from(again.root()) == tree)) std::abort();
    return 0;
}
