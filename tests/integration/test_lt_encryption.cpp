// MSE/PE interop with real libtorrent: seeders that force PE with RC4 only, and seeders that
// force PE but allow a plaintext payload, announce through our crawler. Every torrent must be
// delivered exactly once, verified (the pipeline checks the hash), and the completion must
// name the stream that served it.
#include <doctest/doctest.h>

#include <string>

#include "support/lt_fetch_case.hpp"

using namespace dhtc;

namespace {

// A swarm of libtorrent seeders with `--encryption swarm_policy` against a crawler whose
// metadata.encryption is `policy`.
test::lt_case_result run_case(metadata::encryption_policy policy, const std::string& swarm_policy,
                              const std::string& base_ip) {
    test::lt_case c;
    c.swarm_script = DHTC_LT_SWARM;
    c.name = "enc-" + swarm_policy;
    c.base_ip = base_ip;
    c.encryption = policy;
    c.swarm_args = {"--encryption", swarm_policy};
    return test::run_lt_case(c);
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("libtorrent with PE forced, RC4 only: the default policy falls back to MSE and gets RC4") {
    const test::lt_case_result r = run_case(metadata::encryption_policy::prefer_plaintext, "forced_rc4", "127.0.44");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::rc4);
    for (const auto& c : r.completions) {
        test::check_round_accepted(r, c);
        if (c.result == api::outcome::accepted) CHECK(c.encryption == api::stream_encryption::rc4);
    }
}

TEST_CASE("libtorrent with PE forced, plaintext allowed: MSE with a plaintext select") {
    const test::lt_case_result r = run_case(metadata::encryption_policy::prefer_encrypted, "forced_both", "127.0.46");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    // We offer RC4 and plaintext; libtorrent without prefer_rc4 selects plaintext.
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::plaintext);
    for (const auto& c : r.completions) test::check_round_accepted(r, c);
}

TEST_CASE("libtorrent with PE forced, plaintext allowed, and require: RC4") {
    const test::lt_case_result r = run_case(metadata::encryption_policy::require, "forced_both", "127.0.48");
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) CHECK(d.encryption == api::stream_encryption::rc4);
}

} // TEST_SUITE
