// The replies of the answering path, written from pre-encoded fragments. Everything that is
// the same in every reply we give (the keys, our id, our `v`) is encoded once, so a reply is
// a few copies into the caller's reused buffer rather than a bencode::writer walk that
// formats and order-checks every key.
//
// Each reply is byte for byte what the matching encode_*_response in krpc/encode.hpp gives
// for reply_header{transaction, own id, requester, version}, with the same return value;
// tests/unit/krpc/test_krpc_fast_path.cpp and tests/fuzz/fuzz_krpc_fast_path.cpp hold the two
// to that.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "model/address.hpp"
#include "util/id20.hpp"

namespace dhtc::krpc {

class reply_encoder {
public:
    /// `version` is our `v` (omitted when empty).
    reply_encoder(const id20& own_id, std::string_view version);

    /// encode_ping_response (and encode_announce_response, the same shape).
    bool ping(std::string& out, std::string_view transaction, const endpoint& requester) const noexcept;
    /// encode_find_node_response.
    bool find_node(std::string& out, std::string_view transaction, const endpoint& requester,
                   std::string_view nodes, std::string_view nodes6, bool with_nodes6 = false) const noexcept;
    /// encode_get_peers_response with no `values` (our node stores no peers).
    bool get_peers(std::string& out, std::string_view transaction, const endpoint& requester,
                   std::string_view token, std::string_view nodes, std::string_view nodes6,
                   bool with_nodes6 = false) const noexcept;

private:
    /// One entry of `r` after `id`: its key already encoded ("5:nodes"), and its value.
    struct field {
        std::string_view encoded_key;
        std::string_view value;
    };
    /// At most nodes, nodes6 and token follow `id`.
    struct fields {
        std::array<field, 3> items;
        std::size_t count = 0;
        void add(std::string_view encoded_key, std::string_view value) noexcept { items[count++] = {encoded_key, value}; }
        /// nodes always (BEP-5 requires it); nodes6 when not empty or asked for.
        void add_nodes(std::string_view nodes, std::string_view nodes6, bool with_nodes6) noexcept;
    };
    bool write(std::string& out, std::string_view transaction, const endpoint& requester,
               const fields& body) const noexcept;

    std::string id_part_; ///< "1:rd2:id20:" and our id: `r` up to its first optional key
    std::string tail_;    ///< `v` when we have one, then "1:y1:re"
};

} // namespace dhtc::krpc
