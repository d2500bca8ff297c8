// Differential fuzzer of the receive path's fast paths (codec only, no Asio):
//   - the whole input is a packet: whenever krpc::parse_query_fast accepts it, the generic
//     bencode::decode + krpc::parse must accept the same query with every field equal and
//     every view pointing at the same bytes;
//   - the input also supplies the arguments of a reply (transaction, version, requester,
//     token, nodes, nodes6, valid or not): krpc::reply_encoder must give the same result
//     and the same bytes as the generic encode_*_response.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "../support/krpc_equivalence.hpp"

using namespace dhtc;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

// Hands out consecutive slices of the input; lengths come from the input too.
class slicer {
public:
    explicit slicer(std::string_view in) noexcept : in_(in) {}
    std::size_t byte() noexcept {
        if (in_.empty()) return 0;
        const auto b = static_cast<unsigned char>(in_[0]);
        in_.remove_prefix(1);
        return b;
    }
    std::string_view take(std::size_t n) noexcept {
        n = std::min(n, in_.size());
        const auto s = in_.substr(0, n);
        in_.remove_prefix(n);
        return s;
    }

private:
    std::string_view in_;
};

void check_replies(std::string_view in) {
    slicer s(in);
    const std::size_t family = s.byte();
    testing::reply_case c{};
    c.transaction = s.take(s.byte() % 80);
    c.version = s.take(s.byte() % 8);
    c.token = s.take(s.byte() % 80);
    c.nodes = s.take(s.byte() * 2);
    c.nodes6 = s.take(s.byte() * 2);
    const auto id = s.take(id20::size);
    if (id.size() == id20::size) c.id = *id20::from_bytes(id);
    const auto port = static_cast<std::uint16_t>(s.byte() << 8 | s.byte());
    const auto addr = s.take(family & 1 ? 16 : 4);
    std::array<std::uint8_t, 16> raw{};
    for (std::size_t i = 0; i < addr.size(); ++i) raw[i] = static_cast<std::uint8_t>(addr[i]);
    c.requester = family & 1 ? endpoint{ip_address::v6(raw), port}
                             : endpoint{ip_address::v4(std::array<std::uint8_t, 4>{raw[0], raw[1], raw[2], raw[3]}), port};
    check(testing::replies_match(c, family & 2 ? "prefix" : ""));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static testing::differential_scratch scratch;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    check(testing::fast_matches_generic(in, scratch).agrees);
    check_replies(in);
    return 0;
}
