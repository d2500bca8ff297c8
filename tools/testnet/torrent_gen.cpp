#include "testnet/torrent_gen.hpp"

#include <algorithm>

#include "bencode/encoder.hpp"
#include "testnet/rng.hpp"

namespace dhtc::testnet {

namespace {

using bencode::entry;

enum class kind { v1_single, v1_multi, v2_single, v2_multi, hybrid, count };

std::string random_bytes(rng& r, std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; i += 8) {
        const auto v = r();
        for (std::size_t k = 0; k < 8 && i + k < n; ++k) s[i + k] = static_cast<char>((v >> (8 * k)) & 0xff);
    }
    return s;
}

std::string torrent_name(rng& r, std::size_t index) {
    static const char* const ascii[] = {"Ubuntu-Mirror", "field recordings", "dataset", "lecture notes", "photos"};
    // UTF-8 spelled out in bytes, so the source file's encoding never matters.
    static const char* const unicode[] = {
        "\xd0\xa2\xd0\xb5\xd1\x81\xd1\x82 \xd1\x82\xd0\xbe\xd1\x80\xd1\x80\xd0\xb5\xd0\xbd\xd1\x82", // Тест торрент
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x95\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab", // 日本語のファイル
        "caf\xc3\xa9 \xf0\x9f\x8e\xb5 m\xc3\xbcsik",                                        // café 🎵 müsik
        "\xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac",                  // Ελληνικά
    };
    std::string base = r.chance(0.3) ? unicode[r.below(std::size(unicode))] : ascii[r.below(std::size(ascii))];
    return base + " " + std::to_string(index);
}

/// How many metadata pieces (16 KiB) the info dict should span: mostly one, a tail to 34.
std::size_t metadata_pieces_wanted(rng& r, kind k) {
    const auto roll = r.below(100);
    std::size_t pieces = 1;
    if (roll >= 97) pieces = r.between(17, 34);
    else if (roll >= 88) pieces = r.between(6, 16);
    else if (roll >= 70) pieces = r.between(2, 5);
    // v2 dicts grow only with the file count; keep them at most a few pieces.
    if (k == kind::v2_single) pieces = 1;
    if (k == kind::v2_multi) pieces = std::min<std::size_t>(pieces, 4);
    return pieces;
}

struct file_spec {
    std::vector<std::string> path;
    std::uint64_t size;
};

/// `count` files of random sizes summing to exactly `total` (each at least 1 byte).
std::vector<file_spec> make_files(rng& r, std::size_t count, std::uint64_t total, bool unicode) {
    std::vector<file_spec> files;
    std::uint64_t left = total;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t remaining = count - i;
        std::uint64_t size = left - (remaining - 1);
        if (remaining > 1) size = 1 + r.below(std::max<std::uint64_t>(1, 2 * (left / remaining)));
        size = std::min(size, left - (remaining - 1));
        left -= size;
        file_spec f;
        f.size = size;
        if (count > 3 && r.chance(0.5)) f.path.push_back("dir" + std::to_string(i % 7));
        f.path.push_back((unicode && i % 3 == 0 ? std::string("\xc3\xa9t\xc3\xa9-") : std::string("file-")) +
                         std::to_string(i) + ".bin");
        files.push_back(std::move(f));
    }
    return files;
}

entry path_list(const std::vector<std::string>& path) {
    entry::list_type l;
    for (const auto& p : path) l.emplace_back(p);
    return entry(std::move(l));
}

void add_to_tree(entry& tree, const file_spec& f, rng& r) {
    entry* node = &tree;
    for (const auto& element : f.path) node = &(*node)[element];
    entry leaf = entry::dict();
    leaf["length"] = static_cast<std::int64_t>(f.size);
    leaf["pieces root"] = random_bytes(r, 32);
    (*node)[""] = std::move(leaf);
}

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

} // namespace

std::string make_info_dict(std::uint64_t seed, std::size_t index) {
    rng r(seed, 0x70220000 + index);
    const auto k = static_cast<kind>(r.below(static_cast<std::uint64_t>(kind::count)));
    const std::string name = torrent_name(r, index);
    const bool unicode_paths = r.chance(0.3);
    const std::uint64_t piece_length = std::uint64_t{16384} << r.below(6); // 16 KiB .. 512 KiB
    const std::size_t meta_pieces = metadata_pieces_wanted(r, k);
    // Roughly what the info dict must hold beyond its fixed part to reach meta_pieces.
    const std::size_t fill = meta_pieces == 1 ? r.between(0, 12000) : (meta_pieces - 1) * 16384 + r.between(1, 16000);

    entry info = entry::dict();
    info["name"] = name;
    info["piece length"] = static_cast<std::int64_t>(piece_length);
    if (r.chance(0.05)) info["private"] = 1;

    const bool multi = k == kind::v1_multi || k == kind::v2_multi || k == kind::hybrid;
    const bool has_v1 = k == kind::v1_single || k == kind::v1_multi || k == kind::hybrid;
    const bool has_v2 = k == kind::v2_single || k == kind::v2_multi || k == kind::hybrid;

    std::size_t file_count = 1;
    if (multi) file_count = has_v1 ? r.between(2, 12) : std::max<std::size_t>(2, fill / 60);
    // v1 dicts reach their size through piece hashes: 20 bytes a piece.
    const std::size_t hashes_wanted = has_v1 ? std::max<std::size_t>(1, fill / 20) : 1;
    std::uint64_t total = has_v1 ? hashes_wanted * piece_length - r.below(piece_length / 2)
                                 : file_count * (1 + r.below(4 * piece_length));
    total = std::max<std::uint64_t>(total, file_count);
    if (k == kind::hybrid) {
        // The pad files take room too: leave one piece per file for them.
        total = std::max<std::uint64_t>(file_count, total > file_count * piece_length ? total - file_count * piece_length : total);
    }
    auto files = make_files(r, file_count, total, unicode_paths);
    // A hybrid's v1 list must follow its v2 tree order (sorted paths): libtorrent rejects
    // the metadata otherwise ("v1 and v2 file lists do not match").
    if (k == kind::hybrid)
        std::sort(files.begin(), files.end(), [](const file_spec& a, const file_spec& b) { return a.path < b.path; });

    std::uint64_t covered = 0; // bytes the v1 pieces cover, padding included
    if (has_v1) {
        if (!multi) {
            info["length"] = static_cast<std::int64_t>(files[0].size);
            covered = files[0].size;
        } else {
            entry::list_type list;
            for (std::size_t i = 0; i < files.size(); ++i) {
                entry f = entry::dict();
                f["length"] = static_cast<std::int64_t>(files[i].size);
                f["path"] = path_list(files[i].path);
                list.push_back(std::move(f));
                covered += files[i].size;
                const std::uint64_t pad = round_up(covered, piece_length) - covered;
                if (k == kind::hybrid && i + 1 < files.size() && pad > 0) {
                    entry p = entry::dict();
                    p["attr"] = "p";
                    p["length"] = static_cast<std::int64_t>(pad);
                    p["path"] = path_list({".pad", std::to_string(pad)});
                    list.push_back(std::move(p));
                    covered += pad;
                }
            }
            info["files"] = entry(std::move(list));
        }
        info["pieces"] = random_bytes(r, 20 * ((covered + piece_length - 1) / piece_length));
    }
    if (has_v2) {
        info["meta version"] = 2;
        entry tree = entry::dict();
        if (!multi) {
            add_to_tree(tree, file_spec{{name}, files[0].size}, r);
        } else {
            for (const auto& f : files) add_to_tree(tree, f, r);
        }
        info["file tree"] = std::move(tree);
    }
    return info.encode();
}

} // namespace dhtc::testnet
