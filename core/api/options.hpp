// The crawler's options as ONE strict JSON document, the only way the C ABI (and every
// binding) configures the engine. docs/options.md lists every key with its type, default,
// range and normalisation; one table in options.cpp drives parsing, normalisation and
// to_json(), so the three cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/crawler.hpp"

namespace dhtc::api {

/// Why a document was refused (ok: it was applied).
enum class options_status : std::uint8_t {
    ok,
    invalid_json,  ///< not JSON, too large, nested too deep, or a key repeated within an object
    unknown_key,   ///< a key that is not an option (a typo, or a dotted name not written as nesting)
    wrong_type,    ///< e.g. a string where a number belongs, 1.5 where an integer belongs
    invalid_value, ///< the right type but unusable: out of the C++ field's range, negative, malformed
};

/// "ok", "invalid_json", ... (the enumerator's name).
std::string_view to_string(options_status s) noexcept;

/// The outcome of parse_options(). On error exactly one problem is reported: the first met
/// (objects are walked in key order, so the same document always reports the same one).
struct options_result {
    options_status status = options_status::ok;
    /// Dotted JSON path of the offending key, array elements as `[i]`
    /// (e.g. "crawl.bootstrap.sources[2]"); "" for the document as a whole.
    std::string path;
    /// "<path>: <what is wrong>" (the path reads "(document)" when empty); empty when ok.
    std::string message;
    /// One human-readable line per value replaced by a safe one, e.g.
    /// "crawl.pool.low_watermark: 200000 > crawl.pool.capacity 100000, using 100000".
    /// Filled on success (and up to the error otherwise).
    std::vector<std::string> normalized;
    /// invalid_json from the parser: how many bytes it had read when it stopped, so the
    /// 1-based position of the offending byte (end of input counts as one byte); 0 otherwise.
    std::size_t offset = 0;

    bool ok() const noexcept { return status == options_status::ok; }
};

/// Documents above this size are refused as invalid_json (a full document is ~3 KiB).
inline constexpr std::size_t max_options_document_bytes = std::size_t{1} << 20;
/// Objects and arrays nested deeper than this are refused as invalid_json (the options
/// themselves nest 4 deep: root, crawl, bootstrap, sources).
inline constexpr std::size_t max_options_depth = 16;
/// crawl.bootstrap.sources holds at most this many entries.
inline constexpr std::size_t max_bootstrap_sources = 256;

/// Parses an options document onto the defaults (`api::crawler_options{}`): every key
/// present replaces its default, absent keys keep it. Strict: unknown keys, wrong types and
/// unusable values are errors naming the key's path; unsafe but usable values are replaced
/// by safe ones and reported in `normalized`. `out` is assigned only when the result is ok
/// (the whole options, not a merge into what `out` held before).
///
/// Derived fields: metadata.bind_v4 (the source address of outgoing metadata TCP) is the
/// top-level bind_v4 unless that is 0.0.0.0; dht.seed is left unset (random).
///
/// Never throws (short of std::bad_alloc); any input is safe. Thread rules: none (pure).
options_result parse_options(std::string_view json, api::crawler_options& out);

/// The document parse_options() reads, with every key, for `o`:
/// parse_options(to_json(x).dump()) gives back x for any x parse_options() can produce.
/// Fields that are not keys (dht.seed, metadata.bind_v4) are not written.
nlohmann::json to_json(const api::crawler_options& o);

/// to_json(api::crawler_options{}) pretty-printed with a 2-space indent: every key at
/// its default.
std::string default_options_json();

} // namespace dhtc::api
