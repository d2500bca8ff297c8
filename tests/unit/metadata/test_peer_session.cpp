// The metadata peer session against scripted fake peers on loopback: protocol.md part d
// items 21-27 at the session level, the single deadline, connect failures, pipelining,
// sessions sharing one piece source, and cancellation.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "util/hashing.hpp"
#include "metadata/peer_session.hpp"
#include "streams/utp_stream.hpp"
#include "support/fake_peer.hpp"

using namespace std::chrono_literals;
using dhtc::id20;
using dhtc::metadata::run_peer_session;
using dhtc::metadata::session_failure;
using dhtc::metadata::session_request;
using dhtc::metadata::session_result;
using dhtc::test::fake_peer;
using dhtc::test::make_info_dict;
using dhtc::test::peer_mode;
using dhtc::test::peer_script;
using dhtc::test::simple_piece_source;
using dhtc::wire::wire_error;

namespace {

using clock_type = std::chrono::steady_clock;

// Generous: these bound how long a broken test can hang, they assert no speed.
constexpr auto run_bound = 20s;
constexpr auto slack = 1500ms;

id20 next_peer_id() {
    static std::uint8_t n = 0;
    id20 id;
    id.bytes.fill(0xa5);
    id.bytes[19] = ++n;
    return id;
}

session_request make_request(const fake_peer& fp, std::chrono::milliseconds budget = 5000ms) {
    session_request r;
    r.info_hash = fp.info_hash();
    r.peer = fp.local_endpoint();
    r.peer_id = next_peer_id();
    r.deadline = clock_type::now() + budget;
    return r;
}

session_result run_one(const session_request& req, dhtc::metadata::piece_source& src, std::uint32_t slot = 7) {
    asio::io_context io;
    std::optional<session_result> out;
    asio::co_spawn(io, run_peer_session(req, src, slot), [&](std::exception_ptr e, session_result r) {
        if (!e) out = r;
    });
    io.run_for(run_bound);
    REQUIRE(out.has_value());
    return *out;
}

// Serves `info` with `script` to one session and returns its result.
session_result fetch(const std::string& info, const peer_script& script, simple_piece_source& src,
                     std::chrono::milliseconds budget = 5000ms) {
    fake_peer fp(info, script);
    return run_one(make_request(fp, budget), src);
}

void check_failure(const session_result& r, session_failure f, wire_error e) {
    CHECK_MESSAGE(r.failure == f, "got ", dhtc::api::to_string(r.failure), " / ", dhtc::wire::to_string(r.error));
    CHECK_MESSAGE(r.error == e, "got ", dhtc::wire::to_string(r.error));
}

} // namespace

TEST_SUITE("peer_session") {

TEST_CASE("fetches a one-piece dict like from libtorrent, and puts only allowed messages on the wire") {
    const std::string info = make_info_dict(1000);
    fake_peer fp(info);
    simple_piece_source src;
    const session_result r = run_one(make_request(fp), src, 3);
    CHECK(r.ok());
    CHECK(r.connected);
    CHECK(r.metadata_size == 1000);
    CHECK(r.pieces_received == 1);
    CHECK(r.bytes_received > dhtc::wire::handshake_size + 1000);
    CHECK(src.bytes() == info);
    CHECK(src.releases_of(3) == 1);
    CHECK(src.held(3) == 0);

    REQUIRE(fp.wait_ended(1, 5000ms));
    const auto convs = fp.conversations();
    REQUIRE(convs.size() == 1);
    const auto& c = convs[0];
    CHECK(c.got_handshake);
    CHECK((c.reserved[5] & 0x10) != 0); // extension protocol
    CHECK((c.reserved[7] & 0x10) == 0); // never the v2 bit
    CHECK(c.info_hash == fp.info_hash());
    // Only extended messages: no bitfield (5), interested (2), have_all (0x0e).
    CHECK(std::all_of(c.message_ids.begin(), c.message_ids.end(), [](std::uint8_t id) { return id == 20; }));
    REQUIRE(c.ext_handshakes.size() == 1);
    CHECK(c.ext_handshakes[0].find("11:ut_metadatai1e") != std::string::npos);
    CHECK(c.ext_handshakes[0].find("upload_only") == std::string::npos);
    CHECK(c.ext_handshakes[0].find("metadata_size") == std::string::npos);
    CHECK(c.requests == std::vector<std::uint32_t>{0});
    CHECK(c.ext_ids == std::vector<std::uint8_t>{2}); // the PEER's ut_metadata id
}

TEST_CASE("multi-piece dicts: piece boundaries and a pipelined 30+ piece fetch") {
    for (std::size_t size : {std::size_t{16384}, std::size_t{16385}, std::size_t{32768}, std::size_t{31 * 16384 + 5}}) {
        CAPTURE(size);
        const std::string info = make_info_dict(size, static_cast<std::uint32_t>(size));
        fake_peer fp(info);
        simple_piece_source src;
        const session_result r = run_one(make_request(fp), src);
        CHECK(r.ok());
        CHECK(src.bytes() == info);
        CHECK(r.pieces_received == dhtc::wire::piece_count(size));
        REQUIRE(fp.wait_ended(1, 5000ms));
        const auto c = fp.conversations().at(0);
        CHECK(c.requests.size() == dhtc::wire::piece_count(size));
        // Requests are pipelined up to the default depth, never beyond.
        CHECK(src.max_held(7) == std::min<std::size_t>(4, dhtc::wire::piece_count(size)));
    }
}

TEST_CASE("noise is ignored and a request to us is answered with a reject") {
    peer_script s;
    s.noise = true; // bitfield, have, have_all, port, unknown ids, keep-alives, msg_type 7
    s.ask_us = true;
    const std::string info = make_info_dict(40000);
    fake_peer fp(info, s);
    simple_piece_source src;
    const session_result r = run_one(make_request(fp), src);
    CHECK(r.ok());
    CHECK(src.bytes() == info);
    REQUIRE(fp.wait_ended(1, 5000ms));
    const auto c = fp.conversations().at(0);
    CHECK(c.rejects == std::vector<std::uint32_t>{0});
    CHECK(std::all_of(c.ext_ids.begin(), c.ext_ids.end(), [](std::uint8_t id) { return id == 2; }));
}

TEST_CASE("a hybrid reply with our key and the v2 bit set is accepted") {
    peer_script s;
    s.v2_bit = true;
    simple_piece_source src;
    const std::string info = make_info_dict(500);
    CHECK(fetch(info, s, src).ok());
    CHECK(src.bytes() == info);
}

TEST_CASE("the session connects by the v2 key when that is the key it saw") {
    const std::string info = make_info_dict(700);
    fake_peer fp(info);
    simple_piece_source src;
    session_request req = make_request(fp);
    req.info_hash = fp.v2_key();
    CHECK(run_one(req, src).ok());
    CHECK(src.bytes() == info);
}

TEST_CASE("handshake failures (protocol.md d.21)") {
    struct row {
        peer_mode mode;
        session_failure failure;
        wire_error error;
    };
    const row rows[] = {
        {peer_mode::bad_pstrlen, session_failure::handshake_failed, wire_error::bad_pstrlen},
        {peer_mode::bad_protocol, session_failure::handshake_failed, wire_error::bad_protocol},
        {peer_mode::short_handshake, session_failure::handshake_failed, wire_error::short_handshake},
        {peer_mode::wrong_info_hash, session_failure::handshake_failed, wire_error::info_hash_mismatch},
        {peer_mode::v2_key_reply, session_failure::handshake_failed, wire_error::info_hash_mismatch},
        {peer_mode::echo_peer_id, session_failure::handshake_failed, wire_error::own_peer_id},
        {peer_mode::no_extension_bit, session_failure::no_extension_support, wire_error::no_extension_bit},
        {peer_mode::close_after_handshake, session_failure::disconnected, wire_error::none},
    };
    const std::string info = make_info_dict(900);
    for (const row& w : rows) {
        CAPTURE(static_cast<int>(w.mode));
        peer_script s;
        s.mode = w.mode;
        simple_piece_source src;
        const session_result r = fetch(info, s, src);
        check_failure(r, w.failure, w.error);
        CHECK(r.connected);
        CHECK(src.releases_of(7) == 1);
    }
}

TEST_CASE("extension handshake failures (protocol.md d.23, d.24)") {
    struct row {
        peer_mode mode;
        const char* raw; // the whole extension handshake payload when set
        session_failure failure;
        wire_error error;
    };
    const row rows[] = {
        {peer_mode::ext_handshake_not_dict, nullptr, session_failure::protocol_error, wire_error::bad_ext_handshake},
        {peer_mode::no_ut_metadata, nullptr, session_failure::no_metadata_support, wire_error::no_ut_metadata},
        {peer_mode::ut_metadata_zero, nullptr, session_failure::no_metadata_support, wire_error::ut_metadata_disabled},
        {peer_mode::oversize_claim, nullptr, session_failure::size_limit, wire_error::metadata_too_large},
        {peer_mode::serve, "d1:mi1e13:metadata_sizei900ee", session_failure::protocol_error, wire_error::bad_ext_m},
        {peer_mode::serve, "d1:md11:ut_metadatai-1ee13:metadata_sizei900ee", session_failure::protocol_error,
         wire_error::bad_ut_metadata_id},
        {peer_mode::serve, "d1:md11:ut_metadatai256ee13:metadata_sizei900ee", session_failure::protocol_error,
         wire_error::bad_ut_metadata_id},
        {peer_mode::serve, "d1:md11:ut_metadata1:2e13:metadata_sizei900ee", session_failure::protocol_error,
         wire_error::bad_ut_metadata_id},
        {peer_mode::serve, "d1:md11:ut_metadatai2eee", session_failure::no_metadata_support,
         wire_error::no_metadata_size},
        {peer_mode::serve, "d1:md11:ut_metadatai2ee13:metadata_sizei0ee", session_failure::protocol_error,
         wire_error::bad_metadata_size},
        {peer_mode::serve, "d1:md11:ut_metadatai2ee13:metadata_sizei-900ee", session_failure::protocol_error,
         wire_error::bad_metadata_size},
        {peer_mode::serve, "d1:md11:ut_metadatai2ee13:metadata_size3:900e", session_failure::protocol_error,
         wire_error::bad_metadata_size},
        {peer_mode::serve, "d1:md11:ut_metadatai2ee13:metadata_sizei2147483648ee", session_failure::size_limit,
         wire_error::metadata_too_large},
        {peer_mode::serve, "d1:md11:ut_metadatai2ee13:metadata_sizei9223372036854775808ee",
         session_failure::protocol_error, wire_error::bad_ext_handshake},
    };
    const std::string info = make_info_dict(900);
    for (const row& w : rows) {
        CAPTURE(static_cast<int>(w.mode));
        CAPTURE(w.raw ? w.raw : "");
        peer_script s;
        s.mode = w.mode;
        if (w.raw) s.ext_handshake_raw = w.raw;
        simple_piece_source src;
        const session_result r = fetch(info, s, src);
        check_failure(r, w.failure, w.error);
        CHECK(src.releases_of(7) == 1);
    }
}

TEST_CASE("the caller's metadata size cap applies") {
    const std::string info = make_info_dict(5000);
    fake_peer fp(info);
    simple_piece_source src;
    session_request req = make_request(fp);
    req.max_metadata_size = 4999;
    check_failure(run_one(req, src), session_failure::size_limit, wire_error::metadata_too_large);
}

TEST_CASE("a metadata_size that disagrees with the job is this peer's failure") {
    const std::string info = make_info_dict(20000);
    peer_script s;
    s.mode = peer_mode::wrong_metadata_size;
    {
        simple_piece_source src(info.size()); // an earlier peer fixed the size
        const session_result r = fetch(info, s, src);
        check_failure(r, session_failure::protocol_error, wire_error::bad_metadata_size);
        CHECK(r.metadata_size == info.size() + 1);
    }
    {
        simple_piece_source src; // first to speak: its size stands, and its last piece is short
        check_failure(fetch(info, s, src), session_failure::protocol_error, wire_error::bad_piece_length);
        CHECK(src.size() == info.size() + 1);
    }
}

TEST_CASE("a repeated extension handshake moves the peer's ut_metadata id") {
    peer_script s;
    s.mode = peer_mode::rehandshake;
    const std::string info = make_info_dict(9 * 16384 + 100);
    fake_peer fp(info, s);
    simple_piece_source src;
    CHECK(run_one(make_request(fp), src).ok());
    CHECK(src.bytes() == info);
    REQUIRE(fp.wait_ended(1, 5000ms));
    const auto c = fp.conversations().at(0);
    REQUIRE(!c.ext_ids.empty());
    CHECK(c.ext_ids.front() == 2);
    CHECK(c.ext_ids.back() == 3);
}

TEST_CASE("framing attacks (protocol.md d.22)") {
    const std::string info = make_info_dict(900);
    SUBCASE("length 0xFFFFFFFF") {
        peer_script s;
        s.mode = peer_mode::huge_length;
        simple_piece_source src;
        check_failure(fetch(info, s, src), session_failure::size_limit, wire_error::message_too_large);
    }
    SUBCASE("length just over 1 MiB") {
        peer_script s;
        s.mode = peer_mode::huge_length;
        s.length_value = (1u << 20) + 1;
        simple_piece_source src;
        check_failure(fetch(info, s, src), session_failure::size_limit, wire_error::message_too_large);
    }
    SUBCASE("a ut_metadata message announcing 20000 bytes is refused from its header") {
        peer_script s;
        s.raw_after_ext = std::string("\x00\x00\x4e\x20\x14\x01", 6); // 20000 bytes, extended, our ut id
        simple_piece_source src;
        const auto start = clock_type::now();
        const session_result r = fetch(info, s, src, 3000ms);
        check_failure(r, session_failure::size_limit, wire_error::message_too_large);
        CHECK(clock_type::now() - start < 2500ms); // did not wait for the body until the deadline
    }
    SUBCASE("an extended message of length 1") {
        peer_script s;
        s.mode = peer_mode::short_extended;
        simple_piece_source src;
        check_failure(fetch(info, s, src), session_failure::protocol_error, wire_error::short_extended_message);
    }
    SUBCASE("a keep-alive flood does not extend the deadline") {
        peer_script s;
        s.mode = peer_mode::keepalive_flood;
        simple_piece_source src;
        const session_result r = fetch(info, s, src, 400ms);
        check_failure(r, session_failure::timeout, wire_error::none);
        CHECK(r.elapsed >= 390ms);
        CHECK(r.elapsed < 400ms + slack);
        CHECK(r.bytes_received > 1000);
    }
}

TEST_CASE("bad data messages (protocol.md d.25)") {
    struct row {
        peer_mode mode;
        std::size_t size;
        std::uint32_t target;
        session_failure failure;
        wire_error error;
    };
    const std::size_t multi = 31 * 16384 + 5;
    const row rows[] = {
        {peer_mode::reject_all, 900, 0, session_failure::rejected, wire_error::rejected},
        {peer_mode::reject_as_data, 900, 0, session_failure::protocol_error, wire_error::missing_data},
        {peer_mode::data_dict_past_payload, 900, 0, session_failure::protocol_error, wire_error::bad_ut_metadata_dict},
        {peer_mode::total_size_mismatch, 900, 0, session_failure::protocol_error, wire_error::bad_total_size},
        {peer_mode::unrequested_piece, multi, 30, session_failure::protocol_error, wire_error::unrequested_piece},
        {peer_mode::unrequested_piece, multi, 40, session_failure::protocol_error, wire_error::piece_out_of_range},
        {peer_mode::short_piece, 40000, 0, session_failure::protocol_error, wire_error::bad_piece_length},
        {peer_mode::long_last_piece, 40000, 0, session_failure::protocol_error, wire_error::trailing_bytes},
    };
    for (const row& w : rows) {
        CAPTURE(static_cast<int>(w.mode));
        peer_script s;
        s.mode = w.mode;
        s.target_piece = w.target;
        simple_piece_source src;
        check_failure(fetch(make_info_dict(w.size), s, src), w.failure, w.error);
        CHECK(src.releases_of(7) == 1);
        CHECK(src.held(7) == 0);
    }
    SUBCASE("negative piece") {
        peer_script s;
        s.first_answer_raw = "d8:msg_typei1e5:piecei-1e10:total_sizei900ee" + std::string(900, 'x');
        simple_piece_source src;
        check_failure(fetch(make_info_dict(900), s, src), session_failure::protocol_error, wire_error::bad_piece);
    }
    SUBCASE("unterminated dict") {
        peer_script s;
        s.first_answer_raw = "d8:msg_typei1e5:piecei0e10:total_sizei900e";
        simple_piece_source src;
        check_failure(fetch(make_info_dict(900), s, src), session_failure::protocol_error,
                      wire_error::bad_ut_metadata_dict);
    }
}

TEST_CASE("bad metadata is delivered as served: verifying and parsing belong to the job (d.26, d.27)") {
    SUBCASE("a corrupted piece") {
        peer_script s;
        s.mode = peer_mode::corrupt_piece;
        s.target_piece = 1;
        const std::string info = make_info_dict(3 * 16384);
        simple_piece_source src;
        CHECK(fetch(info, s, src).ok());
        REQUIRE(src.bytes().size() == info.size());
        CHECK(src.bytes().substr(0, 16384) == std::string_view(info).substr(0, 16384));
        CHECK(src.bytes().substr(16384, 16384) != std::string_view(info).substr(16384, 16384));
        CHECK(src.bytes().substr(32768) == std::string_view(info).substr(32768));
    }
    SUBCASE("a hostile info dict, non-canonical, with trailing bytes") {
        const std::string info = "d4:name2:..6:lengthi-1e12:piece lengthi0e6:pieces3:abcee trailing";
        simple_piece_source src;
        CHECK(fetch(info, peer_script{}, src).ok());
        CHECK(src.bytes() == info);
    }
}

TEST_CASE("a slow peer completes within the deadline") {
    peer_script s;
    s.delay = 30ms;
    const std::string info = make_info_dict(5 * 16384);
    simple_piece_source src;
    const session_result r = fetch(info, s, src, 10000ms);
    CHECK(r.ok());
    CHECK(src.bytes() == info);
}

TEST_CASE("one deadline for the whole attempt") {
    SUBCASE("a peer that accepts and stays silent") {
        peer_script s;
        s.mode = peer_mode::silent;
        simple_piece_source src;
        const session_result r = fetch(make_info_dict(900), s, src, 300ms);
        check_failure(r, session_failure::timeout, wire_error::none);
        CHECK(r.connected);
        CHECK(r.elapsed >= 290ms);
        CHECK(r.elapsed < 300ms + slack);
    }
    SUBCASE("slow handshakes then a stall in the middle of a piece: the phases do not stack") {
        peer_script s;
        s.mode = peer_mode::stall_mid_piece;
        s.delay = 100ms; // handshake at ~100 ms, extension handshake ~200 ms, half a piece ~300 ms
        s.target_piece = 0;
        simple_piece_source src;
        const session_result r = fetch(make_info_dict(20000), s, src, 600ms);
        check_failure(r, session_failure::timeout, wire_error::none);
        CHECK(r.metadata_size == 20000);
        CHECK(r.pieces_received == 0);
        CHECK(r.elapsed >= 590ms);
        CHECK(r.elapsed < 600ms + slack);
        CHECK(src.held(7) == 0);
    }
    SUBCASE("a deadline already past") {
        fake_peer fp(make_info_dict(900));
        simple_piece_source src;
        session_request req = make_request(fp);
        req.deadline = clock_type::now() - 1ms;
        const session_result r = run_one(req, src);
        check_failure(r, session_failure::connect_timeout, wire_error::none);
        CHECK(!r.connected);
    }
}

TEST_CASE("connect refused vs connect timeout") {
    SUBCASE("refused") {
        peer_script s;
        s.mode = peer_mode::refuse;
        simple_piece_source src;
        const session_result r = fetch(make_info_dict(900), s, src, 3000ms);
        check_failure(r, session_failure::connect_refused, wire_error::none);
        CHECK(!r.connected);
        CHECK(r.net_error == asio::error::connection_refused);
        CHECK(r.elapsed < 2000ms);
        CHECK(src.releases_of(7) == 1);
    }
    SUBCASE("timeout: a listener whose backlog is full") {
        peer_script s;
        s.mode = peer_mode::full_backlog;
        simple_piece_source src;
        const session_result r = fetch(make_info_dict(900), s, src, 400ms);
        check_failure(r, session_failure::connect_timeout, wire_error::none);
        CHECK(!r.connected);
        CHECK(r.elapsed >= 390ms);
        CHECK(r.elapsed < 400ms + slack);
    }
    SUBCASE("an explicit bind address") {
        const std::string info = make_info_dict(900);
        fake_peer fp(info);
        simple_piece_source src;
        session_request req = make_request(fp);
        req.bind_address = dhtc::ip_address::parse("127.0.0.1");
        CHECK(run_one(req, src).ok());
        CHECK(src.bytes() == info);
    }
    SUBCASE("a bind address of the wrong family fails before connecting") {
        fake_peer fp(make_info_dict(900));
        simple_piece_source src;
        session_request req = make_request(fp);
        req.bind_address = dhtc::ip_address::parse("::1");
        const session_result r = run_one(req, src);
        CHECK(r.failure == session_failure::connect_refused);
        CHECK(r.net_error);
    }
}

TEST_CASE("two sessions share one piece source and split the pieces") {
    const std::string info = make_info_dict(40 * 16384 - 3);
    peer_script s;
    s.delay = 2ms; // keeps both sessions in the race
    fake_peer a(info, s);
    fake_peer b(info, s);
    simple_piece_source src;
    asio::io_context io;
    std::optional<session_result> ra;
    std::optional<session_result> rb;
    asio::co_spawn(io, run_peer_session(make_request(a), src, 1), [&](std::exception_ptr, session_result r) { ra = r; });
    asio::co_spawn(io, run_peer_session(make_request(b), src, 2), [&](std::exception_ptr, session_result r) { rb = r; });
    io.run_for(run_bound);
    REQUIRE(ra);
    REQUIRE(rb);
    CHECK(ra->ok());
    CHECK(rb->ok());
    CHECK(src.bytes() == info);
    CHECK(src.pieces_by(1) > 0);
    CHECK(src.pieces_by(2) > 0);
    CHECK(src.pieces_by(1) + src.pieces_by(2) == 40);
    CHECK(ra->pieces_received + rb->pieces_received == 40);
    CHECK(src.releases_of(1) == 1);
    CHECK(src.releases_of(2) == 1);
}

TEST_CASE("an idle session waits for leases held by a stuck session and takes them over") {
    const std::string info = make_info_dict(8 * 16384);
    peer_script stuck_script;
    stuck_script.mode = peer_mode::ignore_requests;
    peer_script good_script;
    good_script.delay = 20ms; // the stuck session leases first
    fake_peer stuck(info, stuck_script);
    fake_peer good(info, good_script);
    simple_piece_source src;
    asio::io_context io;
    std::optional<session_result> rs;
    std::optional<session_result> rg;
    asio::co_spawn(io, run_peer_session(make_request(stuck, 500ms), src, 1),
                   [&](std::exception_ptr, session_result r) { rs = r; });
    asio::co_spawn(io, run_peer_session(make_request(good, 10000ms), src, 2),
                   [&](std::exception_ptr, session_result r) { rg = r; });
    io.run_for(run_bound);
    REQUIRE(rs);
    REQUIRE(rg);
    CHECK(rs->failure == session_failure::timeout);
    CHECK(src.max_held(1) == 4);
    CHECK(rg->ok());
    CHECK(rg->pieces_received == 8);
    CHECK(rg->elapsed >= 490ms); // it had to wait for the stuck session's deadline
    CHECK(src.bytes() == info);
}

TEST_CASE("cancellation through the cancellation slot ends the session promptly") {
    SUBCASE("mid-transfer") {
        peer_script s;
        s.delay = 20ms;
        const std::string info = make_info_dict(30 * 16384);
        fake_peer fp(info, s);
        simple_piece_source src;
        asio::io_context io;
        asio::cancellation_signal sig;
        src.on_deliver = [&](std::uint32_t, std::uint32_t) {
            asio::post(io, [&] { sig.emit(asio::cancellation_type::terminal); });
        };
        std::optional<session_result> out;
        asio::co_spawn(io, run_peer_session(make_request(fp, 10000ms), src, 4),
                       asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr, session_result r) { out = r; }));
        io.run_for(run_bound);
        REQUIRE(out);
        check_failure(*out, session_failure::cancelled, wire_error::none);
        CHECK(out->pieces_received >= 1);
        CHECK(out->pieces_received < 30);
        CHECK(out->elapsed < 5000ms);
        CHECK(src.releases_of(4) == 1);
        CHECK(src.held(4) == 0);
    }
    SUBCASE("while connecting") {
        peer_script s;
        s.mode = peer_mode::full_backlog;
        fake_peer fp(make_info_dict(900), s);
        simple_piece_source src;
        asio::io_context io;
        asio::cancellation_signal sig;
        asio::steady_timer t(io, 100ms);
        t.async_wait([&](std::error_code) { sig.emit(asio::cancellation_type::terminal); });
        std::optional<session_result> out;
        asio::co_spawn(io, run_peer_session(make_request(fp, 10000ms), src, 4),
                       asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr, session_result r) { out = r; }));
        io.run_for(run_bound);
        REQUIRE(out);
        check_failure(*out, session_failure::cancelled, wire_error::none);
        CHECK(!out->connected);
        CHECK(out->elapsed < 5000ms);
    }
}

TEST_CASE("destroying a stopped io_context ends the session and releases its leases") {
    peer_script s;
    s.mode = peer_mode::ignore_requests;
    fake_peer fp(make_info_dict(10 * 16384), s);
    simple_piece_source src; // outlives the io_context, as the contract requires
    bool finished = false;
    {
        asio::io_context io;
        asio::co_spawn(io, run_peer_session(make_request(fp, 10000ms), src, 5),
                       [&](std::exception_ptr, session_result) { finished = true; });
        for (int i = 0; i < 200 && src.held(5) == 0; ++i) io.run_for(10ms);
        CHECK(src.held(5) == 4);
        io.stop();
    }
    CHECK(!finished);
    CHECK(src.releases_of(5) == 1);
    CHECK(src.held(5) == 0);
    // The peer sees the connection close.
    CHECK(fp.wait_ended(1, 5000ms));
}

TEST_CASE("MSE/PE: every policy against every peer encryption") {
    using dhtc::metadata::encryption_policy;
    using dhtc::metadata::stream_encryption;
    using dhtc::test::peer_encryption;
    const std::string info = make_info_dict(40000); // three pieces: the RC4 stream carries real traffic
    struct row {
        encryption_policy policy;
        peer_encryption peer;
        bool ok;
        stream_encryption stream;
        std::uint8_t tries;
    };
    const row rows[] = {
        {encryption_policy::prefer_plaintext, peer_encryption::plaintext_only, true, stream_encryption::plaintext, 1},
        {encryption_policy::prefer_plaintext, peer_encryption::forced_rc4, true, stream_encryption::rc4, 2},
        {encryption_policy::prefer_plaintext, peer_encryption::forced_plaintext, true, stream_encryption::plaintext, 2},
        {encryption_policy::prefer_plaintext, peer_encryption::either, true, stream_encryption::plaintext, 1},
        {encryption_policy::prefer_encrypted, peer_encryption::plaintext_only, true, stream_encryption::plaintext, 2},
        {encryption_policy::prefer_encrypted, peer_encryption::forced_rc4, true, stream_encryption::rc4, 1},
        {encryption_policy::prefer_encrypted, peer_encryption::forced_plaintext, true, stream_encryption::plaintext, 1},
        {encryption_policy::require, peer_encryption::forced_rc4, true, stream_encryption::rc4, 1},
        {encryption_policy::require, peer_encryption::forced_plaintext, true, stream_encryption::rc4, 1},
        {encryption_policy::require, peer_encryption::either, true, stream_encryption::rc4, 1},
        {encryption_policy::require, peer_encryption::plaintext_only, false, stream_encryption::plaintext, 1},
        {encryption_policy::disable, peer_encryption::forced_rc4, false, stream_encryption::plaintext, 1},
        {encryption_policy::disable, peer_encryption::either, true, stream_encryption::plaintext, 1},
    };
    for (const row& w : rows) {
        CAPTURE(dhtc::metadata::to_string(w.policy));
        CAPTURE(static_cast<int>(w.peer));
        peer_script script;
        script.encryption = w.peer;
        fake_peer fp(info, script);
        simple_piece_source src;
        session_request req = make_request(fp);
        req.encryption = w.policy;
        const session_result r = run_one(req, src);
        CHECK(r.ok() == w.ok);
        CHECK(r.tries == w.tries);
        if (w.ok) {
            CHECK(src.bytes() == info);
            CHECK(r.encryption == w.stream);
            CHECK(r.pieces_received == 3);
        } else if (w.policy == encryption_policy::require) {
            // The plaintext-only peer closed our MSE exchange.
            CHECK(r.failure == session_failure::encryption_failed);
            CHECK(r.mse_error == dhtc::metadata::mse::mse_error::none);
        } else {
            // A plaintext handshake the peer closed: PE forced, or no torrent, look alike.
            check_failure(r, session_failure::handshake_failed, wire_error::short_handshake);
        }
    }
}

TEST_CASE("MSE: a peer that closes during the exchange falls back once within the deadline") {
    using dhtc::metadata::encryption_policy;
    const std::string info = make_info_dict(1000);
    // A peer that drops MSE (plaintext only) under require: one try, encryption_failed.
    peer_script script;
    fake_peer fp(info, script);
    simple_piece_source src;
    session_request req = make_request(fp);
    req.encryption = encryption_policy::require;
    const session_result r = run_one(req, src);
    CHECK(r.tries == 1);
    CHECK(r.used_mse);
    CHECK(r.failure == session_failure::encryption_failed);
    CHECK(fp.conversations().size() == 1);
}

TEST_CASE("MSE: a peer whose bytes hold no VC fails encryption_failed with the cause") {
    using dhtc::metadata::encryption_policy;
    // A peer that answers our key with bytes that never hold the VC, then keeps the
    // connection open: the exchange fails on the pad window, not on the deadline.
    asio::io_context peer_io;
    asio::ip::tcp::acceptor acceptor(peer_io, {asio::ip::make_address_v4("127.0.0.1"), 0});
    std::thread peer([&] {
        std::error_code ec;
        asio::ip::tcp::socket s(peer_io);
        acceptor.accept(s, ec);
        if (ec) return;
        const std::string noise(1500, '\x5a');
        asio::write(s, asio::buffer(noise), ec);
        char sink[4096];
        while (!ec) s.read_some(asio::buffer(sink), ec); // until the session drops it
    });
    session_request req;
    req.info_hash = dhtc::metadata::sha1_id(make_info_dict(500));
    req.peer = dhtc::endpoint{dhtc::ip_address::v4(0x7f000001u), acceptor.local_endpoint().port()};
    req.peer_id = next_peer_id();
    req.deadline = clock_type::now() + 5000ms;
    req.encryption = encryption_policy::require; // no fallback: one try
    simple_piece_source src;
    const session_result r = run_one(req, src);
    peer.join();
    CHECK(r.tries == 1);
    CHECK(r.failure == session_failure::encryption_failed);
    CHECK(r.try_failures[0] == session_failure::encryption_failed);
    CHECK(r.mse_error == dhtc::metadata::mse::mse_error::vc_not_found);
}

TEST_CASE("transports both: a refused TCP connect falls back to uTP once, inside the deadline") {
    using dhtc::metadata::transport_policy;
    peer_script s;
    s.mode = peer_mode::refuse; // nothing answers on UDP either
    fake_peer fp(make_info_dict(900), s);
    simple_piece_source src;
    asio::io_context io;
    session_request req = make_request(fp, 1500ms);
    req.transports = transport_policy::both;
    req.utp = dhtc::metadata::utp_host::create(io.get_executor(), std::nullopt);
    std::optional<session_result> out;
    asio::co_spawn(io, run_peer_session(req, src, 7), [&](std::exception_ptr e, session_result r) {
        if (!e) out = r;
    });
    io.run_for(run_bound);
    REQUIRE(out.has_value());
    CHECK(out->tries == 2);
    CHECK(out->try_modes[0] == 0);
    CHECK(out->try_modes[1] == dhtc::metadata::try_utp);
    CHECK(out->transport == dhtc::api::stream_transport::utp);
    CHECK(out->failure == session_failure::utp_timeout); // the SYNs went unanswered
    CHECK(out->elapsed < 1500ms + slack);
    CHECK(src.releases_of(7) == 1);
    CHECK(req.utp->mux_stats().connections_opened == 1);
}

TEST_CASE("failure names are stable") {
    CHECK(dhtc::api::to_string(session_failure::connect_timeout) == "connect_timeout");
    CHECK(dhtc::api::to_string(session_failure::cancelled) == "cancelled");
    CHECK(dhtc::api::to_string(session_failure::encryption_failed) == "encryption_failed");
    CHECK(dhtc::api::to_string(session_failure::utp_timeout) == "utp_timeout");
    // Appended: the stored values of the older classes never change.
    CHECK(static_cast<int>(session_failure::cancelled) == 15);
    CHECK(static_cast<int>(session_failure::encryption_failed) == 16);
    CHECK(static_cast<int>(session_failure::utp_timeout) == 17);
}

TEST_CASE("the DHT's round trip plans the deadline and the uTP-first SYN wait, within their bounds") {
    using namespace dhtc::metadata;
    // Instants only: the plan is pure, so any start will do (no session runs).
    const clock_type::time_point start{std::chrono::hours(1)};
    session_request req;
    req.deadline = start + 4s;       // metadata.timeout_secs 4
    req.deadline_limit = start + 8s; // twice it
    const auto plan_with = [&](std::uint16_t rtt_ms, transport_policy tr) {
        session_request r = req;
        r.dht_rtt = dhtc::api::peer_rtt{rtt_ms};
        r.transports = tr;
        return plan_session(r, start);
    };

    SUBCASE("unknown: today's defaults") {
        for (const auto tr : {transport_policy::tcp, transport_policy::utp_first}) {
            const auto p = plan_with(0, tr);
            CHECK(p.deadline == req.deadline);
            CHECK(p.utp_syn_wait == utp_first_connect_limit);
            CHECK_FALSE(p.syn_wait_scaled);
            CHECK_FALSE(p.extended);
        }
    }
    SUBCASE("300 ms over TCP: 12 round trips and one retransmission") {
        const auto p = plan_with(300, transport_policy::tcp);
        CHECK(p.deadline == start + 4600ms);
        CHECK_FALSE(p.syn_wait_scaled);
        CHECK(p.extended);
    }
    SUBCASE("300 ms uTP first: a 3.6 s SYN wait, and room for TCP after it") {
        const auto p = plan_with(300, transport_policy::utp_first);
        CHECK(p.syn_wait_scaled);
        CHECK(p.utp_syn_wait == 3600ms);
        CHECK(p.deadline == start + 3600ms + 11 * 300ms + 1s); // 7.9 s
        CHECK(p.extended);
    }
    SUBCASE("up to 250 ms nothing changes at the default timeout") {
        for (const std::uint16_t ms : {1, 50, 100, 250}) {
            CAPTURE(ms);
            for (const auto tr : {transport_policy::tcp, transport_policy::both, transport_policy::utp_first}) {
                const auto p = plan_with(ms, tr);
                CHECK(p.deadline == req.deadline);
                CHECK_FALSE(p.syn_wait_scaled);
                CHECK_FALSE(p.extended);
            }
        }
    }
    SUBCASE("bounds: never past deadline_limit, a SYN wait of at most 6 s that leaves TCP its time") {
        for (const std::uint16_t ms : {260, 300, 400, 500, 1000, 5000, 65535}) {
            CAPTURE(ms);
            const auto rtt = std::chrono::milliseconds(ms);
            for (const auto tr : {transport_policy::tcp, transport_policy::utp_first}) {
                const auto p = plan_with(ms, tr);
                CHECK(p.deadline > req.deadline);
                CHECK(p.deadline <= req.deadline_limit);
                CHECK(p.utp_syn_wait >= utp_first_connect_limit);
                CHECK(p.utp_syn_wait <= utp_first_connect_limit_max);
                if (p.syn_wait_scaled) CHECK(start + p.utp_syn_wait + 11 * rtt + 1s <= p.deadline);
            }
        }
        CHECK(plan_with(500, transport_policy::utp_first).deadline == req.deadline_limit);
        CHECK_FALSE(plan_with(500, transport_policy::utp_first).syn_wait_scaled); // 6 s + 5.5 s + 1 s > 8 s
        CHECK(plan_with(350, transport_policy::utp_first).utp_syn_wait == 8s - 11 * 350ms - 1s); // what TCP leaves
        CHECK_FALSE(plan_with(400, transport_policy::utp_first).syn_wait_scaled); // 2.6 s left: the default's
    }
    SUBCASE("without a deadline_limit nothing moves") {
        req.deadline_limit = {};
        for (const auto tr : {transport_policy::tcp, transport_policy::utp_first}) {
            const auto p = plan_with(1000, tr);
            CHECK(p.deadline == req.deadline);
            CHECK_FALSE(p.syn_wait_scaled);
            CHECK_FALSE(p.extended);
        }
    }
}

TEST_CASE("after a connect its own round trip sets the deadline: the later measurement wins") {
    using namespace dhtc::metadata;
    const clock_type::time_point start{std::chrono::hours(1)};
    session_request req;
    req.deadline = start + 4s;
    req.deadline_limit = start + 8s;
    req.dht_rtt = dhtc::api::peer_rtt{300};
    // The DHT planned 4.6 s; a 50 ms connect brings it back to the default, a slow one pushes it out.
    CHECK(deadline_after_connect(req, start + 50ms, 50ms) == req.deadline);
    CHECK(deadline_after_connect(req, start + 300ms, 300ms) == start + 4300ms);
    CHECK(deadline_after_connect(req, start + 1s, 900ms) == req.deadline_limit);
    req.deadline_limit = {};
    CHECK(deadline_after_connect(req, start + 1s, 900ms) == req.deadline);
}

} // TEST_SUITE
