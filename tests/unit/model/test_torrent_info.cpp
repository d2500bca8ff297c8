// The info-dict parser, its hashes and its JSON form: real torrents made by libtorrent
// (tests/fixtures/info, from make_fixtures.py) compared with what libtorrent reports,
// and one hand-built dict per row of the hostile-metadata table of docs/torrent-json.md.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bencode/encoder.hpp"
#include "util/hashing.hpp"
#include "model/torrent_info.hpp"
#include "metadata/torrent_json.hpp"
#include "model/address.hpp"
#include "util/utf8.hpp"

using namespace std::string_literals;
using dhtc::id20;
using dhtc::bencode::entry;
namespace md = dhtc::metadata;
using md::info_error;

namespace {

constexpr std::int64_t piece = 16384;
const std::string fffd{dhtc::utf8::replacement};

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot open " << path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string hex(const auto& digest) {
    return dhtc::to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

// A syntactically valid 32-byte pieces root.
std::string root32(char fill = '\x01') { return std::string(32, fill); }

// Filler of the right size; lengths too large to fill get one piece (those dicts are
// rejected before the pieces are looked at).
std::string pieces_for(std::int64_t total, std::int64_t piece_length = piece) {
    if (total > (std::int64_t{1} << 30)) return std::string(20, 'h');
    return std::string(static_cast<std::size_t>((total + piece_length - 1) / piece_length) * 20, 'h');
}

entry v1_single(std::int64_t length = 100, std::string name = "a.bin") {
    entry d = entry::dict();
    d["name"] = name;
    d["length"] = length;
    d["piece length"] = piece;
    d["pieces"] = pieces_for(length);
    return d;
}

entry v1_file(std::vector<std::string> path, std::int64_t length) {
    entry f = entry::dict();
    f["length"] = length;
    entry p = entry::list();
    for (auto& e : path) p.as_list().push_back(entry(e));
    f["path"] = p;
    return f;
}

entry v1_multi(std::vector<entry> files, std::string name = "root") {
    std::int64_t total = 0;
    for (auto& f : files)
        if (f.is_dict() && f.as_dict().count("length") && f["length"].is_integer()) total += f["length"].integer();
    entry d = entry::dict();
    d["name"] = name;
    d["files"] = entry(entry::list_type(files));
    d["piece length"] = piece;
    d["pieces"] = pieces_for(total);
    return d;
}

entry v2_leaf(std::int64_t length, std::string root = root32()) {
    entry meta = entry::dict();
    meta["length"] = length;
    if (!root.empty()) meta["pieces root"] = root;
    entry leaf = entry::dict();
    leaf[""] = meta;
    return leaf;
}

entry v2_info(entry tree, std::string name = "root", std::int64_t piece_length = piece) {
    entry d = entry::dict();
    d["name"] = name;
    d["meta version"] = 2;
    d["piece length"] = piece_length;
    d["file tree"] = tree;
    return d;
}

// {a.bin: 10, dir: {b.bin: 20}}
entry small_tree() {
    entry tree = entry::dict();
    tree["a.bin"] = v2_leaf(10);
    tree["dir"]["b.bin"] = v2_leaf(20);
    return tree;
}

// A hybrid over small_tree(): v1 list in a different order, with a BEP-47 pad.
entry small_hybrid() {
    entry pad = v1_file({".pad", "16374"}, 16374);
    pad["attr"] = "p";
    entry d = v1_multi({v1_file({"dir", "b.bin"}, 20), pad, v1_file({"a.bin"}, 10)});
    d["meta version"] = 2;
    d["file tree"] = small_tree();
    d["pieces"] = pieces_for(20 + 16374 + 10);
    return d;
}

md::info_result parse_raw(const std::string& raw, md::torrent_info& out, const md::info_limits& lim = {}) {
    return md::parse_info(raw, id20{}, out, lim);
}

md::info_result parse(const entry& e, md::torrent_info& out, const md::info_limits& lim = {}) {
    return parse_raw(e.encode(), out, lim);
}

info_error code_of(const entry& e) {
    md::torrent_info out;
    return parse(e, out).code;
}

info_error code_of_raw(const std::string& raw) {
    md::torrent_info out;
    return parse_raw(raw, out).code;
}

// Raw info dict of a v2 torrent with one file `depth` path elements deep (d/d/.../f).
// Built by hand because the encoder caps nesting at 32.
std::string deep_v2(int depth) {
    std::string tree;
    for (int i = 1; i < depth; ++i) tree += "1:dd";
    tree += "1:fd0:d6:lengthi5e11:pieces root32:" + root32() + "ee";
    for (int i = 1; i < depth; ++i) tree += "e";
    return "d9:file treed" + tree + "e12:meta versioni2e4:name4:root12:piece lengthi16384ee";
}

} // namespace

TEST_SUITE("hashing") {

TEST_CASE("SHA-1 and SHA-256 test vectors (FIPS 180)") {
    CHECK(hex(md::sha1(""s)) == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    CHECK(hex(md::sha1("abc"s)) == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(hex(md::sha256(""s)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex(md::sha256("abc"s)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(hex(md::sha256(two_blocks)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("byte spans and string views hash the same") {
    const std::uint8_t bytes[] = {'a', 'b', 'c'};
    CHECK(md::sha1(std::span<const std::uint8_t>(bytes)) == md::sha1("abc"s));
    CHECK(md::sha256(std::span<const std::uint8_t>(bytes)) == md::sha256("abc"s));
}

TEST_CASE("id20 forms: whole SHA-1, truncated SHA-256") {
    CHECK(md::sha1_id("abc").hex() == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(md::sha256_id("abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a3");
    CHECK(md::truncate_to_id20(md::sha256("abc")) == md::sha256_id("abc"));
    CHECK_FALSE(md::is_zero(md::sha1("abc")));
    CHECK(md::is_zero(md::sha1_digest{}));
}

} // TEST_SUITE hashing

TEST_SUITE("torrent_info") {

// ---- real torrents made by libtorrent -------------------------------------------------

TEST_CASE("libtorrent fixtures parse to what libtorrent reports") {
    const std::string dir = DHTC_FIXTURE_DIR "/info/";
    const char* names[] = {"v1_single", "v1_multi", "v2_single", "v2_multi",
                           "hybrid_multi", "unicode_multi", "private_hybrid_single"};
    for (const char* name : names) {
        CAPTURE(name);
        const std::string raw = read_file(dir + name + ".info");
        const auto expect = nlohmann::json::parse(read_file(dir + name + ".json"));
        const bool has_v1 = !expect["info_hash_v1"].is_null();
        const bool has_v2 = !expect["info_hash_v2"].is_null();
        REQUIRE((has_v1 || has_v2));

        // Found under the key a crawler would have seen: the v1 hash, else the truncated v2.
        const auto key = has_v1 ? *id20::from_hex(expect["info_hash_v1"].get<std::string>())
                                : *id20::from_hex(expect["info_hash_v2"].get<std::string>().substr(0, 40));
        md::torrent_info info;
        const auto r = md::parse_info(raw, key, info);
        REQUIRE_MESSAGE(r, md::to_string(r.code) << ": " << r.reason << " at " << r.offset);

        CHECK(info.version == (has_v1 && has_v2 ? md::torrent_version::hybrid
                               : has_v1         ? md::torrent_version::v1
                                                : md::torrent_version::v2));
        CHECK(info.info_hash == key);
        CHECK(md::matches(info, key));
        if (has_v1) CHECK(hex(info.sha1) == expect["info_hash_v1"].get<std::string>());
        if (has_v2) {
            CHECK(hex(info.sha256) == expect["info_hash_v2"].get<std::string>());
            CHECK(md::matches(info, md::truncate_to_id20(info.sha256)));
        }
        CHECK(info.name == expect["name"].get<std::string>());
        CHECK(info.piece_length == expect["piece_length"].get<std::uint64_t>());
        CHECK(info.is_private == expect["private"].get<bool>());
        CHECK(info.info_size == raw.size());

        // libtorrent's list includes padding (v1 pads from the dict, v2 alignment pads it
        // adds in memory) and prefixes multi-file paths with the torrent name.
        const std::string name_str = expect["name"].get<std::string>();
        std::vector<md::file_entry> want;
        std::uint64_t want_total = 0;
        for (const auto& f : expect["files"]) {
            if (f["pad"].get<bool>()) continue;
            std::string path = f["path"].get<std::string>();
            if (path.rfind(name_str + "/", 0) == 0) {
                path = path.substr(name_str.size() + 1);
            } else {
                CHECK(path == name_str); // a single-file torrent
            }
            want.push_back({path, f["size"].get<std::uint64_t>()});
            want_total += f["size"].get<std::uint64_t>();
        }
        CHECK(info.files == want);
        CHECK(info.total_size == want_total);
        CHECK(info.num_files() == want.size());

        const auto j = md::to_json(info);
        CHECK(j["info_hash"] == key.hex());
        CHECK(j["info_hash_v1"] == expect["info_hash_v1"]);
        CHECK(j["info_hash_v2"] == expect["info_hash_v2"]);
        CHECK(j["name"] == expect["name"]);
        CHECK(j["num_files"] == want.size());
        CHECK(j["total_size"] == want_total);
        CHECK(j["private"] == expect["private"]);
        CHECK(j["files"].size() == want.size());
    }
}

TEST_CASE("the unicode fixture keeps its names byte for byte") {
    const std::string raw = read_file(DHTC_FIXTURE_DIR "/info/unicode_multi.info");
    md::torrent_info info;
    REQUIRE(md::parse_info(raw, id20{}, info));
    CHECK(info.name == "\xc3\x9cn\xc3\xaf" "c\xc3\xb8" "d\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"); // Ünïcødé 日本語
    CHECK(info.files.at(0).path == "emoji \xf0\x9f\x8e\xb5.bin");
    CHECK(info.files.at(1).path == "m\xc3\xbasica/canci\xc3\xb3n.flac");
}

// ---- structure and classification ------------------------------------------------------

TEST_CASE("v1 single-file: one file named like the torrent") {
    md::torrent_info info;
    REQUIRE(parse(v1_single(40000, "movie.mkv"), info));
    CHECK(info.version == md::torrent_version::v1);
    CHECK(info.files == std::vector<md::file_entry>{{"movie.mkv", 40000}});
    CHECK(info.total_size == 40000);
    CHECK_FALSE(info.has_v2());
}

TEST_CASE("v1 multi-file: paths relative to the root, joined with /") {
    md::torrent_info info;
    REQUIRE(parse(v1_multi({v1_file({"a", "b", "c.txt"}, 3), v1_file({"d.txt"}, 4)}), info));
    CHECK(info.name == "root");
    CHECK(info.files == std::vector<md::file_entry>{{"a/b/c.txt", 3}, {"d.txt", 4}});
    CHECK(info.total_size == 7);
}

TEST_CASE("v2 single-file and multi-file") {
    md::torrent_info info;
    entry tree = entry::dict();
    tree["movie.mkv"] = v2_leaf(50000);
    REQUIRE(parse(v2_info(tree, "movie.mkv"), info));
    CHECK(info.version == md::torrent_version::v2);
    CHECK(info.files == std::vector<md::file_entry>{{"movie.mkv", 50000}});
    CHECK_FALSE(info.has_v1());

    REQUIRE(parse(v2_info(small_tree()), info));
    CHECK(info.files == std::vector<md::file_entry>{{"a.bin", 10}, {"dir/b.bin", 20}});
    CHECK(info.total_size == 30);
}

TEST_CASE("hybrid: v1 order kept, pads left out, lists compared regardless of order") {
    md::torrent_info info;
    REQUIRE(parse(small_hybrid(), info));
    CHECK(info.version == md::torrent_version::hybrid);
    CHECK(info.files == std::vector<md::file_entry>{{"dir/b.bin", 20}, {"a.bin", 10}});
    CHECK(info.total_size == 30);
}

TEST_CASE("a file tree without meta version is ignored: plain v1") {
    entry d = v1_single();
    d["file tree"] = small_tree();
    md::torrent_info info;
    REQUIRE(parse(d, info));
    CHECK(info.version == md::torrent_version::v1);
    CHECK(info.files.size() == 1);
}

TEST_CASE("padding files are left out of files and total_size") {
    md::torrent_info info;
    entry pad = v1_file({".pad", "100"}, 100);
    pad["attr"] = "p";
    entry bitcomet = v1_file({"_____padding_file_0_if you see this file, please update to BitComet 0.85 or above____"}, 50);
    entry hidden_exec = v1_file({"run.sh"}, 7);
    hidden_exec["attr"] = "xh"; // other attributes do not make a pad
    REQUIRE(parse(v1_multi({v1_file({"a"}, 10), pad, bitcomet, hidden_exec}), info));
    CHECK(info.files == std::vector<md::file_entry>{{"a", 10}, {"run.sh", 7}});
    CHECK(info.total_size == 17);
}

TEST_CASE("matches(): the v1 hash or the truncated v2 hash") {
    md::torrent_info info;
    const std::string raw = small_hybrid().encode();
    REQUIRE(parse_raw(raw, info));
    CHECK(md::matches(info, md::sha1_id(raw)));
    CHECK(md::matches(info, md::sha256_id(raw)));
    CHECK_FALSE(md::matches(info, md::sha1_id(raw + "x")));
    CHECK_FALSE(md::matches(info, id20{}));
}

TEST_CASE("found_under is recorded, not checked") {
    const auto key = *id20::from_hex("0123456789abcdef0123456789abcdef01234567");
    md::torrent_info info;
    REQUIRE(md::parse_info(v1_single().encode(), key, info));
    CHECK(info.info_hash == key);
    CHECK_FALSE(md::matches(info, key));
}

// ---- the hostile-metadata table (docs/torrent-json.md), row by row ---------------------

TEST_CASE("name missing, not a string, empty, \".\", \"..\", with / or NUL: rejected") {
    entry d = v1_single();
    d.as_dict().erase("name");
    CHECK(code_of(d) == info_error::missing_name);
    d["name"] = 5;
    CHECK(code_of(d) == info_error::missing_name);
    for (const auto& bad : {""s, "."s, ".."s, "a/b"s, "/etc"s, "a\0b"s}) {
        CAPTURE(bad);
        CHECK(code_of(v1_single(100, bad)) == info_error::bad_name);
        CHECK(code_of(v2_info(small_tree(), bad)) == info_error::bad_name);
    }
    md::torrent_info info;
    const auto r = parse(v1_single(100, ".."), info);
    CHECK(r.reason == "name is \"..\"");
    CHECK(info.name.empty()); // reset on failure
}

TEST_CASE("name.utf-8 wins over name when usable, else name") {
    md::torrent_info info;
    entry d = v1_single(100, "caf\xe9");
    d["name.utf-8"] = "caf\xc3\xa9";
    REQUIRE(parse(d, info));
    CHECK(info.name == "caf\xc3\xa9");
    CHECK(info.files.at(0).path == "caf\xc3\xa9"); // single-file path is the chosen name

    for (const auto& unusable : {"\xff"s, ".."s, "a/b"s, ""s}) {
        CAPTURE(unusable);
        d["name.utf-8"] = unusable;
        REQUIRE(parse(d, info));
        CHECK(info.name == "caf" + fffd);
    }
    d["name.utf-8"] = 7; // not a string
    REQUIRE(parse(d, info));
    CHECK(info.name == "caf" + fffd);

    // A sane name.utf-8 does not rescue a bad name.
    d["name"] = "..";
    d["name.utf-8"] = "good";
    CHECK(code_of(d) == info_error::bad_name);
}

TEST_CASE("path elements \"..\", \".\", empty, absolute, with / or NUL: rejected (v1)") {
    const std::vector<std::vector<std::string>> bad = {
        {"..", "etc"}, {"a", ".."}, {"."}, {"a", "", "b"}, {"", "etc", "passwd"}, {"a/b"}, {"a\0b"s}, {},
    };
    for (const auto& path : bad) {
        CAPTURE(path.size());
        CHECK(code_of(v1_multi({v1_file({"ok"}, 1), v1_file(path, 1)})) == info_error::bad_path);
    }
    md::torrent_info info;
    CHECK(parse(v1_multi({v1_file({"", "etc", "passwd"}, 1)}), info).reason == "path is absolute (first element empty)");

    entry f = v1_file({"x"}, 1);
    f["path"] = "x"; // not a list
    CHECK(code_of(v1_multi({f})) == info_error::bad_path);
    f["path"] = entry(entry::list_type{entry(1)}); // element not a string
    CHECK(code_of(v1_multi({f})) == info_error::bad_path);
    f.as_dict().erase("path");
    CHECK(code_of(v1_multi({f})) == info_error::bad_path);
    // A pad is validated like any other entry.
    entry pad = v1_file({"..", "pad"}, 1);
    pad["attr"] = "p";
    CHECK(code_of(v1_multi({v1_file({"ok"}, 1), pad})) == info_error::bad_path);
}

TEST_CASE("path elements \"..\", \".\", with / or NUL in a v2 file tree: rejected") {
    for (const auto& key : {".."s, "."s, "a/b"s, "a\0b"s}) {
        CAPTURE(key);
        entry tree = entry::dict();
        tree["ok"] = v2_leaf(1);
        tree["dir"][key] = v2_leaf(1);
        CHECK(code_of(v2_info(tree)) == info_error::bad_path);
    }
}

TEST_CASE("path.utf-8 wins over path when usable, else path") {
    md::torrent_info info;
    entry f = v1_file({"d", "caf\xe9"}, 1);
    f["path.utf-8"] = entry(entry::list_type{entry("d"), entry("caf\xc3\xa9")});
    REQUIRE(parse(v1_multi({f}), info));
    CHECK(info.files.at(0).path == "d/caf\xc3\xa9");

    f["path.utf-8"] = entry(entry::list_type{entry(".."), entry("x")});
    REQUIRE(parse(v1_multi({f}), info));
    CHECK(info.files.at(0).path == "d/caf" + fffd);
}

TEST_CASE("invalid UTF-8 in names and paths: accepted, repaired with U+FFFD") {
    md::torrent_info info;
    REQUIRE(parse(v1_multi({v1_file({"d\xc0\xaf", "f\xed\xa0\x80.txt"}, 1)}, "n\xff"), info));
    CHECK(info.name == "n" + fffd);
    CHECK(info.files.at(0).path == "d" + fffd + fffd + "/f" + fffd + fffd + fffd + ".txt");

    entry tree = entry::dict();
    tree["\xe2\x82"]["x\xf5"] = v2_leaf(3);
    REQUIRE(parse(v2_info(tree), info));
    CHECK(info.files.at(0).path == fffd + "/x" + fffd);
    CHECK(dhtc::utf8::is_valid(md::to_json_line(info)));
}

TEST_CASE("lengths missing, not integers or negative: rejected") {
    CHECK(code_of(v1_single(-1)) == info_error::bad_length);
    entry d = v1_single();
    d["length"] = "100";
    CHECK(code_of(d) == info_error::bad_length);
    CHECK(code_of(v1_multi({v1_file({"a"}, -5)})) == info_error::bad_length);
    entry f = v1_file({"a"}, 1);
    f.as_dict().erase("length");
    CHECK(code_of(v1_multi({f})) == info_error::bad_length);

    entry tree = entry::dict();
    tree["a"] = v2_leaf(-1);
    CHECK(code_of(v2_info(tree)) == info_error::bad_length);
    tree["a"][""].as_dict().erase("length");
    CHECK(code_of(v2_info(tree)) == info_error::bad_length);
}

TEST_CASE("lengths or totals above 2^53-1: rejected") {
    constexpr std::int64_t safe = (std::int64_t{1} << 53) - 1;
    CHECK(code_of(v1_single(safe + 1)) == info_error::length_too_large);
    CHECK(code_of(v1_single(INT64_MAX)) == info_error::length_too_large);
    CHECK(code_of(v1_multi({v1_file({"a"}, INT64_MAX)})) == info_error::length_too_large);
    // Past int64 the bencode decoder itself refuses the integer.
    md::torrent_info info;
    const auto r = parse_raw("d6:lengthi9223372036854775808e4:name1:a12:piece lengthi16384e6:pieces0:e", info);
    CHECK(r.code == info_error::bad_bencode);
    CHECK(r.reason == "integer_overflow");

    // v2 carries no pieces string, so the exact boundary is reachable there.
    entry tree = entry::dict();
    tree["a"] = v2_leaf(safe);
    REQUIRE(parse(v2_info(tree), info));
    CHECK(info.total_size == static_cast<std::uint64_t>(safe));
    CHECK(md::to_json(info)["total_size"].get<std::uint64_t>() == static_cast<std::uint64_t>(safe));
    tree["a"] = v2_leaf(safe + 1);
    CHECK(code_of(v2_info(tree)) == info_error::length_too_large);
    tree["a"] = v2_leaf(safe);
    tree["b"] = v2_leaf(1); // each fine, the total not
    const auto r2 = parse(v2_info(tree), info);
    CHECK(r2.code == info_error::length_too_large);
    CHECK(r2.reason == "total size above 2^53-1");
}

TEST_CASE("pieces missing, not a string, not a multiple of 20, or the wrong count: rejected") {
    entry d = v1_single(100);
    d["pieces"] = std::string(19, 'h');
    CHECK(code_of(d) == info_error::bad_pieces);
    d["pieces"] = std::string(21, 'h');
    CHECK(code_of(d) == info_error::bad_pieces);
    d["pieces"] = std::string(40, 'h'); // 2 pieces for 100 bytes
    CHECK(code_of(d) == info_error::bad_pieces);
    d["pieces"] = 20;
    CHECK(code_of(d) == info_error::bad_pieces);
    d.as_dict().erase("pieces");
    CHECK(code_of(d) == info_error::bad_pieces);

    entry h = small_hybrid();
    h["pieces"] = std::string(30, 'h');
    CHECK(code_of(h) == info_error::bad_pieces);
    h.as_dict().erase("pieces");
    h.as_dict().erase("files");
    h["length"] = 30; // a hybrid whose v1 half lacks pieces is not taken for v2
    CHECK(code_of(h) == info_error::bad_pieces);
}

TEST_CASE("piece length missing, 0, negative, not an integer, above 2^31-1: rejected") {
    entry d = v1_single();
    for (const entry& bad : {entry(0), entry(-16384), entry("16384"), entry(std::int64_t{1} << 31)}) {
        d["piece length"] = bad;
        CHECK(code_of(d) == info_error::bad_piece_length);
    }
    d.as_dict().erase("piece length");
    CHECK(code_of(d) == info_error::bad_piece_length);
    // v1 has no power-of-two rule.
    d["piece length"] = 1000;
    d["pieces"] = pieces_for(100, 1000);
    CHECK(code_of(d) == info_error::none);
}

TEST_CASE("v2 piece length not a power of two or below 16 KiB: rejected") {
    for (std::int64_t bad : {std::int64_t{8192}, std::int64_t{49152}, std::int64_t{16385}, std::int64_t{1}}) {
        CAPTURE(bad);
        CHECK(code_of(v2_info(small_tree(), "root", bad)) == info_error::bad_piece_length);
        entry h = small_hybrid();
        h["piece length"] = bad;
        CHECK(code_of(h) == info_error::bad_piece_length);
    }
    CHECK(code_of(v2_info(small_tree(), "root", 1 << 22)) == info_error::none);
}

TEST_CASE("empty files: accepted with size 0") {
    md::torrent_info info;
    REQUIRE(parse(v1_single(0), info)); // and no pieces at all
    CHECK(info.files == std::vector<md::file_entry>{{"a.bin", 0}});
    REQUIRE(parse(v1_multi({v1_file({"e"}, 0), v1_file({"f"}, 5)}), info));
    CHECK(info.files == std::vector<md::file_entry>{{"e", 0}, {"f", 5}});

    entry tree = entry::dict();
    tree["e"] = v2_leaf(0, ""); // no pieces root, as libtorrent writes it
    tree["z"] = v2_leaf(0, root32('\0')); // an all-zero root is fine when empty
    REQUIRE(parse(v2_info(tree), info));
    CHECK(info.files == std::vector<md::file_entry>{{"e", 0}, {"z", 0}});
    CHECK(info.total_size == 0);
}

TEST_CASE("private=1: accepted and flagged") {
    md::torrent_info info;
    entry d = v1_single();
    d["private"] = 1;
    REQUIRE(parse(d, info));
    CHECK(info.is_private);
    CHECK(md::to_json(info)["private"] == true);
    d["private"] = 0;
    REQUIRE(parse(d, info));
    CHECK_FALSE(info.is_private);
    d["private"] = "1"; // only the integer 1 counts
    REQUIRE(parse(d, info));
    CHECK_FALSE(info.is_private);
}

TEST_CASE("meta version other than the integer 2: rejected") {
    for (const entry& mv : {entry(3), entry(1), entry(0), entry(-2), entry("2")}) {
        entry d = v2_info(small_tree());
        d["meta version"] = mv;
        CHECK(code_of(d) == info_error::unsupported_version);
    }
}

TEST_CASE("file tree root is a file, malformed nodes, pads in v2: rejected") {
    CHECK(code_of(v2_info(v2_leaf(10))) == info_error::bad_file_tree); // root has a "" key

    entry d = v2_info(small_tree());
    d.as_dict().erase("file tree");
    CHECK(code_of(d) == info_error::bad_file_tree); // meta version 2, no tree
    d["file tree"] = entry::list();
    CHECK(code_of(d) == info_error::bad_file_tree);

    entry tree = small_tree();
    tree["x"] = 5; // node not a dict
    CHECK(code_of(v2_info(tree)) == info_error::bad_file_tree);
    tree = small_tree();
    tree["x"] = entry::dict(); // empty directory
    CHECK(code_of(v2_info(tree)) == info_error::bad_file_tree);
    tree = small_tree();
    tree["a.bin"]["sub"] = v2_leaf(1); // file and directory at once
    CHECK(code_of(v2_info(tree)) == info_error::bad_file_tree);
    tree = small_tree();
    tree["a.bin"][""] = "not a dict";
    CHECK(code_of(v2_info(tree)) == info_error::bad_file_tree);
    tree = small_tree();
    tree["a.bin"][""]["attr"] = "p";
    CHECK(code_of(v2_info(tree)) == info_error::bad_file_tree);
    CHECK(code_of(v2_info(entry::dict())) == info_error::no_files);
}

TEST_CASE("file tree deeper than 100 levels: rejected") {
    md::torrent_info info;
    const auto ok = parse_raw(deep_v2(100), info);
    REQUIRE_MESSAGE(ok, md::to_string(ok.code) << ": " << ok.reason);
    std::string want;
    for (int i = 1; i < 100; ++i) want += "d/";
    CHECK(info.files == std::vector<md::file_entry>{{want + "f", 5}});
    CHECK(code_of_raw(deep_v2(101)) == info_error::file_tree_too_deep);
    CHECK(code_of_raw(deep_v2(200)) == info_error::file_tree_too_deep);
    // Past the decoder's depth limit the bencode layer refuses it first.
    md::info_result r = parse_raw(deep_v2(300), info);
    CHECK(r.code == info_error::bad_bencode);
    CHECK(r.reason == "depth_exceeded");
}

TEST_CASE("pieces root of the wrong length, missing or all zeros for a non-empty file: rejected") {
    for (const auto& bad : {std::string(31, '\x01'), std::string(33, '\x01'), root32('\0')}) {
        entry tree = entry::dict();
        tree["a"] = v2_leaf(10, bad);
        CHECK(code_of(v2_info(tree)) == info_error::bad_pieces_root);
    }
    entry tree = entry::dict();
    tree["a"] = v2_leaf(10, ""); // missing
    CHECK(code_of(v2_info(tree)) == info_error::bad_pieces_root);
    tree["a"] = v2_leaf(0, std::string(31, '\x01')); // wrong length even when empty
    CHECK(code_of(v2_info(tree)) == info_error::bad_pieces_root);
    tree["a"] = v2_leaf(10);
    tree["a"][""]["pieces root"] = 7;
    CHECK(code_of(v2_info(tree)) == info_error::bad_pieces_root);
}

TEST_CASE("hybrid v1/v2 file lists that disagree: rejected") {
    entry h = small_hybrid();
    h["file tree"]["a.bin"] = v2_leaf(11); // size differs
    CHECK(code_of(h) == info_error::hybrid_mismatch);
    h = small_hybrid();
    h["file tree"]["c.bin"] = v2_leaf(5); // an extra file in v2
    CHECK(code_of(h) == info_error::hybrid_mismatch);
    h = small_hybrid();
    h["file tree"].as_dict().erase("a.bin");
    h["file tree"]["A.bin"] = v2_leaf(10); // path differs
    CHECK(code_of(h) == info_error::hybrid_mismatch);
    // v1 single-file vs a v2 tree holding it under another name
    entry s = v1_single(10, "x.bin");
    s["meta version"] = 2;
    entry tree = entry::dict();
    tree["y.bin"] = v2_leaf(10);
    s["file tree"] = tree;
    CHECK(code_of(s) == info_error::hybrid_mismatch);
    tree = entry::dict();
    tree["x.bin"] = v2_leaf(10);
    s["file tree"] = tree;
    CHECK(code_of(s) == info_error::none);
}

TEST_CASE("info not a dict, trailing bytes, bad bencode: rejected with the bencode error") {
    CHECK(code_of_raw("le") == info_error::not_a_dict);
    CHECK(code_of_raw("i1e") == info_error::not_a_dict);
    CHECK(code_of_raw("4:spam") == info_error::not_a_dict);
    md::torrent_info info;
    const std::string good = v1_single().encode();
    auto r = parse_raw(good + "x", info);
    CHECK(r.code == info_error::bad_bencode);
    CHECK(r.reason == "trailing_bytes");
    CHECK(r.offset == good.size());
    r = parse_raw(good.substr(0, good.size() - 1), info);
    CHECK(r.code == info_error::bad_bencode);
    CHECK(r.reason == "unexpected_eof");
    r = parse_raw("", info);
    CHECK(r.reason == "empty_input");
    r = parse_raw("d4:name1:a4:name1:be", info);
    CHECK(r.reason == "duplicate_key");
    r = parse_raw("d4:namei03ee", info);
    CHECK(r.reason == "leading_zero");
}

TEST_CASE("non-canonical but valid bencode: accepted, hashed as received") {
    // Keys out of order; a canonical re-encoding would sort them and hash differently.
    const std::string raw = "d4:name5:a.bin12:piece lengthi16384e6:lengthi0e6:pieces0:e";
    md::torrent_info info;
    REQUIRE(parse_raw(raw, info));
    CHECK(info.sha1 == md::sha1(raw));
    CHECK(info.sha256 == md::sha256(raw));
    const std::string canonical = v1_single(0).encode();
    CHECK(canonical != raw);
    CHECK(info.sha1 != md::sha1(canonical));
    CHECK(md::to_json(info)["info_hash_v1"] == md::sha1_id(raw).hex());
}

TEST_CASE("files: both length and files, not a list, entry not a dict, empty, only pads") {
    entry d = v1_multi({v1_file({"a"}, 1)});
    d["length"] = 1;
    CHECK(code_of(d) == info_error::bad_file_list);
    d = v1_multi({});
    CHECK(code_of(d) == info_error::no_files);
    d["files"] = "x";
    CHECK(code_of(d) == info_error::bad_file_list);
    CHECK(code_of(v1_multi({entry(1)})) == info_error::bad_file_list);
    entry pad = v1_file({"p"}, 1);
    pad["attr"] = "p";
    CHECK(code_of(v1_multi({pad})) == info_error::no_files);
    d = v1_single();
    d.as_dict().erase("length");
    CHECK(code_of(d) == info_error::no_files);
}

TEST_CASE("file count cap") {
    md::info_limits lim;
    lim.max_files = 3;
    md::torrent_info info;
    entry three = v1_multi({v1_file({"a"}, 1), v1_file({"b"}, 1), v1_file({"c"}, 1)});
    CHECK(parse(three, info, lim));
    entry four = v1_multi({v1_file({"a"}, 1), v1_file({"b"}, 1), v1_file({"c"}, 1), v1_file({"d"}, 1)});
    CHECK(parse(four, info, lim).code == info_error::too_many_files);
    entry tree = entry::dict();
    for (auto n : {"a", "b", "c", "d"}) tree[n] = v2_leaf(1);
    CHECK(parse(v2_info(tree), info, lim).code == info_error::too_many_files);

    // The default cap, 100,000, at its boundary (empty files, so no pieces are needed).
    std::string list;
    for (int i = 0; i < 100'000; ++i) list += "d6:lengthi0e4:pathl1:xee";
    const std::string head = "d5:filesl", tail = "e4:name1:r12:piece lengthi16384e6:pieces0:e";
    REQUIRE(parse_raw(head + list + tail, info));
    CHECK(info.num_files() == 100'000);
    CHECK(parse_raw(head + list + "d6:lengthi0e4:pathl1:xee" + tail, info).code == info_error::too_many_files);
}

TEST_CASE("path bytes cap: a v2 tree cannot multiply a long directory name") {
    md::info_limits lim;
    lim.max_path_bytes = 64;
    entry tree = entry::dict();
    for (auto n : {"a", "b", "c"}) tree[std::string(20, 'd')][n] = v2_leaf(1);
    md::torrent_info info;
    CHECK(parse(v2_info(tree), info, lim).code == info_error::paths_too_long);
    lim.max_path_bytes = 66; // 3 x 22 bytes
    CHECK(parse(v2_info(tree), info, lim));
}

TEST_CASE("size cap") {
    md::info_limits lim;
    lim.max_size = 32;
    md::torrent_info info;
    const auto r = parse(v1_single(), info, lim);
    CHECK(r.code == info_error::bad_bencode);
    CHECK(r.reason == "size_limit_exceeded");
}

TEST_CASE("error names are stable") {
    CHECK(md::to_string(info_error::hybrid_mismatch) == "hybrid_mismatch");
    CHECK(md::to_string(info_error::file_tree_too_deep) == "file_tree_too_deep");
    CHECK(md::to_string(md::torrent_version::hybrid) == "hybrid");
}

} // TEST_SUITE torrent_info

TEST_SUITE("torrent_json") {

TEST_CASE("the form of a v1 torrent") {
    md::torrent_info info;
    const std::string raw = v1_multi({v1_file({"d", "a.txt"}, 3), v1_file({"b"}, 4)}, "pack").encode();
    REQUIRE(md::parse_info(raw, md::sha1_id(raw), info));
    const auto j = md::to_json(info);
    CHECK(j["schema"] == 1);
    CHECK(j["info_hash"] == md::sha1_id(raw).hex());
    CHECK(j["info_hash_v1"] == md::sha1_id(raw).hex());
    CHECK(j["info_hash_v2"].is_null());
    CHECK(j["name"] == "pack");
    CHECK(j["version"] == "v1");
    CHECK(j["total_size"] == 7);
    CHECK(j["num_files"] == 2);
    CHECK(j["piece_length"] == piece);
    CHECK(j["private"] == false);
    CHECK(j["files"] == nlohmann::json::parse(R"([{"path":"d/a.txt","size":3},{"path":"b","size":4}])"));
    CHECK_FALSE(j.contains("peer"));
    CHECK_FALSE(j.contains("discovered_at"));
}

TEST_CASE("the form of v2 and hybrid torrents") {
    md::torrent_info info;
    const std::string raw = v2_info(small_tree()).encode();
    REQUIRE(md::parse_info(raw, md::sha256_id(raw), info));
    auto j = md::to_json(info);
    CHECK(j["info_hash"] == md::sha256_id(raw).hex());
    CHECK(j["info_hash_v1"].is_null());
    CHECK(j["info_hash_v2"] == hex(md::sha256(raw)));
    CHECK(j["info_hash_v2"].get<std::string>().size() == 64);
    CHECK(j["version"] == "v2");

    const std::string hraw = small_hybrid().encode();
    REQUIRE(md::parse_info(hraw, md::sha1_id(hraw), info));
    j = md::to_json(info);
    CHECK(j["info_hash_v1"] == md::sha1_id(hraw).hex());
    CHECK(j["info_hash_v2"] == hex(md::sha256(hraw)));
    CHECK(j["version"] == "hybrid");
}

TEST_CASE("delivery details: peer (v4 and v6) and discovered_at") {
    md::torrent_info info;
    REQUIRE(parse(v1_single(), info));
    using namespace std::chrono;
    const auto t = sys_days{year{2026} / 12 / 2} + hours{18};
    const dhtc::endpoint v4{*dhtc::ip_address::parse("1.2.3.4"), 6881};
    auto j = md::to_json(info, v4, t);
    CHECK(j["peer"] == "1.2.3.4:6881");
    CHECK(j["discovered_at"] == "2026-12-02T18:00:00Z");
    const dhtc::endpoint v6{*dhtc::ip_address::parse("2001:db8::1"), 51413};
    j = md::to_json(info, md::delivery_details{v6, std::nullopt, std::nullopt, std::nullopt});
    CHECK(j["peer"] == "[2001:db8::1]:51413");
    CHECK_FALSE(j.contains("discovered_at"));
    CHECK_FALSE(j.contains("transport"));
    j = md::to_json(info, md::delivery_details{v6, std::nullopt, "rc4", "utp"});
    CHECK(j["encryption"] == "rc4");
    CHECK(j["transport"] == "utp");
}

TEST_CASE("to_json_line: compact, one line, parses back") {
    md::torrent_info info;
    REQUIRE(parse(v1_multi({v1_file({"a"}, 1)}, "line"), info));
    const auto line = md::to_json_line(info, md::delivery_details{std::nullopt, std::chrono::system_clock::time_point{}, std::nullopt, std::nullopt});
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find(": ") == std::string::npos);
    const auto back = nlohmann::json::parse(line);
    CHECK(back["discovered_at"] == "1970-01-01T00:00:00Z");
    CHECK(back == md::to_json(info, md::delivery_details{std::nullopt, std::chrono::system_clock::time_point{}, std::nullopt, std::nullopt}));
}

TEST_CASE("dump never throws, even on strings that bypassed the parser") {
    md::torrent_info info;
    info.name = "bad\xff";
    info.files.push_back({"x\xc0", 1});
    std::string line;
    CHECK_NOTHROW(line = md::to_json_line(info));
    CHECK(dhtc::utf8::is_valid(line));
    CHECK(nlohmann::json::parse(line)["name"] == "bad" + fffd);
}

TEST_CASE("RFC 3339 timestamps: UTC, whole seconds, floor before the epoch") {
    using namespace std::chrono;
    const system_clock::time_point epoch{};
    CHECK(md::to_rfc3339(epoch) == "1970-01-01T00:00:00Z");
    CHECK(md::to_rfc3339(epoch + milliseconds{1999}) == "1970-01-01T00:00:01Z");
    CHECK(md::to_rfc3339(epoch - milliseconds{1}) == "1969-12-31T23:59:59Z");
    CHECK(md::to_rfc3339(sys_days{year{2024} / 2 / 29} + hours{23} + minutes{59} + seconds{58}) ==
          "2024-02-29T23:59:58Z");
}

} // TEST_SUITE torrent_json
