#include "retry/policy.hpp"

#include <algorithm>
#include <cmath>

namespace dhtc::retry {

using api::failure_class;

std::vector<std::uint32_t> default_ladder_secs() {
    constexpr std::uint32_t minute = 60, hour = 3600, day = 86400;
    return {30 * minute, 2 * hour, 8 * hour, day, 7 * day, 30 * day};
}

std::array<std::uint32_t, api::failure_class_count> default_class_percent() {
    std::array<std::uint32_t, api::failure_class_count> p{};
    p.fill(100);
    // Transient by nature: the peer was away or slow, not wrong. Sooner.
    // utp_timeout is connect_timeout over uTP. encryption_failed keeps the ladder, like the
    // handshake_failed it was reported as before: the peer's encryption policy and ours do
    // not meet, and waiting does not change a configuration.
    for (const auto c : {failure_class::no_peers, failure_class::timeout, failure_class::connect_timeout,
                         failure_class::connect_refused, failure_class::disconnected, failure_class::utp_timeout})
        p[static_cast<std::size_t>(c)] = 50;
    // Our side failed, not the peer: the torrent is good and wanted, so try again soon
    // (90 s after the first failure with the default ladder).
    p[static_cast<std::size_t>(failure_class::sink_failed)] = 5;
    return p;
}

std::int64_t next_delay_secs(const policy_options& p, std::uint32_t attempt, failure_class cls,
                             std::uint32_t mismatch_rounds, double u01, std::uint32_t timeout_rounds) noexcept {
    attempt = std::max<std::uint32_t>(attempt, 1);
    // Nothing but timeouts so far: a lost datagram is likelier than a dead swarm (issue 32).
    const std::uint32_t quick = p.timeout_retry_secs > 0 ? std::min(p.timeout_retries, 16u) : 0;
    double delay = 0;
    if (api::is_timeout(cls) && timeout_rounds >= attempt && attempt <= quick) {
        delay = static_cast<double>(p.timeout_retry_secs) * static_cast<double>(1u << (2 * (attempt - 1)));
    } else {
        if (p.ladder_secs.empty()) return 1;
        // The quick retries spent are not ladder steps: the ladder starts from its first.
        const std::uint32_t rung = attempt - std::min({quick, timeout_rounds, attempt - 1});
        const std::size_t step = std::min<std::size_t>(rung, p.ladder_secs.size()) - 1;
        delay = p.ladder_secs[step];
        const auto ci = static_cast<std::size_t>(cls);
        std::uint32_t percent = ci < p.class_percent.size() ? p.class_percent[ci] : 100;
        if (cls == failure_class::hash_mismatch && mismatch_rounds >= 2) percent = p.repeated_mismatch_percent;
        delay = delay * percent / 100.0;
    }
    const double j = std::min<std::uint32_t>(p.jitter_percent, 100) / 100.0;
    const double u = std::clamp(u01, 0.0, 1.0);
    delay *= 1.0 - j + 2.0 * j * u;
    return std::max<std::int64_t>(1, std::llround(delay));
}

unix_seconds reactivated_at(const policy_options& p, unix_seconds next_retry_at, unix_seconds now) noexcept {
    if (next_retry_at <= now) return next_retry_at;
    const std::int64_t left = next_retry_at - now;
    const std::int64_t cut = std::max<std::int64_t>(left * std::min<std::uint32_t>(p.reactivation_percent, 100) / 100,
                                                    p.reactivation_min_secs);
    return std::min(next_retry_at, now + cut);
}

std::size_t retry_slots(std::size_t workers, double share) noexcept {
    if (workers <= 1 || !(share > 0.0)) return 0;
    const double s = std::min(share, 1.0);
    const auto n = static_cast<std::size_t>(std::floor(static_cast<double>(workers) * s));
    return std::clamp<std::size_t>(n, 1, workers - 1);
}

} // namespace dhtc::retry
