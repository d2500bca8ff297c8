#include "model/events.hpp"

namespace dhtc::api {

std::string_view to_string(hash_source s) noexcept {
    switch (s) {
    case hash_source::announce: return "announce";
    case hash_source::sample: return "sample";
    case hash_source::get_peers: return "get_peers";
    case hash_source::bep51_sample: return "bep51_sample";
    }
    return "unknown";
}

answer answer_from_int(int value) noexcept {
    if (value == 0) return answer::reject;
    if (value == 2) return answer::retry;
    return answer::accept;
}

std::string_view to_string(outcome o) noexcept {
    switch (o) {
    case outcome::accepted: return "accepted";
    case outcome::fetch_failed: return "fetch_failed";
    case outcome::delivery_rejected: return "delivery_rejected";
    case outcome::cancelled: return "cancelled";
    case outcome::sink_failed: return "sink_failed";
    }
    return "unknown";
}

std::string_view to_string(retry_state s) noexcept {
    return s == retry_state::done ? "done" : "dormant";
}

} // namespace dhtc::api
