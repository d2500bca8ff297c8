#include "util/hashing.hpp"

#include <cstring>

#include <openssl/evp.h>

namespace dhtc::metadata {

namespace {

template <std::size_t N>
std::array<std::uint8_t, N> digest(const EVP_MD* md, const void* data, std::size_t size) noexcept {
    std::array<std::uint8_t, N> out{};
    unsigned int len = 0;
    // EVP_Digest cannot fail on valid arguments short of an allocation failure; in that
    // case the documented all-zero value is returned rather than a partial digest.
    if (EVP_Digest(data, size, out.data(), &len, md, nullptr) != 1 || len != N) out.fill(0);
    return out;
}

} // namespace

sha1_digest sha1(std::span<const std::uint8_t> data) noexcept {
    return digest<20>(EVP_sha1(), data.data(), data.size());
}
sha1_digest sha1(std::string_view data) noexcept { return digest<20>(EVP_sha1(), data.data(), data.size()); }

sha256_digest sha256(std::span<const std::uint8_t> data) noexcept {
    return digest<32>(EVP_sha256(), data.data(), data.size());
}
sha256_digest sha256(std::string_view data) noexcept {
    return digest<32>(EVP_sha256(), data.data(), data.size());
}

id20 to_id20(const sha1_digest& d) noexcept {
    id20 id;
    id.bytes = d;
    return id;
}

id20 truncate_to_id20(const sha256_digest& d) noexcept {
    id20 id;
    std::memcpy(id.bytes.data(), d.data(), id20::size);
    return id;
}

id20 sha1_id(std::string_view data) noexcept { return to_id20(sha1(data)); }
id20 sha256_id(std::string_view data) noexcept { return truncate_to_id20(sha256(data)); }

} // namespace dhtc::metadata
