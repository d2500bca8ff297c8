// The metadata pipeline end to end on loopback: hash events in, fake peers serving (or
// misbehaving), callbacks out on the delivery thread, exactly one completion per gated round.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "api/delivery.hpp"
#include "util/hashing.hpp"
#include "metadata/pipeline.hpp"
#include "support/fake_peer.hpp"

using namespace dhtc;
using namespace std::chrono_literals;

namespace {

std::string fixture(const char* name) {
    std::ifstream in(std::string(DHTC_FIXTURE_DIR) + "/info/" + name + ".info", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    REQUIRE(!ss.str().empty());
    return ss.str();
}

// A dict of several metadata pieces: the "files" list padded with many entries.
std::string big_dict(std::size_t files) {
    std::string list;
    for (std::size_t i = 0; i < files; ++i) {
        const std::string name = "file-number-" + std::to_string(100000 + i) + ".bin";
        list += "d6:lengthi1e4:pathl" + std::to_string(name.size()) + ":" + name + "ee";
    }
    const std::size_t pieces = (files + 16383) / 16384;
    return "d5:filesl" + list + "e4:name3:big12:piece lengthi16384e6:pieces" + std::to_string(pieces * 20) + ":" +
           std::string(pieces * 20, 'x') + "e";
}

// Records what the application sees, thread-safely (callbacks run on the delivery thread).
struct app {
    std::mutex m;
    std::vector<api::delivery> torrents;
    std::vector<api::completion> completions;
    std::vector<std::string> errors;
    std::vector<id20> gated;
    bool accept = true;
    bool gate_pass = true;
    bool throw_in_torrent = false;
    int retry_first = 0;                  ///< this many torrents are answered retry (a sink failed)
    std::chrono::milliseconds torrent_delay{0};
    std::function<void()> in_gate; ///< runs inside the gate callback, before it answers
    std::function<void()> in_torrent; ///< runs inside the torrent callback, before it answers


    api::event_handlers callbacks(bool with_torrent = true) {
        api::event_handlers cb;
        cb.gate = [this](const id20& h) {
            if (in_gate) in_gate();
            std::lock_guard l(m);
            gated.push_back(h);
            return gate_pass;
        };
        if (with_torrent)
            cb.torrent = [this](const api::delivery& d) {
                std::this_thread::sleep_for(torrent_delay);
                if (in_torrent) in_torrent();
                std::lock_guard l(m);
                if (throw_in_torrent) throw std::runtime_error("boom");
                torrents.push_back(d);
                if (retry_first > 0) {
                    --retry_first;
                    return api::answer::retry;
                }
                return accept ? api::answer::accept : api::answer::reject;
            };
        cb.completion = [this](const api::completion& c) {
            std::lock_guard l(m);
            completions.push_back(c);
        };
        cb.error = [this](const std::string& e) {
            std::lock_guard l(m);
            errors.push_back(e);
        };
        return cb;
    }
    std::size_t completion_count() {
        std::lock_guard l(m);
        return completions.size();
    }
};

struct rig {
    app a;
    manual_clock clock; ///< the pipeline's bookkeeping (filters, caches, queues) moves only when told
    api::event_delivery delivery{api::delivery_options{1024, 1024}};
    metadata::pipeline pipe;

    explicit rig(metadata::pipeline_options o = options(), bool with_torrent = true) : pipe(o, delivery, clock) {
        delivery.configure(a.callbacks(with_torrent), false);
        delivery.start();
        pipe.start();
    }
    ~rig() { stop(); }
    void stop() {
        pipe.stop();
        delivery.close_input();
        delivery.finish();
        delivery.join(std::nullopt);
    }
    static metadata::pipeline_options options() {
        metadata::pipeline_options o;
        o.timeout_secs = 2;
        o.bind_v4 = ip_address::parse("127.0.0.1");
        // The fake peers are TCP only; the default's uTP try would wait out a silent SYN.
        o.encryption = metadata::encryption_policy::prefer_plaintext;
        o.transports = metadata::transport_policy::tcp;
        return o;
    }
    // Each offer is a millisecond after the last on the pipeline's clock, so "freshest" is defined.
    void offer(const id20& h, const endpoint& peer, api::peer_rtt rtt = {}) {
        clock.advance(std::chrono::milliseconds(1));
        REQUIRE(pipe.ingress().try_push(api::hash_event{h, peer, peer, api::hash_source::announce, clock.now(), rtt}));
    }
    // Waits (bounded) until `n` completions arrived.
    bool wait_completions(std::size_t n, std::chrono::seconds limit = 15s) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            if (a.completion_count() >= n) return true;
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }
};

// Resident set size of this process, from /proc/self/statm.
std::size_t rss_bytes() {
    std::ifstream in("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    in >> pages >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

} // namespace

TEST_SUITE("pipeline") {

TEST_CASE("a served info dict is verified, parsed, delivered once and completed accepted") {
    test::fake_peer peer(fixture("v1_multi"));
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    std::this_thread::sleep_for(100ms); // nothing more may arrive
    r.stop();
    REQUIRE(r.a.torrents.size() == 1);
    CHECK(r.a.torrents[0].info.info_hash == peer.info_hash());
    CHECK(r.a.torrents[0].raw == peer.info_dict());
    CHECK(r.a.torrents[0].peer == peer.local_endpoint());
    REQUIRE(r.a.completions.size() == 1);
    CHECK(r.a.completions[0].result == api::outcome::accepted);
    CHECK(r.a.completions[0].attempts == 1);
    CHECK(r.a.gated.size() == 1);
}

TEST_CASE("a peer's DHT round trip reaches its session: 300 ms lengthens the deadline, unknown keeps it") {
    test::fake_peer slow(fixture("v1_multi"));
    test::fake_peer unknown(fixture("v1_single"));
    rig r; // timeout 2 s, so 300 ms plans past it (12 round trips + 1 s), up to 4 s
    r.offer(slow.info_hash(), slow.local_endpoint(), api::peer_rtt{300});
    r.offer(unknown.info_hash(), unknown.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    REQUIRE(r.a.completions.size() == 2);
    for (const auto& c : r.a.completions) CHECK(c.result == api::outcome::accepted);
    const auto& c = r.pipe.counters();
    CHECK(c.dht_rtt_extensions.load() == 1);
    CHECK(c.dht_rtt_saves.load() == 0); // loopback: served long before the unscaled deadline
}

TEST_CASE("tries by transport x encryption: a peer forcing RC4 under prefer_plaintext") {
    test::peer_script script;
    script.encryption = test::peer_encryption::forced_rc4;
    test::fake_peer peer(fixture("v1_multi"), script);
    rig r; // prefer_plaintext: the plaintext try is closed, the MSE one is served over RC4
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.stop();
    REQUIRE(r.a.completions.size() == 1);
    CHECK(r.a.completions[0].result == api::outcome::accepted);
    CHECK(r.a.completions[0].encryption == api::stream_encryption::rc4);
    CHECK(r.a.completions[0].transport == api::stream_transport::tcp);
    const auto& c = r.pipe.counters();
    constexpr std::size_t tcp = 0, utp = 1, plaintext = 0, mse = 1, mse_rc4 = 2;
    const auto closed = static_cast<std::size_t>(api::failure_class::handshake_failed);
    CHECK(c.session_tries[tcp][plaintext].load() == 1);
    CHECK(c.session_failures[tcp][plaintext][closed].load() == 1); // the fallen-back try keeps its class
    CHECK(c.session_tries[tcp][mse].load() == 1);
    CHECK(c.session_successes[tcp][mse_rc4].load() == 1);
    CHECK(c.session_successes[tcp][plaintext].load() == 0);
    CHECK(c.session_tries[utp][plaintext].load() + c.session_tries[utp][mse].load() == 0);
    CHECK(c.encryption_fallbacks.load() == 1);
    CHECK(c.attempt_failures[closed].load() == 0); // the attempt itself succeeded
}

TEST_CASE("the gate decides before any connection; a rejected hash produces nothing") {
    test::fake_peer peer(fixture("v1_single"));
    rig r;
    r.a.gate_pass = false;
    r.offer(peer.info_hash(), peer.local_endpoint());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (r.pipe.counters().gate_rejected.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(200ms);
    r.stop();
    CHECK(r.pipe.counters().gate_rejected.load() == 1);
    CHECK(peer.conversations().empty());
    CHECK(r.a.torrents.empty());
    CHECK(r.a.completions.empty());
}

TEST_CASE("no torrent callback, or one that throws, ends the round delivery_rejected") {
    test::fake_peer peer(fixture("v1_single"));
    SUBCASE("no callback") {
        rig r(rig::options(), false);
        r.offer(peer.info_hash(), peer.local_endpoint());
        REQUIRE(r.wait_completions(1));
        r.stop();
        CHECK(r.a.completions[0].result == api::outcome::delivery_rejected);
    }
    SUBCASE("a throwing callback is reported, never propagated") {
        rig r;
        r.a.throw_in_torrent = true;
        r.offer(peer.info_hash(), peer.local_endpoint());
        REQUIRE(r.wait_completions(1));
        r.stop();
        CHECK(r.a.completions[0].result == api::outcome::delivery_rejected);
        REQUIRE(r.a.errors.size() == 1);
        CHECK(r.a.errors[0].find("boom") != std::string::npos);
    }
    SUBCASE("an application that says no") {
        rig r;
        r.a.accept = false;
        r.offer(peer.info_hash(), peer.local_endpoint());
        REQUIRE(r.wait_completions(1));
        r.stop();
        CHECK(r.a.torrents.size() == 1);
        CHECK(r.a.completions[0].result == api::outcome::delivery_rejected);
    }
}

TEST_CASE("a peer serving wrong bytes: fetch_failed hash_mismatch naming that peer") {
    test::peer_script s;
    s.mode = test::peer_mode::corrupt_piece;
    test::fake_peer peer(fixture("v1_single"), s);
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.stop();
    const auto& c = r.a.completions[0];
    CHECK(c.result == api::outcome::fetch_failed);
    CHECK(c.failure == api::failure_class::hash_mismatch);
    REQUIRE(c.peer);
    CHECK(*c.peer == peer.local_endpoint());
    CHECK(r.a.torrents.empty());
}

TEST_CASE("up to three real attempts; failures are classified; the last attempt's class is reported") {
    const std::string dict = fixture("v1_single");
    test::peer_script refuse, silent, serve;
    refuse.mode = test::peer_mode::refuse;
    silent.mode = test::peer_mode::no_ut_metadata;
    test::fake_peer bad1(dict, refuse), bad2(dict, silent), good(dict, serve);
    rig r;
    // Offered oldest first: the queue keeps the freshest first, so `good` is tried last.
    r.offer(good.info_hash(), good.local_endpoint());
    r.offer(good.info_hash(), bad2.local_endpoint());
    r.offer(good.info_hash(), bad1.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.stop();
    const auto& c = r.a.completions[0];
    CHECK(c.result == api::outcome::accepted);
    CHECK(c.attempts == 3);
    CHECK(r.pipe.counters().attempt_failures[static_cast<std::size_t>(api::failure_class::connect_refused)].load() == 1);
    CHECK(r.pipe.counters().attempt_failures[static_cast<std::size_t>(api::failure_class::no_metadata_support)].load() == 1);
}

TEST_CASE("the peer failure cache: a refused peer is not tried again, and that is not an attempt") {
    test::peer_script refuse;
    refuse.mode = test::peer_mode::refuse;
    test::fake_peer bad(fixture("v1_single"), refuse);
    test::fake_peer other(fixture("v1_multi"), refuse);
    rig r;
    r.offer(bad.info_hash(), bad.local_endpoint());
    REQUIRE(r.wait_completions(1));
    // Another hash, same (refusing) endpoint: a cache hit sends nothing.
    r.offer(other.info_hash(), bad.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    CHECK(r.a.completions[0].failure == api::failure_class::connect_refused);
    CHECK(r.a.completions[0].attempts == 1);
    CHECK(r.a.completions[1].result == api::outcome::fetch_failed);
    CHECK(r.a.completions[1].failure == api::failure_class::no_peers);
    CHECK(r.a.completions[1].attempts == 0);
    CHECK(r.pipe.counters().failure_cache_hits.load() == 1);
}

id20 numbered_hash(std::uint8_t n) {
    id20 h;
    h.bytes.fill(0xd0);
    h.bytes[19] = n;
    return h;
}

TEST_CASE("a peer that refused us twice is skipped for metadata.refusal_ttl_secs, longer than an unreachable one") {
    test::peer_script refusing;
    refusing.mode = test::peer_mode::short_handshake; // handshake_failed, as a PE-forcing peer under tcp
    test::fake_peer peer(fixture("v1_single"), refusing);
    auto o = rig::options(); // peer_failure_ttl_secs 60, refusal_ttl_secs 600, first_timeout_ttl_secs 10
    o.encryption = metadata::encryption_policy::disable; // one connection per attempt, no MSE fallback
    rig r(o);
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    // A first refusal: skipped for first_timeout_ttl_secs, then asked again (issue 32).
    r.offer(numbered_hash(1), peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.clock.advance(11s);
    r.offer(numbered_hash(2), peer.local_endpoint());
    REQUIRE(r.wait_completions(3));
    CHECK(peer.conversations().size() == 2);
    // Refused again: other torrents at that endpoint are skipped past the unreachable TTL too.
    r.clock.advance(61s);
    r.offer(numbered_hash(3), peer.local_endpoint());
    REQUIRE(r.wait_completions(4));
    CHECK(peer.conversations().size() == 2);
    // Once the refusal TTL has passed it is asked again.
    r.clock.advance(540s);
    r.offer(numbered_hash(4), peer.local_endpoint());
    REQUIRE(r.wait_completions(5));
    r.stop();
    CHECK(peer.conversations().size() == 3);
    const auto& c = r.a.completions;
    for (std::size_t i : {0, 2, 4}) {
        CHECK(c[i].failure == api::failure_class::handshake_failed);
        CHECK(c[i].attempts == 1);
    }
    for (std::size_t i : {1, 3}) {
        CHECK(c[i].failure == api::failure_class::no_peers);
        CHECK(c[i].attempts == 0);
    }
    CHECK(r.pipe.counters().failure_cache_hits.load() == 2);
}

TEST_CASE("metadata.refusal_ttl_secs 0: a peer that refused us is asked again at its next announce") {
    test::peer_script refusing;
    refusing.mode = test::peer_mode::short_handshake;
    test::fake_peer peer(fixture("v1_single"), refusing);
    auto o = rig::options();
    o.encryption = metadata::encryption_policy::disable;
    o.refusal_ttl_secs = 0;
    rig r(o);
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.offer(numbered_hash(1), peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    CHECK(peer.conversations().size() == 2);
    CHECK(r.a.completions[1].failure == api::failure_class::handshake_failed);
    CHECK(r.pipe.counters().failure_cache_hits.load() == 0);
}

// Every round delivered, and no refusal was held against the peer (counted or cached).
void check_asked_again_not_held(rig& r) {
    for (const auto& c : r.a.completions) {
        CAPTURE(c.info_hash.hex());
        CHECK(c.result == api::outcome::accepted);
    }
    CHECK(r.pipe.counters().failure_cache_hits.load() == 0);
    CHECK(r.pipe.counters().attempt_failures[static_cast<std::size_t>(api::failure_class::handshake_failed)].load() ==
          0);
}

// A peer may refuse a second connection from us while it serves one (libtorrent sees every
// uTP connection of ours come from one port). That refusal is not the peer's: the round asks
// again once the other session ended, and nothing is remembered against the peer.
TEST_CASE("a peer that refused us while another round of ours had it open is asked again, not remembered") {
    test::peer_script busy;
    busy.refuse_while_busy = true;
    busy.delay = 100ms; // the first round's session stays open a while
    busy.also_serves.push_back(fixture("v1_multi"));
    test::fake_peer peer(fixture("v1_single"), busy);
    const id20 second = metadata::sha1_id(busy.also_serves[0]);
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (peer.conversations().empty() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
    r.offer(second, peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    check_asked_again_not_held(r);
    CHECK(r.a.torrents.size() == 2);
    CHECK(peer.conversations().size() >= 3); // served, refused while busy, asked again and served
}

// Issue 32: the next torrent of the same seeder, asked for right after a session it served,
// met libtorrent still holding that session (our close had not reached it) and was refused;
// the refusal was held against the seeder for metadata.refusal_ttl_secs, and the torrent lost.
TEST_CASE("a peer that refused us just after serving us is asked again, not remembered") {
    test::peer_script lingering;
    lingering.refuse_after_close = 500ms;
    lingering.also_serves.push_back(fixture("v1_multi"));
    test::fake_peer peer(fixture("v1_single"), lingering);
    const id20 second = metadata::sha1_id(lingering.also_serves[0]);
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.offer(second, peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    check_asked_again_not_held(r);
}

// A hybrid's second round, refused while the first had the peer open, ends as the first's
// delivery did. It must leave the rounds in flight then: a later announce of its key starts a
// new round instead of joining the one that ended.
TEST_CASE("a round that ended as its sibling's delivery leaves no trace: its key is fetched again later") {
    test::peer_script busy;
    busy.refuse_while_busy = true;
    busy.delay = 100ms;
    test::fake_peer peer(fixture("hybrid_multi"), busy);
    rig r;
    r.a.retry_first = 1;        // the first delivery could not be stored: both keys end sink_failed
    // The second round waits for that answer: it comes after the second round asks again,
    // which is once the first's session closed and its linger passed (3 s, pipeline.cpp).
    r.a.torrent_delay = 4s;
    r.offer(peer.info_hash(), peer.local_endpoint());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (peer.conversations().empty() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
    r.offer(peer.v2_key(), peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.offer(peer.v2_key(), peer.local_endpoint()); // announced again
    REQUIRE(r.wait_completions(3));
    r.stop();
    CHECK(r.a.completions[0].result == api::outcome::sink_failed);
    CHECK(r.a.completions[1].result == api::outcome::sink_failed);
    CHECK(r.a.completions[2].result == api::outcome::accepted);
    CHECK(r.a.torrents.size() == 2);
}

TEST_CASE("several peers share the pieces of a multi-piece dict") {
    const std::string dict = big_dict(3000); // ~4 metadata pieces
    // Slow peers: one fast peer could serve every piece before the other is connected on a
    // loaded machine (it did under ThreadSanitizer), and the test would show no sharing.
    test::peer_script slow;
    slow.delay = 100ms;
    test::fake_peer p1(dict, slow), p2(dict, slow);
    rig r;
    r.offer(p1.info_hash(), p1.local_endpoint());
    r.offer(p1.info_hash(), p2.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.stop();
    CHECK(r.a.completions[0].result == api::outcome::accepted);
    REQUIRE(r.a.torrents.size() == 1);
    CHECK(r.a.torrents[0].raw == dict);
    const auto c1 = p1.conversations(), c2 = p2.conversations();
    REQUIRE(c1.size() == 1);
    REQUIRE(c2.size() == 1);
    CHECK(c1[0].requests.size() + c2[0].requests.size() >= 4);
    // A piece is held by one peer at a time: no piece was requested from both.
    std::set<std::uint32_t> s1(c1[0].requests.begin(), c1[0].requests.end());
    for (auto p : c2[0].requests) CHECK_FALSE(s1.contains(p));
}

TEST_CASE("a dict from several peers that fails verification is refetched from one before blaming") {
    const std::string dict = big_dict(3000);
    test::peer_script corrupt;
    corrupt.mode = test::peer_mode::corrupt_piece;
    corrupt.target_piece = 1;
    test::fake_peer good(dict), bad(dict, corrupt);
    rig r;
    r.offer(good.info_hash(), good.local_endpoint()); // older: tried second in the batch
    r.offer(good.info_hash(), bad.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.stop();
    const auto& c = r.a.completions[0];
    if (c.result == api::outcome::accepted) {
        // The corrupt piece went to the good peer: the dict verified at once.
        CHECK(r.a.torrents[0].raw == dict);
    } else {
        // The blame is exact: a dict with pieces from both peers was refetched from one peer
        // alone (one refetch); one the corrupt peer served entirely (the good one connected
        // too late to take a piece, as happens on a loaded machine) needed none.
        CHECK(r.pipe.counters().refetches.load() <= 1);
        CHECK(c.failure == api::failure_class::hash_mismatch);
        REQUIRE(c.peer);
        CHECK(*c.peer == bad.local_endpoint());
    }
}

TEST_CASE("a hash offered again while in flight joins the running round: one round, one completion") {
    test::peer_script slow;
    slow.delay = 200ms;
    test::fake_peer peer(fixture("v1_single"), slow), other(fixture("v1_single"));
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    std::this_thread::sleep_for(100ms);
    r.offer(peer.info_hash(), other.local_endpoint());
    REQUIRE(r.wait_completions(1));
    std::this_thread::sleep_for(300ms);
    r.stop();
    CHECK(r.a.completions.size() == 1);
    CHECK(r.a.torrents.size() == 1);
    CHECK(r.pipe.counters().merged_in_flight.load() == 1);
}

TEST_CASE("a torrent delivered recently is not fetched again") {
    test::fake_peer peer(fixture("v1_single"));
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.offer(peer.info_hash(), peer.local_endpoint());
    std::this_thread::sleep_for(300ms);
    r.stop();
    CHECK(r.a.completions.size() == 1);
    CHECK(r.pipe.counters().already_delivered.load() == 1);
    CHECK(peer.conversations().size() == 1);
}

TEST_CASE("once the delivered filter's period has passed on the pipeline's clock, a torrent is fetched again") {
    test::fake_peer peer(fixture("v1_single"));
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.clock.advance(std::chrono::hours(23)); // within the day: still delivered
    r.offer(peer.info_hash(), peer.local_endpoint());
    std::this_thread::sleep_for(100ms);
    CHECK(r.a.completion_count() == 1);
    r.clock.advance(std::chrono::hours(2)); // past it, without waiting a day
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    CHECK(r.a.torrents.size() == 2);
    CHECK(peer.conversations().size() == 2);
}

TEST_CASE("a hybrid reached under both keys is delivered once") {
    test::fake_peer peer(fixture("hybrid_multi"));
    rig r;
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(r.wait_completions(1));
    r.offer(peer.v2_key(), peer.local_endpoint());
    std::this_thread::sleep_for(300ms);
    r.stop();
    REQUIRE(r.a.torrents.size() == 1);
    CHECK(r.a.torrents[0].info.has_v1());
    CHECK(r.a.torrents[0].info.has_v2());
    CHECK(r.pipe.counters().already_delivered.load() == 1);
}

// libtorrent announces a hybrid under both keys, so two rounds run side by side. Once one
// delivered, the other has nothing left to fetch: it ends at once as a duplicate (accepted),
// not when its peer times out, and not cancelled at shutdown as if the torrent were lost.
TEST_CASE("a hybrid delivered under one key ends the round still fetching it under the other") {
    test::peer_script stall;
    stall.mode = test::peer_mode::silent;
    test::fake_peer silent(fixture("hybrid_multi"), stall), good(fixture("hybrid_multi"));
    auto o = rig::options();
    o.timeout_secs = 60; // the silent peer would hold its round far past the wait below
    rig r(o);
    r.offer(silent.v2_key(), silent.local_endpoint());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (r.pipe.counters().attempts.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    REQUIRE(r.pipe.counters().attempts.load() == 1);
    r.offer(good.info_hash(), good.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    std::lock_guard l(r.a.m);
    REQUIRE(r.a.torrents.size() == 1);
    for (const auto& c : r.a.completions) CHECK(c.result == api::outcome::accepted);
    CHECK(r.pipe.counters().duplicates.load() == 1);
    CHECK(r.pipe.counters().attempt_failures[static_cast<std::size_t>(api::failure_class::cancelled)].load() == 0);
}

TEST_CASE("a hybrid answered retry under one key is not taken as delivered under the other") {
    test::fake_peer peer(fixture("hybrid_multi"));
    rig r;
    r.a.retry_first = 1;
    r.a.torrent_delay = 300ms; // the other key's round reaches the handover meanwhile
    r.offer(peer.info_hash(), peer.local_endpoint());
    r.offer(peer.v2_key(), peer.local_endpoint());
    REQUIRE(r.wait_completions(2));
    {
        std::lock_guard l(r.a.m);
        REQUIRE(r.a.torrents.size() == 1);
        for (const auto& c : r.a.completions) CHECK(c.result == api::outcome::sink_failed);
        CHECK(r.a.errors.size() == 1); // without a store: "fetched again when it is next announced"
    }
    // Announced again: fetched and delivered once more, this time for good.
    r.offer(peer.v2_key(), peer.local_endpoint());
    REQUIRE(r.wait_completions(3));
    r.offer(peer.info_hash(), peer.local_endpoint());
    std::this_thread::sleep_for(300ms);
    r.stop();
    CHECK(r.a.torrents.size() == 2);
    CHECK(r.a.completions[2].result == api::outcome::accepted);
    CHECK(r.pipe.counters().sink_failures.load() == 1);
}

// The crawler closes the application's input before it stops the pipeline, so a hash can
// reach the gate in between. It must not take the gate's default and start a round only to
// cancel it: the host would get a completion for a hash it was never asked about.
TEST_CASE("a hash that reaches the gate while the application is closing starts no round") {
    test::peer_script stall;
    stall.mode = test::peer_mode::silent;
    const std::string dict = "d6:lengthi1e4:name6:closed12:piece lengthi16384e6:pieces20:" + std::string(20, 'p') + "e";
    test::fake_peer peer(dict, stall);
    auto o = rig::options();
    o.timeout_secs = 30;
    rig r(o);
    r.delivery.close_input();
    r.offer(peer.info_hash(), peer.local_endpoint());
    // A round would start its first attempt at once; give it the chance (bounded, and the
    // check below does not depend on how long this took).
    const auto until = std::chrono::steady_clock::now() + 500ms;
    while (r.pipe.counters().jobs_started.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    REQUIRE(r.pipe.counters().jobs_started.load() == 1);
    while (r.pipe.counters().attempts.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    r.stop();
    CHECK(r.pipe.counters().attempts.load() == 0);
    CHECK(r.a.completion_count() == 0);
    CHECK(r.pipe.counters().gate_rejected.load() == 0); // not a rejection: the hash is not held back
}

// The same window after the gate: a round that passed it before the input closed fetches
// its torrent, which the application never sees. It was neither delivered nor rejected:
// the round must end cancelled (due again at once), not delivery_rejected (done forever).
TEST_CASE("a torrent fetched while the application is closing is not offered, and its round completes cancelled") {
    test::peer_script serve;
    const std::string dict = "d6:lengthi1e4:name7:closing12:piece lengthi16384e6:pieces20:" + std::string(20, 'p') + "e";
    test::fake_peer peer(dict, serve);
    rig r;
    r.a.in_gate = [&] { r.delivery.close_input(); }; // as a host that shuts down from its gate
    r.offer(peer.info_hash(), peer.local_endpoint());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (r.pipe.counters().bytes_fetched.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    REQUIRE(r.pipe.counters().bytes_fetched.load() > 0);
    CHECK(r.wait_completions(1, 5s));
    r.stop();
    CHECK(r.a.torrents.empty());
    REQUIRE(r.a.completions.size() == 1);
    CHECK(r.a.completions[0].result == api::outcome::cancelled);
}

// Waits (bounded) until `flag` is set.
bool wait_flag(const std::atomic<bool>& flag, std::chrono::seconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!flag && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
    return flag;
}

// A torrent the application has when the pipeline stops is answered still: push mode waits
// for the running callback (destroy waits for it anyway), and the round settles as it
// answered. Before, the round got no completion, and a retry store's lease expired instead.
TEST_CASE("a torrent whose callback runs when the pipeline stops: the stop waits, and the round settles as answered") {
    test::fake_peer peer(fixture("v1_single"));
    rig r;
    std::atomic<bool> entered{false}, release{false}, stopped{false};
    r.a.in_torrent = [&] {
        entered = true;
        wait_flag(release); // bounded
    };
    SUBCASE("accepted") {}
    SUBCASE("rejected") { r.a.accept = false; }
    r.offer(peer.info_hash(), peer.local_endpoint());
    REQUIRE(wait_flag(entered));
    std::thread stopper([&] {
        r.pipe.stop();
        stopped = true;
    });
    std::this_thread::sleep_for(50ms); // the stop is under way: it has nothing else to wait for
    const bool stopped_before_answer = stopped;
    release = true;
    stopper.join();
    r.stop();
    CHECK_FALSE(stopped_before_answer);
    REQUIRE(r.a.torrents.size() == 1);
    REQUIRE(r.a.completions.size() == 1);
    CHECK(r.a.completions[0].result == (r.a.accept ? api::outcome::accepted : api::outcome::delivery_rejected));
}

// The same when the host polls: the answer to a torrent it took before shutdown is awaited
// for metadata.gate_timeout_millis (the answer table's time); one that does not come ends
// the round cancelled (shut down while in flight), not sink_failed.
TEST_CASE("polling: a torrent taken before shutdown settles with the answer that comes, or cancelled without one") {
    test::fake_peer peer(fixture("v1_single"));
    manual_clock clock;
    api::event_delivery delivery{api::delivery_options{1024, 1024, 300ms}};
    delivery.configure({}, true);
    delivery.start();
    metadata::pipeline pipe(rig::options(), delivery, clock);
    pipe.start();
    REQUIRE(pipe.ingress().try_push(api::hash_event{peer.info_hash(), peer.local_endpoint(), peer.local_endpoint(),
                                                    api::hash_source::announce, clock.now()}));
    const auto type_of = [](const api::polled_event& e) { return nlohmann::json::parse(e.json).at("type").get<std::string>(); };
    std::optional<std::uint64_t> torrent_id;
    api::polled_event e;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!torrent_id && std::chrono::steady_clock::now() < until) {
        if (delivery.poll(100ms, e) != api::event_delivery::poll_status::event) continue;
        const auto doc = nlohmann::json::parse(e.json);
        if (type_of(e) == "gate") delivery.answer_event(doc.at("id"), 1);
        if (type_of(e) == "torrent") torrent_id = doc.at("id").get<std::uint64_t>();
    }
    REQUIRE(torrent_id);
    delivery.close_input(); // as the crawler does first
    std::thread stopper([&] { pipe.stop(); });
    std::string expected = "cancelled";
    SUBCASE("answered after shutdown began") {
        CHECK(delivery.answer_event(*torrent_id, static_cast<int>(api::answer::accept)));
        expected = "accepted";
    }
    SUBCASE("never answered") {}
    stopper.join();
    delivery.finish();
    std::vector<std::string> outcomes;
    while (delivery.poll(2s, e) == api::event_delivery::poll_status::event)
        if (type_of(e) == "completion") outcomes.push_back(nlohmann::json::parse(e.json).at("outcome"));
    delivery.join(std::nullopt);
    CHECK(outcomes == std::vector<std::string>{expected});
}

TEST_CASE("shutdown while fetching: every gated round completes exactly once, as cancelled") {
    test::peer_script stall;
    stall.mode = test::peer_mode::silent;
    std::vector<std::unique_ptr<test::fake_peer>> peers;
    auto o = rig::options();
    o.timeout_secs = 30;
    rig r(o);
    for (int i = 0; i < 5; ++i) {
        // Five different dicts (names differ), so five different hashes.
        std::string d = "d6:lengthi1e4:name2:n" + std::to_string(i) + "12:piece lengthi16384e6:pieces20:" + std::string(20, 'p') + "e";
        peers.push_back(std::make_unique<test::fake_peer>(d, stall));
        r.offer(peers.back()->info_hash(), peers.back()->local_endpoint());
    }
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (r.pipe.counters().attempts.load() < 5 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    REQUIRE(r.pipe.counters().attempts.load() == 5);
    r.stop();
    REQUIRE(r.a.completions.size() == 5);
    std::set<id20> seen;
    for (const auto& c : r.a.completions) {
        CHECK(c.result == api::outcome::cancelled);
        seen.insert(c.info_hash);
    }
    CHECK(seen.size() == 5);
}

// A sanitizer's quarantine and shadow memory would blur RSS: this runs in the release stage.
TEST_CASE("256 peers claiming 10 MiB and sending nothing cost little memory; a good torrent still arrives" *
          doctest::skip(sanitized)) {
    constexpr std::size_t liars = 256;
    test::peer_script claim;
    claim.mode = test::peer_mode::huge_claim_silent;
    std::vector<std::unique_ptr<test::fake_peer>> peers;
    for (std::size_t i = 0; i < liars; ++i)
        peers.push_back(std::make_unique<test::fake_peer>(test::make_info_dict(300, static_cast<std::uint32_t>(i + 7)), claim));
    const std::string dict = big_dict(300); // several pieces
    test::fake_peer good(dict);
    auto o = rig::options();
    o.max_worker_count = liars + 16; // every liar's round runs at once
    o.max_queue_size = 1024;
    rig r(o);
    const std::size_t before = rss_bytes();
    for (const auto& p : peers) r.offer(p->info_hash(), p->local_endpoint());
    r.offer(good.info_hash(), good.local_endpoint());
    std::size_t peak = before;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until && r.a.completion_count() < liars + 1) {
        peak = std::max(peak, rss_bytes());
        std::this_thread::sleep_for(5ms);
    }
    peak = std::max(peak, rss_bytes());
    const std::uint64_t held_at_end = r.pipe.counters().memory_held.load();
    r.stop();
    MESSAGE("RSS before " << before / 1024 << " KiB, peak " << peak / 1024 << " KiB");
    CHECK(peak - before <= std::size_t{128} << 20);
    REQUIRE(r.a.completions.size() == liars + 1);
    std::size_t accepted = 0;
    for (const auto& c : r.a.completions) {
        if (c.info_hash == good.info_hash()) {
            CHECK(c.result == api::outcome::accepted);
            ++accepted;
        } else {
            CHECK(c.result == api::outcome::fetch_failed);
            CHECK(c.failure == api::failure_class::timeout);
        }
    }
    CHECK(accepted == 1);
    REQUIRE(r.a.torrents.size() == 1);
    CHECK(r.a.torrents[0].raw == dict);
    CHECK(held_at_end == 0);
    CHECK(r.pipe.counters().memory_held.load() == 0);
}

TEST_CASE("a spent metadata budget: the fetch waits, then fails as size_limit; the budget comes back") {
    test::peer_script claim;
    claim.mode = test::peer_mode::huge_claim_silent;
    // The victim never sends a piece either, so it cannot finish in the moment between the
    // hog's deadline and its own: the verdict does not depend on timing.
    test::fake_peer hog(test::make_info_dict(300, 99), claim), good(test::make_info_dict(300, 98), claim);
    auto o = rig::options();
    o.max_in_flight_bytes = 4 * wire::metadata_piece_size; // exactly the hog's pipeline of 4 pieces
    rig r(o);
    r.offer(hog.info_hash(), hog.local_endpoint());
    // Wait until the hog's session holds the whole budget.
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until && r.pipe.counters().memory_held.load() < o.max_in_flight_bytes)
        std::this_thread::sleep_for(5ms);
    REQUIRE(r.pipe.counters().memory_held.load() == o.max_in_flight_bytes);
    r.offer(good.info_hash(), good.local_endpoint());
    REQUIRE(r.wait_completions(2));
    r.stop();
    bool saw_good = false;
    for (const auto& c : r.a.completions) {
        if (c.info_hash != good.info_hash()) continue;
        saw_good = true;
        CHECK(c.result == api::outcome::fetch_failed);
        CHECK(c.failure == api::failure_class::size_limit);
    }
    CHECK(saw_good);
    CHECK(r.pipe.counters().memory_refused.load() > 0);
    CHECK(r.pipe.counters().memory_starved.load() >= 1);
    CHECK(r.pipe.counters().memory_held.load() == 0);
    CHECK(r.a.torrents.empty());
}

} // TEST_SUITE
