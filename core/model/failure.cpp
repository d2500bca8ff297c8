#include "model/failure.hpp"

namespace dhtc::api {

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
    case failure_class::sink_failed: return "sink_failed";
    case failure_class::cancelled: return "cancelled";
    case failure_class::encryption_failed: return "encryption_failed";
    case failure_class::utp_timeout: return "utp_timeout";
    }
    return "unknown";
}

} // namespace dhtc::api
