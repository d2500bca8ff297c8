#include "api/delivery.hpp"

#include "api/event_json.hpp"

namespace dhtc::api {

namespace {

void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

metadata::gate_verdict verdict_of(bool pass) noexcept {
    return pass ? metadata::gate_verdict::fetch : metadata::gate_verdict::skip;
}

template <class... F>
struct overloaded : F... {
    using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

} // namespace

event_delivery::event_delivery(const delivery_options& o) : options_(o) {
    options_.main_capacity = std::max<std::size_t>(options_.main_capacity, 4);
}

void event_delivery::configure(event_handlers handlers, bool polling) {
    std::lock_guard lock(mutex_);
    if (started_) return;
    handlers_ = std::move(handlers);
    polling_ = polling;
    observations_wanted_.store(polling || static_cast<bool>(handlers_.observation), std::memory_order_relaxed);
}

event_delivery::~event_delivery() {
    close_input();
    finish();
    join(std::nullopt);
}

void event_delivery::start() {
    std::lock_guard lock(mutex_);
    if (started_ || finished_) return;
    started_ = true;
    thread_ = std::thread([this] {
        thread_id_.store(std::this_thread::get_id());
        run();
    });
}

void event_delivery::close_input() noexcept {
    std::deque<item> dropped;
    {
        std::lock_guard lock(mutex_);
        if (input_closed_) return;
        input_closed_ = true;
        dropped.swap(gates_);
        for (auto it = main_.begin(); it != main_.end();) {
            if (std::holds_alternative<torrent_item>(*it)) {
                dropped.push_back(std::move(*it));
                it = main_.erase(it);
            } else {
                ++it;
            }
        }
    }
    // The rounds behind them are being cancelled: a gate never asked starts no round, and
    // a torrent never offered ends its round cancelled.
    for (auto& i : dropped) {
        if (auto* g = std::get_if<gate_item>(&i)) g->answer(metadata::gate_verdict::closed);
        if (auto* t = std::get_if<torrent_item>(&i)) t->answered(std::nullopt);
    }
    wake_.notify_all();
    pollers_.notify_all();
}

void event_delivery::finish() noexcept {
    {
        std::lock_guard lock(mutex_);
        finished_ = true;
    }
    wake_.notify_all();
    pollers_.notify_all();
}

bool event_delivery::join(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock lock(mutex_);
    const auto over = [&] { return ended_ || !started_; };
    if (timeout) {
        if (!pollers_.wait_for(lock, *timeout, over)) return false;
    } else {
        pollers_.wait(lock, over);
    }
    lock.unlock();
    if (thread_.joinable()) thread_.join();
    return true;
}

event_delivery::pushed event_delivery::push(std::deque<item>& lane, item&& i, std::size_t capacity,
                                            std::atomic<std::uint64_t>* dropped, bool question) {
    {
        std::lock_guard lock(mutex_);
        if (question && input_closed_) return pushed::closed;
        if (finished_ && ended_) {
            if (dropped) bump(*dropped);
            return pushed::closed;
        }
        if (lane.size() >= capacity) {
            if (dropped) bump(*dropped);
            return pushed::full;
        }
        lane.push_back(std::move(i));
    }
    wake_.notify_one();
    pollers_.notify_one();
    return pushed::yes;
}

bool event_delivery::post_gate(const id20& info_hash, std::function<void(metadata::gate_verdict)> answer) {
    item gate = gate_item{info_hash, std::move(answer)};
    const auto result = push(gates_, std::move(gate), options_.main_capacity, nullptr, true);
    // Shutting down: answered at once, and not with the default, which would start a round
    // only to cancel it.
    if (result == pushed::closed) std::get<gate_item>(gate).answer(metadata::gate_verdict::closed);
    return result != pushed::full;
}

bool event_delivery::post_torrent(api::delivery d, std::function<void(metadata::torrent_reply)> answered) {
    item torrent = torrent_item{std::move(d), std::move(answered)};
    const auto result = push(main_, std::move(torrent), options_.main_capacity, nullptr, true);
    if (result == pushed::closed) std::get<torrent_item>(torrent).answered(std::nullopt);
    return result != pushed::full;
}

bool event_delivery::post_completion(completion c, std::function<void()> done) {
    // Completions may exceed the lane by half: the cancelled rounds of a shutdown still get
    // theirs, and the workers bound how many are outstanding.
    return push(main_, completion_item{c, std::move(done)}, options_.main_capacity + options_.main_capacity / 2,
                nullptr) == pushed::yes;
}

void event_delivery::post_error(std::string message) {
    push(main_, std::move(message), options_.main_capacity, &counters_.errors_dropped);
}

void event_delivery::post_retry(const retry_event& e) {
    if (!polling_ && !handlers_.retry) return;
    push(main_, e, options_.main_capacity, &counters_.retry_events_dropped);
}

void event_delivery::post_scrape(const scrape_event& e) {
    if (!polling_ && !handlers_.scrape) return;
    push(main_, e, options_.main_capacity, &counters_.scrapes_dropped);
}

void event_delivery::post_observation(const observation& o) {
    // Nobody subscribed: nothing to carry.
    if (!observations_wanted_.load(std::memory_order_relaxed)) return;
    push(observations_, o, options_.observation_capacity, &counters_.observations_dropped);
}

std::optional<event_delivery::item> event_delivery::take_locked() {
    for (auto* lane : {&gates_, &main_, &observations_}) {
        if (lane->empty()) continue;
        item i = std::move(lane->front());
        lane->pop_front();
        return i;
    }
    return std::nullopt;
}

void event_delivery::run() {
    std::unique_lock lock(mutex_);
    if (polling_) {
        run_pull(lock);
    } else {
        for (;;) {
            wake_.wait(lock, [&] { return finished_ || !gates_.empty() || !main_.empty() || !observations_.empty(); });
            auto next = take_locked();
            if (!next) break; // finished and drained
            lock.unlock();
            dispatch(*next);
            lock.lock();
        }
    }
    ended_ = true;
    pollers_.notify_all();
}

// Pull: the host takes the events; this thread only keeps the answer table's time.
void event_delivery::run_pull(std::unique_lock<std::mutex>& lock) {
    // Ends at finish() even with events not taken: a host that stopped polling must not
    // keep destroy waiting. poll() still hands out what is left.
    while (!finished_) {
        if (awaited_.empty()) {
            wake_.wait(lock);
            continue;
        }
        auto first = awaited_.begin();
        for (auto it = awaited_.begin(); it != awaited_.end(); ++it)
            if (it->second.deadline < first->second.deadline) first = it;
        // A copy: the entry may be answered (and erased) while this thread waits.
        const auto deadline = first->second.deadline;
        if (std::chrono::steady_clock::now() < deadline) {
            wake_.wait_until(lock, deadline);
            continue;
        }
        awaited late = std::move(first->second);
        awaited_.erase(first);
        bump(counters_.answers_timed_out);
        const bool closing = input_closed_;
        lock.unlock();
        settle_default(late, closing);
        lock.lock();
    }
    // Whatever was never answered gets its default now.
    auto rest = std::move(awaited_);
    awaited_.clear();
    const bool closing = input_closed_;
    lock.unlock();
    for (auto& [id, a] : rest) settle_default(a, closing);
    lock.lock();
}

void event_delivery::settle_default(awaited& a, bool closing) {
    // Shutting down, an answer that did not come is the host leaving, not its verdict: a
    // gate starts no round, and a torrent's round ends cancelled.
    // Otherwise a gate needs nothing from here: the pipeline owns metadata.gate_default and
    // took it when its own timer ran out, which started when the gate was posted (before it
    // was polled), so it always ends first.
    if (auto* g = std::get_if<gate_item>(&a.what); g && closing) g->answer(metadata::gate_verdict::closed);
    // Not answered means not stored: fetch it again rather than lose it.
    if (auto* t = std::get_if<torrent_item>(&a.what))
        t->answered(closing ? metadata::torrent_reply{} : metadata::torrent_reply{answer::retry});
}

event_delivery::poll_status event_delivery::poll(std::optional<std::chrono::milliseconds> timeout, polled_event& out) {
    std::unique_lock lock(mutex_);
    const auto ready = [&] {
        return !gates_.empty() || !main_.empty() || !observations_.empty() || (finished_ && input_closed_);
    };
    if (timeout) {
        pollers_.wait_for(lock, *timeout, ready);
    } else {
        pollers_.wait(lock, ready);
    }
    auto next = take_locked();
    if (!next) return finished_ && input_closed_ ? poll_status::closed : poll_status::timeout;
    bump(counters_.polled);
    std::function<void()> then; // a completion's slot is freed once the host has it
    std::visit(overloaded{
                   [&](gate_item& g) {
                       const auto id = next_id_++;
                       out = {gate_json(id, g.info_hash), {}};
                       awaited_.emplace(id, awaited{std::chrono::steady_clock::now() + options_.answer_timeout,
                                                    std::move(g)});
                       bump(counters_.gates);
                   },
                   [&](torrent_item& t) {
                       const auto id = next_id_++;
                       out = {torrent_envelope_json(id, t.d), t.d.raw};
                       awaited_.emplace(id, awaited{std::chrono::steady_clock::now() + options_.answer_timeout,
                                                    std::move(t)});
                       bump(counters_.torrents);
                   },
                   [&](completion_item& c) {
                       out = {completion_json(c.c), {}};
                       then = std::move(c.done);
                       bump(counters_.completions);
                   },
                   [&](retry_event& r) {
                       out = {retry_json(r), {}};
                       bump(counters_.retry_events);
                   },
                   [&](std::string& message) { out = {error_json(message), {}}; },
                   [&](observation& o) {
                       out = {observation_json(o), {}};
                       bump(counters_.observations);
                   },
                   [&](scrape_event& e) {
                       out = {scrape_json(e), {}};
                       bump(counters_.scrapes);
                   },
               },
               *next);
    lock.unlock();
    wake_.notify_one(); // a new deadline to keep
    if (then) then();
    return poll_status::event;
}

bool event_delivery::answer_event(std::uint64_t id, int value) {
    std::unique_lock lock(mutex_);
    const auto it = awaited_.find(id);
    if (it == awaited_.end()) return false;
    awaited a = std::move(it->second);
    awaited_.erase(it);
    lock.unlock();
    if (auto* g = std::get_if<gate_item>(&a.what)) g->answer(verdict_of(value != 0));
    if (auto* t = std::get_if<torrent_item>(&a.what)) t->answered(answer_from_int(value));
    return true;
}

// Push: one event to its handler. A handler that throws is reported through the error
// handler, directly (this is the delivery thread, in order), and never rethrown.
void event_delivery::dispatch(item& i) {
    const auto guarded = [this](const char* what, auto&& call) {
        try {
            call();
            return true;
        } catch (const std::exception& e) {
            report(what, &e);
        } catch (...) {
            report(what, nullptr);
        }
        return false;
    };
    std::visit(overloaded{
                   [&](gate_item& g) {
                       bump(counters_.gates);
                       bool pass = true;
                       if (handlers_.gate && !guarded("gate callback", [&] { pass = handlers_.gate(g.info_hash); }))
                           pass = false;
                       g.answer(verdict_of(pass));
                   },
                   [&](torrent_item& t) {
                       bump(counters_.torrents);
                       answer a = answer::reject; // no torrent handler: delivery_rejected
                       if (handlers_.torrent && !guarded("torrent callback", [&] { a = handlers_.torrent(t.d); }))
                           a = answer::reject;
                       t.answered(a);
                   },
                   [&](completion_item& c) {
                       bump(counters_.completions);
                       if (handlers_.completion) guarded("completion callback", [&] { handlers_.completion(c.c); });
                       if (c.done) c.done();
                   },
                   [&](retry_event& r) {
                       bump(counters_.retry_events);
                       if (handlers_.retry) guarded("retry callback", [&] { handlers_.retry(r); });
                   },
                   [&](std::string& message) {
                       if (!handlers_.error) return;
                       try {
                           handlers_.error(message);
                       } catch (...) {
                           bump(counters_.callback_exceptions); // an error about an error: count it, go on
                       }
                   },
                   [&](observation& o) {
                       bump(counters_.observations);
                       if (handlers_.observation) guarded("observation callback", [&] { handlers_.observation(o); });
                   },
                   [&](scrape_event& e) {
                       bump(counters_.scrapes);
                       if (handlers_.scrape) guarded("scrape callback", [&] { handlers_.scrape(e); });
                   },
               },
               i);
}

void event_delivery::report(const char* what, const std::exception* e) {
    bump(counters_.callback_exceptions);
    if (!handlers_.error) return;
    const std::string message = std::string(what) + " threw" + (e ? std::string(": ") + e->what() : std::string());
    try {
        handlers_.error(message);
    } catch (...) {
    }
}

} // namespace dhtc::api
