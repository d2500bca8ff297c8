#include "engine/delivery_thread.hpp"

namespace dhtc::engine {

namespace {
void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
} // namespace

delivery_thread::delivery_thread(app_callbacks callbacks, std::size_t main_capacity, std::size_t observation_capacity)
    : callbacks_(std::move(callbacks)), main_capacity_(std::max<std::size_t>(main_capacity, 4)),
      observation_capacity_(observation_capacity) {}

delivery_thread::~delivery_thread() { stop(); }

void delivery_thread::start() {
    std::lock_guard lock(mutex_);
    if (thread_.joinable() || stopping_) return;
    thread_ = std::thread([this] { run(); });
}

void delivery_thread::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (on_this_thread()) return;
    // A second caller waits here until the first one's join has finished.
    std::lock_guard join_lock(join_mutex_);
    if (thread_.joinable()) thread_.join();
}

bool delivery_thread::post_gate(const id20& info_hash, std::function<void(bool)> answer) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || gates_.size() >= main_capacity_) return false;
        gates_.push_back({info_hash, std::move(answer)});
    }
    wake_.notify_one();
    return true;
}

bool delivery_thread::post_torrent(metadata::delivery d, std::function<void(bool)> ack) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || main_.size() >= main_capacity_) return false;
        main_.emplace_back(torrent_item{std::move(d), std::move(ack)});
    }
    wake_.notify_one();
    return true;
}

bool delivery_thread::post_completion(metadata::completion c, std::function<void()> done) {
    {
        std::lock_guard lock(mutex_);
        // Completions are accepted while stopping: the cancelled rounds of a shutdown
        // still get theirs before the thread ends.
        if (main_.size() >= main_capacity_ + main_capacity_ / 2) return false;
        main_.emplace_back(completion_item{c, std::move(done)});
    }
    wake_.notify_one();
    return true;
}

void delivery_thread::post_error(std::string message) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || main_.size() >= main_capacity_) {
            bump(counters_.errors_dropped);
            return;
        }
        main_.emplace_back(std::move(message));
    }
    wake_.notify_one();
}

void delivery_thread::post_retry(const retry::retry_event& e) {
    if (!callbacks_.retry) return;
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || main_.size() >= main_capacity_) {
            bump(counters_.retry_events_dropped);
            return;
        }
        main_.emplace_back(e);
    }
    wake_.notify_one();
}

void delivery_thread::post_observation(const crawl::observation& o) {
    // Nobody subscribed: nothing to carry.
    if (!callbacks_.observation || !observations_wanted_.load(std::memory_order_relaxed)) return;
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || observations_.size() >= observation_capacity_) {
            bump(counters_.observations_dropped);
            return;
        }
        observations_.push_back(o);
    }
    wake_.notify_one();
}

void delivery_thread::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || !gates_.empty() || !main_.empty() || !observations_.empty(); });
        if (!gates_.empty()) {
            gate_item g = std::move(gates_.front());
            gates_.pop_front();
            lock.unlock();
            handle(g);
            lock.lock();
        } else if (!main_.empty()) {
            main_item m = std::move(main_.front());
            main_.pop_front();
            lock.unlock();
            handle(m);
            lock.lock();
        } else if (!observations_.empty()) {
            crawl::observation o = observations_.front();
            observations_.pop_front();
            lock.unlock();
            bump(counters_.observations);
            try {
                callbacks_.observation(o);
            } catch (const std::exception& e) {
                report("observation callback", &e);
            } catch (...) {
                report("observation callback", nullptr);
            }
            lock.lock();
        } else if (stopping_) {
            return;
        }
    }
}

void delivery_thread::handle(gate_item& g) {
    bump(counters_.gates);
    bool pass = true;
    if (callbacks_.gate) {
        try {
            pass = callbacks_.gate(g.info_hash);
        } catch (const std::exception& e) {
            pass = false;
            report("gate callback", &e);
        } catch (...) {
            pass = false;
            report("gate callback", nullptr);
        }
    }
    g.answer(pass);
}

void delivery_thread::handle(main_item& m) {
    if (auto* t = std::get_if<torrent_item>(&m)) {
        bump(counters_.torrents);
        bool accepted = false; // no torrent callback: delivery_rejected
        if (callbacks_.torrent) {
            try {
                accepted = callbacks_.torrent(t->d);
            } catch (const std::exception& e) {
                report("torrent callback", &e);
            } catch (...) {
                report("torrent callback", nullptr);
            }
        }
        t->ack(accepted);
    } else if (auto* c = std::get_if<completion_item>(&m)) {
        bump(counters_.completions);
        if (callbacks_.completion) {
            try {
                callbacks_.completion(c->c);
            } catch (const std::exception& e) {
                report("completion callback", &e);
            } catch (...) {
                report("completion callback", nullptr);
            }
        }
        if (c->done) c->done();
    } else if (auto* r = std::get_if<retry::retry_event>(&m)) {
        bump(counters_.retry_events);
        try {
            callbacks_.retry(*r);
        } catch (const std::exception& e) {
            report("retry callback", &e);
        } catch (...) {
            report("retry callback", nullptr);
        }
    } else if (auto* s = std::get_if<std::string>(&m)) {
        if (callbacks_.error) {
            try {
                callbacks_.error(*s);
            } catch (...) {
                bump(counters_.callback_exceptions); // an error about an error: count it, go on
            }
        }
    }
}

// A throwing callback is reported through the error callback, directly (we are already on
// the delivery thread and in order), never rethrown.
void delivery_thread::report(const char* what, const std::exception* e) {
    bump(counters_.callback_exceptions);
    if (!callbacks_.error) return;
    const std::string message = std::string(what) + " threw" + (e ? std::string(": ") + e->what() : std::string());
    try {
        callbacks_.error(message);
    } catch (...) {
    }
}

} // namespace dhtc::engine
