// The info-dict parser: turns the raw bytes of a fetched (or stored) info dictionary into
// a validated, UTF-8-clean description of the torrent. Used for every delivered torrent.
// The rules for each field and for hostile metadata are in docs/torrent-json.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/hashing.hpp"
#include "util/id20.hpp"

namespace dhtc::metadata {

/// Why an info dict was rejected. Names (to_string) are stable: they appear in logs and
/// in the documentation's hostile-metadata table.
enum class info_error : std::uint8_t {
    none = 0,
    bad_bencode,         ///< not exactly one well-formed bencoded value (reason: the bencode error)
    not_a_dict,          ///< the value is not a dict
    unsupported_version, ///< `meta version` present but not the integer 2
    missing_name,        ///< `name` absent or not a string
    bad_name,            ///< `name` empty, ".", "..", or holding '/' or NUL
    bad_piece_length,    ///< `piece length` absent, not an integer, < 1, > 2^31-1; v2: not a power of two >= 16 KiB
    bad_pieces,          ///< v1/hybrid `pieces` absent, not a string, not a multiple of 20, or the wrong count
    no_files,            ///< no `length`/`files`/`file tree`, an empty list or tree, or only padding files
    bad_file_list,       ///< `files` not a list, an entry not a dict, or both `length` and `files`
    bad_path,            ///< a path absent/empty/not a list of strings; an element "", ".", ".." or holding '/' or NUL
    bad_length,          ///< a length absent, not an integer, or negative
    length_too_large,    ///< a length or the running total above 2^53-1
    too_many_files,      ///< more files than info_limits::max_files
    paths_too_long,      ///< the paths together longer than info_limits::max_path_bytes
    bad_file_tree,       ///< v2 `file tree` absent/not a dict, root is a file, a malformed node, a pad file
    file_tree_too_deep,  ///< a v2 path of more than info_limits::max_tree_depth elements
    bad_pieces_root,     ///< `pieces root` not 32 bytes, or absent/all zeros for a non-empty file
    hybrid_mismatch,     ///< the v1 and v2 file lists of a hybrid disagree
    hash_failed,         ///< OpenSSL could not hash the bytes (allocation failure)
    out_of_memory,       ///< an allocation failed while building the result
};

/// A stable name for an error ("bad_name", ...).
std::string_view to_string(info_error e) noexcept;

/// Outcome of parse_info(). `reason` is a static string naming the precise cause (for
/// bad_bencode, the bencode error's name); `offset` is the byte offset in the info dict
/// of the offending value (0 when not applicable).
struct info_result {
    info_error code = info_error::none;
    std::string_view reason;
    std::size_t offset = 0;
    explicit operator bool() const noexcept { return code == info_error::none; }
};

enum class torrent_version : std::uint8_t { v1, v2, hybrid };

/// "v1", "v2" or "hybrid".
std::string_view to_string(torrent_version v) noexcept;

/// One payload file. Padding files are never listed.
struct file_entry {
    /// Relative to the torrent root, elements joined with '/'; for a single-file torrent,
    /// the torrent name. Valid UTF-8 (repaired with U+FFFD where the input was not).
    std::string path;
    std::uint64_t size = 0;

    bool operator==(const file_entry&) const = default;
};

/// A parsed info dict. Plain value; copy and move freely.
struct torrent_info {
    std::string name;              ///< valid UTF-8 (`name.utf-8` preferred when usable)
    std::vector<file_entry> files; ///< v1 list order (v1, hybrid) or file-tree order (v2)
    std::uint64_t total_size = 0;  ///< sum of files[].size; <= 2^53-1
    std::uint64_t piece_length = 0;
    bool is_private = false;       ///< `private` == 1
    torrent_version version = torrent_version::v1;
    id20 info_hash;                ///< the key the metadata was found under (parse_info's found_under)
    sha1_digest sha1{};            ///< SHA-1 of the exact bytes (the v1 hash when has_v1())
    sha256_digest sha256{};        ///< SHA-256 of the exact bytes (the v2 hash when has_v2())
    std::size_t info_size = 0;     ///< length of the raw info dict

    std::size_t num_files() const noexcept { return files.size(); }
    bool has_v1() const noexcept { return version != torrent_version::v2; }
    bool has_v2() const noexcept { return version != torrent_version::v1; }
};

/// Every limit of the parser. The defaults suit info dicts fetched over ut_metadata.
struct info_limits {
    std::size_t max_size = 10u << 20;            ///< raw info dict bytes
    std::uint32_t max_bencode_depth = 2 * 100 + 10; ///< room for a 100-level v2 file tree
    std::uint32_t max_tokens = 3'000'000;        ///< bencode values (libtorrent's torrent-file limit)
    std::size_t max_files = 100'000;             ///< payload files (padding files not counted)
    std::uint32_t max_tree_depth = 100;          ///< path elements of a v2 file
    std::size_t max_path_bytes = 64u << 20;      ///< all output paths together
};

/// The largest length accepted: 2^53-1, the largest integer a JSON number carries exactly.
inline constexpr std::uint64_t max_safe_integer = (std::uint64_t{1} << 53) - 1;

/// Parses and validates `raw_info_dict` (exactly the bytes received, never re-encoded)
/// and fills `out`. `found_under` is recorded as out.info_hash; whether the bytes hash to
/// it is not checked here (see matches()). On failure `out` is reset to its default
/// state. Never throws; thread-safe (no shared state).
info_result parse_info(std::string_view raw_info_dict, const id20& found_under, torrent_info& out,
                       const info_limits& limits = {}) noexcept;

/// True when `key` is the v1 hash or the truncated v2 hash of the parsed bytes — the
/// acceptance rule libtorrent applies to fetched metadata.
bool matches(const torrent_info& info, const id20& key) noexcept;

} // namespace dhtc::metadata
