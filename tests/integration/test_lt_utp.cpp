// uTP (BEP-29) interop with real libtorrent: seeders with TCP disabled both ways (they still
// accept a TCP connection and close it), plain and with PE forced, announce through our
// crawler. Every torrent must be delivered exactly once, verified, and the completion and the
// delivery must name uTP as the transport.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/lt_fetch_case.hpp"

using namespace dhtc;

namespace {

test::lt_case_result run_utp_case(metadata::transport_policy transports, metadata::encryption_policy encryption,
                                  const std::string& name, const std::string& base_ip,
                                  std::vector<std::string> extra_args = {}) {
    test::lt_case c;
    c.swarm_script = DHTC_LT_SWARM;
    c.name = "utp-" + name;
    c.base_ip = base_ip;
    c.encryption = encryption;
    c.transports = transports;
    c.swarm_args = test::lt_utp_only_args;
    c.swarm_args.insert(c.swarm_args.end(), extra_args.begin(), extra_args.end());
    return test::run_lt_case(c);
}

void check_all_over_utp(const test::lt_case_result& r, api::stream_encryption enc) {
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) {
        CHECK(d.transport == api::stream_transport::utp);
        CHECK(d.encryption == enc);
    }
    for (const auto& c : r.completions) {
        test::check_round_accepted(r, c);
        if (c.result == api::outcome::accepted) CHECK(c.transport == api::stream_transport::utp);
    }
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("libtorrent uTP only: transports utp fetches over uTP") {
    const auto r = run_utp_case(metadata::transport_policy::utp, metadata::encryption_policy::disable, "only",
                                "127.0.52");
    check_all_over_utp(r, api::stream_encryption::plaintext);
}

TEST_CASE("libtorrent uTP only with PE forced (RC4): transports utp and the default encryption policy") {
    const auto r = run_utp_case(metadata::transport_policy::utp, metadata::encryption_policy::prefer_plaintext,
                                "pe", "127.0.54", {"--encryption", "forced_rc4"});
    check_all_over_utp(r, api::stream_encryption::rc4);
}

TEST_CASE("libtorrent uTP only with PE forced: transports both falls back from TCP to uTP and from plaintext to MSE") {
    const auto r = run_utp_case(metadata::transport_policy::both, metadata::encryption_policy::prefer_plaintext,
                                "both-pe", "127.0.56", {"--encryption", "forced_rc4"});
    check_all_over_utp(r, api::stream_encryption::rc4);
}

TEST_CASE("libtorrent uTP only with PE forced: prefer_encrypted and both go back to MSE over uTP after both modes closed over TCP") {
    const auto r = run_utp_case(metadata::transport_policy::both, metadata::encryption_policy::prefer_encrypted,
                                "both-mse-back", "127.0.58", {"--encryption", "forced_rc4"});
    check_all_over_utp(r, api::stream_encryption::rc4);
}

TEST_CASE("libtorrent uTP only with PE forced: utp_first and prefer_encrypted, served by the first try") {
    const auto r = run_utp_case(metadata::transport_policy::utp_first, metadata::encryption_policy::prefer_encrypted,
                                "first", "127.0.36", {"--encryption", "forced_rc4"});
    check_all_over_utp(r, api::stream_encryption::rc4);
}

} // TEST_SUITE
