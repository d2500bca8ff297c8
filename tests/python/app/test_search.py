"""Search over real SQLite files: the schema-2 migration of a version-1 database, the
file-row cap, full text in Latin, Cyrillic and CJK names and in file paths, filters,
sorts and the `dhtcrawler search` command."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

import pytest

from dhtcrawler import Torrent
from dhtcrawler import search as S
from dhtcrawler.app.db import wrap
from dhtcrawler.app.db.migrations import migrate
from dhtcrawler.app.db.schema import COMPONENT, prepare
from dhtcrawler.app.search import FACETS
from dhtcrawler.sinks import MIGRATIONS, SCHEMA_VERSION, SqliteSink

from conftest import pg_schema_uri
from cliutil import run_cli


def make(name, files, *, version="v1", at="2026-12-01T00:00:00Z", piece_length=16384, peer="127.0.0.1:1"):
    h = hashlib.sha1(name.encode()).hexdigest()
    h2 = hashlib.sha256(name.encode()).hexdigest()
    v1 = h if version in ("v1", "hybrid") else None
    v2 = h2 if version in ("v2", "hybrid") else None
    doc = {"schema": 1, "info_hash": v1 or v2[:40], "info_hash_v1": v1, "info_hash_v2": v2, "version": version,
           "name": name, "total_size": sum(s for _, s in files), "num_files": len(files),
           "piece_length": piece_length, "private": False,
           "files": [{"path": p, "size": s} for p, s in files], "peer": peer, "discovered_at": at}
    return Torrent.from_json(json.dumps(doc, ensure_ascii=False))


CORPUS = [
    make("Ubuntu 24.04 Desktop amd64", [("ubuntu-24.04-desktop-amd64.iso", 6_000_000_000)],
         at="2026-11-01T00:00:00Z"),
    make("Debian netinst", [("debian/netinst.iso", 600_000_000), ("debian/SHA256SUMS", 1000)],
         version="hybrid", at="2026-11-15T00:00:00Z"),
    make("Тест торрент Москва", [("Москва/часть 1.mkv", 700_000_000), ("Москва/часть 2.mkv", 710_000_000)],
         version="v2", at="2026-11-20T00:00:00Z"),
    make("東京の夜景 写真集", [("写真/東京タワー.jpg", 3_000_000), ("写真/渋谷.jpg", 2_000_000),
                           ("readme.txt", 100)], at="2026-11-25T00:00:00Z"),
    make("field recordings", [("birds/sparrow.flac", 30_000_000), ("birds/owl.flac", 20_000_000),
                              ("notes/ubuntu-setup.txt", 10)], at="2026-12-01T00:00:00Z"),
]


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "s.sqlite")
    sink = SqliteSink(path)
    for t in CORPUS:
        sink.add(t)
    sink.close()
    return path


def names(result):
    return [r["name"] for r in result[1]]


def test_latin_cyrillic_and_cjk_names_are_found(db):
    assert names(S.search(db, "ubuntu desktop")) == ["Ubuntu 24.04 Desktop amd64"]
    assert names(S.search(db, "москва")) == ["Тест торрент Москва"]  # case-folded Cyrillic
    assert names(S.search(db, "торрент")) == ["Тест торрент Москва"]
    assert names(S.search(db, "夜景")) == ["東京の夜景 写真集"]          # a 2-character CJK word
    assert names(S.search(db, "東京の夜")) == ["東京の夜景 写真集"]      # a CJK substring
    assert S.search(db, "nothing-like-this")[0] == 0
    # LIKE's wildcards are plain characters in a word
    assert S.search(db, "ubuntu_24")[0] == 0 and S.search(db, "24%04")[0] == 0
    assert names(S.search(db, "ubuntu-24.04")) == ["Ubuntu 24.04 Desktop amd64"]


def test_file_paths_are_searched_and_the_name_ranks_first(db):
    assert names(S.search(db, "sparrow")) == ["field recordings"]
    assert names(S.search(db, "東京タワー")) == ["東京の夜景 写真集"]
    # "ubuntu" is in one name and in another torrent's file path: the name ranks first.
    total, rows = S.search(db, "ubuntu")
    assert total == 2 and [r["name"] for r in rows] == ["Ubuntu 24.04 Desktop amd64", "field recordings"]
    assert rows[0]["score"] > rows[1]["score"]
    assert rows[0]["magnet"].startswith("magnet:?xt=urn:btih:" + rows[0]["info_hash"])


def test_filters(db):
    assert set(names(S.search(db, "", min_size=1_000_000_000))) == {
        "Ubuntu 24.04 Desktop amd64", "Тест торрент Москва"}
    assert names(S.search(db, "", max_size=10_000_000)) == ["東京の夜景 写真集"]
    assert set(names(S.search(db, "", min_files=3))) == {"東京の夜景 写真集", "field recordings"}
    assert names(S.search(db, "", max_files=1)) == ["Ubuntu 24.04 Desktop amd64"]
    assert names(S.search(db, "", version="hybrid")) == ["Debian netinst"]
    assert names(S.search(db, "", version="v2")) == ["Тест торрент Москва"]
    assert set(names(S.search(db, "", since="2026-11-20T00:00:00Z"))) == {
        "Тест торрент Москва", "東京の夜景 写真集", "field recordings"}
    assert names(S.search(db, "ubuntu", since="2026-11-02")) == ["field recordings"]
    with pytest.raises(S.QueryError):
        S.search(db, "", version="v3")
    with pytest.raises(S.QueryError):
        S.search(db, "", sort="colour")


def test_sorts_and_pages(db):
    assert names(S.search(db, "", sort="size"))[0] == "Ubuntu 24.04 Desktop amd64"
    assert names(S.search(db, "", sort="size", order="asc"))[0] == "東京の夜景 写真集"
    assert names(S.search(db, "", sort="first_seen")) == [t.name for t in reversed(CORPUS)]
    assert names(S.search(db, "", sort="first_seen", order="asc")) == [t.name for t in CORPUS]
    assert names(S.search(db, "", sort="files"))[0] in ("東京の夜景 写真集", "field recordings")
    # swarm sizes are not stored yet: sort=swarm is relevance
    assert names(S.search(db, "ubuntu", sort="swarm")) == names(S.search(db, "ubuntu"))
    # a window of 1 candidate: the newest torrent the index finds
    check_window(db)
    total, page = S.search(db, "", sort="first_seen", limit=2, offset=2)
    assert total == 5 and [r["name"] for r in page] == [CORPUS[2].name, CORPUS[1].name]


def test_torrent_and_stats(db):
    hybrid = CORPUS[1]
    for key in (hybrid.info_hash_v1, hybrid.info_hash_v2, hybrid.info_hash_v2[:40].upper()):
        t = S.torrent(db, key)
        assert t["name"] == "Debian netinst" and t["version"] == "hybrid" and t["piece_length"] == 16384
        assert t["files"] == [{"path": "debian/netinst.iso", "size": 600_000_000},
                              {"path": "debian/SHA256SUMS", "size": 1000}]
    assert S.torrent(db, "00" * 20) is None and S.torrent(db, "xyz") is None
    st = S.stats(db)
    assert st["torrents"] == 5 and st["files"] == st["files_stored"] == 11
    assert st["versions"] == {"v1": 3, "v2": 1, "hybrid": 1, "unknown": 0}
    assert st["first_seen"] == "2026-11-01T00:00:00Z" and st["tokenizer"] == S.tokenizer(sqlite3.connect(db))


def test_file_rows_cap_keeps_count_and_total(tmp_path):
    path = str(tmp_path / "cap.sqlite")
    sink = SqliteSink(path, max_files=1)
    sink.add(CORPUS[3])
    sink.close()
    t = S.torrent(path, CORPUS[3].info_hash)
    assert t["num_files"] == 3 and t["total_size"] == CORPUS[3].total_size and t["files_stored"] == 1
    assert names(S.search(path, "東京タワー")) == [CORPUS[3].name]  # the stored path is indexed
    assert S.search(path, "渋谷.jpg")[0] == 0                        # the capped one is not


def write_text_keyed_files_and_hashes(conn, t) -> None:
    """A torrent's files and hashes as the first schema kept them (hex text, keyed by the
    info hash): SQLite's version 1, PostgreSQL's versions 1 to 3."""
    for i, f in enumerate(t.files):
        conn.execute("INSERT INTO files VALUES (?, ?, ?, ?)", (t.info_hash, i, f.path, f.size))
    for h, kind in ((t.info_hash_v1, "v1"), (t.info_hash_v2, "v2")):
        if h:
            conn.execute("INSERT INTO hashes VALUES (?, ?, ?)", (h, kind, t.info_hash))


def test_a_version_1_database_is_migrated(tmp_path):
    path = str(tmp_path / "old.sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(wrap(conn), COMPONENT, MIGRATIONS[:1], prepare=prepare)
    hybrid, v2 = CORPUS[1], CORPUS[2]
    for t, times in ((hybrid, 3), (v2, 1)):
        conn.execute("INSERT INTO torrents VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 100, ?, ?, ?, ?)",
                     (t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, t.num_files,
                      t.piece_length, "2026-11-15T00:00:00Z", "2026-11-16T10:00:00Z", t.peer, times))
        write_text_keyed_files_and_hashes(conn, t)
    conn.close()
    sink = SqliteSink(path)
    assert sink.schema_version_found == 1
    assert sink.add(hybrid) is False  # the migrated hybrid is found under its keys
    sink.close()
    got = S.torrent(path, hybrid.info_hash_v2)
    assert got["first_seen"] == "2026-11-15T00:00:00Z" and got["times_seen"] == 4
    assert got["files"] == [{"path": f.path, "size": f.size} for f in hybrid.files]
    assert names(S.search(path, "netinst")) == ["Debian netinst"]
    assert names(S.search(path, "часть")) == [v2.name]  # backfilled from the file paths
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT version FROM schema_migrations WHERE component = 'torrents'").fetchone() == (
            SCHEMA_VERSION,)


def test_search_command(db):
    out = run_cli("search", "москва", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["name"] for r in rows] == ["Тест торрент Москва"]
    out = run_cli("search", "ubuntu", "--db", db, "--limit", "1")
    assert out.returncode == 0 and "Ubuntu 24.04 Desktop amd64" in out.stdout and "field recordings" not in out.stdout
    assert "2 found" in out.stdout
    out = run_cli("search", "ubuntu", "--db", db, "--window", "1")
    assert out.returncode == 0 and "about " in out.stdout, out.stdout
    assert run_cli("search", "x", "--db", str(db) + ".missing").returncode == 2
    assert run_cli("search", "x", "--db", db, "--sort", "colour").returncode == 2


def check_phrases(db):
    """A quoted phrase is one word, spaces included: it matches only in that order."""
    assert names(S.search(db, '"24.04 desktop"')) == ["Ubuntu 24.04 Desktop amd64"]
    assert S.search(db, '"desktop 24.04"')[0] == 0  # both words are there, the phrase is not
    assert names(S.search(db, 'amd64 "field recordings"')) == []
    assert names(S.search(db, '"часть 1"')) == ["Тест торрент Москва"]  # a phrase in a file path
    assert names(S.search(db, '"field   recordings')) == ["field recordings"]  # unclosed, spaces collapsed
    assert S.query_words("ocean's C:\\x \"a  b\" c") == ["ocean's", "C:\\x", "a b", "c"]


def test_quoted_phrases(db):
    check_phrases(db)
    for args, found in ((["24.04 desktop"], True), (["desktop 24.04"], False), (["desktop", "24.04"], True),
                        (['"24.04 desktop" ubuntu'], True), (['"desktop 24.04" ubuntu'], False)):
        out = run_cli("search", *args, "--db", db, "--json")
        assert out.returncode == 0, out.stderr
        assert [json.loads(line)["name"] for line in out.stdout.splitlines()] == (
            ["Ubuntu 24.04 Desktop amd64"] if found else []), args


def check_name_sort_word_cap_files_and_magnets(db):
    """What the web server needs beside search(): sort=name, max_words, torrent(max_files),
    largest_files, and magnet links naming exactly the hashes a torrent has."""
    latin = ["Debian netinst", "field recordings", "Ubuntu 24.04 Desktop amd64"]
    assert names(S.search(db, "", sort="name"))[:3] == latin  # A to Z, case-insensitively
    assert names(S.search(db, "", sort="name", order="desc"))[-3:] == latin[::-1]
    assert S.search(db, "ubuntu nothing-like-this")[0] == 0
    assert S.search(db, "ubuntu nothing-like-this", max_words=1)[0] == 2
    assert S.query_words('ubuntu "two words" ubuntu x', 2) == ["ubuntu", "two words"]
    hybrid, v2_only = CORPUS[1], CORPUS[2]
    for key in (hybrid.info_hash_v1, hybrid.info_hash_v2):
        assert S.largest_files(db, key, 1) == [("debian/netinst.iso", 600_000_000)]
    assert S.largest_files(db, "00" * 20, 5) == [] and S.largest_files(db, "xyz", 5) == []
    t = S.torrent(db, hybrid.info_hash_v1, max_files=1)
    assert t["files"] == [{"path": "debian/netinst.iso", "size": 600_000_000}] and t["files_stored"] == 2
    assert t["magnet"].startswith(f"magnet:?xt=urn:btih:{hybrid.info_hash_v1}&xt=urn:btmh:1220{hybrid.info_hash_v2}&dn=")
    m = S.torrent(db, v2_only.info_hash_v2)["magnet"]
    assert m.startswith(f"magnet:?xt=urn:btmh:1220{v2_only.info_hash_v2}&dn=") and "btih" not in m


def test_name_sort_word_cap_files_and_magnets(db):
    check_name_sort_word_cap_files_and_magnets(db)


def check_window(db):
    """Both databases bound a query's work by the candidate window, and count exactly below it."""
    page = S.search_page(db, "ubuntu", window=1)
    assert page.rows == S.search(db, "ubuntu", since="2026-11-02")[1]
    # the window was full: the total is an estimate, never below what the window held
    assert page.total_is_estimate and page.total >= 1
    assert S.search_page(db, "ubuntu", window=None) == (2, S.search(db, "ubuntu")[1], False)
    assert S.search_page(db, "ubuntu", window=3) == (2, S.search(db, "ubuntu")[1], False)
    assert S.search_page(db, "ubuntu", window=3, offset=5) == (2, [], False)
    # without words, the count stops at the window too
    assert S.search_page(db, "", window=2, limit=1).total_is_estimate
    assert S.search_page(db, "", window=5, limit=1)[::2] == (5, True)
    assert S.search_page(db, "", window=6, limit=1)[::2] == (5, False)
    assert S.search_page(db, "", window=6, limit=0, min_size=1_000_000_000) == (2, [], False)


# ---- PostgreSQL (DHTC_TEST_PG) ------------------------------------------------------------

@pytest.fixture
def pg_db():
    from dhtcrawler.sinks import PostgresSink

    with pg_schema_uri("search") as uri:
        sink = PostgresSink(uri)
        sink.uri = uri
        for t in CORPUS:
            sink.add(t)
        yield sink
        sink.close()


def test_postgresql_search_filters_and_sorts(pg_db):
    db = pg_db
    assert names(S.search(db, "ubuntu desktop")) == ["Ubuntu 24.04 Desktop amd64"]
    assert names(S.search(db, "москва")) == ["Тест торрент Москва"]
    assert names(S.search(db, "夜景")) == ["東京の夜景 写真集"]
    assert names(S.search(db, "sparrow")) == ["field recordings"]  # a file path
    assert names(S.search(db, "ubuntu")) == ["Ubuntu 24.04 Desktop amd64", "field recordings"]
    assert set(names(S.search(db, "", min_size=1_000_000_000))) == {"Ubuntu 24.04 Desktop amd64", "Тест торрент Москва"}
    assert names(S.search(db, "", max_files=1)) == ["Ubuntu 24.04 Desktop amd64"]
    assert names(S.search(db, "", version="hybrid")) == ["Debian netinst"]
    assert names(S.search(db, "ubuntu", since="2026-11-02")) == ["field recordings"]
    assert names(S.search(db, "", sort="first_seen", order="asc")) == [t.name for t in CORPUS]
    assert names(S.search(db, "", sort="size"))[0] == "Ubuntu 24.04 Desktop amd64"
    total, page = S.search(db, "", sort="first_seen", limit=2, offset=2)
    assert total == 5 and [r["name"] for r in page] == [CORPUS[2].name, CORPUS[1].name]
    hybrid = CORPUS[1]
    for key in (hybrid.info_hash_v1, hybrid.info_hash_v2, hybrid.info_hash_v2[:40]):
        t = S.torrent(db, key)
        assert t["name"] == hybrid.name and t["first_seen"] == "2026-11-15T00:00:00Z"
        assert t["files"] == [{"path": f.path, "size": f.size} for f in hybrid.files]
    st = S.stats(db)
    assert st["torrents"] == 5 and st["versions"]["hybrid"] == 1 and st["tokenizer"] == "pg_trgm"
    check_window(db)
    check_name_sort_word_cap_files_and_magnets(db)
    check_phrases(db)
    out = run_cli("search", "東京", "--store", db.uri, "--json")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["name"] for line in out.stdout.splitlines()] == ["東京の夜景 写真集"]


def test_non_ascii_words_with_glob_characters(tmp_path):
    """A non-ASCII word is checked with GLOB, each letter as a class of its cases: GLOB's own
    characters in it are literal, and Cyrillic and Greek fold both ways."""
    path = str(tmp_path / "g.sqlite")
    sink = SqliteSink(path)
    for i, name in enumerate(["Звёзды [Live]*?^-Ω", "звёзды live", "ΟΔΟΣ ΣΤΑΘΜΟΣ", "Ящик"]):
        sink.add(make(name, [(f"f{i}.bin", 10)], at=f"2026-11-0{i + 1}T00:00:00Z"))
    sink.close()
    assert names(S.search(path, "ЗВЁЗДЫ")) == ["звёзды live", "Звёзды [Live]*?^-Ω"]
    assert names(S.search(path, "звёзды [live]*?^-ω")) == ["Звёзды [Live]*?^-Ω"]
    assert names(S.search(path, "звёзды [")) == ["Звёзды [Live]*?^-Ω"]
    assert names(S.search(path, "οδος")) == ["ΟΔΟΣ ΣΤΑΘΜΟΣ"]  # a final sigma matches Σ
    assert names(S.search(path, "σταθμος")) == ["ΟΔΟΣ ΣΤΑΘΜΟΣ"]
    assert names(S.search(path, "ящ*")) == []


@pytest.mark.parametrize("index", ["trigrams", "words", "words counted"])
def test_postgresql_recency_buckets_find_the_newest_matches(monkeypatch, index):
    """PostgreSQL looks a query's words up bucket by bucket, newest first, in the trigram
    index (schema 8's search_recent) or the word index (schema 11's search_words_recent;
    counted: with the statistics of the rare words' rows): with buckets of 4 ids, the window
    holds the newest matches of a word in every torrent, in every fifth and in two, as an
    unbounded query finds them."""
    from dhtcrawler.app.db.dialect import PostgresDialect
    from dhtcrawler.sinks import PostgresSink

    with pg_schema_uri("buckets") as uri:
        sink = PostgresSink(uri)
        try:
            for i in range(60):
                words = ["common"] + (["fifth"] if i % 5 == 0 else []) + (["rarest"] if i in (3, 41) else [])
                sink.add(make(f"t{i:02d} " + " ".join(words), [(f"d{i}/x.bin", 10 + i)],
                              at=f"2026-11-01T00:{i:02d}:00Z"))
            assert S.stats(sink)["tokenizer"] == "pg_trgm"
            monkeypatch.setattr(PostgresDialect, "SEARCH_BUCKET", 4)
            monkeypatch.setattr(PostgresDialect, "BUCKETS_PER_STATEMENT", 3)
            if index == "trigrams":
                monkeypatch.setattr(PostgresDialect, "_in_words", lambda *_: None)  # not the word index
            elif index == "words":
                monkeypatch.setattr(PostgresDialect, "_rows_holding",  # no word rare: the word index's buckets
                                    lambda *_: ((lambda form: 1e9), 1e9))
            else:  # every word rare, and never so few rows that the whole word index answers
                sink.connection.execute("ANALYZE search")
                monkeypatch.setattr(PostgresDialect, "BUCKET_ROWS", 0.001)
            looked_in = []
            in_buckets = PostgresDialect._in_buckets
            monkeypatch.setattr(PostgresDialect, "_in_buckets",
                                lambda self, conn, tests, *more: looked_in.append(tests[0])
                                or in_buckets(self, conn, tests, *more))
            for query in ("common", "fifth", "rarest", "common fifth"):
                full = S.search_page(sink, query, window=None, sort="first_seen", limit=1000)
                for window in (1, 5, 7, 100):
                    page = S.search_page(sink, query, window=window, sort="first_seen", limit=1000)
                    assert page.rows == full.rows[:window], (query, window)
                    assert page.total_is_estimate == (full.total >= window), (query, window)
                    assert page.total_is_estimate or page.total == full.total
            # A short word is checked on the other words' newest candidates: a full window
            # none of which holds it is an estimate, not proof of no match.
            page = S.search_page(sink, "fifth t4", window=1)
            assert page.rows == [] and page.total_is_estimate
            assert names(S.search(sink, "fifth t4", window=4)) == ["t45 common fifth", "t40 common fifth"]
            assert looked_in and all(("&&" in tests) == (index != "trigrams") for tests in looked_in)
        finally:
            sink.close()


def test_postgresql_several_words_are_looked_up_by_two_trigrams_and_tested_whole():
    """With several words, PostgreSQL hands the trigram index two trigrams a word (one
    within a bucket of ids: the default window) and tests each word exactly: a text holding
    a word's first and last trigrams but not the word is no match, LIKE's wildcards in a
    word are literal, and a word without a run of three letters or digits still finds its
    torrents."""
    from dhtcrawler.sinks import PostgresSink

    corpus = ["alpha bravo charlie", "alpine phase bravo", "100%_done bravo", "100ab_done bravo",
              "r@y gold bravo", "ray gold bravo"]
    with pg_schema_uri("sparse") as uri:
        sink = PostgresSink(uri)
        try:
            for i, name in enumerate(corpus):
                sink.add(make(name, [(f"d{i}/x.bin", 10 + i)], at=f"2026-11-01T00:{i:02d}:00Z"))
            assert names(S.search(sink, "alpha bravo")) == ["alpha bravo charlie"]
            assert names(S.search(sink, "bravo 100%_done")) == ["100%_done bravo"]
            assert names(S.search(sink, "r@y bravo")) == ["r@y gold bravo"]
            assert sorted(names(S.search(sink, "gold bravo"))) == ["r@y gold bravo", "ray gold bravo"]
            assert names(S.search(sink, "alpha bravo", window=None)) == ["alpha bravo charlie"]
        finally:
            sink.close()


def test_a_trigram_in_most_torrents_is_checked_not_looked_up(tmp_path):
    """SQLite leaves a trigram that most of the newest torrents hold out of the index lookup
    (intersecting its doclist costs more than it narrows); its word is still checked on
    every candidate, so the answer is the same."""
    from dhtcrawler.app.db.dialect import SQLITE

    path = str(tmp_path / "c.sqlite")
    sink = SqliteSink(path)
    for i in range(SQLITE.TRIGRAM_PROBE + 50):
        sink.add(make(f"the thing {i}", [(f"t{i}.bin", 10)]))
    sink.add(make("the zebrafish", [("z.bin", 10)]))
    sink.add(make("a zebrafish alone", [("a.bin", 10)]))
    sink.close()
    with sqlite3.connect(path) as conn:
        lookup = SQLITE._rarer(wrap(conn), ["the", "zeb", "fis"])
    assert lookup == ["zeb", "fis"]
    assert names(S.search(path, "the zebrafish")) == ["the zebrafish"]
    assert set(names(S.search(path, "zebrafish"))) == {"a zebrafish alone", "the zebrafish"}
    assert S.search(path, "the thing")[0] == SQLITE.TRIGRAM_PROBE + 50


def test_the_word_index_answers_as_the_trigram_index_does(tmp_path):
    """A new SQLite database keeps a word index (schema.py) where a word of letters and digits
    is looked up: absent at once, a substring of the words holding it, a common one only
    checked; a word whose cases the index does not fold as GLOB does is not. Every query
    answers as through the trigram index alone."""
    from dhtcrawler.app.db.dialect import SQLITE

    path = str(tmp_path / "w.sqlite")
    sink = SqliteSink(path)
    extra = [make("Some.Movie.2024.1080p.WEB-DL", [("Some.Movie.2024.1080p.mkv", 10)]),
             make("ZebraFish documentary", [("foo_bar_baz.txt", 1), ("notes/caféteria menu.pdf", 2)]),
             make("superlongwordabcdef", [("x.bin", 1)]),
             make("Ελληνικά ΟΔΟΣ Ԩԩԩ \u212aыш straẞe", [("𠀀𠀁𠀂.txt", 1)]),
             *(make(f"common form com{i:02d}x", [(f"f{i}.bin", 1)]) for i in range(SQLITE.WORD_FORMS + 6))]
    for t in CORPUS + extra:
        sink.add(t)
    sink.close()
    queries = ["ebrafi", "ZEBRA fish", "zebrafish documentary", "qqqzzz", "zebra qqqzzz", "movie 2024", "1080p",
               "movie.2024", "web-dl", "bar_baz", "barbaz", "foo", "caf", "caféteria", "feteri", "longwordabc",
               "com", "com 05x", "common com", "ubuntu desktop", "ubuntu", "часть", "東京の夜", "夜景", "a", "24",
               '"field recordings"', "owl flac", "setup", "sha256sums", "amd64 iso", "москва", "οδος", "ΟΔΟΣ",
               "ελληνικά", "ԩԩԩ", "kыш", "straße", "𠀀𠀁", "𠀀𠀁𠀂", "東京タワー"]

    def answers(words_on: int) -> list:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE words_state SET complete = ?", (words_on,))
        return [(q, S.search(path, q, limit=200)[0], sorted(names(S.search(path, q, limit=200)))) for q in queries]

    through_trigrams = answers(0)
    assert answers(1) == through_trigrams
    assert dict((q, n) for q, n, _ in through_trigrams)["ebrafi"] == 1  # the queries do find things
    with sqlite3.connect(path) as c:
        conn = wrap(c)

        def looked_up_in(query: str, window: int = 1000) -> str:
            sql, _args, _checked = SQLITE.candidates(conn, S.query_words(query), window)
            return "words" if "FROM words" in sql else "trigrams"

        assert looked_up_in("ebrafi") == "words" and looked_up_in("qqqzzz zebra") == "words"
        assert looked_up_in("com") == "trigrams"       # in more than WORD_FORMS words: only checked
        # Beside a word left out, the others' candidates are taken only when they do not fill
        # the window (the trigram index narrows by the word left out too).
        assert looked_up_in("form com") == "words" and looked_up_in("form com", window=10) == "trigrams"
        assert looked_up_in("movie.2024") == "trigrams"  # across punctuation: no one word holds it
        assert looked_up_in("часть") == "words" and looked_up_in("οδος") == "words"  # folded alike everywhere
        assert looked_up_in("ԩԩԩ") == "trigrams"  # its capital (Ԩ) GLOB takes, this SQLite's index does not fold
        assert looked_up_in("𠀀𠀁𠀂") == "trigrams"  # outside the BMP: tested in Python (dhtc_has)


def test_postgresql_word_index_answers_as_the_buckets_do(monkeypatch):
    """PostgreSQL's word index (schema 10, bucketed by schema 11) looks up a word of letters
    and digits as the words holding it: absent at once, a substring inside a word, pieces of
    a word longer than 200 characters; a word with ASCII punctuation or a phrase by its runs
    of letters and digits, then tested whole; a word longer than 100 is not looked up, and a
    common one is only tested. Every query answers as the trigram index does. The vocabulary
    is kept by the trigger, and filled again by the migration's backfill."""
    from dhtcrawler.app.db.dialect import PostgresDialect, pg_words
    from dhtcrawler.sinks import PostgresSink

    long_run = "長" * 190 + "境界語" + "長" * 150  # the word crosses the first piece's end
    extra = [make("Some.Movie.2024.1080p.WEB-DL", [("Some.Movie.2024.1080p.mkv", 10)]),
             make("ZebraFish documentary", [("foo_bar_baz.txt", 1), ("notes/caféteria menu.pdf", 2)]),
             make("Zebras at dusk", [("zebra-herd.mkv", 1)]),
             make("superlongwordabcdef " + "w" * 120, [("x.bin", 1)]),
             make("Ελληνικά ΟΔΟΣ 【字幕】kыш", [(long_run + ".txt", 1)]),
             *(make(f"common form com{i:02d}x", [(f"f{i}.bin", 1)]) for i in range(PostgresDialect.WORD_FORMS + 6))]
    queries = ["ebrafi", "ZEBRA fish", "zebrafish documentary", "qqqzzz", "zebra qqqzzz", "zebra", "zebra herd",
               "movie 2024", "1080p", "movie.2024", "web-dl", "bar_baz", "barbaz", "foo", "caf", "caféteria", "feteri",
               "longwordabc", "com", "com 05x", "common com", "ubuntu desktop", "ubuntu", "часть", "東京の夜", "夜景", "a",
               "24", '"field recordings"', "owl flac", "setup", "sha256sums", "amd64 iso", "москва", "οδος", "ελληνικά",
               "字幕", "【字幕】", "境界語", "長境界語長", "w" * 100, "w" * 101, "東京タワー", '"zebrafish documentary"',
               '"ebrafish docu"', '"documentary zebrafish"', '"movie 2024"', "some.movie.2024.1080p", "a.qqqzzz"]
    with pg_schema_uri("words") as uri:
        sink = PostgresSink(uri)
        try:
            for t in CORPUS + extra:
                sink.add(t)

            def answers(db) -> list:
                return [(q, S.search(db, q, limit=200)[0], sorted(names(S.search(db, q, limit=200)))) for q in queries]

            def looked_up_in(db, query: str) -> str:
                conn = db.connection
                sql, _args, _checked = conn.dialect.candidates(conn, S.query_words(query), 1000)
                return "words" if "dhtc_words" in sql or "false" in sql else "buckets"

            conn = sink.connection
            through_words = answers(sink)
            found = dict((q, n) for q, n, _ in through_words)  # the queries do find things
            assert found["境界語"] == 1 and found["zebra"] == 2 and found["ebrafi"] == 1
            assert looked_up_in(sink, "ebrafi") == "words" and looked_up_in(sink, "qqqzzz zebra") == "words"
            assert looked_up_in(sink, "境界語") == "words" and looked_up_in(sink, "w" * 100) == "words"
            assert looked_up_in(sink, "com") == "buckets"         # in more than WORD_FORMS words: only tested
            assert looked_up_in(sink, "movie.2024") == "words"    # across punctuation: by its runs, tested whole
            assert looked_up_in(sink, '"zebrafish documentary"') == "words" and found['"zebrafish documentary"'] == 1
            assert looked_up_in(sink, "w" * 101) == "buckets"     # longer than a piece's overlap
            assert conn.value("SELECT count(*) FROM vocab WHERE word = 'zebrafish'") == 1  # the trigger's
            # A large table whose word index has no statistics yet (just built): not used.
            conn.memo["word_stats search_words_recent"] = (time.monotonic(), 1e7, {}, None)
            assert looked_up_in(sink, "ebrafi") == "buckets"
            conn.memo.clear()
            # Schema 11's bucketed word index replaced schema 10's.
            assert conn.value("SELECT to_regclass('search_words') IS NULL AND to_regclass('search_words_recent') IS NOT NULL")
            # The words a writer sends are the server's own cut of the text.
            for (text,) in conn.execute("SELECT text FROM search") + [("",), (".. a1b2,c-d " + long_run + "!",)]:
                assert conn.value("SELECT dhtc_words(?) = string_to_array(?, ' ')", (text, pg_words(text))), text
            with monkeypatch.context() as m:
                m.setattr(PostgresDialect, "_in_words", lambda *_: None)
                assert answers(sink) == through_words
            # Rows without the words (a writer older than schema 10) are cut by the server.
            conn.execute("UPDATE search SET words = NULL")
            assert answers(sink) == through_words
            # A database that held torrents before version 10: the migration fills the vocabulary.
            conn.execute("DROP INDEX vocab_trgm")
            conn.execute("TRUNCATE vocab")
            conn.execute("UPDATE schema_migrations SET version = 9 WHERE component = 'torrents'")
        finally:
            sink.close()
        again = PostgresSink(uri)
        try:
            assert again.schema_version_found == 9
            assert answers(again) == through_words and looked_up_in(again, "ebrafi") == "words"
        finally:
            again.close()


def test_facets_count_each_value_of_the_served_torrents(tmp_path):
    """The facets, from one pass over the table, are each column's own counts: hidden
    torrents and missing values left out, the most common first (years: newest first)."""
    path = str(tmp_path / "f.sqlite")
    sink = SqliteSink(path)
    for i, name in enumerate(["Show.S01E02.1080p.WEB-DL.x264", "Show.S01E03.720p.WEB-DL.x264", "Film.2019.1080p.BluRay",
                              "Film.Two.2019.2160p.BluRay", "Old.Film.1999.720p", "Artist - Album (2019) [FLAC]",
                              "notes.txt bundle", "Hidden.Film.2019.1080p"]):
        sink.add(make(name, [(f"f{i}.mkv", 10 + i)], at=f"2026-11-0{i + 1}T00:00:00Z"))
    sink.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE torrents SET hidden = 1 WHERE name LIKE 'Hidden%'")
        expected = {}
        for column in FACETS:
            order = "value DESC" if column == "year" else "n DESC, value"
            expected[column] = [{"value": v, "count": n} for v, n in conn.execute(
                f"SELECT {column} AS value, count(*) AS n FROM torrents WHERE hidden IS NULL AND {column} IS NOT NULL "
                f"GROUP BY {column} ORDER BY {order}")]
    assert expected["year"][0] == {"value": 2019, "count": 3}  # the hidden one left out
    assert S.facets(path) == expected
    assert S.facets(path, limit=1) == {column: values[:1] for column, values in expected.items()}
