#include "testnet/wan_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>

namespace dhtc::testnet::wan {

namespace {

// SplitMix64's finaliser: the keyed hash of a pair (and the seed) that fixes its RTT.
std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double unit(std::uint64_t h) noexcept { return static_cast<double>(h >> 11) * 0x1.0p-53; }

duration from_ms(double ms) noexcept { return duration(static_cast<std::int64_t>(ms * 1e6)); }

bool parse_double(std::string_view s, double& out) {
    const std::string copy(s);
    char* end = nullptr;
    out = std::strtod(copy.c_str(), &end);
    return !copy.empty() && end && *end == '\0' && std::isfinite(out);
}

bool probability(double p) noexcept { return p >= 0 && p <= 1; }

} // namespace

double gilbert_elliott::mean_loss() const noexcept {
    const double to_bad = good_to_bad, to_good = bad_to_good;
    if (to_bad + to_good <= 0) return loss_good;
    const double share_bad = to_bad / (to_bad + to_good);
    return share_bad * loss_bad + (1 - share_bad) * loss_good;
}

gilbert_elliott gilbert_elliott::bursts(double loss, double mean_burst) noexcept {
    // In the bad state every packet is lost and a burst ends with probability 1/B per
    // packet; the stationary share of the bad state, p / (p + r), is the loss.
    gilbert_elliott g;
    g.bad_to_good = 1.0 / std::max(1.0, mean_burst);
    g.good_to_bad = loss >= 1 ? 1.0 : loss * g.bad_to_good / (1 - loss);
    g.loss_good = 0;
    g.loss_bad = 1;
    return g;
}

options options::libtorrent_like(std::uint64_t seed) {
    options o;
    o.enabled = true;
    o.seed = seed;
    return o; // the defaults: 50–350 ms uniform, 20 ms jitter, 2% i.i.d. each way
}

std::string options::check() const {
    if (!(rtt_min_ms >= 0 && rtt_min_ms <= rtt_max_ms && rtt_max_ms <= 10000)) return "the RTT bounds must satisfy 0 <= min <= max <= 10000 ms";
    if (distribution == rtt_distribution::lognormal && rtt_min_ms <= 0) return "a log-normal RTT needs a lower bound above 0";
    if (!(jitter_ms >= 0 && jitter_ms <= 10000)) return "the jitter must be 0..10000 ms";
    if (!probability(loss)) return "the loss must be 0..1";
    if (bursts && !(probability(bursts->good_to_bad) && probability(bursts->bad_to_good) &&
                    probability(bursts->loss_good) && probability(bursts->loss_bad) &&
                    bursts->good_to_bad + bursts->bad_to_good > 0))
        return "the Gilbert–Elliott parameters must be probabilities, with P_GB + P_BG > 0";
    return {};
}

std::string options::to_json() const {
    if (!enabled) return R"({"wan":false})";
    char buf[512];
    std::string burst = "null";
    if (bursts) {
        std::snprintf(buf, sizeof buf, R"({"good_to_bad":%g,"bad_to_good":%g,"loss_good":%g,"loss_bad":%g})",
                      bursts->good_to_bad, bursts->bad_to_good, bursts->loss_good, bursts->loss_bad);
        burst = buf;
    }
    std::snprintf(buf, sizeof buf,
                  R"({"wan":true,"rtt_ms":[%g,%g],"rtt_distribution":"%s","jitter_ms":%g,"loss_each_way":%g,"burst_loss":%s,"seed":%llu})",
                  rtt_min_ms, rtt_max_ms, distribution == rtt_distribution::uniform ? "uniform" : "lognormal", jitter_ms,
                  mean_loss(), burst.c_str(), static_cast<unsigned long long>(seed));
    return buf;
}

parse_result parse_option(std::string_view name, std::string_view value, options& o) {
    // Into a copy: a bad value changes nothing.
    options n = o;
    bool ok = true;
    if (name == "rtt") ok = parse_range(value, n.rtt_min_ms, n.rtt_max_ms);
    else if (name == "rtt-dist") {
        const auto d = parse_distribution(value);
        ok = d.has_value();
        if (ok) n.distribution = *d;
    } else if (name == "jitter") ok = parse_double(value, n.jitter_ms);
    else if (name == "loss") ok = parse_double(value, n.loss);
    else if (name == "burst") ok = parse_double(value, n.mean_burst) && n.mean_burst >= 1;
    else if (name == "ge") {
        n.bursts = parse_gilbert_elliott(value);
        ok = n.bursts.has_value();
    } else return parse_result::not_an_option;
    if (!ok) return parse_result::bad_value;
    o = n;
    return parse_result::ok;
}

std::string finish_options(options& o) {
    if (o.mean_burst > 0 && !o.bursts) o.bursts = gilbert_elliott::bursts(o.loss, o.mean_burst);
    return o.check();
}

std::string options_help(std::string_view prefix) {
    struct line {
        const char* option;
        const char* text;
    };
    static constexpr line lines[] = {
        {"rtt MIN-MAX", "RTT bounds in ms, one draw per pair of addresses, stable over the\nrun (default 50-350)"},
        {"rtt-dist D", "uniform, or lognormal (median at the bounds' geometric mean, the\nbounds at +-2 sigma) (default uniform)"},
        {"jitter MS", "each packet's one-way delay gets U(0, MS) more; a direction keeps\nits order (default 20)"},
        {"loss P", "share of packets lost each way, i.i.d. (default 0.02)"},
        {"burst B", "lose in bursts of B packets on average instead (a Gilbert chain\nper direction of a pair, the same mean loss)"},
        {"ge PGB,PBG,LG,LB", "a Gilbert-Elliott chain per direction: P(good->bad),\nP(bad->good), loss in the good and in the bad state (its mean\nreplaces the loss)"},
    };
    // The usage texts' layout: options from column 2, their text from column 23.
    const std::string indent(23, ' ');
    std::string out;
    for (const auto& l : lines) {
        std::string head = "  " + std::string(prefix) + l.option;
        head += head.size() < indent.size() - 1 ? std::string(indent.size() - head.size(), ' ') : "\n" + indent;
        std::string text = l.text;
        for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
            text.insert(at + 1, indent);
        out += head + text + "\n";
    }
    return out;
}

std::string usage_with_options(std::string_view usage, std::string_view prefix) {
    std::string text(usage);
    constexpr std::string_view marker = "{wan options}\n";
    if (const auto at = text.find(marker); at != std::string::npos) text.replace(at, marker.size(), options_help(prefix));
    return text;
}

bool parse_range(std::string_view s, double& lo, double& hi) {
    const auto dash = s.find('-');
    if (dash == std::string_view::npos) return false;
    double a = 0, b = 0;
    if (!parse_double(s.substr(0, dash), a) || !parse_double(s.substr(dash + 1), b) || a < 0 || a > b) return false;
    lo = a;
    hi = b;
    return true;
}

std::optional<rtt_distribution> parse_distribution(std::string_view s) {
    if (s == "uniform") return rtt_distribution::uniform;
    if (s == "lognormal") return rtt_distribution::lognormal;
    return std::nullopt;
}

std::optional<gilbert_elliott> parse_gilbert_elliott(std::string_view s) {
    std::array<double, 4> v{};
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto comma = s.find(',');
        const bool last = i + 1 == v.size();
        if (last != (comma == std::string_view::npos)) return std::nullopt;
        if (!parse_double(s.substr(0, comma), v[i]) || !probability(v[i])) return std::nullopt;
        if (!last) s.remove_prefix(comma + 1);
    }
    if (v[0] + v[1] <= 0) return std::nullopt;
    return gilbert_elliott{v[0], v[1], v[2], v[3]};
}

model::model(const options& o) : opt_(o), rng_(o.seed, 0x77616e), links_(table_size) {}

duration model::rtt(std::uint32_t a, std::uint32_t b) const noexcept {
    const std::uint64_t pair = std::uint64_t{std::min(a, b)} << 32 | std::max(a, b);
    const std::uint64_t h = mix(pair ^ mix(opt_.seed ^ 0x7274745f6b6579ULL));
    const double lo = opt_.rtt_min_ms, hi = opt_.rtt_max_ms;
    if (hi <= lo) return from_ms(lo);
    if (opt_.distribution == rtt_distribution::uniform) return from_ms(lo + unit(h) * (hi - lo));
    // Log-normal: the bounds two standard deviations either side of the median; a draw
    // outside them is drawn again (from the same key, so still stable), ~5% of pairs.
    const double mu = (std::log(lo) + std::log(hi)) / 2, sigma = (std::log(hi) - std::log(lo)) / 4;
    for (std::uint64_t i = 0; i < 64; ++i) {
        const double u1 = std::max(unit(mix(h + 2 * i + 1)), 0x1.0p-53), u2 = unit(mix(h + 2 * i + 2));
        const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
        const double ms = std::exp(mu + sigma * z);
        if (ms >= lo && ms <= hi) return from_ms(ms);
    }
    return from_ms(std::exp(mu));
}

model::link_state& model::link(std::uint32_t from, std::uint32_t to) {
    const std::uint64_t key = (std::uint64_t{from} << 32 | to) + 1; // never 0 (empty)
    auto& l = links_[mix(key) & (table_size - 1)];
    if (l.key != key) {
        if (l.key != 0) ++stats_.link_evictions;
        l.key = key;
        l.last_arrival = {};
        // A chain starts in its stationary state.
        const auto& g = opt_.bursts;
        l.bad = g && rng_.chance(g->good_to_bad / (g->good_to_bad + g->bad_to_good));
    }
    return l;
}

bool model::step_loss(link_state& l) {
    if (!opt_.bursts) return rng_.chance(opt_.loss);
    const auto& g = *opt_.bursts;
    const bool lost = rng_.chance(l.bad ? g.loss_bad : g.loss_good);
    l.bad = l.bad ? !rng_.chance(g.bad_to_good) : rng_.chance(g.good_to_bad);
    return lost;
}

bool model::lose(std::uint32_t from, std::uint32_t to) {
    ++stats_.packets;
    const bool lost = step_loss(link(from, to));
    if (lost) ++stats_.lost;
    return lost;
}

duration model::jitter() { return from_ms(unit(rng_()) * opt_.jitter_ms); }

verdict model::datagram(std::uint32_t from, std::uint32_t to, clock::time_point now) {
    auto& l = link(from, to);
    ++stats_.packets;
    if (step_loss(l)) {
        ++stats_.lost;
        return {true, {}};
    }
    auto arrival = now + rtt(from, to) / 2 + jitter();
    arrival = std::max(arrival, l.last_arrival);
    l.last_arrival = arrival;
    return {false, arrival - now};
}

duration model::tcp_retransmit(std::uint32_t a, std::uint32_t b) const noexcept {
    return std::max<duration>(std::chrono::milliseconds(200), 3 * rtt(a, b));
}

duration model::tcp_handshake(std::uint32_t client, std::uint32_t server) {
    duration d = rtt(client, server);
    duration rto = std::chrono::seconds(1);
    // Linux gives up after 6 SYN retransmissions (tcp_syn_retries); so does this.
    for (int tries = 0; tries < 6 && (lose(client, server) || lose(server, client)); ++tries) {
        d += rto;
        rto *= 2;
    }
    return d;
}

} // namespace dhtc::testnet::wan
