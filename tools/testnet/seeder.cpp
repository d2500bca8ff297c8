#include "testnet/seeder.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "bencode/encoder.hpp"
#include "metadata/mse.hpp"
#include "streams/tcp_stream.hpp"
#include "testnet/wan_stream.hpp"
#include "metadata/wire.hpp"
#include "testnet/address_plan.hpp"

namespace dhtc::testnet {

namespace {

using asio::ip::tcp;

constexpr std::uint8_t our_ut_metadata = 3;
constexpr std::size_t max_message = 64 * 1024;     // nothing we accept is longer
constexpr std::size_t max_buffered = 2 * max_message;
constexpr std::size_t max_messages = 2000;          // per connection
constexpr auto slow_delay = std::chrono::seconds(1);

/// Our extension handshake. wire::build_ext_handshake writes a fetcher's handshake (no
/// metadata_size); a seeder must advertise it, so the payload is written here.
std::string seeder_ext_handshake(std::size_t metadata_size) {
    std::string payload;
    bencode::writer w(payload);
    w.begin_dict();
    w.key("m").begin_dict().entry("ut_metadata", std::int64_t{our_ut_metadata}).end();
    w.entry("metadata_size", static_cast<std::int64_t>(metadata_size));
    w.entry("reqq", std::int64_t{250});
    w.entry("v", "dhtc-testnet");
    w.end();
    std::string framed;
    wire::build_extended(framed, wire::ext_handshake_id, payload);
    return framed;
}

} // namespace

/// The connection's stream (TCP or uTP) and its watchdog: the stream is closed when the
/// watchdog fires, which ends any pending read or write. Shared, so a late timer callback
/// stays safe.
struct peer_connection {
    peer_connection(std::unique_ptr<metadata::byte_stream> s, asio::io_context& io)
        : stream(std::move(s)), watchdog(io) {}
    std::unique_ptr<metadata::byte_stream> stream;
    asio::steady_timer watchdog;

    void arm(std::chrono::steady_clock::duration idle, const std::shared_ptr<peer_connection>& self) {
        watchdog.expires_after(idle);
        watchdog.async_wait([self](const asio::error_code& ec) {
            if (ec) return; // re-armed or cancelled
            self->stream->close();
        });
    }
};

namespace {

/// The BitTorrent byte stream of one connection after the optional MSE handshake: what was
/// read and not yet consumed (`rx`, plaintext), and the ciphers when RC4 was selected.
struct wire_channel {
    metadata::byte_stream& stream;
    std::string rx;
    std::unique_ptr<metadata::mse::rc4> encrypt;
    std::unique_ptr<metadata::mse::rc4> decrypt;
    std::array<char, 16384> chunk{};

    /// Appends what arrives to rx (decrypted); false when the stream ended or rx would
    /// grow past `cap`.
    asio::awaitable<bool> read_more(std::size_t cap) {
        auto [n, ec] = co_await stream.read_some(asio::buffer(chunk));
        if (ec || n == 0) co_return false;
        if (decrypt) decrypt->apply(chunk.data(), n);
        rx.append(chunk.data(), n);
        co_return rx.size() <= cap;
    }
    /// Sends `tx` (encrypted in place when RC4 was selected).
    asio::awaitable<bool> send(std::string& tx) {
        if (encrypt) encrypt->apply(tx.data(), tx.size());
        const auto ec = co_await stream.write(tx);
        co_return !ec;
    }
};

bool requires_mse(connection_policy p) noexcept {
    return p == connection_policy::pe_rc4 || p == connection_policy::pe_plain || p == connection_policy::utp_pe;
}
bool utp_only(connection_policy p) noexcept { return p == connection_policy::utp || p == connection_policy::utp_pe; }
bool accepts_utp(connection_policy p) noexcept { return p != connection_policy::tcp_only; }
/// The MSE methods a policy accepts (RC4-only policies select RC4; the others plaintext
/// when the initiator offers it, as libtorrent does without prefer_rc4).
std::uint32_t mse_allowed(connection_policy p) noexcept {
    using namespace metadata::mse;
    return p == connection_policy::pe_rc4 || p == connection_policy::utp_pe ? crypto_rc4 : (crypto_rc4 | crypto_plaintext);
}

constexpr std::string_view bt_protocol_prefix{"\x13" "BitTorrent protocol", 20};

} // namespace

std::string_view to_string(connection_policy p) noexcept {
    switch (p) {
    case connection_policy::plaintext: return "plaintext";
    case connection_policy::pe_rc4: return "pe_rc4";
    case connection_policy::pe_plain: return "pe_plain";
    case connection_policy::utp: return "utp";
    case connection_policy::utp_pe: return "utp_pe";
    case connection_policy::tcp_only: return "tcp_only";
    }
    return "?";
}

std::optional<std::array<double, policy_count>> parse_policy_mix(std::string_view s) {
    std::array<double, policy_count> mix{};
    double total = 0;
    while (!s.empty()) {
        const auto comma = s.find(',');
        const std::string_view item = s.substr(0, comma);
        s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        const std::string_view name = item.substr(0, eq);
        const std::string value(item.substr(eq + 1));
        char* end = nullptr;
        const double w = std::strtod(value.c_str(), &end);
        if (value.empty() || !end || *end != '\0' || !(w >= 0) || !std::isfinite(w)) return std::nullopt;
        std::size_t i = 0;
        while (i < policy_count && to_string(static_cast<connection_policy>(i)) != name) ++i;
        if (i == policy_count) return std::nullopt;
        mix[i] = w;
        total += w;
    }
    if (!(total > 0)) return std::nullopt;
    return mix;
}

std::string_view to_string(misbehaviour m) noexcept {
    switch (m) {
    case misbehaviour::none: return "none";
    case misbehaviour::slow: return "slow";
    case misbehaviour::stall: return "stall";
    case misbehaviour::reject: return "reject";
    case misbehaviour::wrong_bytes: return "wrong_bytes";
    case misbehaviour::refuse: return "refuse";
    }
    return "?";
}

seeder_set::seeder_set(asio::io_context& io, network& net, catalog& torrents, const seeder_options& o,
                       const std::vector<std::uint32_t>& ips)
    : io_(io), net_(net), torrents_(torrents), opt_(o), rng_(o.seed, 0x5eed), acceptor_(io), timer_(io) {
    for (std::size_t s = 0; s < o.count; ++s) {
        seeder sd{ips.at(s), net.add_client(ips.at(s)), misbehaviour::none, {}, {}, connection_policy::plaintext, nullptr};
        if (rng_.chance(o.misbehave)) sd.mode = static_cast<misbehaviour>(1 + rng_.below(5));
        std::memcpy(sd.peer_id.bytes.data(), "-TN0001-", 8);
        for (std::size_t i = 8; i < id20::size; ++i) sd.peer_id.bytes[i] = static_cast<std::uint8_t>(rng_());
        by_ip_[sd.ip] = static_cast<std::uint32_t>(s);
        seeders_.push_back(std::move(sd));
    }
    assign_policies();
    if (seeders_.empty()) return;
    for (std::size_t t = 0; t < torrents.size(); ++t) {
        const auto copies = std::min<std::size_t>(seeders_.size(), 1 + rng_.below(3));
        auto& holders = torrents.at(t).seeders;
        while (holders.size() < copies) {
            const auto s = static_cast<std::uint32_t>(rng_.below(seeders_.size()));
            if (std::find(holders.begin(), holders.end(), s) != holders.end()) continue;
            holders.push_back(s);
            seeders_[s].torrents.push_back(static_cast<std::uint32_t>(t));
        }
    }
}

void seeder_set::assign_policies() {
    // Exact shares (largest remainder), shuffled: with 5 seeders and equal weights each
    // policy has one. Its own random stream, so the other draws from --seed do not move.
    double total = 0;
    for (double w : opt_.policy_mix) total += w;
    if (seeders_.empty() || !(total > 0)) return;
    std::array<std::size_t, policy_count> count{};
    std::array<double, policy_count> remainder{};
    std::size_t given = 0;
    for (std::size_t p = 0; p < policy_count; ++p) {
        const double exact = static_cast<double>(seeders_.size()) * opt_.policy_mix[p] / total;
        count[p] = static_cast<std::size_t>(exact);
        remainder[p] = exact - static_cast<double>(count[p]);
        given += count[p];
    }
    while (given < seeders_.size()) {
        const auto p = static_cast<std::size_t>(std::max_element(remainder.begin(), remainder.end()) - remainder.begin());
        ++count[p];
        remainder[p] = -1;
        ++given;
    }
    std::vector<connection_policy> deck;
    for (std::size_t p = 0; p < policy_count; ++p) deck.insert(deck.end(), count[p], static_cast<connection_policy>(p));
    rng shuffle(opt_.seed, 0x9011c7);
    for (std::size_t i = deck.size(); i > 1; --i) std::swap(deck[i - 1], deck[shuffle.below(i)]);
    utp::multiplexer_config mc;
    mc.accept_incoming = true;
    mc.max_connections = opt_.max_utp_connections;
    mc.max_accept_queue = opt_.max_utp_accept_queue;
    for (std::size_t s = 0; s < seeders_.size(); ++s) {
        auto& sd = seeders_[s];
        sd.policy = deck[s];
        ++stats_.seeders_by_policy[static_cast<std::size_t>(sd.policy)];
        if (!accepts_utp(sd.policy)) continue;
        mc.seed = opt_.seed * 1000003 + s;
        sd.utp = std::make_shared<utp_port>(io_, net_, sd.ip, mc, [this, s](std::shared_ptr<utp::connection> c) {
            if (stopped_) {
                c->abort();
                return;
            }
            const auto peer = c->peer();
            ++stats_.utp_connections;
            if (open_ >= opt_.max_connections) {
                ++stats_.over_capacity;
                c->abort();
                return;
            }
            auto stream = std::make_unique<metadata::utp_stream>(io_.get_executor(), seeders_[s].utp, std::move(c));
            start_session(std::move(stream), s, peer.address.to_v4_uint());
        });
    }
    net_.on_stream_datagram([this](const datagram& d) { return on_utp_datagram(d); });
}

bool seeder_set::on_utp_datagram(const datagram& d) {
    const auto it = by_ip_.find(d.to_ip);
    if (it == by_ip_.end() || d.to_port != port_ || !seeders_[it->second].utp || stopped_) return false;
    seeders_[it->second].utp->on_datagram(d.from_ip, d.from_port, d.bytes);
    return true;
}

const seeder_stats& seeder_set::stats() const noexcept {
    stats_.utp_refused = 0;
    for (const auto& sd : seeders_)
        if (sd.utp) stats_.utp_refused += sd.utp->stats().syn_refused;
    return stats_;
}

std::string seeder_set::endpoint_of(std::size_t s) const {
    return ipv4_to_string(seeders_[s].ip) + ":" + std::to_string(port_);
}

void seeder_set::listen(std::uint16_t port) {
    const tcp::endpoint ep(asio::ip::address_v4::any(), port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(1024);
    port_ = port;
    accept();
}

void seeder_set::stop() {
    stopped_ = true;
    asio::error_code ec;
    acceptor_.close(ec);
    timer_.cancel();
    for (auto& [key, weak] : live_) {
        if (auto c = weak.lock()) {
            c->watchdog.cancel();
            c->stream->close();
        }
    }
    for (auto& sd : seeders_)
        if (sd.utp) sd.utp->shutdown();
}

void seeder_set::accept() {
    acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket s) {
        if (stopped_) return;
        if (!ec) {
            asio::error_code lec;
            const auto local = s.local_endpoint(lec);
            const auto it = lec ? by_ip_.end() : by_ip_.find(local.address().to_v4().to_uint());
            asio::error_code rec;
            const auto remote = s.remote_endpoint(rec);
            const std::uint32_t peer_ip = rec ? 0 : remote.address().to_v4().to_uint();
            const std::uint32_t seeder_ip = it == by_ip_.end() ? 0 : seeders_[it->second].ip;
            ++stats_.connections;
            if (it == by_ip_.end() || seeders_[it->second].mode == misbehaviour::refuse) {
                ++stats_.refused;
                close_refused(std::move(s), seeder_ip, peer_ip);
            } else if (utp_only(seeders_[it->second].policy)) {
                // Incoming TCP firewalled: libtorrent's listen socket accepts and closes.
                ++stats_.tcp_refused_utp_only;
                close_refused(std::move(s), seeder_ip, peer_ip);
            } else if (open_ >= opt_.max_connections) {
                ++stats_.over_capacity;
                close_refused(std::move(s), seeder_ip, peer_ip);
            } else {
                // As BitTorrent clients do: with Nagle on, the second of two small writes
                // (handshake, then extension handshake) waits for the peer's delayed ACK.
                s.set_option(tcp::no_delay(true), lec);
                std::unique_ptr<metadata::byte_stream> stream = std::make_unique<metadata::tcp_stream>(std::move(s));
                // Under the WAN model the seeder's side delays what it reads and writes, and
                // its close (see wan_stream).
                if (auto* wan = net_.wan())
                    stream = std::make_unique<wan_stream>(io_, std::move(stream), *wan, seeder_ip, peer_ip);
                start_session(std::move(stream), it->second, peer_ip);
            }
        }
        accept();
    });
}

void seeder_set::close_refused(tcp::socket s, std::uint32_t seeder_ip, std::uint32_t peer_ip) {
    asio::error_code ignored;
    auto* wan = net_.wan();
    if (!wan) {
        s.close(ignored);
        return;
    }
    // The close reaches the peer when its first bytes would have reached us, and half an
    // RTT later: kept open until then.
    const auto after = wan->tcp_handshake(peer_ip, seeder_ip) + wan->rtt(seeder_ip, peer_ip) / 2;
    auto timer = std::make_shared<asio::steady_timer>(io_, after);
    auto socket = std::make_shared<tcp::socket>(std::move(s));
    timer->async_wait([timer, socket](const asio::error_code&) {
        asio::error_code e;
        socket->close(e);
    });
}

void seeder_set::start_session(std::unique_ptr<metadata::byte_stream> stream, std::size_t seeder_index,
                               std::uint32_t peer_ip) {
    ++open_;
    ++stats_.connections_by_policy[static_cast<std::size_t>(seeders_[seeder_index].policy)];
    auto conn = std::make_shared<peer_connection>(std::move(stream), io_);
    asio::co_spawn(io_, serve(std::move(conn), seeder_index, peer_ip), asio::detached);
}

asio::awaitable<void> seeder_set::serve(std::shared_ptr<peer_connection> conn, std::size_t seeder_index,
                                        std::uint32_t requester_ip) {
    const auto live_key = next_live_++;
    live_.emplace(live_key, conn);
    struct closer {
        seeder_set* self;
        std::shared_ptr<peer_connection> c;
        std::uint64_t key;
        ~closer() {
            --self->open_;
            self->live_.erase(key);
            c->watchdog.cancel();
            c->stream->close();
        }
    } guard{this, conn, live_key};
    const auto started = std::chrono::steady_clock::now();
    const seeder& sd = seeders_[seeder_index];
    conn->arm(opt_.idle_timeout, conn);

    wire_channel ch{*conn->stream, {}, {}, {}};
    ch.rx.reserve(4096);
    std::string tx;

    // Plaintext BitTorrent starts with its protocol string; anything else is MSE's Ya.
    while (ch.rx.size() < bt_protocol_prefix.size() && ch.rx.compare(0, ch.rx.size(), bt_protocol_prefix, 0, ch.rx.size()) == 0) {
        if (!co_await ch.read_more(max_buffered)) co_return;
    }
    const bool plaintext = ch.rx.compare(0, bt_protocol_prefix.size(), bt_protocol_prefix) == 0;
    if (plaintext && requires_mse(sd.policy)) {
        ++stats_.plaintext_refused; // pe_forced: accepted, then closed
        co_return;
    }
    if (!plaintext) {
        // MSE: SKEY is the info hash of one of this seeder's torrents.
        auto find = [this, &sd](const std::array<std::uint8_t, 20>& req2) -> std::optional<id20> {
            for (auto t : sd.torrents)
                for (const auto& key : torrents_.at(t).keys)
                    if (metadata::mse::req2_hash(key) == req2) return key;
            return std::nullopt;
        };
        metadata::mse::responder mse(find, mse_allowed(sd.policy), /*prefer_rc4=*/false);
        std::string in = std::move(ch.rx);
        ch.rx.clear();
        for (std::size_t fed = 0;;) {
            tx.clear();
            fed += in.size();
            const auto st = mse.feed(in, tx);
            if (!tx.empty() && !co_await ch.send(tx)) co_return;
            if (st == metadata::mse::status::failed || fed > 2 * metadata::mse::max_handshake_bytes) {
                ++stats_.mse_failures;
                co_return;
            }
            if (st == metadata::mse::status::done) break;
            if (!co_await ch.read_more(max_buffered)) co_return;
            in = std::move(ch.rx);
            ch.rx.clear();
        }
        ++stats_.mse_handshakes;
        auto o = mse.take();
        ch.rx = std::move(o.payload);
        ch.encrypt = std::move(o.encrypt);
        ch.decrypt = std::move(o.decrypt);
    }

    // BEP-3 handshake: exactly 68 bytes, for a hash this seeder holds.
    while (ch.rx.size() < wire::handshake_size) {
        if (!co_await ch.read_more(max_buffered)) co_return;
        wire::handshake probe;
        const auto e = wire::parse_handshake(ch.rx, probe);
        if (e == wire::wire_error::bad_pstrlen || e == wire::wire_error::bad_protocol) {
            ++stats_.bad_handshakes;
            co_return;
        }
    }
    wire::handshake hs;
    if (wire::parse_handshake(ch.rx, hs) != wire::wire_error::none) {
        ++stats_.bad_handshakes;
        co_return;
    }
    ch.rx.erase(0, wire::handshake_size);
    const auto found = torrents_.find(hs.info_hash);
    if (!found || !std::binary_search(sd.torrents.begin(), sd.torrents.end(), static_cast<std::uint32_t>(*found))) {
        ++stats_.unknown_hash;
        co_return;
    }
    const std::size_t torrent_index = *found;
    std::string info = torrents_.info_dict(torrent_index);
    if (sd.mode == misbehaviour::wrong_bytes) {
        // Flip bytes inside the dict so the size stays right and only the hash check fails.
        for (std::size_t i = info.size() / 3; i < info.size(); i += 997) info[i] = static_cast<char>(info[i] ^ 0x5a);
    }
    const std::size_t pieces = wire::piece_count(info.size());

    tx.clear();
    wire::build_handshake(tx, hs.info_hash, sd.peer_id);
    tx += seeder_ext_handshake(info.size());
    if (!co_await ch.send(tx)) co_return;

    bencode::document scratch;
    std::uint8_t peer_ut_metadata = 0;
    std::vector<bool> served(pieces, false);
    std::size_t served_count = 0;
    std::size_t answered = 0;
    std::size_t requests = 0;
    std::size_t messages = 0;
    bool recorded = false;
    asio::steady_timer delay(io_);
    asio::error_code ec;
    std::string& rx = ch.rx;

    for (;;) {
        wire::message_view m;
        const auto st = wire::next_message(rx, max_message, m);
        if (st == wire::frame_status::too_large) {
            ++stats_.protocol_errors;
            co_return;
        }
        if (st == wire::frame_status::need_more) {
            if (std::chrono::steady_clock::now() - started > opt_.connection_lifetime) co_return;
            if (!co_await ch.read_more(max_buffered)) co_return;
            conn->arm(opt_.idle_timeout, conn);
            continue;
        }
        if (++messages > max_messages) co_return;
        const std::size_t consumed = m.consumed;
        if (st == wire::frame_status::keep_alive || m.id != wire::msg_extended) {
            rx.erase(0, consumed);
            continue;
        }
        wire::extended_view ext;
        if (wire::parse_extended(m, ext) != wire::wire_error::none) {
            ++stats_.protocol_errors;
            co_return;
        }
        tx.clear();
        std::optional<std::size_t> correct_piece; // set when tx carries a correct data message
        if (ext.ext_id == wire::ext_handshake_id) {
            wire::ext_handshake peer;
            wire::parse_ext_handshake(ext.payload, scratch, peer);
            if (peer.ut_metadata != 0) peer_ut_metadata = peer.ut_metadata;
        } else if (ext.ext_id == our_ut_metadata) {
            wire::ut_metadata_message um;
            const auto e = wire::parse_ut_metadata(ext.payload, scratch, um);
            if (e != wire::wire_error::none) {
                ++stats_.protocol_errors;
                co_return;
            }
            if (um.kind == wire::ut_kind::request && peer_ut_metadata != 0) {
                if (++requests > 4 * pieces + 8) co_return; // a loop, not a fetch
                const auto piece = um.piece;
                if (piece < 0 || static_cast<std::size_t>(piece) >= pieces || sd.mode == misbehaviour::reject) {
                    wire::build_metadata_reject(tx, peer_ut_metadata, static_cast<std::uint32_t>(std::max<std::int64_t>(piece, 0)));
                    ++stats_.rejects_sent;
                } else if (sd.mode == misbehaviour::stall && answered >= (pieces + 1) / 2) {
                    // Silent from here on: the fetcher must time out.
                } else {
                    const auto p = static_cast<std::size_t>(piece);
                    const auto offset = p * wire::metadata_piece_size;
                    const auto length = wire::piece_length(info.size(), p);
                    wire::build_metadata_data(tx, peer_ut_metadata, static_cast<std::uint32_t>(p), info.size(),
                                              std::string_view(info).substr(offset, length));
                    ++answered;
                    ++stats_.pieces_served;
                    if (sd.mode == misbehaviour::none || sd.mode == misbehaviour::slow) correct_piece = p;
                    if (!served[p]) {
                        served[p] = true;
                        ++served_count;
                    }
                }
            }
        }
        rx.erase(0, consumed);
        if (tx.empty()) continue;
        if (sd.mode == misbehaviour::slow) {
            delay.expires_after(slow_delay);
            co_await delay.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            if (stopped_) co_return;
        }
        if (!co_await ch.send(tx)) co_return;
        conn->arm(opt_.idle_timeout, conn); // progress: a slow seeder is slow, not idle
        if (correct_piece) torrents_.piece_served(torrent_index, requester_ip, *correct_piece, pieces);
        if (!recorded && served_count == pieces &&
            (sd.mode == misbehaviour::none || sd.mode == misbehaviour::slow)) {
            recorded = true;
            ++stats_.full_transfers;
            ++stats_.full_transfers_by_policy[static_cast<std::size_t>(sd.policy)];
        }
    }
}

// ---- announcing -------------------------------------------------------------------------------

std::chrono::steady_clock::duration seeder_set::next_interval() {
    // +-20% jitter, as clients spread their re-announces.
    const auto base = static_cast<std::uint64_t>(opt_.reannounce) * 1000;
    return std::chrono::milliseconds(base * 4 / 5 + rng_.below(base * 2 / 5 + 1));
}

void seeder_set::start(std::function<void()> first_round_done) {
    first_round_done_ = std::move(first_round_done);
    const auto now = std::chrono::steady_clock::now();
    for (std::uint32_t s = 0; s < seeders_.size(); ++s) {
        for (auto t : seeders_[s].torrents) {
            for (std::uint8_t k = 0; k < torrents_.at(t).keys.size(); ++k) {
                jobs_.push({now, s, t, k, true});
                ++first_round_left_;
            }
        }
    }
    if (first_round_left_ == 0 && first_round_done_) first_round_done_();
    tick();
}

void seeder_set::tick() {
    if (stopped_) return;
    const auto now = std::chrono::steady_clock::now();
    // Leave room for the nodes' own lookups.
    const auto budget = net_.max_lookups() > 32 ? net_.max_lookups() - 32 : 1;
    while (!jobs_.empty() && jobs_.top().due <= now && net_.lookups_active() < budget) {
        const job j = jobs_.top();
        jobs_.pop();
        run_job(j);
    }
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([this](const asio::error_code& ec) {
        if (!ec) tick();
    });
}

void seeder_set::run_job(const job& j) {
    const auto& sd = seeders_[j.seeder];
    const id20 key = torrents_.at(j.torrent).keys.at(j.key);
    net_.lookup(sd.client_host, key, true, [this, j, key](const std::vector<lookup_reply>& closest) {
        const auto& s = seeders_[j.seeder];
        for (const auto& r : closest) {
            if (!r.token.empty()) net_.announce(s.client_host, r, key, port_);
        }
        ++stats_.announce_rounds;
        job next = j;
        next.first = false;
        next.due = std::chrono::steady_clock::now() + next_interval();
        jobs_.push(next);
        if (j.first && --first_round_left_ == 0 && first_round_done_) {
            auto cb = std::move(first_round_done_);
            cb();
        }
    });
}

} // namespace dhtc::testnet
