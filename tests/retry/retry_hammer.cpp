// Heavy state updates on a SQLite retry store, for the durability test: each transaction
// claims a run of new hashes (numbered from --start), fails some older ones, completes a
// few, and leases due ones for one second; after each commit it prints "committed N" (all
// hashes below N are stored). The test kills it with SIGKILL at random points and checks
// the file after each restart.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "retry/sqlite_store.hpp"
#include "retry/scheduler.hpp"

using namespace dhtc;

namespace {
id20 numbered(std::uint64_t n) {
    id20 h;
    for (std::size_t i = 0; i < 8; ++i) h.bytes[i] = static_cast<std::uint8_t>(n >> (8 * i));
    h.bytes[19] = 0x77;
    return h;
}
} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: retry_hammer DB START LIMIT\n");
        return 2;
    }
    const std::string path = argv[1];
    std::uint64_t next = std::strtoull(argv[2], nullptr, 10);
    const std::uint64_t limit = std::strtoull(argv[3], nullptr, 10);
    retry::policy_options policy;
    policy.ladder_secs = {1};
    try {
        retry::store s(retry::open_sqlite(path), policy, "hammer-" + std::to_string(next), 1);
        const std::vector<endpoint> peers{endpoint{*ip_address::parse("127.0.0.1"), 6881}};
        while (next < limit) {
            const auto now = retry::scheduler::now();
            s.begin();
            for (int k = 0; k < 50; ++k) s.claim(numbered(next + k), peers, now);
            for (int k = 0; k < 20 && next > 200; ++k)
                s.record_failure(numbered(next - 200 + k * 7), api::failure_class::timeout, now);
            for (int k = 0; k < 10 && next > 100; ++k) s.record_done(numbered(next - 100 + k * 3), now);
            s.lease_due(20, now);
            s.expire_leases(now);
            s.commit();
            next += 50;
            std::printf("committed %llu\n", static_cast<unsigned long long>(next));
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "retry_hammer: %s\n", e.what());
        return 1;
    }
    return 0;
}
