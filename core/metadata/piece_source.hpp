// The work queue a peer session draws metadata pieces from. Several sessions fetching the
// same info dict from different peers share one source, so each piece is leased to one
// session at a time and the first peer to learn the size fixes it for the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dhtc::metadata {

/// Hands out metadata pieces to peer sessions and collects what they receive.
///
/// Sessions identify themselves by a slot number chosen by whoever runs them (unique among
/// the sessions sharing one source). All calls come from the thread (or strand) the
/// sessions run on; an implementation shared by sessions on different threads must do its
/// own locking. No call may throw.
class piece_source {
public:
    virtual ~piece_source() = default;

    /// The peer advertised metadata_size; true when it agrees with what the job knows (the
    /// first session to learn the size sets it; a different size from a later peer is that
    /// peer's failure).
    virtual bool on_metadata_size(std::size_t size) = 0;

    /// The next piece for this session to request, or nothing (all leased to others or all
    /// received). A session may hold several leases at once (it pipelines its requests).
    virtual std::optional<std::uint32_t> acquire(std::uint32_t session) = 0;

    /// A piece arrived (already length-checked against the size). False when the session
    /// did not hold that lease (e.g. it was taken back); the bytes are then ignored. `data`
    /// is valid only during the call.
    virtual bool deliver(std::uint32_t session, std::uint32_t piece, std::string_view data) = 0;

    /// Returns every piece the session still holds. Called exactly once when the session
    /// ends, whatever the outcome (also when its coroutine frame is destroyed unresumed).
    virtual void release(std::uint32_t session) = 0;

    /// True when every piece has been received (by anyone).
    virtual bool complete() const = 0;
};

} // namespace dhtc::metadata
