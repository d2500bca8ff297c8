#include "engine/dht_engine.hpp"

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <charconv>
#include <mutex>
#include <random>
#include <thread>

#include "crawl/saved_nodes.hpp"
#include "dht/node_id.hpp"

namespace dhtc::engine {

namespace {

constexpr auto turn_interval = std::chrono::milliseconds(10);
// KRPC `v`: "DC" and the protocol revision of this implementation.
constexpr std::string_view client_version{"DC\x00\x01", 4};

// Sends each datagram through the socket of its address family.
class udp_transport final : public transport {
public:
    net::udp_socket* v4 = nullptr;
    net::udp_socket* v6 = nullptr;
    bool send(const endpoint& to, std::string_view payload) override {
        net::udp_socket* s = to.address.is_v6() ? v6 : v4;
        return s && s->send(to, payload);
    }
};

} // namespace

struct dht_engine::impl {
    dht_engine_options options;
    crawl::crawl_sink& sink;
    steady_clock_source steady;
    batch_clock clock{steady}; // what the DHT reads: refreshed per receive batch and per turn
    asio::io_context io{1};
    asio::steady_timer turn_timer{io};
    asio::steady_timer resolve_timer{io};
    asio::steady_timer routing_timer{io};
    std::function<void(std::vector<krpc::node_entry>)> routing_sink;
    asio::ip::udp::resolver resolver{io};
    std::unique_ptr<net::udp_socket> v4;
    std::unique_ptr<net::udp_socket> v6;
    udp_transport transport;
    address_policy policy;
    std::unique_ptr<dht_service> service;
    std::vector<bool> resolved;
    std::thread thread;
    std::mutex lifecycle;
    bool started = false;
    bool stopped = false;

    impl(const dht_engine_options& o, crawl::crawl_sink& s)
        : options(o), sink(s), policy(address_policy_options{o.crawl.allow_private_addresses}) {}

    bool bind(std::string& error);
    void on_batch(std::span<const net::datagram> batch) {
        clock.refresh();
        for (const auto& d : batch) service->handle(d.from, d.payload);
    }
    void schedule_turn() {
        turn_timer.expires_after(turn_interval);
        turn_timer.async_wait([this](const std::error_code& ec) {
            if (ec) return;
            clock.refresh();
            service->turn();
            // A turn queues queries of its own (bootstrap, crawl, samples); without a flush
            // they would wait for the next received batch, which may never come.
            for (auto* sock : {v4.get(), v6.get()})
                if (sock) sock->flush();
            schedule_turn();
        });
    }
    void resolve_bootstrap();
    void hand_routing_state() {
        if (!routing_sink) return;
        try {
            routing_sink(service->actor().routing_to_save(crawl::max_saved_nodes));
        } catch (...) {
            // Keeping the routing state is a convenience: it never stops the DHT.
        }
    }
    void schedule_routing_save() {
        routing_timer.expires_after(routing_save_interval);
        routing_timer.async_wait([this](const std::error_code& ec) {
            if (ec) return;
            hand_routing_state();
            schedule_routing_save();
        });
    }
};

bool dht_engine::impl::bind(std::string& error) {
    const auto bind_one = [&](const std::string& text, std::unique_ptr<net::udp_socket>& out) {
        const auto addr = ip_address::parse(text);
        if (!addr) {
            error = "invalid bind address: " + text;
            return false;
        }
        std::error_code ec;
        out = net::udp_socket::open(io, endpoint{*addr, options.port}, ec);
        if (!out) {
            error = "cannot bind UDP " + endpoint{*addr, options.port}.to_string() + ": " + ec.message();
            return false;
        }
        const endpoint local = out->local_endpoint();
        policy.add_own_endpoint(local);
        // Bound to a wildcard, we are reachable through loopback too: never query ourselves.
        if (local.address == ip_address::v4(0u)) policy.add_own_endpoint({*ip_address::parse("127.0.0.1"), local.port});
        if (local.address.is_v6() && local.address == *ip_address::parse("::"))
            policy.add_own_endpoint({*ip_address::parse("::1"), local.port});
        return true;
    };
    if (options.mode != netmode::ipv6 && !bind_one(options.bind_v4, v4)) return false;
    if (options.mode != netmode::ipv4 && !bind_one(options.bind_v6, v6)) return false;
    transport.v4 = v4.get();
    transport.v6 = v6.get();
    return true;
}

void dht_engine::impl::resolve_bootstrap() {
    const auto& sources = options.crawl.bootstrap.sources;
    for (std::size_t i = 0; i < sources.size(); ++i) {
        if (resolved[i]) continue;
        const host_port hp = split_host_port(sources[i]);
        if (!hp || hp.port == 0) {
            resolved[i] = true; // malformed: the options layer reports it; never retried
            continue;
        }
        resolver.async_resolve(std::string(hp.host), std::to_string(hp.port), [this, i](const std::error_code& ec,
                                                     asio::ip::udp::resolver::results_type results) {
            if (ec) return; // retried at the next resolve round
            std::vector<endpoint> eps;
            for (const auto& r : results) {
                const endpoint ep = net::from_asio(r.endpoint());
                if ((ep.address.is_v6() ? transport.v6 : transport.v4) != nullptr) eps.push_back(ep);
            }
            if (eps.empty()) return;
            resolved[i] = true;
            service->actor().set_bootstrap_endpoints(i, std::move(eps));
        });
    }
    resolve_timer.expires_after(std::chrono::seconds(std::max(options.crawl.bootstrap.interval_secs, 1u)));
    resolve_timer.async_wait([this](const std::error_code& ec) {
        if (!ec) resolve_bootstrap();
    });
}

std::unique_ptr<dht_engine> dht_engine::create(const dht_engine_options& o, crawl::crawl_sink& sink,
                                               std::string& error) {
    auto p = std::make_unique<impl>(o, sink);
    if (!p->bind(error)) return nullptr;
    std::random_device rd;
    const std::uint64_t seed = o.seed ? *o.seed : (std::uint64_t{rd()} << 32 | rd());
    std::mt19937_64 rng(seed);
    const id20 own = o.node_id ? *o.node_id : dht::random_id(rng);
    p->service = std::make_unique<dht_service>(o.crawl, p->clock, p->transport, p->policy, sink, own, client_version,
                                               seed);
    p->resolved.assign(o.crawl.bootstrap.sources.size(), false);
    return std::unique_ptr<dht_engine>(new dht_engine(std::move(p)));
}

dht_engine::dht_engine(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

dht_engine::~dht_engine() { stop(); }

void dht_engine::seed_saved_nodes(const std::vector<krpc::node_entry>& nodes) {
    std::lock_guard lock(impl_->lifecycle);
    if (!impl_->started) impl_->service->actor().seed_saved_nodes(nodes);
}

void dht_engine::on_routing_state(std::function<void(std::vector<krpc::node_entry>)> sink) {
    std::lock_guard lock(impl_->lifecycle);
    if (!impl_->started) impl_->routing_sink = std::move(sink);
}

void dht_engine::start() {
    std::lock_guard lock(impl_->lifecycle);
    if (impl_->started || impl_->stopped) return;
    impl_->started = true;
    auto* m = impl_.get();
    for (auto* s : {m->v4.get(), m->v6.get()})
        if (s) s->start([m](std::span<const net::datagram> b) { m->on_batch(b); });
    m->resolve_bootstrap();
    m->schedule_turn();
    if (m->routing_sink) m->schedule_routing_save();
    m->thread = std::thread([m] { m->io.run(); });
}

void dht_engine::stop() {
    std::lock_guard lock(impl_->lifecycle);
    if (impl_->stopped) return;
    impl_->stopped = true;
    auto* m = impl_.get();
    if (m->thread.joinable()) {
        // Close everything on the network thread, then let run() return.
        asio::post(m->io, [m] {
            m->hand_routing_state(); // the last word, before the sockets close
            m->routing_timer.cancel();
            m->turn_timer.cancel();
            m->resolve_timer.cancel();
            m->resolver.cancel();
            if (m->v4) m->v4->close();
            if (m->v6) m->v6->close();
            m->io.stop();
        });
        m->thread.join();
    } else {
        if (m->v4) m->v4->close();
        if (m->v6) m->v6->close();
    }
}

bool dht_engine::request_lookup(const id20& info_hash) {
    return impl_->service->actor().lookup_requests().try_push(info_hash);
}

bool dht_engine::request_scrape(const id20& info_hash) {
    return impl_->service->actor().scrape_requests().try_push(info_hash);
}

std::vector<endpoint> dht_engine::local_endpoints() const {
    std::vector<endpoint> out;
    if (impl_->v4) out.push_back(impl_->v4->local_endpoint());
    if (impl_->v6) out.push_back(impl_->v6->local_endpoint());
    return out;
}

const id20& dht_engine::node_id() const noexcept { return impl_->service->own_id(); }
const dht_service& dht_engine::service() const noexcept { return *impl_->service; }
const net::udp_counters* dht_engine::udp_counters(bool v6) const noexcept {
    const auto& s = v6 ? impl_->v6 : impl_->v4;
    return s ? &s->counters() : nullptr;
}

} // namespace dhtc::engine
