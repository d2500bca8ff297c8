// The durable state of every info hash the retry scheduler knows, behind one interface with
// two backends (SQLite, PostgreSQL). The transitions live here, once, over a few primitive
// row operations each backend implements; both backends therefore behave alike, and one
// test suite runs against both.
//
// States: `pending` (ready now: a released or recovered lease), `leased` (one crawler owns
// the round until the lease expires; next_retry_at then holds the expiry), `dormant`
// (failed, waiting for next_retry_at), `done` (delivered: never fetched again).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/events.hpp"
#include "model/address.hpp"
#include "retry/policy.hpp"
#include "util/id20.hpp"

namespace dhtc::retry {

enum class hash_state : std::uint8_t { pending = 0, leased = 1, done = 2, dormant = 3 };
inline constexpr std::size_t hash_state_count = 4;
std::string_view to_string(hash_state s) noexcept;

/// A database failed (connection lost, disk full, constraint): the batch is rolled back.
struct store_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// One info hash, compactly: failure counts are 4-bit saturating counters packed into one
/// 64-bit integer, one slot per recordable class (counter_slot()), the last four failure
/// classes 5 bits each by value (newest lowest; schema v3, 4 bits before), peers in compact
/// form.
struct retry_row {
    static constexpr std::size_t max_peers = 3;
    static constexpr std::size_t recent_kept = 4;
    id20 info_hash;
    hash_state state = hash_state::pending;
    unix_seconds next_retry_at = 0; ///< leased: the lease's expiry
    unix_seconds first_seen = 0;
    unix_seconds last_seen = 0;
    std::uint32_t observations = 0;
    std::uint32_t attempts = 0;  ///< failed rounds (cancelled rounds are not attempts)
    std::uint32_t priority = 0;  ///< raised by fresh observations, saturating at the policy's max
    std::uint64_t failure_counts = 0;
    std::uint32_t recent_failures = 0;
    std::string lease_owner;     ///< empty unless leased
    std::vector<endpoint> peers; ///< freshest first, at most max_peers

    std::uint32_t failures(api::failure_class c) const noexcept;
    /// Counts one more failure of class `c` and pushes it onto the recent ones. A class
    /// without a counter slot (none, cancelled) is not a failure: nothing changes.
    void add_failure(api::failure_class c) noexcept;
    /// The last failure classes, newest first.
    std::vector<api::failure_class> recent() const;
    /// Puts `fresh` in front of the known peers (deduplicated, at most max_peers).
    void merge_peers(std::span<const endpoint> fresh);
};

/// Compact peer list: per peer one length byte (6 or 18) then address and port.
std::string pack_peers(std::span<const endpoint> peers);
/// The inverse; malformed tails are dropped (the bytes come from a shared database).
std::vector<endpoint> unpack_peers(std::string_view packed);

struct store_counts {
    std::array<std::uint64_t, hash_state_count> by_state{};
    std::uint64_t database_bytes = 0;
};

/// What a backend provides. Every call may throw store_error. Thread rules: one thread.
class backend {
public:
    virtual ~backend() = default;
    /// A transaction that also serialises writers across processes (SQLite: BEGIN
    /// IMMEDIATE; PostgreSQL: row locks taken by load()).
    virtual void begin() = 0;
    virtual void commit() = 0;
    virtual void rollback() noexcept = 0;
    /// The row, locked for this transaction where the backend locks rows.
    virtual std::optional<retry_row> load(const id20& info_hash) = 0;
    /// Inserts a row that did not exist; false when another writer inserted it first.
    virtual bool insert(const retry_row& r) = 0;
    virtual void update(const retry_row& r) = 0;
    /// Leases up to `batch` pending or dormant rows due at `now` (earliest first), to
    /// `owner` until `lease_until`, skipping rows other transactions hold. Returns them leased.
    virtual std::vector<retry_row> lease_due(std::size_t batch, std::string_view owner, unix_seconds lease_until,
                                             unix_seconds now) = 0;
    /// Leases that expired by `now` become pending (due at once); returns how many.
    virtual std::size_t expire_leases(unix_seconds now) = 0;
    virtual store_counts counts() = 0;
    /// "sqlite" or "postgresql".
    virtual std::string_view kind() const noexcept = 0;

    /// The DHT routing state saved under `owner` (one row each; a fleet shares every row):
    /// replaces that owner's row, then drops rows saved before `expire_before`. Inside a
    /// transaction of the caller's. A backend without the table keeps nothing.
    virtual void save_routing(std::string_view /*owner*/, unix_seconds /*saved_at*/, std::string_view /*state*/,
                              unix_seconds /*expire_before*/) {}
    /// The newest saved states of any owner, newest first: at most `limit`, saved at or
    /// after `since`.
    virtual std::vector<std::string> load_routing(unix_seconds /*since*/, std::size_t /*limit*/) { return {}; }
};

/// What claim() decided for a hash seen with peers.
enum class claim_result : std::uint8_t {
    fetch,    ///< leased to us: run a round (a first one, or a retry that was due)
    done,     ///< delivered before: never again
    busy,     ///< another crawler (or one of our own rounds) holds its lease
    deferred, ///< dormant and not due: reactivated (closer, peers kept), not fetched now
};
std::string_view to_string(claim_result r) noexcept;

struct claim_answer {
    claim_result result = claim_result::fetch;
    std::uint32_t attempts = 0; ///< failed rounds before this one
};

/// The transitions. Callers group several calls in one begin()/commit(); nothing here
/// commits by itself. Idempotent where a crawler may repeat itself after a crash: completing,
/// releasing or failing a round whose lease is gone changes nothing that another owner holds.
class store {
public:
    store(std::unique_ptr<backend> db, policy_options policy, std::string owner, std::uint32_t lease_secs,
          std::uint64_t seed = 0);

    void begin() { db_->begin(); }
    void commit() { db_->commit(); }
    void rollback() noexcept { db_->rollback(); }

    /// A hash seen with `peers` (an announce, or a sample's lookup): may we fetch it now?
    claim_answer claim(const id20& info_hash, std::span<const endpoint> peers, unix_seconds now);
    /// A fresh observation (a get_peers, a BEP-51 sample, or an announce while not fetching):
    /// a dormant row moves closer and keeps the peers; unknown hashes are not stored. True
    /// when a row was reactivated.
    bool observe(const id20& info_hash, std::span<const endpoint> peers, unix_seconds now);
    /// A round of ours failed with `cls`: the row goes dormant until the policy's delay.
    /// Returns the row as stored (nothing when the hash is unknown or done).
    std::optional<retry_row> record_failure(const id20& info_hash, api::failure_class cls, unix_seconds now);
    /// A round delivered the torrent: done, for good.
    void record_done(const id20& info_hash, unix_seconds now);
    /// Gives our lease back without an attempt (a cancelled round, a gate that said no):
    /// due again from `retry_at` (dormant if it failed before, else pending).
    void release(const id20& info_hash, unix_seconds retry_at);
    /// Due rows, leased to us.
    std::vector<retry_row> lease_due(std::size_t batch, unix_seconds now);
    std::size_t expire_leases(unix_seconds now) { return db_->expire_leases(now); }
    store_counts counts() { return db_->counts(); }

    backend& db() noexcept { return *db_; }
    const std::string& owner() const noexcept { return owner_; }
    const policy_options& policy() const noexcept { return policy_; }

private:
    bool ours(const retry_row& r) const noexcept { return r.state == hash_state::leased && r.lease_owner == owner_; }
    void lease_to_us(retry_row& r, unix_seconds now) const;

    std::unique_ptr<backend> db_;
    policy_options policy_;
    std::string owner_;
    std::uint32_t lease_secs_;
    std::mt19937_64 rng_;
};

} // namespace dhtc::retry
