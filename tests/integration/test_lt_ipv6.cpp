// IPv6 interop with real libtorrent: seeders on ::1 run their DHT over IPv6 and announce
// through a crawler bound to ::1 only, so every announce, peer and fetch is IPv6. Each
// torrent must be delivered exactly once, verified, from an IPv6 peer, over the transport
// and stream the policy leads to: TCP, and uTP (with PE forced) on the UDP socket the
// uTP host opens for IPv6 beside its IPv4 one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/lt_fetch_case.hpp"
#include "support/lt_swarm_setup.hpp"

using namespace dhtc;

namespace {

test::lt_case_result run_v6_case(const std::string& name, metadata::transport_policy transports,
                                 metadata::encryption_policy encryption, std::vector<std::string> swarm_args) {
    test::lt_case c;
    c.swarm_script = DHTC_LT_SWARM;
    c.name = "v6-" + name;
    c.ipv6 = true;
    c.transports = transports;
    c.encryption = encryption;
    c.swarm_args = std::move(swarm_args);
    return test::run_lt_case(c);
}

void check_all_over(const test::lt_case_result& r, api::stream_transport transport, api::stream_encryption enc) {
    MESSAGE("delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& d : r.deliveries) {
        CHECK_MESSAGE(d.peer.address.is_v6(), "served by " << d.peer.to_string());
        CHECK(d.transport == transport);
        CHECK(d.encryption == enc);
    }
    for (const auto& c : r.completions) test::check_round_accepted(r, c);
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("libtorrent on ::1 with its default settings: plaintext over TCP") {
    const auto r = run_v6_case("tcp", metadata::transport_policy::tcp, metadata::encryption_policy::prefer_plaintext, {});
    check_all_over(r, api::stream_transport::tcp, api::stream_encryption::plaintext);
}

TEST_CASE("libtorrent on ::1, uTP only with PE forced: the default policy (utp_first, prefer_encrypted)") {
    std::vector<std::string> args = test::lt_utp_only_args;
    args.insert(args.end(), {"--encryption", "forced_rc4"});
    const auto r = run_v6_case("utp-pe", metadata::transport_policy::utp_first,
                               metadata::encryption_policy::prefer_encrypted, args);
    check_all_over(r, api::stream_transport::utp, api::stream_encryption::rc4);
}

} // TEST_SUITE
