// Arbitrary bytes through the peer-wire codec: the handshake parser, the framing reader and
// every message parser, with invariants that must hold whatever the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metadata/wire.hpp"

using namespace dhtc;
using namespace dhtc::wire;

namespace {

// Below the library default so that inputs allocating the assembly buffer stay fast.
constexpr std::size_t fuzz_max_metadata = std::size_t{1} << 20;

void require(bool ok) {
    if (!ok) std::abort();
}

// A ut_metadata message that parsed must survive being rebuilt and parsed again.
void check_ut_round_trip(const ut_metadata_message& m, bencode::document& doc) {
    if (m.kind == ut_kind::ignore || m.piece > 0xFFFFFFFF) return;
    std::string out;
    const auto piece = static_cast<std::uint32_t>(m.piece);
    bool built = false;
    switch (m.kind) {
    case ut_kind::request: built = build_metadata_request(out, 1, piece); break;
    case ut_kind::reject: built = build_metadata_reject(out, 1, piece); break;
    case ut_kind::data: built = build_metadata_data(out, 1, piece, static_cast<std::size_t>(m.total_size), m.data); break;
    case ut_kind::ignore: break;
    }
    require(built);
    message_view mv;
    require(next_message(out, out.size(), mv) == frame_status::message);
    extended_view x;
    require(parse_extended(mv, x) == wire_error::none);
    ut_metadata_message again;
    require(parse_ut_metadata(x.payload, doc, again) == wire_error::none);
    require(again.kind == m.kind && again.piece == m.piece && again.total_size == m.total_size && again.data == m.data);
}

void exercise_payload(std::string_view payload, bencode::document& doc, metadata_buffer& assembly) {
    ext_handshake hs;
    const wire_error he = parse_ext_handshake(payload, doc, hs, fuzz_max_metadata);
    require(!to_string(he).empty());
    if (he == wire_error::none) {
        require(hs.ut_metadata != 0 && hs.metadata_size > 0 && hs.metadata_size <= fuzz_max_metadata);
        require(assembly.reset(hs.metadata_size, fuzz_max_metadata) == wire_error::none);
    }

    ut_metadata_message m;
    const wire_error ue = parse_ut_metadata(payload, doc, m);
    require(classify(ue) != failure_class::none || ue == wire_error::none);
    if (ue != wire_error::none) return;
    require(m.data.size() <= payload.size());
    check_ut_round_trip(m, doc);
    if (m.kind != ut_kind::data) return;
    if (assembly.size() == 0) {
        const auto size = static_cast<std::uint64_t>(m.total_size);
        if (size > fuzz_max_metadata || assembly.reset(static_cast<std::size_t>(size), fuzz_max_metadata) != wire_error::none) return;
    }
    const wire_error ce = check_data(m, assembly.size(), any_piece);
    const wire_error se = assembly.store(static_cast<std::size_t>(m.piece), m.data); // parse made piece >= 0
    if (ce == wire_error::none) require(se == wire_error::none);
    if (se == wire_error::none) require(ce == wire_error::none || ce == wire_error::bad_total_size);
    if (assembly.complete()) require(assembly.bytes().size() == assembly.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    bencode::document doc;
    metadata_buffer assembly;

    handshake h;
    if (parse_handshake(in, h) == wire_error::none) {
        require(in.size() >= handshake_size);
        (void)check_handshake(h, h.info_hash, id20{});
    }

    // The prefix finder agrees with a whole-input decode.
    std::size_t end = 0;
    const bencode::limits lim{8, 256, 4096};
    if (decode_prefix(in, doc, end, lim)) {
        require(end <= in.size() && doc.root().raw() == in.substr(0, end));
    }
    if (bencode::decode(in, doc, lim)) {
        require(decode_prefix(in, doc, end, lim) && end == in.size());
    }

    // Raw payloads straight into the message parsers.
    exercise_payload(in, doc, assembly);

    // The same bytes as a message stream, with a tight and a loose size cap.
    for (std::size_t cap : {std::size_t{17 * 1024}, default_max_message}) {
        std::string_view rest = in;
        for (;;) {
            message_view m;
            const frame_status s = next_message(rest, cap, m);
            if (s == frame_status::need_more || s == frame_status::too_large) break;
            require(m.consumed >= 4 && m.consumed <= rest.size());
            rest.remove_prefix(m.consumed);
            if (s == frame_status::keep_alive) continue;
            extended_view x;
            if (parse_extended(m, x) != wire_error::none) continue;
            exercise_payload(x.payload, doc, assembly);
        }
    }
    return 0;
}
