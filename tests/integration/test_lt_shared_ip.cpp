// Several real libtorrent sessions behind one IP (distinct ports), as behind a carrier-grade NAT
// or on a seedbox host, crawled by a crawler with its default options: every torrent arrives
// exactly once, verified, and no session's DoS blocker fires. libtorrent's blocker is per
// session, so each session gets the per-node budget; the per-IP ceiling bounds them together.
//   - six sessions on one IPv4 address: every torrent kind, every connection policy (plaintext,
//     PE with RC4, PE with a plaintext payload, uTP only, uTP only with PE, TCP only);
//   - four sessions on ::1, mixed policies, the DHT over IPv6.
// The two-crawler fleet against sessions on one IP is in test_retry_lt.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/lt_fetch_case.hpp"

using namespace dhtc;

namespace {

test::lt_case_result run_shared_case(test::lt_case c) {
    c.swarm_script = DHTC_LT_SWARM;
    c.encryption.reset(); // the crawler's defaults: prefer_encrypted, utp_first
    c.transports.reset();
    auto r = test::run_lt_case(c);
    MESSAGE(c.name << ": delivered " << r.deliveries.size() << " of " << r.expected);
    CHECK(r.deliveries.size() == r.expected);
    for (const auto& done : r.completions) test::check_round_accepted(r, done);
    return r;
}

} // namespace

TEST_SUITE("integration") {

TEST_CASE("six libtorrent sessions on one IP, every torrent kind and connection policy, default options") {
    test::lt_case c;
    c.name = "one-ip";
    c.base_ip = "127.0.60";
    c.one_ip = true;
    c.sessions = 6;
    c.torrents_per_session = 2;
    c.kinds = "v1,v2,hybrid,multi,unicode";
    c.swarm_args = {"--policies", "plaintext,pe_rc4,pe_plain,utp,utp_pe,tcp_only"};
    const auto r = run_shared_case(c);
    for (const auto& d : r.deliveries) CHECK(d.peer.address.to_string() == "127.0.60.1");
}

TEST_CASE("four libtorrent sessions on ::1, mixed connection policies, default options") {
    test::lt_case c;
    c.name = "v6-shared";
    c.ipv6 = true;
    c.sessions = 4;
    c.torrents_per_session = 2;
    c.kinds = "v1,hybrid,multi";
    c.swarm_args = {"--policies", "plaintext,utp_pe,pe_rc4,utp"};
    const auto r = run_shared_case(c);
    for (const auto& d : r.deliveries) CHECK(d.peer.address.is_v6());
}

} // TEST_SUITE
