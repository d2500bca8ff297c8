// A simulated datagram link between uTP multiplexers on a manual clock: fixed delay plus
// jitter (which reorders), and chosen shares of loss, duplication and truncation, all from
// one seeded generator so every run is the same. Used by the uTP unit tests and the fuzzer
// does not need it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "util/clock.hpp"
#include "net/transport.hpp"
#include "utp/multiplexer.hpp"

namespace dhtc::test {

class utp_link {
public:
    struct conditions {
        double loss = 0;      ///< share of datagrams dropped
        double duplicate = 0; ///< share delivered twice
        double truncate = 0;  ///< share cut below the 20-byte header
        std::chrono::microseconds delay{10'000};
        std::chrono::microseconds jitter{0}; ///< extra uniform delay: reorders
    };

    explicit utp_link(manual_clock& clk, std::uint64_t seed = 7) : clock_(clk), rng_(static_cast<unsigned>(seed)) {}

    conditions link;
    /// Drops the datagrams it returns true for (after the random conditions passed them).
    std::function<bool(const endpoint& from, const endpoint& to, const std::string& bytes)> filter;
    std::uint64_t delivered = 0;
    std::uint64_t dropped = 0;

    /// The transport one endpoint sends through.
    class port final : public transport {
    public:
        port(utp_link& link, endpoint self) : link_(link), self_(self) {}
        bool send(const endpoint& to, std::string_view payload) override {
            link_.push(self_, to, std::string(payload));
            return true;
        }

    private:
        utp_link& link_;
        endpoint self_;
    };

    void attach(const endpoint& at, utp::multiplexer& m) { hosts_[at] = &m; }

    /// Moves time and datagrams until `done()` holds or `limit` of simulated time passed;
    /// `pump` runs after every step (the application reading and writing). True when done.
    bool run(const std::function<bool()>& done, std::chrono::seconds limit,
             const std::function<void()>& pump = [] {}) {
        const time_point end = clock_.now() + limit;
        pump();
        while (!done()) {
            time_point next = end;
            for (const auto& d : queue_) next = std::min(next, d.at);
            for (const auto& [at, m] : hosts_) next = std::min(next, m->next_timer());
            if (next >= end) return done();
            if (next > clock_.now()) clock_.set(next);
            deliver_due();
            for (const auto& [at, m] : hosts_) m->tick();
            pump();
            for (const auto& [at, m] : hosts_) m->flush();
        }
        return true;
    }

private:
    struct datagram {
        time_point at;
        endpoint from, to;
        std::string bytes;
    };

    void push(const endpoint& from, const endpoint& to, std::string bytes) {
        std::uniform_real_distribution<double> u(0, 1);
        if (u(rng_) < link.loss) {
            ++dropped;
            return;
        }
        if (filter && filter(from, to, bytes)) {
            ++dropped;
            return;
        }
        if (u(rng_) < link.truncate) bytes.resize(std::uniform_int_distribution<std::size_t>(0, 19)(rng_) % (bytes.size() + 1));
        const int copies = u(rng_) < link.duplicate ? 2 : 1;
        for (int i = 0; i < copies; ++i) {
            const auto jitter = std::chrono::microseconds(
                link.jitter.count() ? std::uniform_int_distribution<long>(0, link.jitter.count())(rng_) : 0);
            queue_.push_back(datagram{clock_.now() + link.delay + jitter, from, to, bytes});
        }
    }

    void deliver_due() {
        const time_point now = clock_.now();
        std::vector<datagram> due;
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (it->at <= now) {
                due.push_back(std::move(*it));
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        std::stable_sort(due.begin(), due.end(), [](const datagram& a, const datagram& b) { return a.at < b.at; });
        for (const auto& d : due) {
            const auto host = hosts_.find(d.to);
            if (host == hosts_.end()) continue;
            ++delivered;
            host->second->on_datagram(d.from, d.bytes);
        }
    }

    manual_clock& clock_;
    std::mt19937 rng_;
    std::vector<datagram> queue_;
    std::map<endpoint, utp::multiplexer*> hosts_;
};

} // namespace dhtc::test
