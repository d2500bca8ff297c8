#include "support/fake_peer.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "bencode/encoder.hpp"
#include "metadata/mse.hpp"
#include "util/hashing.hpp"

namespace dhtc::test {

using asio::ip::tcp;

namespace {

std::string be32(std::uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
    return std::string(b, 4);
}

std::string frame(std::uint8_t id, std::string_view payload) {
    std::string m = be32(static_cast<std::uint32_t>(payload.size() + 1));
    m.push_back(static_cast<char>(id));
    m.append(payload);
    return m;
}

std::string extended(std::uint8_t ext_id, std::string_view payload) {
    std::string m;
    if (!wire::build_extended(m, ext_id, payload)) throw std::runtime_error("build_extended");
    return m;
}

// A raw socket on 127.0.0.1:0, bound; returns the fd and sets `port`.
int bound_socket(std::uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("bind");
    }
    port = ntohs(a.sin_port);
    return fd;
}

// Starts a non-blocking connect to 127.0.0.1:port; true when it completed within 100 ms.
bool connect_filler(std::uint16_t port, int& fd_out) {
    fd_out = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd_out < 0) throw std::runtime_error("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd_out, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return true;
    if (errno != EINPROGRESS) throw std::runtime_error("connect");
    pollfd p{fd_out, POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) return false;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_out, SOL_SOCKET, SO_ERROR, &err, &len);
    return err == 0;
}

} // namespace

struct fake_peer::impl {
    impl(const std::string& info, const peer_script& script, const id20& v1, const id20& v2)
        : info(info), script(script), v1_key(v1), v2_key(v2), acceptor(io) {}

    const std::string& info;
    const peer_script& script;
    const id20& v1_key;
    const id20& v2_key;

    asio::io_context io;
    tcp::acceptor acceptor;
    std::vector<int> raw_fds; // refuse / full_backlog: the listener and its fillers
    std::thread thread;
    int open_connections = 0; // on the io thread only
    std::chrono::steady_clock::time_point last_closed{}; // on the io thread only

    /// The dict served under `key`: the first one's v1 or v2 key, or another's v1 key.
    const std::string* dict_for(const id20& key) const {
        if (key == v1_key || key == v2_key) return &info;
        for (const auto& d : script.also_serves)
            if (metadata::sha1_id(d) == key) return &d;
        return nullptr;
    }

    mutable std::mutex mu;
    mutable std::condition_variable cv;
    std::vector<conversation> convs;

    template <class F>
    void update(std::size_t idx, F&& f) {
        {
            std::lock_guard lock(mu);
            f(convs[idx]);
        }
        cv.notify_all();
    }

    std::size_t add_conversation() {
        std::lock_guard lock(mu);
        convs.emplace_back();
        return convs.size() - 1;
    }

    static asio::awaitable<void> accept_loop(impl* self);
    static asio::awaitable<void> serve(impl* self, tcp::socket sock, std::size_t idx);
};

namespace {

// One accepted connection, scripted.
class peer_conn {
public:
    peer_conn(fake_peer::impl& p, tcp::socket sock, std::size_t idx)
        : p_(p), s_(p.script), sock_(std::move(sock)), idx_(idx), timer_(sock_.get_executor()),
          fake_ut_(s_.ut_metadata_id) {}

    asio::awaitable<void> run() {
        // Like real clients: the handshakes go out as several small writes, and Nagle would
        // hold each behind the delayed ACK of the one before.
        std::error_code nd;
        sock_.set_option(tcp::no_delay(true), nd);
        ++p_.open_connections;
        try {
            co_await talk();
        } catch (const std::exception&) {
            // The session closed the connection or the server is stopping.
        }
        --p_.open_connections;
        p_.last_closed = std::chrono::steady_clock::now();
        std::error_code ignored;
        sock_.close(ignored);
        p_.update(idx_, [](conversation& c) { c.ended = true; });
    }

private:
    using mode = peer_mode;

    asio::awaitable<void> send(std::string msg) {
        if (s_.delay.count() > 0) {
            timer_.expires_after(s_.delay);
            co_await timer_.async_wait(asio::use_awaitable);
        }
        if (enc_) enc_->apply(msg.data(), msg.size());
        co_await asio::async_write(sock_, asio::buffer(msg), asio::use_awaitable);
    }

    // Exactly n bytes of the payload stream: first what came with the MSE handshake, then
    // the socket, through RC4 when it was selected.
    asio::awaitable<void> read_exact(char* out, std::size_t n) {
        const std::size_t from_pending = std::min(n, pending_.size());
        std::memcpy(out, pending_.data(), from_pending);
        pending_.erase(0, from_pending);
        if (from_pending == n) co_return;
        co_await asio::async_read(sock_, asio::buffer(out + from_pending, n - from_pending), asio::use_awaitable);
        if (dec_) dec_->apply(out + from_pending, n - from_pending);
    }

    // MSE per the script; false: drop the connection (like libtorrent).
    asio::awaitable<bool> negotiate() {
        using enc = peer_encryption;
        if (s_.encryption == enc::plaintext_only) co_return true;
        std::array<char, 20> first{};
        co_await asio::async_read(sock_, asio::buffer(first), asio::use_awaitable);
        const bool plaintext = std::string_view(first.data(), 20) == std::string_view("\x13" "BitTorrent protocol", 20);
        if (plaintext) {
            pending_.assign(first.data(), first.size());
            co_return s_.encryption == enc::either;
        }
        const bool rc4_only = s_.encryption == enc::forced_rc4;
        // The key is looked up among the torrents served, like libtorrent: v1 or v2.
        metadata::mse::responder r1(p_.v1_key, rc4_only ? metadata::mse::crypto_rc4 : 3, false);
        std::string out;
        metadata::mse::status st = r1.feed(std::string_view(first.data(), first.size()), out);
        std::array<char, 2048> buf{};
        while (st == metadata::mse::status::need_more) {
            if (!out.empty()) {
                co_await asio::async_write(sock_, asio::buffer(out), asio::use_awaitable);
                out.clear();
            }
            const std::size_t n = co_await sock_.async_read_some(asio::buffer(buf), asio::use_awaitable);
            st = r1.feed(std::string_view(buf.data(), n), out);
        }
        if (st != metadata::mse::status::done) co_return false;
        co_await asio::async_write(sock_, asio::buffer(out), asio::use_awaitable);
        metadata::mse::outcome o = r1.take();
        pending_ = std::move(o.payload);
        enc_ = std::move(o.encrypt);
        dec_ = std::move(o.decrypt);
        p_.update(idx_, [&](conversation& c) {
            c.mse = true;
            c.mse_selected = o.selected;
        });
        co_return true;
    }

    std::string ext_handshake_payload() const {
        if (s_.ext_handshake_raw) return *s_.ext_handshake_raw;
        if (s_.mode == mode::ext_handshake_not_dict) return "i1e";
        std::int64_t size = static_cast<std::int64_t>(info_->size());
        if (s_.mode == mode::wrong_metadata_size) size += 1;
        if (s_.mode == mode::oversize_claim) size = std::int64_t{1} << 31;
        if (s_.mode == mode::huge_claim_silent) size = std::int64_t{10} << 20;
        std::string out;
        bencode::writer w(out);
        w.begin_dict();
        w.key("m").begin_dict();
        if (s_.mode == mode::ut_metadata_zero)
            w.entry("ut_metadata", std::int64_t{0});
        else if (s_.mode != mode::no_ut_metadata)
            w.entry("ut_metadata", std::int64_t{fake_ut_});
        w.entry("ut_pex", std::int64_t{1});
        w.end();
        w.entry("metadata_size", size).entry("reqq", std::int64_t{250}).entry("v", std::string_view("fake_peer/1"));
        w.end();
        if (!w.complete()) throw std::runtime_error("ext handshake encoding");
        return out;
    }

    asio::awaitable<void> talk() {
        const bool go_on = co_await negotiate();
        if (!go_on) co_return;
        std::array<char, wire::handshake_size> hs{};
        co_await read_exact(hs.data(), hs.size());
        wire::handshake theirs;
        const bool parsed = wire::parse_handshake(std::string_view(hs.data(), hs.size()), theirs) == wire::wire_error::none;
        p_.update(idx_, [&](conversation& c) {
            c.got_handshake = parsed;
            std::memcpy(c.reserved.data(), theirs.reserved, 8);
            c.info_hash = theirs.info_hash;
            c.peer_id = theirs.peer_id;
        });
        // Like libtorrent: no torrent under that key, no answer.
        if (!parsed) co_return;
        info_ = p_.dict_for(theirs.info_hash);
        if (!info_) co_return;
        if (s_.refuse_while_busy && p_.open_connections > 1) co_return;
        if (s_.refuse_after_close.count() && std::chrono::steady_clock::now() - p_.last_closed < s_.refuse_after_close)
            co_return;
        if (s_.mode == mode::silent) co_return co_await read_loop();

        id20 key = theirs.info_hash;
        if (s_.mode == mode::wrong_info_hash) key.bytes.fill(0x42);
        if (s_.mode == mode::v2_key_reply) key = p_.v2_key;
        id20 own_id;
        own_id.bytes.fill(0x5a);
        if (s_.mode == mode::echo_peer_id) own_id = theirs.peer_id;
        std::string h;
        wire::build_handshake(h, key, own_id);
        if (s_.v2_bit || s_.mode == mode::v2_key_reply) h[27] = static_cast<char>(h[27] | 0x10);
        if (s_.mode == mode::no_extension_bit) h[25] = 0;
        if (s_.mode == mode::bad_pstrlen) h[0] = 18;
        if (s_.mode == mode::bad_protocol) h[19] = 'X';
        if (s_.mode == mode::short_handshake) h.resize(30);
        co_await send(h);
        if (s_.mode == mode::short_handshake || s_.mode == mode::close_after_handshake) co_return;

        if (theirs.supports_extensions && s_.mode != mode::no_extension_bit)
            co_await send(extended(wire::ext_handshake_id, ext_handshake_payload()));

        if (!s_.raw_after_ext.empty()) co_await send(s_.raw_after_ext);
        switch (s_.mode) {
        case mode::huge_length: co_await send(be32(s_.length_value)); break;
        case mode::short_extended: co_await send(be32(1) + std::string(1, static_cast<char>(wire::msg_extended))); break;
        case mode::keepalive_flood:
            for (;;) {
                co_await send(std::string(256, '\0'));
                timer_.expires_after(std::chrono::milliseconds(1));
                co_await timer_.async_wait(asio::use_awaitable);
            }
        default: break;
        }
        if (s_.noise) {
            co_await send(frame(1, ""));                         // unchoke
            co_await send(frame(5, std::string("\xff\x80", 2))); // bitfield
            co_await send(frame(4, be32(1)));                    // have
            co_await send(frame(0x0e, ""));                      // have_all
            co_await send(frame(9, std::string("\x1a\xe1", 2))); // port
            co_await send(frame(0x77, std::string(3, 'u')));     // unknown id
            co_await send(be32(0) + be32(0) + be32(0));          // keep-alives
            co_await send(extended(9, "d1:xi1ee"));              // unknown extension
        }
        co_await read_loop();
    }

    asio::awaitable<void> read_loop() {
        for (;;) {
            std::array<char, 4> len{};
            co_await read_exact(len.data(), len.size());
            const std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(len[0])) << 24 |
                                    static_cast<std::uint32_t>(static_cast<unsigned char>(len[1])) << 16 |
                                    static_cast<std::uint32_t>(static_cast<unsigned char>(len[2])) << 8 |
                                    static_cast<std::uint32_t>(static_cast<unsigned char>(len[3]));
            if (n == 0) continue;
            if (n > (1u << 20)) co_return;
            std::string body(n, '\0');
            co_await read_exact(body.data(), body.size());
            const auto id = static_cast<std::uint8_t>(body[0]);
            p_.update(idx_, [&](conversation& c) { c.message_ids.push_back(id); });
            if (id != wire::msg_extended || n < 2) continue;
            const auto ext = static_cast<std::uint8_t>(body[1]);
            const std::string_view payload = std::string_view(body).substr(2);
            if (ext == wire::ext_handshake_id) {
                co_await on_ext_handshake(payload);
                continue;
            }
            p_.update(idx_, [&](conversation& c) { c.ext_ids.push_back(ext); });
            // After a rehandshake, requests still in flight under the old id are served too.
            if (ext != fake_ut_ && !(s_.mode == mode::rehandshake && ext == s_.ut_metadata_id)) continue;
            wire::ut_metadata_message um;
            if (wire::parse_ut_metadata(payload, doc_, um) != wire::wire_error::none) continue;
            const auto piece = static_cast<std::uint32_t>(um.piece);
            if (um.kind == wire::ut_kind::reject) {
                p_.update(idx_, [&](conversation& c) { c.rejects.push_back(piece); });
            } else if (um.kind == wire::ut_kind::request) {
                p_.update(idx_, [&](conversation& c) { c.requests.push_back(piece); });
                co_await answer(piece);
            }
        }
    }

    asio::awaitable<void> on_ext_handshake(std::string_view payload) {
        const bool first = session_ut_ == 0;
        p_.update(idx_, [&](conversation& c) { c.ext_handshakes.emplace_back(payload); });
        wire::ext_handshake eh;
        wire::parse_ext_handshake(payload, doc_, eh);
        if (eh.ut_metadata != 0) session_ut_ = eh.ut_metadata;
        if (!first || session_ut_ == 0) co_return;
        if (s_.noise) co_await send(extended(session_ut_, "d8:msg_typei7e5:piecei0ee")); // unknown msg_type
        if (s_.ask_us) co_await send(extended(session_ut_, "d8:msg_typei0e5:piecei0ee"));
    }

    asio::awaitable<void> answer(std::uint32_t piece) {
        if (stalled_ || session_ut_ == 0 || s_.mode == mode::ignore_requests || s_.mode == mode::huge_claim_silent)
            co_return;
        const std::size_t size = info_->size();
        const std::size_t count = wire::piece_count(size);
        const bool first = !answered_;
        answered_ = true;
        std::string msg;
        if (first && s_.first_answer_raw) co_return co_await send(extended(session_ut_, *s_.first_answer_raw));
        if (piece >= count || s_.mode == mode::reject_all) {
            wire::build_metadata_reject(msg, session_ut_, piece);
            co_return co_await send(msg);
        }
        const std::string p = std::to_string(piece);
        if (s_.mode == mode::reject_as_data)
            co_return co_await send(extended(session_ut_, "d8:msg_typei1e5:piecei" + p + "ee"));
        if (s_.mode == mode::data_dict_past_payload)
            co_return co_await send(extended(session_ut_, "d8:msg_typei1e5:piecei" + p + "e1:x99999:ab"));

        std::uint32_t sent_piece = piece;
        std::size_t total = size;
        std::string data = info_->substr(piece * wire::metadata_piece_size, wire::piece_length(size, piece));
        switch (s_.mode) {
        case mode::wrong_metadata_size:
        case mode::total_size_mismatch: total = size + 1; break;
        case mode::corrupt_piece:
            if (piece == s_.target_piece)
                for (char& c : data) c = static_cast<char>(~c);
            break;
        case mode::unrequested_piece:
            if (first) {
                sent_piece = s_.target_piece;
                if (sent_piece < count)
                    data = info_->substr(sent_piece * wire::metadata_piece_size, wire::piece_length(size, sent_piece));
            }
            break;
        case mode::short_piece:
            if (piece + 1 < count) data.pop_back();
            break;
        case mode::long_last_piece:
            if (piece + 1 == count) data.push_back('x');
            break;
        default: break;
        }
        wire::build_metadata_data(msg, session_ut_, sent_piece, total, data);
        if (s_.mode == mode::stall_mid_piece && piece == s_.target_piece) {
            stalled_ = true;
            msg.resize(msg.size() / 2);
            co_return co_await send(msg);
        }
        co_await send(msg);
        if (s_.mode == mode::rehandshake && first) {
            fake_ut_ = 3;
            co_await send(extended(wire::ext_handshake_id, "d1:md11:ut_metadatai3eee"));
        }
    }

    fake_peer::impl& p_;
    const peer_script& s_;
    tcp::socket sock_;
    std::size_t idx_;
    const std::string* info_ = &p_.info; // the dict this connection asked for
    asio::steady_timer timer_;
    bencode::document doc_;
    std::uint8_t fake_ut_;
    std::string pending_; // payload that came with the MSE handshake, decrypted
    std::unique_ptr<metadata::mse::rc4> enc_;
    std::unique_ptr<metadata::mse::rc4> dec_;
    std::uint8_t session_ut_ = 0;
    bool answered_ = false;
    bool stalled_ = false;
};

} // namespace

asio::awaitable<void> fake_peer::impl::serve(impl* self, tcp::socket sock, std::size_t idx) {
    peer_conn c(*self, std::move(sock), idx);
    co_await c.run();
}

asio::awaitable<void> fake_peer::impl::accept_loop(impl* self) {
    for (;;) {
        std::error_code ec;
        tcp::socket s(self->io);
        co_await self->acceptor.async_accept(s, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
        const std::size_t idx = self->add_conversation();
        asio::co_spawn(self->io, serve(self, std::move(s), idx), asio::detached);
    }
}

fake_peer::fake_peer(std::string info_dict, peer_script script)
    : info_(std::move(info_dict)), script_(std::move(script)), v1_key_(metadata::sha1_id(info_)),
      v2_key_(metadata::sha256_id(info_)) {
    impl_ = std::make_unique<impl>(info_, script_, v1_key_, v2_key_);
    std::uint16_t port = 0;
    if (script_.mode == peer_mode::refuse) {
        // Bound but not listening: the kernel answers a SYN with a reset.
        impl_->raw_fds.push_back(bound_socket(port));
    } else if (script_.mode == peer_mode::full_backlog) {
        // A listener that never accepts, its accept queue filled: further SYNs are dropped,
        // so a connect hangs until its caller gives up (no non-loopback blackhole needed).
        const int fd = bound_socket(port);
        impl_->raw_fds.push_back(fd);
        if (::listen(fd, 0) != 0) throw std::runtime_error("listen");
        for (int i = 0; i < 16; ++i) {
            int filler = -1;
            const bool done = connect_filler(port, filler);
            impl_->raw_fds.push_back(filler);
            if (!done) break;
        }
    } else {
        const tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
        impl_->acceptor.open(ep.protocol());
        impl_->acceptor.bind(ep);
        impl_->acceptor.listen();
        port = impl_->acceptor.local_endpoint().port();
        asio::co_spawn(impl_->io, impl::accept_loop(impl_.get()), asio::detached);
        impl_->thread = std::thread([io = &impl_->io] { io->run(); });
    }
    local_ = endpoint{ip_address::v4(std::array<std::uint8_t, 4>{127, 0, 0, 1}), port};
}

fake_peer::~fake_peer() { stop(); }

void fake_peer::stop() {
    if (!impl_) return;
    impl_->io.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
    for (int fd : impl_->raw_fds) ::close(fd);
    impl_->raw_fds.clear();
}

std::vector<conversation> fake_peer::conversations() const {
    std::lock_guard lock(impl_->mu);
    return impl_->convs;
}

bool fake_peer::wait_ended(std::size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(impl_->mu);
    return impl_->cv.wait_for(lock, timeout, [&] {
        std::size_t ended = 0;
        for (const auto& c : impl_->convs) ended += c.ended ? 1 : 0;
        return ended >= n;
    });
}

std::string make_info_dict(std::size_t size, std::uint32_t seed) {
    const std::string head = "d6:lengthi1e4:name1:x12:piece lengthi16384e6:pieces";
    // head + "<n>:" + n bytes + "e" == size; the digits of n depend on n, so iterate.
    std::size_t n = size > head.size() + 3 ? size - head.size() - 3 : 0;
    while (n > 0 && head.size() + std::to_string(n).size() + 1 + n + 1 > size) --n;
    if (head.size() + std::to_string(n).size() + 1 + n + 1 != size) throw std::invalid_argument("size");
    std::string out = head + std::to_string(n) + ":";
    std::uint32_t x = seed * 2654435761u + 1;
    for (std::size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push_back(static_cast<char>(x));
    }
    out.push_back('e');
    return out;
}

// ---- simple_piece_source -------------------------------------------------------------------

simple_piece_source::simple_piece_source(std::size_t known_size) {
    if (known_size != 0) on_metadata_size(known_size);
}

bool simple_piece_source::on_metadata_size(std::size_t size) {
    if (buf_.size() != 0) return size == buf_.size();
    if (buf_.reset(size) != wire::wire_error::none) return false;
    owner_.assign(buf_.pieces(), -1);
    return true;
}

std::optional<std::uint32_t> simple_piece_source::acquire(std::uint32_t session) {
    for (std::size_t i = 0; i < owner_.size(); ++i) {
        if (buf_.has(i) || owner_[i] >= 0) continue;
        owner_[i] = session;
        max_held_[session] = std::max(max_held_[session], held(session));
        return static_cast<std::uint32_t>(i);
    }
    return std::nullopt;
}

bool simple_piece_source::deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) {
    if (piece >= owner_.size() || owner_[piece] != static_cast<std::int64_t>(session)) return false;
    owner_[piece] = -1;
    if (buf_.store(piece, data) != wire::wire_error::none) return false;
    ++delivered_[session];
    if (on_deliver) on_deliver(session, piece);
    return true;
}

void simple_piece_source::release(std::uint32_t session) {
    for (auto& o : owner_)
        if (o == static_cast<std::int64_t>(session)) o = -1;
    ++releases_[session];
}

bool simple_piece_source::complete() const { return buf_.complete(); }

std::size_t simple_piece_source::pieces_by(std::uint32_t session) const {
    auto it = delivered_.find(session);
    return it == delivered_.end() ? 0 : it->second;
}

std::size_t simple_piece_source::releases_of(std::uint32_t session) const {
    auto it = releases_.find(session);
    return it == releases_.end() ? 0 : it->second;
}

std::size_t simple_piece_source::max_held(std::uint32_t session) const {
    auto it = max_held_.find(session);
    return it == max_held_.end() ? 0 : it->second;
}

std::size_t simple_piece_source::held(std::uint32_t session) const {
    return static_cast<std::size_t>(
        std::count(owner_.begin(), owner_.end(), static_cast<std::int64_t>(session)));
}

} // namespace dhtc::test
