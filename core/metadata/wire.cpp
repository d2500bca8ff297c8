#include "metadata/wire.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "bencode/encoder.hpp"

namespace dhtc::wire {

std::string_view to_string(wire_error e) noexcept {
    switch (e) {
    case wire_error::none: return "none";
    case wire_error::short_handshake: return "short_handshake";
    case wire_error::bad_pstrlen: return "bad_pstrlen";
    case wire_error::bad_protocol: return "bad_protocol";
    case wire_error::info_hash_mismatch: return "info_hash_mismatch";
    case wire_error::own_peer_id: return "own_peer_id";
    case wire_error::no_extension_bit: return "no_extension_bit";
    case wire_error::no_ut_metadata: return "no_ut_metadata";
    case wire_error::ut_metadata_disabled: return "ut_metadata_disabled";
    case wire_error::no_metadata_size: return "no_metadata_size";
    case wire_error::rejected: return "rejected";
    case wire_error::metadata_too_large: return "metadata_too_large";
    case wire_error::message_too_large: return "message_too_large";
    case wire_error::not_extended: return "not_extended";
    case wire_error::short_extended_message: return "short_extended_message";
    case wire_error::bad_ext_handshake: return "bad_ext_handshake";
    case wire_error::bad_ext_m: return "bad_ext_m";
    case wire_error::bad_ut_metadata_id: return "bad_ut_metadata_id";
    case wire_error::bad_metadata_size: return "bad_metadata_size";
    case wire_error::bad_ut_metadata_dict: return "bad_ut_metadata_dict";
    case wire_error::bad_msg_type: return "bad_msg_type";
    case wire_error::bad_piece: return "bad_piece";
    case wire_error::piece_out_of_range: return "piece_out_of_range";
    case wire_error::unrequested_piece: return "unrequested_piece";
    case wire_error::bad_total_size: return "bad_total_size";
    case wire_error::bad_piece_length: return "bad_piece_length";
    case wire_error::missing_data: return "missing_data";
    case wire_error::trailing_bytes: return "trailing_bytes";
    }
    return "unknown";
}

failure_class classify(wire_error e) noexcept {
    switch (e) {
    case wire_error::none: return failure_class::none;
    case wire_error::short_handshake:
    case wire_error::bad_pstrlen:
    case wire_error::bad_protocol:
    case wire_error::info_hash_mismatch:
    case wire_error::own_peer_id: return failure_class::handshake_failed;
    case wire_error::no_extension_bit: return failure_class::no_extension_support;
    case wire_error::no_ut_metadata:
    case wire_error::ut_metadata_disabled:
    case wire_error::no_metadata_size: return failure_class::no_metadata_support;
    case wire_error::rejected: return failure_class::rejected;
    case wire_error::metadata_too_large:
    case wire_error::message_too_large: return failure_class::size_limit;
    case wire_error::not_extended:
    case wire_error::short_extended_message:
    case wire_error::bad_ext_handshake:
    case wire_error::bad_ext_m:
    case wire_error::bad_ut_metadata_id:
    case wire_error::bad_metadata_size:
    case wire_error::bad_ut_metadata_dict:
    case wire_error::bad_msg_type:
    case wire_error::bad_piece:
    case wire_error::piece_out_of_range:
    case wire_error::unrequested_piece:
    case wire_error::bad_total_size:
    case wire_error::bad_piece_length:
    case wire_error::missing_data:
    case wire_error::trailing_bytes: return failure_class::protocol_error;
    }
    return failure_class::protocol_error;
}

std::string_view to_string(frame_status s) noexcept {
    switch (s) {
    case frame_status::need_more: return "need_more";
    case frame_status::message: return "message";
    case frame_status::keep_alive: return "keep_alive";
    case frame_status::too_large: return "too_large";
    }
    return "unknown";
}

namespace {

constexpr std::uint8_t extension_bit = 0x10; // reserved[5]
constexpr std::uint8_t v2_bit = 0x10;        // reserved[7]

std::uint32_t read_be32(const char* p) noexcept {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return std::uint32_t{u[0]} << 24 | std::uint32_t{u[1]} << 16 | std::uint32_t{u[2]} << 8 | std::uint32_t{u[3]};
}

void write_be32(char* p, std::uint32_t v) noexcept {
    p[0] = static_cast<char>(v >> 24);
    p[1] = static_cast<char>(v >> 16);
    p[2] = static_cast<char>(v >> 8);
    p[3] = static_cast<char>(v);
}

// Appends length + 20 + ext_id + whatever `body` writes, then patches the length. Any
// failure (body refuses, allocation, a length over 32 bits) leaves `out` as it was;
// shrinking a string never throws, so the rollback is safe inside the catch.
template <class Body>
bool append_extended(std::string& out, std::uint8_t ext_id, Body&& body) noexcept {
    const std::size_t start = out.size();
    try {
        const char head[6] = {0, 0, 0, 0, static_cast<char>(msg_extended), static_cast<char>(ext_id)};
        out.append(head, sizeof head);
        if (!body(out)) {
            out.resize(start);
            return false;
        }
    } catch (...) {
        out.resize(start);
        return false;
    }
    const std::size_t length = out.size() - start - 4;
    if (length > std::numeric_limits<std::uint32_t>::max()) {
        out.resize(start);
        return false;
    }
    write_be32(out.data() + start, static_cast<std::uint32_t>(length));
    return true;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Structural scan for the end of the first bencoded value. It only has to find the right
// end; bencode::decode then validates exactly that prefix (leading zeros, key types and
// order, integer range), so the scan is deliberately lenient about what decode checks.
bencode::decode_result scan_value_end(std::string_view in, const bencode::limits& lim, std::size_t& end) noexcept {
    using bencode::error;
    if (in.empty()) return {error::empty_input, 0};
    const std::size_t n = in.size();
    std::size_t pos = 0;
    std::size_t depth = 0;
    std::size_t tokens = 0;
    for (;;) {
        if (pos >= lim.max_size) return {error::size_limit_exceeded, lim.max_size};
        if (pos >= n) return {error::unexpected_eof, pos};
        const char c = in[pos];
        if (c == 'e' && depth > 0) {
            --depth;
            ++pos;
        } else {
            if (++tokens > lim.max_tokens) return {error::token_limit_exceeded, pos};
            if (c == 'i') {
                ++pos;
                if (pos < n && in[pos] == '-') ++pos;
                while (pos < n && is_digit(in[pos])) ++pos;
                if (pos >= n) return {error::unexpected_eof, pos};
                if (in[pos] != 'e') return {error::unexpected_byte, pos};
                ++pos;
            } else if (is_digit(c)) {
                const std::size_t start = pos;
                std::size_t length = 0;
                while (pos < n && is_digit(in[pos])) {
                    length = length * 10 + static_cast<std::size_t>(in[pos] - '0');
                    // Bounded by the input size, so the multiplication cannot overflow.
                    if (length > n) return {error::string_length_overflow, start};
                    ++pos;
                }
                if (pos >= n) return {error::unexpected_eof, pos};
                if (in[pos] != ':') return {error::unexpected_byte, pos};
                ++pos;
                if (length > n - pos) return {error::string_past_end, start};
                pos += length;
            } else if (c == 'l' || c == 'd') {
                if (depth >= lim.max_depth) return {error::depth_exceeded, pos};
                ++depth;
                ++pos;
                continue;
            } else {
                return {error::unexpected_byte, pos};
            }
        }
        if (depth == 0) break;
    }
    if (pos > lim.max_size) return {error::size_limit_exceeded, lim.max_size};
    end = pos;
    return {};
}

// The length check shared by check_data() and metadata_buffer::store().
wire_error length_error(std::size_t metadata_size, std::size_t piece, std::size_t got) noexcept {
    const std::size_t want = piece_length(metadata_size, piece);
    if (got == want) return wire_error::none;
    const bool last = piece + 1 == piece_count(metadata_size);
    if (last && got > want) return wire_error::trailing_bytes;
    return wire_error::bad_piece_length;
}

} // namespace

// ---- handshake ---------------------------------------------------------------------------

bool build_handshake(std::string& out, const id20& info_hash, const id20& peer_id) noexcept {
    char h[handshake_size] = {};
    h[0] = static_cast<char>(protocol_string.size());
    std::memcpy(h + 1, protocol_string.data(), protocol_string.size());
    h[20 + 5] = static_cast<char>(extension_bit);
    std::memcpy(h + 28, info_hash.bytes.data(), id20::size);
    std::memcpy(h + 48, peer_id.bytes.data(), id20::size);
    try {
        out.append(h, sizeof h);
    } catch (...) {
        return false; // append gives the strong guarantee: out is unchanged
    }
    return true;
}

wire_error parse_handshake(std::string_view in, handshake& out) noexcept {
    out = {};
    if (in.empty()) return wire_error::short_handshake;
    if (static_cast<unsigned char>(in[0]) != protocol_string.size()) return wire_error::bad_pstrlen;
    const std::size_t have = std::min(in.size() - 1, protocol_string.size());
    if (in.substr(1, have) != protocol_string.substr(0, have)) return wire_error::bad_protocol;
    if (in.size() < handshake_size) return wire_error::short_handshake;
    std::memcpy(out.reserved, in.data() + 20, sizeof out.reserved);
    std::memcpy(out.info_hash.bytes.data(), in.data() + 28, id20::size);
    std::memcpy(out.peer_id.bytes.data(), in.data() + 48, id20::size);
    out.supports_extensions = (out.reserved[5] & extension_bit) != 0;
    out.supports_v2 = (out.reserved[7] & v2_bit) != 0;
    return wire_error::none;
}

wire_error check_handshake(const handshake& h, const id20& info_hash, const id20& our_peer_id) noexcept {
    // Our own id first: a self-connection also echoes the right hash.
    if (h.peer_id == our_peer_id) return wire_error::own_peer_id;
    if (h.info_hash != info_hash) return wire_error::info_hash_mismatch;
    if (!h.supports_extensions) return wire_error::no_extension_bit;
    return wire_error::none;
}

// ---- framing -------------------------------------------------------------------------------

frame_status next_message(std::string_view buffered, std::size_t max_message, message_view& out) noexcept {
    out = {};
    if (buffered.size() < 4) return frame_status::need_more;
    const std::uint32_t length = read_be32(buffered.data());
    out.length = length;
    // Checked before waiting for the body, so a 4 GiB length is refused at once instead of
    // making the caller buffer toward it.
    if (length > max_message) return frame_status::too_large;
    if (length == 0) {
        out.consumed = 4;
        return frame_status::keep_alive;
    }
    if (length > buffered.size() - 4) return frame_status::need_more;
    out.id = static_cast<std::uint8_t>(buffered[4]);
    out.payload = buffered.substr(5, length - 1);
    out.consumed = std::size_t{4} + length;
    return frame_status::message;
}

wire_error parse_extended(const message_view& m, extended_view& out) noexcept {
    out = {};
    if (m.id != msg_extended) return wire_error::not_extended;
    if (m.payload.empty()) return wire_error::short_extended_message;
    out.ext_id = static_cast<std::uint8_t>(m.payload[0]);
    out.payload = m.payload.substr(1);
    return wire_error::none;
}

bool build_extended(std::string& out, std::uint8_t ext_id, std::string_view payload) noexcept {
    return append_extended(out, ext_id, [&](std::string& s) {
        s.append(payload);
        return true;
    });
}

// ---- BEP-10 ----------------------------------------------------------------------------------

bool build_ext_handshake(std::string& out, const ext_handshake_options& opt) noexcept {
    if (opt.ut_metadata_id == 0) return false; // 0 would tell the peer we disabled it
    return append_extended(out, ext_handshake_id, [&](std::string& s) {
        bencode::writer w(s);
        w.begin_dict();
        w.key("m").begin_dict().entry("ut_metadata", std::int64_t{opt.ut_metadata_id}).end();
        if (opt.reqq != 0) w.entry("reqq", std::int64_t{opt.reqq});
        if (!opt.client.empty()) w.entry("v", opt.client);
        w.end();
        return w.complete();
    });
}

wire_error parse_ext_handshake(std::string_view payload, bencode::document& scratch, ext_handshake& out,
                               std::size_t max_metadata_size) noexcept {
    out = {};
    out.decode = bencode::decode(payload, scratch, ext_handshake_limits);
    if (!out.decode) return wire_error::bad_ext_handshake;
    const bencode::value root = scratch.root();
    if (!root.is_dict()) return wire_error::bad_ext_handshake;

    if (auto v = root.find_string("v")) out.client = v.as_string();
    if (auto q = root.find_integer("reqq")) out.reqq = q.as_integer();
    if (auto u = root.find_integer("upload_only")) out.upload_only = u.as_integer() != 0;

    // metadata_size is judged first but reported after the ut_metadata verdict: without a
    // usable ut_metadata id the size does not matter.
    wire_error size_error = wire_error::none;
    const bencode::value ms = root.find("metadata_size");
    if (!ms) {
        size_error = wire_error::no_metadata_size;
    } else if (!ms.is_integer() || ms.as_integer() <= 0) {
        size_error = wire_error::bad_metadata_size;
    } else if (static_cast<std::uint64_t>(ms.as_integer()) > max_metadata_size) {
        size_error = wire_error::metadata_too_large;
    } else {
        out.metadata_size = static_cast<std::size_t>(ms.as_integer());
    }

    const bencode::value m = root.find("m");
    if (!m) return wire_error::no_ut_metadata;
    if (!m.is_dict()) return wire_error::bad_ext_m;
    const bencode::value ut = m.find("ut_metadata");
    if (!ut) return wire_error::no_ut_metadata;
    if (!ut.is_integer() || ut.as_integer() < 0 || ut.as_integer() > 255) return wire_error::bad_ut_metadata_id;
    out.ut_metadata = static_cast<std::uint8_t>(ut.as_integer());
    if (out.ut_metadata == 0) return wire_error::ut_metadata_disabled;
    return size_error;
}

// ---- BEP-9 -----------------------------------------------------------------------------------

namespace {

bool write_ut_dict(std::string& s, std::int64_t msg_type, std::uint32_t piece, const std::size_t* total_size) {
    bencode::writer w(s);
    w.begin_dict().entry("msg_type", msg_type).entry("piece", std::int64_t{piece});
    if (total_size) w.entry("total_size", static_cast<std::int64_t>(*total_size));
    w.end();
    return w.complete();
}

} // namespace

bool build_metadata_request(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece) noexcept {
    if (peer_ut_metadata == 0) return false; // the peer has no ut_metadata: libtorrent disconnects
    return append_extended(out, peer_ut_metadata, [&](std::string& s) { return write_ut_dict(s, 0, piece, nullptr); });
}

bool build_metadata_data(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece, std::size_t total_size,
                         std::string_view data) noexcept {
    if (peer_ut_metadata == 0) return false;
    return append_extended(out, peer_ut_metadata, [&](std::string& s) {
        if (!write_ut_dict(s, 1, piece, &total_size)) return false;
        s.append(data);
        return true;
    });
}

bool build_metadata_reject(std::string& out, std::uint8_t peer_ut_metadata, std::uint32_t piece) noexcept {
    if (peer_ut_metadata == 0) return false;
    return append_extended(out, peer_ut_metadata, [&](std::string& s) { return write_ut_dict(s, 2, piece, nullptr); });
}

bencode::decode_result decode_prefix(std::string_view in, bencode::document& scratch, std::size_t& end,
                                     const bencode::limits& lim) noexcept {
    std::size_t e = 0;
    if (auto r = scan_value_end(in, lim, e); !r) return r;
    if (auto r = bencode::decode(in.substr(0, e), scratch, lim); !r) return r;
    end = e;
    return {};
}

wire_error parse_ut_metadata(std::string_view payload, bencode::document& scratch, ut_metadata_message& out) noexcept {
    out = {};
    std::size_t end = 0;
    out.decode = decode_prefix(payload, scratch, end, ut_metadata_dict_limits);
    if (!out.decode) return wire_error::bad_ut_metadata_dict;
    const bencode::value root = scratch.root();
    if (!root.is_dict()) return wire_error::bad_ut_metadata_dict;

    const bencode::value type = root.find_integer("msg_type");
    if (!type) return wire_error::bad_msg_type;
    out.msg_type = type.as_integer();
    if (out.msg_type < 0 || out.msg_type > 2) {
        out.kind = ut_kind::ignore;
        return wire_error::none;
    }
    out.kind = static_cast<ut_kind>(out.msg_type);

    const bencode::value piece = root.find_integer("piece");
    if (!piece || piece.as_integer() < 0) return wire_error::bad_piece;
    out.piece = piece.as_integer();

    const std::string_view rest = payload.substr(end);
    if (out.kind != ut_kind::data) return rest.empty() ? wire_error::none : wire_error::trailing_bytes;

    // A data message without data is how some clients misspell a reject.
    if (rest.empty()) return wire_error::missing_data;
    const bencode::value total = root.find_integer("total_size");
    if (!total || total.as_integer() <= 0) return wire_error::bad_total_size;
    out.total_size = total.as_integer();
    out.data = rest;
    return wire_error::none;
}

std::size_t piece_count(std::size_t metadata_size) noexcept {
    return metadata_size / metadata_piece_size + (metadata_size % metadata_piece_size != 0 ? 1 : 0);
}

std::size_t piece_length(std::size_t metadata_size, std::size_t piece) noexcept {
    if (piece >= piece_count(metadata_size)) return 0;
    return std::min(metadata_piece_size, metadata_size - piece * metadata_piece_size);
}

wire_error check_data(const ut_metadata_message& m, std::size_t metadata_size, std::int64_t expected_piece) noexcept {
    if (m.kind == ut_kind::reject) return wire_error::rejected;
    if (m.kind != ut_kind::data) return wire_error::bad_msg_type;
    if (m.piece < 0) return wire_error::bad_piece;
    if (static_cast<std::uint64_t>(m.piece) >= piece_count(metadata_size)) return wire_error::piece_out_of_range;
    if (expected_piece != any_piece && m.piece != expected_piece) return wire_error::unrequested_piece;
    if (m.total_size < 0 || static_cast<std::uint64_t>(m.total_size) != metadata_size) return wire_error::bad_total_size;
    return length_error(metadata_size, static_cast<std::size_t>(m.piece), m.data.size());
}

// ---- assembly ----------------------------------------------------------------------------------

wire_error metadata_buffer::reset(std::size_t metadata_size, std::size_t max_metadata_size) noexcept {
    std::string().swap(buf_);
    chunks_.clear();
    present_.clear();
    size_ = 0;
    received_ = 0;
    held_ = 0;
    if (metadata_size == 0) return wire_error::bad_metadata_size;
    if (metadata_size > max_metadata_size) return wire_error::metadata_too_large;
    try {
        const std::size_t n = piece_count(metadata_size);
        chunks_.resize(n);
        present_.assign(n, false);
    } catch (...) {
        chunks_.clear();
        present_.clear();
        return wire_error::metadata_too_large;
    }
    size_ = metadata_size;
    return wire_error::none;
}

std::size_t metadata_buffer::next_missing(std::size_t from) const noexcept {
    for (std::size_t i = from; i < present_.size(); ++i)
        if (!present_[i]) return i;
    return present_.size();
}

wire_error metadata_buffer::store(std::size_t piece, std::string_view data) noexcept {
    if (piece >= present_.size()) return wire_error::piece_out_of_range;
    if (auto e = length_error(size_, piece, data.size()); e != wire_error::none) return e;
    if (present_[piece]) return wire_error::none;
    const bool last = received_ + 1 == present_.size();
    if (last) {
        // Join: the one allocation of the whole size happens only once every byte arrived.
        try {
            buf_.resize(size_);
        } catch (...) {
            return wire_error::metadata_too_large;
        }
        for (std::size_t i = 0; i < chunks_.size(); ++i) {
            const std::size_t len = piece_length(size_, i);
            char* dst = buf_.data() + i * metadata_piece_size;
            if (i == piece) std::memcpy(dst, data.data(), len);
            else std::memcpy(dst, chunks_[i].get(), len);
            chunks_[i].reset();
        }
        std::vector<std::unique_ptr<char[]>>().swap(chunks_);
    } else {
        std::unique_ptr<char[]> copy(new (std::nothrow) char[data.size()]);
        if (!copy) return wire_error::metadata_too_large;
        std::memcpy(copy.get(), data.data(), data.size());
        chunks_[piece] = std::move(copy);
    }
    present_[piece] = true;
    ++received_;
    held_ += data.size();
    return wire_error::none;
}

std::string_view metadata_buffer::bytes() const noexcept { return complete() ? std::string_view(buf_) : std::string_view{}; }

} // namespace dhtc::wire
