#include "krpc/query_fast_path.hpp"

#include <cstdint>
#include <cstring>

namespace dhtc::krpc {

namespace {

// One value as the fast path reads it: the shapes it understands, nothing nested except
// a `want` list of strings. Only `k` needs a value before the scan: the others are read
// only when `k` says they were set.
struct scalar {
    enum class kind : std::uint8_t { absent, string, integer, string_list };
    kind k = kind::absent;
    want wants; ///< string_list: the BEP-32 families named in it
    std::string_view string;
    std::int64_t integer;

    bool is(kind expected) const noexcept { return k == expected; }
    bool present() const noexcept { return k != kind::absent; }
    bool is_id() const noexcept { return k == kind::string && string.size() == id20::size; }
};

// The keys of `a` that some query uses; every other key is skipped.
struct query_fields {
    scalar id, target, info_hash, port, implied_port, token, want, seed, noseed, scrape, bs;

    scalar* slot(std::string_view key) noexcept {
        switch (key.size()) {
        case 2: return key == "id" ? &id : key == "bs" ? &bs : nullptr;
        case 4: return key == "port" ? &port : key == "want" ? &want : key == "seed" ? &seed : nullptr;
        case 5: return key == "token" ? &token : nullptr;
        case 6: return key == "target" ? &target : key == "noseed" ? &noseed : key == "scrape" ? &scrape : nullptr;
        case 9: return key == "info_hash" ? &info_hash : nullptr;
        case 12: return key == "implied_port" ? &implied_port : nullptr;
        default: return nullptr;
        }
    }
};

// The top-level keys of a query.
struct top_fields {
    scalar t, y, q, v, ip, ro;
    bool has_args = false;

    scalar* slot(std::string_view key) noexcept {
        if (key.size() == 2) return key == "ip" ? &ip : key == "ro" ? &ro : nullptr;
        if (key.size() != 1) return nullptr;
        switch (key[0]) {
        case 't': return &t;
        case 'y': return &y;
        case 'q': return &q;
        case 'v': return &v;
        default: return nullptr;
        }
    }
};

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Reads canonical bencode, the way bencode::decode would accept it, and refuses (returns
// false) whatever it is not sure the decoder accepts in the same way.
class scanner {
public:
    explicit scanner(std::string_view in) noexcept : at_(in.data()), end_(in.data() + in.size()) {}

    bool done() const noexcept { return at_ == end_ && tokens_ <= packet_limits.max_tokens; }
    bool next_is(char c) const noexcept { return at_ != end_ && *at_ == c; }
    bool take(char c) noexcept {
        if (!next_is(c)) return false;
        ++at_;
        return true;
    }
    bool begin_container(char c) noexcept {
        ++tokens_;
        return take(c);
    }

    // A string with a canonical length prefix (no leading zero) that fits in the packet;
    // four digits are plenty for a datagram.
    bool string(std::string_view& out) noexcept {
        const char* digits = at_;
        std::size_t length = 0;
        while (at_ != end_ && is_digit(*at_)) {
            if (at_ - digits == 4) return false;
            length = length * 10 + static_cast<std::size_t>(*at_ - '0');
            ++at_;
        }
        if (at_ == digits || (*digits == '0' && at_ - digits > 1) || !take(':')) return false;
        if (length > static_cast<std::size_t>(end_ - at_)) return false;
        out = {at_, length};
        at_ += length;
        ++tokens_;
        return true;
    }

    // A canonical integer of at most 18 digits (those always fit in 64 bits).
    bool integer(std::int64_t& out) noexcept {
        if (!take('i')) return false;
        const bool negative = take('-');
        const char* digits = at_;
        std::int64_t magnitude = 0;
        while (at_ != end_ && is_digit(*at_)) {
            if (at_ - digits == 18) return false;
            magnitude = magnitude * 10 + (*at_ - '0');
            ++at_;
        }
        const auto ndigits = at_ - digits;
        if (ndigits == 0 || (*digits == '0' && (ndigits > 1 || negative)) || !take('e')) return false;
        out = negative ? -magnitude : magnitude;
        ++tokens_;
        return true;
    }

    // A string or an integer.
    bool scalar_value(scalar& out) noexcept {
        if (next_is('i')) {
            out.k = scalar::kind::integer;
            return integer(out.integer);
        }
        out.k = scalar::kind::string;
        return string(out.string);
    }

    // A list of strings (BEP-32 `want`); anything else in it is left to the generic path.
    bool string_list(scalar& out) noexcept {
        if (!begin_container('l')) return false;
        out.k = scalar::kind::string_list;
        out.wants = want::none;
        while (!take('e')) {
            std::string_view s;
            if (!string(s)) return false;
            if (s == "n4") out.wants = out.wants | want::n4;
            else if (s == "n6") out.wants = out.wants | want::n6;
        }
        return true;
    }

    // A dict key, which must sort strictly after the previous one (byte order, as the
    // decoder compares keys): canonical order, so there can be no duplicate. Neighbouring
    // KRPC keys mostly differ in their first byte, which settles it without a memcmp call.
    bool key(std::string_view& k, std::string_view& previous, bool first) noexcept {
        if (!string(k)) return false;
        if (!first) {
            const bool by_first_byte = !previous.empty() && !k.empty() && previous[0] != k[0];
            const bool ascending = by_first_byte ? static_cast<unsigned char>(previous[0]) <
                                                       static_cast<unsigned char>(k[0])
                                                 : previous < k;
            if (!ascending) return false;
        }
        previous = k;
        return true;
    }

private:
    const char* at_;
    const char* end_;
    std::uint32_t tokens_ = 0;
};

bool scan_args(scanner& in, query_fields& a) noexcept {
    if (!in.begin_container('d')) return false;
    std::string_view k, previous;
    for (bool first = true; !in.take('e'); first = false) {
        if (!in.key(k, previous, first)) return false;
        scalar* s = a.slot(k);
        scalar skipped;
        if (!s) s = &skipped;
        const bool ok = s == &a.want && in.next_is('l') ? in.string_list(*s) : in.scalar_value(*s);
        if (!ok) return false;
    }
    return true;
}

bool scan_top(scanner& in, top_fields& top, query_fields& a) noexcept {
    if (!in.begin_container('d')) return false;
    std::string_view k, previous;
    for (bool first = true; !in.take('e'); first = false) {
        if (!in.key(k, previous, first)) return false;
        if (k == "a") {
            if (!scan_args(in, a)) return false;
            top.has_args = true;
            continue;
        }
        scalar* s = top.slot(k);
        scalar skipped;
        if (!in.scalar_value(s ? *s : skipped)) return false;
    }
    return in.done();
}

bool read_id(const scalar& s, id20& out) noexcept {
    if (!s.is_id()) return false;
    std::memcpy(out.bytes.data(), s.string.data(), id20::size);
    return true;
}

bool flag(const scalar& s) noexcept { return s.is(scalar::kind::integer) && s.integer != 0; }

// The checks of parse() on the top level of a query; false wherever parse() fails.
bool fill_header(const top_fields& top, message& out) noexcept {
    using kind = scalar::kind;
    if (!top.t.is(kind::string) || top.t.string.empty() || top.t.string.size() > max_transaction_size) return false;
    out.transaction = top.t.string;
    if (!top.y.is(kind::string) || top.y.string != "q") return false;
    out.type = message_type::query;
    if (!top.q.is(kind::string) || top.q.string.empty() || top.q.string.size() > max_method_size) return false;
    out.query.name = top.q.string;
    out.query.kind = classify_method(top.q.string);
    if (top.v.is(kind::string)) out.version = top.v.string;
    if (top.ip.present()) {
        const auto ep = top.ip.is(kind::string) ? parse_compact_endpoint(top.ip.string) : std::nullopt;
        if (!ep) return false;
        out.ip = *ep;
    }
    if (top.ro.present()) {
        if (!top.ro.is(kind::integer)) return false;
        out.read_only = top.ro.integer != 0;
    }
    return top.has_args;
}

// The checks of parse() on `a`, per method; false wherever parse() fails.
bool fill_args(const query_fields& a, message& out) noexcept {
    using kind = scalar::kind;
    query_args& qa = out.query;
    const method m = qa.kind;
    const bool is_unknown = m == method::unknown;
    const bool uses_target = m == method::find_node || m == method::sample_infohashes;
    const bool uses_info_hash = m == method::get_peers || m == method::announce_peer;
    const bool uses_want = uses_target || m == method::get_peers;

    if (!read_id(a.id, out.id)) return false;
    if (uses_target) {
        if (!read_id(a.target, qa.target)) return false;
        qa.has_target = true;
    } else if (is_unknown) {
        qa.has_target = read_id(a.target, qa.target);
    }
    if (uses_info_hash) {
        if (!read_id(a.info_hash, qa.info_hash)) return false;
        qa.has_info_hash = true;
    } else if (is_unknown) {
        qa.has_info_hash = read_id(a.info_hash, qa.info_hash);
    }
    if (m == method::announce_peer) {
        if (!a.port.is(kind::integer)) return false;
        if (a.implied_port.present()) {
            if (!a.implied_port.is(kind::integer)) return false;
            qa.implied_port = a.implied_port.integer != 0;
        }
        if (!a.token.is(kind::string) || a.token.string.size() > max_token_size) return false;
        qa.token = a.token.string;
        if (!qa.implied_port) {
            if (a.port.integer < 1 || a.port.integer > 65535) return false;
            qa.port = static_cast<std::uint16_t>(a.port.integer);
        }
    }
    if (a.want.present() && (uses_want || is_unknown)) {
        const bool valid = a.want.is(kind::string_list);
        if (!valid && uses_want) return false;
        qa.has_want = valid;
        if (valid) qa.wants = a.want.wants;
    }
    qa.seed = flag(a.seed);
    qa.noseed = flag(a.noseed);
    qa.scrape = flag(a.scrape);
    qa.bootstrap = flag(a.bs);
    return true;
}

} // namespace

bool parse_query_fast(std::string_view packet, message& out) noexcept {
    if (packet.empty() || packet.size() > packet_limits.max_size) return false;
    scanner in(packet);
    top_fields top;
    query_fields args;
    if (!scan_top(in, top, args)) return false;
    out = message{};
    return fill_header(top, out) && fill_args(args, out);
}

} // namespace dhtc::krpc
