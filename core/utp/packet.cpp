#include "utp/packet.hpp"

namespace dhtc::utp {

namespace {

std::uint16_t read16(const unsigned char* p) noexcept { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

std::uint32_t read32(const unsigned char* p) noexcept {
    return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
           static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}

void put16(std::string& out, std::uint16_t v) {
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v));
}

void put32(std::string& out, std::uint32_t v) {
    put16(out, static_cast<std::uint16_t>(v >> 16));
    put16(out, static_cast<std::uint16_t>(v));
}

} // namespace

std::string_view to_string(packet_type t) noexcept {
    switch (t) {
    case packet_type::data: return "data";
    case packet_type::fin: return "fin";
    case packet_type::state: return "state";
    case packet_type::reset: return "reset";
    case packet_type::syn: return "syn";
    }
    return "data";
}

std::string_view to_string(parse_error e) noexcept {
    switch (e) {
    case parse_error::none: return "none";
    case parse_error::too_short: return "too_short";
    case parse_error::bad_version: return "bad_version";
    case parse_error::bad_type: return "bad_type";
    case parse_error::truncated_extension: return "truncated_extension";
    case parse_error::bad_sack_length: return "bad_sack_length";
    case parse_error::too_many_extensions: return "too_many_extensions";
    case parse_error::payload_not_allowed: return "payload_not_allowed";
    }
    return "none";
}

parse_error parse_packet(std::string_view datagram, packet_view& out) noexcept {
    if (datagram.size() < header_size) return parse_error::too_short;
    const auto* p = reinterpret_cast<const unsigned char*>(datagram.data());
    if ((p[0] & 0x0f) != protocol_version) return parse_error::bad_version;
    const unsigned type = p[0] >> 4;
    if (type > static_cast<unsigned>(packet_type::syn)) return parse_error::bad_type;
    out.h.type = static_cast<packet_type>(type);
    out.h.connection_id = read16(p + 2);
    out.h.timestamp_us = read32(p + 4);
    out.h.timestamp_diff_us = read32(p + 8);
    out.h.wnd_size = read32(p + 12);
    out.h.seq_nr = read16(p + 16);
    out.h.ack_nr = read16(p + 18);
    out.sack = {};

    std::size_t pos = header_size;
    std::uint8_t next = p[1];
    for (std::size_t count = 0; next != extension_none; ++count) {
        if (count == max_extensions) return parse_error::too_many_extensions;
        if (datagram.size() - pos < 2) return parse_error::truncated_extension;
        const std::uint8_t type_here = next;
        next = p[pos];
        const std::size_t len = p[pos + 1];
        pos += 2;
        if (datagram.size() - pos < len) return parse_error::truncated_extension;
        if (type_here == extension_selective_ack) {
            if (len == 0 || len % 4 != 0) return parse_error::bad_sack_length;
            out.sack = datagram.substr(pos, len < max_sack_bytes ? len : max_sack_bytes);
        }
        pos += len;
    }
    out.payload = datagram.substr(pos);
    if (!out.payload.empty() && out.h.type != packet_type::data && out.h.type != packet_type::fin)
        return parse_error::payload_not_allowed;
    return parse_error::none;
}

void write_packet(std::string& out, const header& h, std::string_view sack, std::string_view payload) {
    out.reserve(out.size() + header_size + (sack.empty() ? 0 : 2 + sack.size()) + payload.size());
    out.push_back(static_cast<char>(static_cast<unsigned>(h.type) << 4 | protocol_version));
    out.push_back(static_cast<char>(sack.empty() ? extension_none : extension_selective_ack));
    put16(out, h.connection_id);
    put32(out, h.timestamp_us);
    put32(out, h.timestamp_diff_us);
    put32(out, h.wnd_size);
    put16(out, h.seq_nr);
    put16(out, h.ack_nr);
    if (!sack.empty()) {
        out.push_back(static_cast<char>(extension_none));
        out.push_back(static_cast<char>(sack.size()));
        out.append(sack);
    }
    out.append(payload);
}

} // namespace dhtc::utp
