// What the metadata pipeline needs from the rest of the library, declared here where it is
// used: somewhere to hand gates, torrents and completions (the application, through
// core/api's delivery), and optionally a durable retry store. The pipeline knows neither
// the delivery thread nor the retry scheduler, only these.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/events.hpp"
#include "util/bounded_queue.hpp"

namespace dhtc::metadata {

using api::answer;
using api::completion;
using api::delivery;
using api::failure_class;
using api::failure_class_count;
using api::outcome;
using api::outcome_count;

/// The application's word on a hash before its round. `closed`: it is shutting down and
/// was not asked, so no round starts (not a rejection: the hash is not held back for it).
enum class gate_verdict : std::uint8_t { fetch, skip, closed };

/// The application's answer to a torrent; nullopt when it is shutting down and never saw
/// it (the round ends cancelled: neither delivered nor a failure).
using torrent_reply = std::optional<answer>;

/// The application's side. Any thread; each continuation runs later on another thread and
/// must only post back to the pipeline's own executor.
class application_port {
public:
    virtual ~application_port() = default;
    /// False when the queue is full (the caller applies its default).
    virtual bool post_gate(const id20& info_hash, std::function<void(gate_verdict)> answer) = 0;
    virtual bool post_torrent(delivery d, std::function<void(torrent_reply)> answered) = 0;
    /// `done` runs once the application has seen it (the pipeline frees the worker slot then).
    virtual bool post_completion(completion c, std::function<void()> done) = 0;
    virtual void post_error(std::string message) = 0;
};

/// What the store answers to a claim of a freshly seen hash.
enum class claim_verdict : std::uint8_t {
    fetch,    ///< leased to us: run a round
    done,     ///< delivered before: never again
    busy,     ///< leased by another crawler
    deferred, ///< dormant and not due (the sighting brought it closer)
};
struct claim_reply {
    claim_verdict verdict = claim_verdict::busy;
    std::uint32_t attempts = 0; ///< fetch: failed rounds before this one
};

/// A due hash leased to this crawler.
struct due_hash {
    id20 info_hash;
    std::vector<endpoint> peers;
    std::uint32_t attempts = 0; ///< failed rounds before this one
};

/// The durable retry store's side (optional). Never blocks: requests are queued.
class retry_port {
public:
    virtual ~retry_port() = default;
    /// False when the store's queue is full: the caller treats the hash as busy.
    virtual bool post_claim(const id20& info_hash, std::vector<endpoint> peers,
                            std::function<void(claim_reply)> answer) = 0;
    virtual void post_failure(const id20& info_hash, failure_class cls) = 0;
    virtual void post_done(const id20& info_hash) = 0;
    /// Gives a lease back; the hash is due again `after_secs` from now.
    virtual void post_release(const id20& info_hash, std::uint32_t after_secs) = 0;
    /// The next due hash leased to us, if any.
    virtual std::optional<due_hash> take_due() = 0;
    /// How many due hashes wait to be taken.
    virtual std::size_t due_depth() const = 0;
    /// How many more retries the pipeline can take now.
    virtual void set_retry_room(std::size_t n) = 0;
};

} // namespace dhtc::metadata
