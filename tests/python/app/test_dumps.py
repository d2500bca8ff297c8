"""`dhtcrawler export` and `dhtcrawler import` on real SQLite files: a dump round-trips to
the same rows, importing is idempotent and merges sightings, a magnetico database imports
with its unknown fields null, and imported hashes are marked delivered in the retry store."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import jsonschema
import pytest

from dhtcrawler import search as S
from dhtcrawler.app.db import Database
from dhtcrawler.app.dumps import read_dump
from dhtcrawler.sinks import SqliteSink

from conftest import ROOT, pg_schema_uri, torrent_schema
from cliutil import run_cli
from test_search import CORPUS, make

RETRY_DONE = 2


def everything(db):
    """Every torrent by query, without the database's own row order."""
    _, rows = S.search(db, "", limit=1000)
    return sorted((S.torrent(db, r["info_hash"]) for r in rows), key=lambda t: t["info_hash"])


@pytest.fixture
def crawled(tmp_path):
    path = str(tmp_path / "crawled.sqlite")
    sink = SqliteSink(path)
    for t in CORPUS:
        sink.add(t)
    sink.add(CORPUS[0])  # seen twice
    sink.set_swarm(CORPUS[1].info_hash, 5, 2, 1767312000)      # a swarm estimate
    sink.set_swarm(CORPUS[2].info_hash, None, None, 1767312060)  # a scrape nobody could answer
    sink.close()
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_export_then_import_round_trips(tmp_path, crawled, suffix):
    if suffix.endswith(".zst"):
        pytest.importorskip("zstandard")
    dump = str(tmp_path / ("dump" + suffix))
    out = run_cli("export", "--db", crawled, "-o", dump)
    assert out.returncode == 0, out.stderr
    if suffix.endswith(".zst"):
        assert open(dump, "rb").read(4) == b"\x28\xb5\x2f\xfd"
    lines = list(read_dump(dump))
    assert len(lines) == len(CORPUS)
    fresh = str(tmp_path / "fresh.sqlite")
    out = run_cli("import", "--db", fresh, dump)
    assert out.returncode == 0, out.stderr
    assert f"imported {len(CORPUS)} torrents" in out.stderr
    assert everything(fresh) == everything(crawled)
    assert S.torrent(fresh, CORPUS[0].info_hash)["times_seen"] == 2
    t = S.torrent(fresh, CORPUS[1].info_hash)
    assert (t["seeders"], t["leechers"], t["scraped_at"]) == (5, 2, "2026-01-02T00:00:00Z")
    # again: nothing changes
    assert run_cli("import", "--db", fresh, dump).returncode == 0
    assert everything(fresh) == everything(crawled)
    assert S.stats(fresh)["torrents"] == len(CORPUS)
    # the imported keys are delivered: a crawl on this database does not fetch them
    with sqlite3.connect(fresh) as conn:
        states = dict(conn.execute("SELECT hex(info_hash), state FROM retry_hashes"))
    for t in CORPUS:
        for h in (t.info_hash_v1, t.info_hash_v2):
            if h:
                assert states[h[:40].upper()] == RETRY_DONE


def test_import_and_export_with_store_on_postgresql(tmp_path, crawled):
    """A dump imported into a fleet's PostgreSQL (--store) holds what the SQLite file held,
    twice changes nothing, marks the keys delivered there, and exports the same dump."""
    dump = str(tmp_path / "dump.jsonl")
    assert run_cli("export", "--db", crawled, "-o", dump).returncode == 0
    with pg_schema_uri("dumps") as uri:
        for _ in range(2):  # the second time changes nothing
            out = run_cli("import", "--store", uri, dump)
            assert out.returncode == 0, out.stderr
            assert f"imported {len(CORPUS)} torrents" in out.stderr and "password" not in out.stderr
            assert everything(uri) == everything(crawled)
        conn = Database(uri).connect()
        try:
            states = dict(conn.execute("SELECT encode(info_hash, 'hex'), state FROM retry_hashes"))
            # The import merged the search index's pending rows (none left for a search to
            # read one by one); a crawl's connection keeps that list short.
            gin = [i for (i,) in conn.execute(
                "SELECT indexrelid::regclass::text FROM pg_index JOIN pg_class c ON c.oid = indexrelid "
                "JOIN pg_am a ON a.oid = c.relam WHERE indrelid = 'search'::regclass AND a.amname = 'gin'")]
            assert gin and all(conn.value("SELECT gin_clean_pending_list(?::regclass)", (i,)) == 0 for i in gin)
            assert conn.value("SHOW gin_pending_list_limit") == "256kB"
        finally:
            conn.close()
        for t in CORPUS:
            for h in (t.info_hash_v1, t.info_hash_v2):
                if h:
                    assert states[h[:40]] == RETRY_DONE
        again = str(tmp_path / "again.jsonl")
        out = run_cli("export", "--store", uri, "-o", again)
        assert out.returncode == 0, out.stderr
        assert list(read_dump(again)) == list(read_dump(dump))
        both = run_cli("export", "--db", crawled, "--store", uri)
        assert both.returncode == 2 and "exclude each other" in both.stderr
    assert run_cli("import", "--store", "mysql://x", dump).returncode == 2


def test_export_lines_are_the_torrent_json_form(tmp_path, crawled):
    out = run_cli("export", "--db", crawled, "--since", "2026-11-20T00:00:00Z")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["name"] for d in docs] == [t.name for t in CORPUS[2:]]  # by last_seen
    schema = torrent_schema()
    for d, t in zip(docs, CORPUS[2:]):
        jsonschema.validate(d, schema)
        assert d["files"] == [{"path": f.path, "size": f.size} for f in t.files]
        assert d["discovered_at"] == d["first_seen"] and d["times_seen"] == 1


def test_import_merges_sightings_and_a_hybrid_stays_one_row(tmp_path):
    early, late = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    hybrid = CORPUS[1]
    for path, at, key in ((early, "2026-10-01T00:00:00Z", hybrid.info_hash_v1),
                          (late, "2026-12-24T00:00:00Z", hybrid.info_hash_v2[:40])):
        doc = json.loads(make(hybrid.name, [(f.path, f.size) for f in hybrid.files], version="hybrid", at=at).json)
        doc["info_hash"] = key  # the other crawl found it under its other key
        doc["times_seen"] = 3
        with open(path, "w") as f:
            f.write(json.dumps(doc) + "\n")
    db = str(tmp_path / "m.sqlite")
    assert run_cli("import", "--db", db, "--refetch", late, early).returncode == 0
    (t,) = everything(db)
    assert t["first_seen"] == "2026-10-01T00:00:00Z" and t["last_seen"] == "2026-12-24T00:00:00Z"
    assert t["times_seen"] == 3 and t["info_hash"] == hybrid.info_hash_v2[:40]
    with sqlite3.connect(db) as conn:  # --refetch: nothing marked delivered
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "retry_hashes" not in tables or conn.execute("SELECT count(*) FROM retry_hashes").fetchone() == (0,)


def test_a_magnetico_database_imports_with_unknown_fields_null(tmp_path):
    mag = str(tmp_path / "magnetico.sqlite3")
    with sqlite3.connect(mag) as conn:
        conn.executescript("""
            CREATE TABLE torrents (id INTEGER PRIMARY KEY, info_hash BLOB NOT NULL UNIQUE, name TEXT NOT NULL,
                                   total_size INTEGER NOT NULL CHECK(total_size > 0),
                                   discovered_on INTEGER NOT NULL CHECK(discovered_on > 0));
            CREATE TABLE files (id INTEGER PRIMARY KEY, torrent_id INTEGER REFERENCES torrents ON DELETE CASCADE,
                                size INTEGER NOT NULL, path TEXT NOT NULL);
        """)
        conn.execute("INSERT INTO torrents VALUES (1, ?, 'Голубой щенок 1976', 1500, 1764547200)", (b"\x11" * 20,))
        conn.executemany("INSERT INTO files(torrent_id, size, path) VALUES (1, ?, ?)",
                         [(1000, "video/щенок.avi"), (500, "info.nfo")])
        conn.execute("INSERT INTO torrents VALUES (2, ?, '青い子犬', 42, 1764633600)", (b"\x22" * 20,))
        conn.execute("INSERT INTO files(torrent_id, size, path) VALUES (2, 42, '青い子犬.mkv')")
    db = str(tmp_path / "moved.sqlite")
    out = run_cli("import", "--db", db, mag)
    assert out.returncode == 0, out.stderr
    t = S.torrent(db, "11" * 20)
    assert t["name"] == "Голубой щенок 1976" and t["total_size"] == 1500 and t["num_files"] == 2
    assert t["first_seen"] == "2025-12-01T00:00:00Z"
    assert (t["version"], t["piece_length"], t["private"], t["info_hash_v1"], t["info_hash_v2"]) == (
        None, None, None, None, None)
    assert t["files"] == [{"path": "video/щенок.avi", "size": 1000}, {"path": "info.nfo", "size": 500}]
    assert [r["name"] for r in S.search(db, "щенок")[1]] == ["Голубой щенок 1976"]
    assert [r["name"] for r in S.search(db, "子犬")[1]] == ["青い子犬"]
    # The web API's answers hold the unknowns as null, and still match its schema.
    from dhtcrawler.app.web import queries  # needs no serve extra

    api = json.loads((ROOT / "docs" / "api.schema.json").read_text())
    doc = queries.torrent(db, "11" * 20)
    assert doc["magnet"].startswith("magnet:?xt=urn:btih:" + "11" * 20) and doc["files_truncated"] is False
    jsonschema.validate(doc, {"$ref": "#/$defs/torrent", **api})
    for row in queries.search(db, "", 10, 0, "name")[1]:
        jsonschema.validate(row, {"$ref": "#/$defs/result", **api})
    jsonschema.validate(queries.stats(db), {"$ref": "#/$defs/stats", **api})
    out = run_cli("export", "--db", db)
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["version"] for d in docs] == [None, None] and docs[0]["piece_length"] is None
    for d in docs:
        jsonschema.validate(d, torrent_schema())
    with sqlite3.connect(db) as conn:
        assert dict(conn.execute("SELECT hex(info_hash), state FROM retry_hashes")) == {
            "11" * 20: RETRY_DONE, "22" * 20: RETRY_DONE}


def test_bad_inputs_exit_2(tmp_path, crawled):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert run_cli("import", "--db", str(tmp_path / "x.sqlite"), str(bad)).returncode == 2
    assert run_cli("import", "--db", str(tmp_path / "x.sqlite"), str(tmp_path / "missing")).returncode == 2
    assert run_cli("import", "--db", str(tmp_path / "x.sqlite"), crawled).returncode == 2  # ours: export it
    assert run_cli("export", "--db", str(tmp_path / "missing.sqlite")).returncode == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_batched_import_merges_across_batches_and_keeps_lines_before_a_bad_one(tmp_path, crawled, monkeypatch,
                                                                                backend):
    """Import merges IMPORT_BATCH records per transaction: a torrent repeated in one batch or
    across batches is one row, a second import changes nothing, and the lines before a bad
    one are stored (the error comes after them)."""
    from dhtcrawler.app import dumps

    monkeypatch.setattr(dumps, "IMPORT_BATCH", 2)
    dump = tmp_path / "dump.jsonl"
    assert run_cli("export", "--db", crawled, "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines(keepends=True)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(lines + lines[:1] + lines))  # the first torrent in three batches
    with pg_schema_uri("batches") if backend == "postgresql" else _file(tmp_path / "fresh.sqlite") as target:
        seen = []
        counts = dumps.import_files(target, [str(twice)], progress=seen.append)
        assert counts == {"read": 2 * len(lines) + 1, "new": len(lines), "merged": len(lines) + 1, "dropped": 0,
                          "parsed": 0}  # the exported lines carry their parsed fields
        assert seen == list(range(2, counts["read"], 2)) + [counts["read"]]
        assert everything(target) == everything(crawled)
        assert dumps.import_files(target, [str(dump)])["new"] == 0
        assert everything(target) == everything(crawled)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:3]) + "{not json\n")
    fresh = str(tmp_path / "partial.sqlite")
    with pytest.raises(dumps.DumpError):
        dumps.import_files(fresh, [str(bad)])
    assert S.stats(fresh)["torrents"] == 3


def _segments(path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT count(DISTINCT segid) FROM search_idx").fetchone()[0]


def test_an_import_leaves_sqlites_search_index_in_one_segment(tmp_path, crawled, monkeypatch):
    """Each transaction of an import writes a segment of the search index, which every
    lookup reads apart: an import that wrote a tenth of the index or more merges them into
    one, step by step, and every torrent is still found. A smaller one leaves them."""
    from dhtcrawler.app import dumps
    from dhtcrawler.app.db.dialect import SqliteDialect

    monkeypatch.setattr(dumps, "IMPORT_BATCH", 1)
    monkeypatch.setattr(SqliteDialect, "bulk_transaction_secs", 0.0)  # a transaction a torrent
    monkeypatch.setattr(SqliteDialect, "MERGE_STEP_PAGES", 1)  # a merge of several steps
    dump = str(tmp_path / "dump.jsonl")
    assert run_cli("export", "--db", crawled, "-o", dump).returncode == 0
    unsettled = str(tmp_path / "unsettled.sqlite")
    with monkeypatch.context() as m:
        m.setattr(SqliteDialect, "settle_search", lambda self, conn, share: None)
        dumps.import_files(unsettled, [dump])
    assert _segments(unsettled) > 1  # what the merge is for
    conn = Database(unsettled).connect()
    try:
        SqliteDialect().settle_search(conn, 0.05)  # a twentieth of the index: left to automerge
    finally:
        conn.close()
    assert _segments(unsettled) > 1
    settled = str(tmp_path / "settled.sqlite")
    assert dumps.import_files(settled, [dump])["new"] == len(CORPUS)
    assert _segments(settled) == 1
    assert everything(settled) == everything(crawled)
    for t in CORPUS:
        assert t.name in [r["name"] for r in S.search(settled, t.name)[1]]


def test_batches_left_early_close_without_handing_out_another():
    """An import that stops while writing a batch (an error, Ctrl-C) closes its batches:
    the generator ends there, where handing out the partial batch was a RuntimeError
    ("generator ignored GeneratorExit")."""
    from dhtcrawler.app.dumps import _chunks

    batches = _chunks(iter([{"n": n} for n in range(5)]), 2)
    assert next(batches) == [{"n": 0}, {"n": 1}]
    batches.close()
    with pytest.raises(StopIteration):
        next(batches)


@contextlib.contextmanager
def _file(path):
    yield str(path)


def _tables(target):
    """Every row of the torrent and retry tables (SQLite: the search index's own pages too),
    sorted, for comparing a database before and after."""
    conn = Database(target).connect(read_only=True)
    try:
        search = ("search_data", "search_idx", "search_docsize") if conn.dialect.name == "sqlite" else ("search",)
        tables = ("torrents", "files", "hashes", "retry_hashes", *search)
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables
                if t != "search_docsize" or conn.value("SELECT count(*) FROM sqlite_master WHERE name = ?", (t,))}
    finally:
        conn.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_dump_imported_twice_changes_nothing(tmp_path, crawled, backend):
    """A second import of the same dump (a torrent repeated, one under its other key, with
    swarm estimates and parsed fields) leaves every row of every table as it was: the
    torrents, their files, hashes and search text, and the keys marked delivered."""
    from dhtcrawler.app import dumps

    dump = tmp_path / "dump.jsonl"
    assert run_cli("export", "--db", crawled, "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines(keepends=True)
    other = json.loads(lines[1])
    assert other["info_hash_v2"]  # the hybrid, seen under its v2 key too
    other.update(info_hash=other["info_hash_v2"][:40], last_seen="2027-01-01T00:00:00Z", peer="192.0.2.7:6881")
    (tmp_path / "twice.jsonl").write_text("".join(lines + lines[:1] + [json.dumps(other) + "\n"]))
    with pg_schema_uri("twice") if backend == "postgresql" else _file(tmp_path / "twice.sqlite") as target:
        first = dumps.import_files(target, [str(tmp_path / "twice.jsonl")])
        assert (first["new"], first["merged"]) == (len(lines), 2)
        before = _tables(target)
        assert len(before["torrents"]) == len(lines) and before["retry_hashes"]
        again = dumps.import_files(target, [str(tmp_path / "twice.jsonl")])
        assert (again["new"], again["merged"]) == (0, len(lines) + 2)
        assert _tables(target) == before


def test_progress_shows_on_a_terminal_only(monkeypatch):
    """Import, export and prune show their counts on a terminal: tqdm's bar when installed,
    else a line the standard library rewrites; nothing when standard error is not a terminal."""
    import io
    import sys

    from dhtcrawler.app.progress import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed
    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        with progress("importing", 10) as update:
            update(5)
        assert ("importing: 5 of 10 torrents" in stream.getvalue()) is shown


def test_postgresql_import_writes_search_rows_beside_and_never_a_torrent_without_them(tmp_path, crawled,
                                                                                      monkeypatch):
    """On PostgreSQL an import writes its batches' search rows on a second connection
    (sinks.IndexAside), committed before their batch. A batch that fails after they were
    written deletes them again; rows a killed import left (a torrent that never came) are
    deleted by the next import, unless another import is writing beside meanwhile; and
    every stored torrent is found by its words."""
    from dhtcrawler.app import dumps
    from dhtcrawler.app.db.dialect import PG_INDEX_ASIDE_LOCK

    monkeypatch.setattr(dumps, "IMPORT_BATCH", 2)
    dump = tmp_path / "dump.jsonl"
    assert run_cli("export", "--db", crawled, "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines(keepends=True)
    assert len(lines) >= 4

    def orphans_and_unindexed(target):
        conn = Database(target).connect(read_only=True)
        try:
            return (conn.value("SELECT count(*) FROM search s WHERE NOT EXISTS (SELECT 1 FROM torrents t WHERE t.id = s.id)"),
                    conn.value("SELECT count(*) FROM torrents t WHERE NOT EXISTS (SELECT 1 FROM search s WHERE s.id = t.id)"))
        finally:
            conn.close()

    with pg_schema_uri("aside") as target:
        # The second batch fails after its search rows went beside (marking its keys).
        real, calls = dumps.mark_delivered, []

        def failing(conn, keys, now):
            calls.append(keys)
            if len(calls) == 2:
                raise RuntimeError("the disk is full")
            real(conn, keys, now)

        monkeypatch.setattr(dumps, "mark_delivered", failing)
        with pytest.raises(RuntimeError):
            dumps.import_files(target, [str(dump)])
        assert S.stats(target)["torrents"] == 2  # the first batch only
        assert orphans_and_unindexed(target) == (0, 0)
        monkeypatch.setattr(dumps, "mark_delivered", real)

        # A killed import's rows: a search row whose torrent never came.
        admin = Database(target).connect()
        try:
            admin.execute("INSERT INTO search(id, text) VALUES (999999, 'killed midway')")
            other = Database(target).connect()  # another import writing beside: its rows are left alone
            other.execute(f"SELECT pg_advisory_lock_shared({PG_INDEX_ASIDE_LOCK})")
            dumps.import_files(target, [str(dump)])
            assert orphans_and_unindexed(target) == (1, 0)
            other.close()
            dumps.import_files(target, [str(dump)])
            assert orphans_and_unindexed(target) == (0, 0)
        finally:
            admin.close()
        assert everything(target) == everything(crawled)
        for t in CORPUS:
            assert t.name in [r["name"] for r in S.search(target, t.name.split()[0], limit=100)[1]]
    # A bad line: the batches before it are stored (the next batch is read while one is
    # written beside, and its error waits for that one), nothing else, no orphan.
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:3]) + "{not json\n")
    with pg_schema_uri("asidebad") as target:
        with pytest.raises(dumps.DumpError):
            dumps.import_files(target, [str(bad)])
        assert S.stats(target)["torrents"] == 3
        assert orphans_and_unindexed(target) == (0, 0)
