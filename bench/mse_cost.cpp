// MSE/PE cost: full metadata peer sessions against a loopback seeder (the tests' fake peer,
// on its own thread), plaintext against MSE+RC4 and MSE with a plaintext select, in the same
// run. Reports, as JSON lines per mode: fetches per second, the client thread's CPU time per
// fetch (the seeder's CPU is on another thread and not counted), and the p50/p95 session
// time. Never run by the tests; see docs/performance.md.
//   dhtc-mse-cost [--fetches N] [--size BYTES] [--concurrency C]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "metadata/peer_session.hpp"
#include "support/fake_peer.hpp"

using namespace dhtc;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
    std::size_t fetches = 2000;
    std::size_t size = 30000; // two metadata pieces
    std::size_t concurrency = 16;
};

struct mode {
    const char* name;
    metadata::encryption_policy policy;
    test::peer_encryption peer;
};

nlohmann::json run(const settings& s, const mode& m, const std::string& info) {
    test::peer_script script;
    script.encryption = m.peer;
    test::fake_peer seeder(info, script);
    asio::io_context io;
    std::size_t started = 0, done = 0, ok = 0, rc4 = 0;
    std::vector<double> ms;
    ms.reserve(s.fetches);
    std::uint32_t id_seed = 0;

    std::function<void()> launch = [&] {
        if (started >= s.fetches) return;
        ++started;
        metadata::session_request req;
        req.info_hash = seeder.info_hash();
        req.peer = seeder.local_endpoint();
        // Never the fake peer's own id (all 0x5a): it would be taken for a self-connection.
        req.peer_id.bytes.fill(0xa5);
        ++id_seed;
        std::memcpy(req.peer_id.bytes.data(), &id_seed, sizeof id_seed);
        req.deadline = clock_type::now() + std::chrono::seconds(10);
        req.encryption = m.policy;
        auto src = std::make_shared<test::simple_piece_source>();
        asio::co_spawn(io, metadata::run_peer_session(req, *src, 0),
                       [&, src](std::exception_ptr e, metadata::session_result r) {
                           ++done;
                           if (!e && r.ok() && src->bytes() == info) ++ok;
                           if (r.encryption == api::stream_encryption::rc4) ++rc4;
                           ms.push_back(std::chrono::duration<double, std::milli>(r.elapsed).count());
                           launch();
                       });
    };
    const double cpu0 = bench::thread_cpu_seconds();
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < s.concurrency; ++i) launch();
    io.run();
    const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    const double cpu = bench::thread_cpu_seconds() - cpu0;
    std::sort(ms.begin(), ms.end());
    return {{"bench", "mse_cost"},
            {"mode", m.name},
            {"fetches", done},
            {"ok", ok},
            {"rc4", rc4},
            {"size", info.size()},
            {"concurrency", s.concurrency},
            {"fetches_per_sec", done / wall},
            {"client_cpu_ms_per_fetch", 1000.0 * cpu / static_cast<double>(std::max<std::size_t>(done, 1))},
            {"p50_ms", bench::quantile(ms, 0.5)},
            {"p95_ms", bench::quantile(ms, 0.95)}};
}

} // namespace

int main(int argc, char** argv) {
    settings s;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const std::size_t v = std::stoul(argv[i + 1]);
        if (a == "--fetches") s.fetches = v;
        else if (a == "--size") s.size = v;
        else if (a == "--concurrency") s.concurrency = std::max<std::size_t>(v, 1);
        else {
            std::fprintf(stderr, "usage: dhtc-mse-cost [--fetches N] [--size BYTES] [--concurrency C]\n");
            return 2;
        }
    }
    std::string why;
    if (!metadata::mse::rc4_available(&why)) {
        std::fprintf(stderr, "dhtc-mse-cost: %s\n", why.c_str());
        return 1;
    }
    const std::string info = test::make_info_dict(s.size);
    const mode modes[] = {
        {"plaintext", metadata::encryption_policy::disable, test::peer_encryption::plaintext_only},
        {"mse_rc4", metadata::encryption_policy::require, test::peer_encryption::forced_rc4},
        {"mse_plaintext", metadata::encryption_policy::prefer_encrypted, test::peer_encryption::forced_plaintext},
        {"plaintext_again", metadata::encryption_policy::disable, test::peer_encryption::plaintext_only},
    };
    for (const mode& m : modes) std::printf("%s\n", run(s, m, info).dump().c_str());
    return 0;
}
