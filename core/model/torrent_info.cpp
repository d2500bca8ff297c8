#include "model/torrent_info.hpp"

#include <algorithm>
#include <exception>

#include "bencode/decoder.hpp"
#include "util/utf8.hpp"

namespace dhtc::metadata {

std::string_view to_string(info_error e) noexcept {
    switch (e) {
    case info_error::none: return "none";
    case info_error::bad_bencode: return "bad_bencode";
    case info_error::not_a_dict: return "not_a_dict";
    case info_error::unsupported_version: return "unsupported_version";
    case info_error::missing_name: return "missing_name";
    case info_error::bad_name: return "bad_name";
    case info_error::bad_piece_length: return "bad_piece_length";
    case info_error::bad_pieces: return "bad_pieces";
    case info_error::no_files: return "no_files";
    case info_error::bad_file_list: return "bad_file_list";
    case info_error::bad_path: return "bad_path";
    case info_error::bad_length: return "bad_length";
    case info_error::length_too_large: return "length_too_large";
    case info_error::too_many_files: return "too_many_files";
    case info_error::paths_too_long: return "paths_too_long";
    case info_error::bad_file_tree: return "bad_file_tree";
    case info_error::file_tree_too_deep: return "file_tree_too_deep";
    case info_error::bad_pieces_root: return "bad_pieces_root";
    case info_error::hybrid_mismatch: return "hybrid_mismatch";
    case info_error::hash_failed: return "hash_failed";
    case info_error::out_of_memory: return "out_of_memory";
    }
    return "unknown";
}

std::string_view to_string(torrent_version v) noexcept {
    switch (v) {
    case torrent_version::v1: return "v1";
    case torrent_version::v2: return "v2";
    case torrent_version::hybrid: return "hybrid";
    }
    return "unknown";
}

bool matches(const torrent_info& info, const id20& key) noexcept {
    return to_id20(info.sha1) == key || truncate_to_id20(info.sha256) == key;
}

namespace {

using bencode::value;

constexpr std::int64_t max_piece_length = 0x7fffffff; // libtorrent keeps piece sizes in an int
constexpr std::int64_t min_v2_piece_length = 16 * 1024;
constexpr std::string_view legacy_pad_prefix = "_____padding_file_";

info_result fail(info_error e, std::string_view reason, const value& at = {}) noexcept {
    return {e, reason, at ? at.offset() : 0};
}

// Names and path elements become parts of file-system paths in whatever consumes the
// JSON, so anything that would change the directory structure is refused outright.
enum class element_fault : std::uint8_t { none, empty, dot, dotdot, slash, nul };

element_fault check_element(std::string_view s) noexcept {
    if (s.empty()) return element_fault::empty;
    if (s == ".") return element_fault::dot;
    if (s == "..") return element_fault::dotdot;
    if (s.find('/') != std::string_view::npos) return element_fault::slash;
    if (s.find('\0') != std::string_view::npos) return element_fault::nul;
    return element_fault::none;
}

std::string_view name_reason(element_fault f) noexcept {
    switch (f) {
    case element_fault::none: break;
    case element_fault::empty: return "name is empty";
    case element_fault::dot: return "name is \".\"";
    case element_fault::dotdot: return "name is \"..\"";
    case element_fault::slash: return "name holds '/'";
    case element_fault::nul: return "name holds NUL";
    }
    return {};
}

std::string_view path_reason(element_fault f) noexcept {
    switch (f) {
    case element_fault::none: break;
    case element_fault::empty: return "path element is empty";
    case element_fault::dot: return "path element is \".\"";
    case element_fault::dotdot: return "path element is \"..\"";
    case element_fault::slash: return "path element holds '/'";
    case element_fault::nul: return "path element holds NUL";
    }
    return {};
}

// Validates a v1 `path` list; on failure returns the reason and sets `at`.
std::string_view check_path_list(const value& list, value& at) noexcept {
    at = list;
    if (!list.is_list()) return "path is not a list";
    if (list.size() == 0) return "path is empty";
    bool first = true;
    for (auto e : list) {
        at = e.val;
        if (!e.val.is_string()) return "path element is not a string";
        const auto fault = check_element(e.val.as_string());
        // An empty first element is how an absolute path ("/etc/passwd") is spelt.
        if (first && fault == element_fault::empty) return "path is absolute (first element empty)";
        if (fault != element_fault::none) return path_reason(fault);
        first = false;
    }
    return {};
}

bool all_valid_utf8(const value& list) noexcept {
    for (auto e : list)
        if (!utf8::is_valid(e.val.as_string())) return false;
    return true;
}

bool is_power_of_two(std::int64_t v) noexcept { return v > 0 && (v & (v - 1)) == 0; }

class parser {
public:
    parser(const info_limits& lim, torrent_info& out) noexcept : lim_(lim), out_(out) {}

    info_result run(std::string_view raw);

private:
    info_result parse_name(const value& info);
    info_result parse_piece_length(const value& info, bool v2);
    info_result parse_length(const value& dict, std::int64_t& length) const;
    info_result add_to_total(std::uint64_t length, std::uint64_t& total, const value& at) const;
    info_result count_file(const value& at);
    info_result count_path_bytes(std::size_t n, const value& at);
    info_result parse_v1(const value& info, std::vector<file_entry>& files);
    info_result parse_v1_entry(const value& entry, std::vector<file_entry>& files, std::uint64_t& total_all);
    info_result parse_v2(const value& info, std::vector<file_entry>& files);
    info_result walk_v2(const value& dir, std::string& prefix, std::uint32_t depth, std::vector<file_entry>& files);
    info_result parse_v2_file(const value& node, std::string path, std::vector<file_entry>& files);

    const info_limits& lim_;
    torrent_info& out_;
    bencode::document doc_;
    std::size_t files_seen_ = 0; // payload files of the list being parsed
    std::size_t path_bytes_ = 0; // bytes of the paths of the list being parsed
    std::uint64_t v2_total_ = 0;
};

info_result parser::run(std::string_view raw) {
    const bencode::limits blim{lim_.max_bencode_depth, lim_.max_tokens, lim_.max_size};
    if (const auto r = bencode::decode(raw, doc_, blim); !r) {
        return {info_error::bad_bencode, bencode::to_string(r.code), r.offset};
    }
    const value info = doc_.root();
    if (!info.is_dict()) return fail(info_error::not_a_dict, "info is not a dict", info);

    // Classification (protocol.md part c). The v1 keys are looked at by presence only:
    // their types are checked when the v1 part is parsed, so a hybrid with a broken v1
    // half is rejected rather than silently treated as v2-only.
    bool v2 = false;
    if (const value mv = info.find("meta version")) {
        if (!mv.is_integer() || mv.as_integer() != 2) {
            return fail(info_error::unsupported_version, "meta version is not 2", mv);
        }
        v2 = true;
    }
    const bool v1_keys = info.find("pieces") || info.find("files") || info.find("length");
    if (v2 && !info.find("file tree")) return fail(info_error::bad_file_tree, "meta version 2 without a file tree", info);
    out_.version = !v2 ? torrent_version::v1 : v1_keys ? torrent_version::hybrid : torrent_version::v2;

    if (auto r = parse_name(info); !r) return r;
    if (auto r = parse_piece_length(info, v2); !r) return r;

    if (out_.has_v1()) {
        if (auto r = parse_v1(info, out_.files); !r) return r;
    }
    if (out_.version == torrent_version::v2) {
        if (auto r = parse_v2(info, out_.files); !r) return r;
        out_.total_size = v2_total_;
    } else if (out_.version == torrent_version::hybrid) {
        std::vector<file_entry> v2_files;
        if (auto r = parse_v2(info, v2_files); !r) return r;
        // The two halves describe the same payload, so the same (path, size) multiset.
        // Order may legitimately differ (v1 lists are free-form, v2 trees are sorted).
        bool same = v2_files.size() == out_.files.size() && v2_total_ == out_.total_size;
        if (same) {
            std::vector<const file_entry*> a, b;
            a.reserve(v2_files.size());
            b.reserve(v2_files.size());
            for (const auto& f : out_.files) a.push_back(&f);
            for (const auto& f : v2_files) b.push_back(&f);
            auto less = [](const file_entry* x, const file_entry* y) {
                return x->path != y->path ? x->path < y->path : x->size < y->size;
            };
            std::sort(a.begin(), a.end(), less);
            std::sort(b.begin(), b.end(), less);
            for (std::size_t i = 0; same && i < a.size(); ++i) same = *a[i] == *b[i];
        }
        if (!same) return fail(info_error::hybrid_mismatch, "v1 and v2 file lists disagree", info.find("file tree"));
    }

    if (const value p = info.find_integer("private")) out_.is_private = p.as_integer() == 1;

    out_.sha1 = sha1(raw);
    out_.sha256 = sha256(raw);
    if (is_zero(out_.sha1) || is_zero(out_.sha256)) return fail(info_error::hash_failed, "digest failed");
    out_.info_size = raw.size();
    return {};
}

info_result parser::parse_name(const value& info) {
    const value name = info.find("name");
    if (!name) return fail(info_error::missing_name, "name missing", info);
    if (!name.is_string()) return fail(info_error::missing_name, "name is not a string", name);
    if (const auto f = check_element(name.as_string()); f != element_fault::none) {
        return fail(info_error::bad_name, name_reason(f), name);
    }
    // name.utf-8 is what a client that wrote a legacy code page in `name` meant; it wins
    // when it is itself a sane, well-formed name, and is ignored otherwise.
    const value alt = info.find_string("name.utf-8");
    if (alt && check_element(alt.as_string()) == element_fault::none && utf8::is_valid(alt.as_string())) {
        out_.name.assign(alt.as_string());
    } else {
        out_.name = utf8::repair(name.as_string());
    }
    return {};
}

info_result parser::parse_piece_length(const value& info, bool v2) {
    const value pl = info.find("piece length");
    if (!pl) return fail(info_error::bad_piece_length, "piece length missing", info);
    if (!pl.is_integer()) return fail(info_error::bad_piece_length, "piece length is not an integer", pl);
    const std::int64_t n = pl.as_integer();
    if (n < 1) return fail(info_error::bad_piece_length, "piece length below 1", pl);
    if (n > max_piece_length) return fail(info_error::bad_piece_length, "piece length above 2^31-1", pl);
    if (v2 && !is_power_of_two(n)) return fail(info_error::bad_piece_length, "v2 piece length not a power of two", pl);
    if (v2 && n < min_v2_piece_length) return fail(info_error::bad_piece_length, "v2 piece length below 16 KiB", pl);
    out_.piece_length = static_cast<std::uint64_t>(n);
    return {};
}

info_result parser::parse_length(const value& dict, std::int64_t& length) const {
    const value l = dict.find("length");
    if (!l) return fail(info_error::bad_length, "length missing", dict);
    if (!l.is_integer()) return fail(info_error::bad_length, "length is not an integer", l);
    length = l.as_integer();
    if (length < 0) return fail(info_error::bad_length, "length is negative", l);
    if (static_cast<std::uint64_t>(length) > max_safe_integer) {
        return fail(info_error::length_too_large, "length above 2^53-1", l);
    }
    return {};
}

info_result parser::add_to_total(std::uint64_t length, std::uint64_t& total, const value& at) const {
    // Both operands are <= 2^53-1, so the sum cannot wrap.
    total += length;
    if (total > max_safe_integer) return fail(info_error::length_too_large, "total size above 2^53-1", at);
    return {};
}

info_result parser::count_file(const value& at) {
    if (++files_seen_ > lim_.max_files) return fail(info_error::too_many_files, "more files than the limit", at);
    return {};
}

info_result parser::count_path_bytes(std::size_t n, const value& at) {
    // A v2 tree repeats every directory name in each path below it, so the output can
    // be far larger than the input; this bounds it.
    path_bytes_ += n;
    if (path_bytes_ > lim_.max_path_bytes) return fail(info_error::paths_too_long, "paths longer than the limit", at);
    return {};
}

info_result parser::parse_v1(const value& info, std::vector<file_entry>& files) {
    files_seen_ = 0;
    path_bytes_ = 0;
    const value list = info.find("files");
    const value single = info.find("length");
    std::uint64_t total_all = 0; // with padding files: what the pieces cover

    if (list && single) return fail(info_error::bad_file_list, "both length and files", info);
    if (single) {
        std::int64_t length = 0;
        if (auto r = parse_length(info, length); !r) return r;
        files.push_back({out_.name, static_cast<std::uint64_t>(length)});
        total_all = static_cast<std::uint64_t>(length);
        out_.total_size = total_all;
    } else if (list) {
        if (!list.is_list()) return fail(info_error::bad_file_list, "files is not a list", list);
        if (list.size() == 0) return fail(info_error::no_files, "files is empty", list);
        // Padding entries sit between payload files, so a legitimate list holds at most
        // about twice max_files entries; anything longer is refused before any work.
        if (list.size() > 2 * lim_.max_files + 1) return fail(info_error::too_many_files, "more files than the limit", list);
        files.reserve(std::min<std::size_t>(list.size(), lim_.max_files));
        for (auto e : list) {
            if (auto r = parse_v1_entry(e.val, files, total_all); !r) return r;
        }
        if (files.empty()) return fail(info_error::no_files, "only padding files", list);
    } else {
        return fail(info_error::no_files, "neither length nor files", info);
    }

    const value pieces = info.find("pieces");
    if (!pieces) return fail(info_error::bad_pieces, "pieces missing", info);
    if (!pieces.is_string()) return fail(info_error::bad_pieces, "pieces is not a string", pieces);
    const std::size_t n = pieces.as_string().size();
    if (n % 20 != 0) return fail(info_error::bad_pieces, "pieces not a multiple of 20", pieces);
    // piece_length >= 1 and total_all <= 2^53-1, so this neither divides by zero nor wraps.
    const std::uint64_t expected = (total_all + out_.piece_length - 1) / out_.piece_length;
    if (n / 20 != expected) return fail(info_error::bad_pieces, "pieces count does not match the total size", pieces);
    return {};
}

info_result parser::parse_v1_entry(const value& entry, std::vector<file_entry>& files, std::uint64_t& total_all) {
    if (!entry.is_dict()) return fail(info_error::bad_file_list, "files entry is not a dict", entry);
    std::int64_t length = 0;
    if (auto r = parse_length(entry, length); !r) return r;

    const value path = entry.find("path");
    if (!path) return fail(info_error::bad_path, "path missing", entry);
    value at;
    if (auto reason = check_path_list(path, at); !reason.empty()) return fail(info_error::bad_path, reason, at);
    value chosen = path;
    const value alt = entry.find_list("path.utf-8");
    if (alt && check_path_list(alt, at).empty() && all_valid_utf8(alt)) chosen = alt;

    bool pad = false;
    if (const value attr = entry.find_string("attr")) pad = attr.as_string().find('p') != std::string_view::npos;
    for (auto e : chosen) pad = pad || e.val.as_string().substr(0, legacy_pad_prefix.size()) == legacy_pad_prefix;

    const auto size = static_cast<std::uint64_t>(length);
    if (auto r = add_to_total(size, total_all, entry); !r) return r;
    if (pad) return {};

    if (auto r = count_file(entry); !r) return r;
    file_entry f;
    f.size = size;
    for (auto e : chosen) {
        if (!f.path.empty()) f.path += '/';
        utf8::append_repaired(f.path, e.val.as_string());
    }
    if (auto r = count_path_bytes(f.path.size(), entry); !r) return r;
    out_.total_size += size;
    files.push_back(std::move(f));
    return {};
}

info_result parser::parse_v2(const value& info, std::vector<file_entry>& files) {
    files_seen_ = 0;
    path_bytes_ = 0;
    v2_total_ = 0;
    const value tree = info.find("file tree");
    if (!tree.is_dict()) return fail(info_error::bad_file_tree, "file tree is not a dict", tree);
    if (tree.find("")) return fail(info_error::bad_file_tree, "file tree root is a file", tree);
    if (tree.size() == 0) return fail(info_error::no_files, "file tree is empty", tree);
    std::string prefix;
    return walk_v2(tree, prefix, 0, files);
}

// Recursion is bounded by max_tree_depth (checked before descending), not by the input.
info_result parser::walk_v2(const value& dir, std::string& prefix, std::uint32_t depth,
                            std::vector<file_entry>& files) {
    const std::uint32_t here = depth + 1; // path elements of the entries of this dict
    for (auto e : dir) {
        if (const auto f = check_element(e.key); f != element_fault::none) {
            return fail(info_error::bad_path, path_reason(f), e.val);
        }
        if (!e.val.is_dict()) return fail(info_error::bad_file_tree, "file tree node is not a dict", e.val);
        if (here > lim_.max_tree_depth) return fail(info_error::file_tree_too_deep, "file tree deeper than the limit", e.val);
        const std::size_t keep = prefix.size();
        utf8::append_repaired(prefix, e.key);
        if (const value leaf = e.val.find("")) {
            if (e.val.size() != 1) return fail(info_error::bad_file_tree, "node is both a file and a directory", e.val);
            if (auto r = parse_v2_file(leaf, prefix, files); !r) return r;
        } else {
            if (e.val.size() == 0) return fail(info_error::bad_file_tree, "empty directory", e.val);
            prefix += '/';
            if (auto r = walk_v2(e.val, prefix, here, files); !r) return r;
        }
        prefix.resize(keep);
    }
    return {};
}

info_result parser::parse_v2_file(const value& node, std::string path, std::vector<file_entry>& files) {
    if (!node.is_dict()) return fail(info_error::bad_file_tree, "file node is not a dict", node);
    std::int64_t length = 0;
    if (auto r = parse_length(node, length); !r) return r;
    // BEP-52 trees never hold padding (v2 aligns files by construction); libtorrent
    // refuses such a tree, and so do we.
    if (const value attr = node.find_string("attr"); attr && attr.as_string().find('p') != std::string_view::npos) {
        return fail(info_error::bad_file_tree, "padding file in a v2 file tree", attr);
    }
    if (const value root = node.find("pieces root")) {
        if (!root.is_string() || root.as_string().size() != 32) {
            return fail(info_error::bad_pieces_root, "pieces root is not 32 bytes", root);
        }
        const auto bytes = root.as_string();
        const bool zero = std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
        if (length > 0 && zero) return fail(info_error::bad_pieces_root, "pieces root is all zeros", root);
    } else if (length > 0) {
        return fail(info_error::bad_pieces_root, "pieces root missing for a non-empty file", node);
    }
    const auto size = static_cast<std::uint64_t>(length);
    if (auto r = add_to_total(size, v2_total_, node); !r) return r;
    if (auto r = count_file(node); !r) return r;
    if (auto r = count_path_bytes(path.size(), node); !r) return r;
    files.push_back({std::move(path), size});
    return {};
}

} // namespace

info_result parse_info(std::string_view raw_info_dict, const id20& found_under, torrent_info& out,
                       const info_limits& limits) noexcept {
    out = torrent_info{};
    info_result r;
    try {
        parser p(limits, out);
        out.info_hash = found_under;
        r = p.run(raw_info_dict);
    } catch (const std::exception&) {
        // Only allocation can throw here (strings and vectors of the result).
        r = {info_error::out_of_memory, "allocation failed", 0};
    }
    if (!r) out = torrent_info{}; // move assignment: cannot throw
    return r;
}

} // namespace dhtc::metadata
