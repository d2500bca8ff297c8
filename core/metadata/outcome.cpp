#include "metadata/outcome.hpp"

namespace dhtc::metadata {

std::string_view to_string(failure_class c) noexcept {
    switch (c) {
    case failure_class::none: return "none";
    case failure_class::connect_refused: return "connect_refused";
    case failure_class::connect_timeout: return "connect_timeout";
    case failure_class::handshake_failed: return "handshake_failed";
    case failure_class::no_extension_support: return "no_extension_support";
    case failure_class::no_metadata_support: return "no_metadata_support";
    case failure_class::rejected: return "rejected";
    case failure_class::timeout: return "timeout";
    case failure_class::size_limit: return "size_limit";
    case failure_class::hash_mismatch: return "hash_mismatch";
    case failure_class::parse_error: return "parse_error";
    case failure_class::no_peers: return "no_peers";
    case failure_class::protocol_error: return "protocol_error";
    case failure_class::disconnected: return "disconnected";
    }
    return "unknown";
}

failure_class from_session(session_failure f) noexcept {
    switch (f) {
    case session_failure::none: return failure_class::none;
    case session_failure::connect_refused: return failure_class::connect_refused;
    case session_failure::connect_timeout: return failure_class::connect_timeout;
    case session_failure::handshake_failed: return failure_class::handshake_failed;
    case session_failure::no_extension_support: return failure_class::no_extension_support;
    case session_failure::no_metadata_support: return failure_class::no_metadata_support;
    case session_failure::rejected: return failure_class::rejected;
    case session_failure::timeout: return failure_class::timeout;
    case session_failure::size_limit: return failure_class::size_limit;
    case session_failure::protocol_error: return failure_class::protocol_error;
    case session_failure::disconnected: return failure_class::disconnected;
    case session_failure::cancelled: return failure_class::none;
    }
    return failure_class::none;
}

std::string_view to_string(outcome o) noexcept {
    switch (o) {
    case outcome::accepted: return "accepted";
    case outcome::fetch_failed: return "fetch_failed";
    case outcome::delivery_rejected: return "delivery_rejected";
    case outcome::cancelled: return "cancelled";
    }
    return "unknown";
}

} // namespace dhtc::metadata
