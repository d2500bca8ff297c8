"""The database layer on SQLite and PostgreSQL: the one migration format shared by the
retry store's runner (C++, through dhtcrawler.migrate_store) and the application's
(dhtcrawler.app.db.migrations), in either order; a migration step outside a transaction,
interrupted halfway and run again; PostgreSQL's move to SQLite's shape (version 4) keeping
every torrent; and every documented import path."""

from __future__ import annotations

import contextlib
import importlib
from typing import Iterator

import pytest

import dhtcrawler
from dhtcrawler import search as S
from dhtcrawler.app.db import Database
from dhtcrawler.app.db.dialect import Index
from dhtcrawler.app.db.migrations import Migration, migrate
from dhtcrawler.app.db.schema import COMPONENT, MIGRATIONS, SCHEMA_VERSION, prepare
from dhtcrawler.sinks import DatabaseSink, PostgresSink

from conftest import pg_schema_uri
from test_search import CORPUS, names, write_text_keyed_files_and_hashes

BACKENDS = ["sqlite", "postgresql"]


@contextlib.contextmanager
def database(backend: str, tmp_path) -> Iterator[Database]:
    if backend == "sqlite":
        yield Database(str(tmp_path / "shared.sqlite"))
    else:
        with pg_schema_uri("migrations") as uri:
            yield Database(uri)


def versions(db: Database) -> dict:
    conn = db.connect()
    try:
        return {c: int(v) for c, v in conn.execute("SELECT component, version FROM schema_migrations")}
    finally:
        conn.close()


# A component with a step outside a transaction (PostgreSQL builds its indexes online there).
PROBE = (
    Migration("a table", ("CREATE TABLE probe (x INTEGER, y INTEGER)",),
              ("CREATE TABLE probe (x INTEGER, y INTEGER)",)),
    Migration("two unique indexes, built online", (Index("probe_x", "probe", "x", unique=True),
                                                   Index("probe_y", "probe", "y", unique=True)),
              (Index("probe_x", "probe", "x", unique=True), Index("probe_y", "probe", "y", unique=True)),
              transactional=False),
)


def migrate_probe(db: Database) -> int:
    conn = db.connect()
    try:
        return migrate(conn, "probe", PROBE)
    finally:
        conn.close()


def application(db: Database) -> None:
    DatabaseSink(db).close()  # migrates the torrent tables
    migrate_probe(db)


def retry_store(db: Database) -> None:
    dhtcrawler.migrate_store(db.retry_store())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", ["retry", "application"])
def test_both_runners_in_either_order_share_one_table(tmp_path, backend, first):
    runners = [retry_store, application] if first == "retry" else [application, retry_store]
    with database(backend, tmp_path) as db:
        for run in runners + runners:  # the second round finds everything done
            run(db)
        found = versions(db)
        assert set(found) == {"retry", COMPONENT, "probe"}
        assert found[COMPONENT] == SCHEMA_VERSION and found["probe"] == len(PROBE) and found["retry"] >= 3
        conn = db.connect()
        try:
            assert conn.value("SELECT count(*) FROM retry_hashes") == 0
            assert conn.value("SELECT count(*) FROM torrents") == 0
            conn.execute("INSERT INTO probe VALUES (1, 1)")
            with pytest.raises(Exception):  # the unique index is there, and valid
                conn.execute("INSERT INTO probe VALUES (1, 2)")
        finally:
            conn.close()
        assert DatabaseSink(db).schema_version_found == SCHEMA_VERSION
        assert migrate_probe(db) == len(PROBE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_of_writes_is_one_transaction(tmp_path, backend):
    with database(backend, tmp_path) as db:
        sink = DatabaseSink(db)
        try:
            with pytest.raises(RuntimeError):
                with sink.batch():
                    sink.add(CORPUS[0])
                    sink.add(CORPUS[1])
                    raise RuntimeError("the batch fails")
            assert sink.count() == 0  # none stored
            with sink.batch():
                for t in CORPUS:
                    sink.add(t)
                sink.add(CORPUS[0])  # seen again, in the same transaction
            assert sink.count() == len(CORPUS)
            assert S.torrent(sink, CORPUS[0].info_hash)["times_seen"] == 2
        finally:
            sink.close()


def index_state(db: Database, name: str) -> str:
    """"valid", "invalid" (an interrupted online build) or "missing"."""
    conn = db.connect()
    try:
        if db.is_file:
            return "valid" if conn.value("SELECT count(*) FROM sqlite_master WHERE name = ?", (name,)) else "missing"
        row = conn.one("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                       "WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace", (name,))
        return "missing" if row is None else ("valid" if row[0] else "invalid")
    finally:
        conn.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_step_outside_a_transaction_interrupted_halfway_runs_again(tmp_path, backend):
    with database(backend, tmp_path) as db:
        conn = db.connect()
        migrate(conn, "probe", PROBE[:1])
        conn.executemany("INSERT INTO probe VALUES (?, ?)", [(1, 7), (2, 7)])  # y is not unique
        with pytest.raises(Exception):
            migrate(conn, "probe", PROBE)
        # Not recorded. PostgreSQL ran the first step (x's index is there) and stopped in the
        # middle of the second, leaving its index invalid; SQLite rolled the migration back.
        assert versions(db)["probe"] == 1
        assert index_state(db, "probe_x") == ("missing" if db.is_file else "valid")
        assert index_state(db, "probe_y") == ("missing" if db.is_file else "invalid")
        conn.execute("UPDATE probe SET y = 8 WHERE x = 2")
        assert migrate(conn, "probe", PROBE) == 1  # runs again whole, and completes
        conn.close()
        assert versions(db)["probe"] == 2
        assert index_state(db, "probe_x") == index_state(db, "probe_y") == "valid"


def test_a_newer_version_is_refused_on_postgresql():
    with pg_schema_uri("newer") as uri:
        db = Database(uri)
        DatabaseSink(db).close()
        conn = db.connect()
        conn.execute("UPDATE schema_migrations SET version = ? WHERE component = ?", (SCHEMA_VERSION + 1, COMPONENT))
        conn.close()
        with pytest.raises(dhtcrawler.sinks.SchemaError):
            DatabaseSink(db)
        assert versions(db)[COMPONENT] == SCHEMA_VERSION + 1


def test_postgresql_version_3_moves_to_sqlites_shape_keeping_every_torrent():
    """A fleet database written before version 4 (hex text hashes, files and hashes keyed by
    the info hash) comes through with every torrent, file, key and swarm estimate."""
    with pg_schema_uri("shape") as uri:
        conn = Database(uri).connect()
        migrate(conn, COMPONENT, MIGRATIONS[:3], prepare=prepare)
        hybrid, v2 = CORPUS[1], CORPUS[2]
        for t, times in ((hybrid, 3), (v2, 1)):
            conn.execute("INSERT INTO torrents(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
                         "num_files, piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen, "
                         "seeders, leechers, scraped_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, false, 100, "
                         "'2026-11-15T00:00:00Z', '2026-11-16T10:00:00Z', ?, ?, 4, 1, '2026-11-16T11:00:00Z')",
                         (t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, t.num_files,
                          t.piece_length, t.peer, times))
            write_text_keyed_files_and_hashes(conn, t)
        conn.close()
        sink = PostgresSink(uri)
        assert sink.schema_version_found == 3
        assert sink.add(hybrid) is False  # found under its keys
        sink.close()
        for key in (hybrid.info_hash_v1, hybrid.info_hash_v2, hybrid.info_hash_v2[:40]):
            got = S.torrent(uri, key)
            assert got["info_hash"] == hybrid.info_hash and got["times_seen"] == 4
            assert got["first_seen"] == "2026-11-15T00:00:00Z"
            assert (got["seeders"], got["leechers"], got["scraped_at"]) == (4, 1, "2026-11-16T11:00:00Z")
            assert got["files"] == [{"path": f.path, "size": f.size} for f in hybrid.files]
        assert S.torrent(uri, v2.info_hash_v2)["name"] == v2.name
        assert names(S.search(uri, "часть")) == [v2.name]
        assert S.stats(uri)["torrents"] == 2


# Every import path README.md and docs/*.md name, and the names they use from it.
DOCUMENTED = {
    "dhtcrawler": ["Crawler", "Torrent", "Answer", "OptionsError", "CloseTimeoutError", "default_options",
                   "migrate_store"],
    "dhtcrawler.aio": ["AsyncCrawler"],
    "dhtcrawler.search": ["search", "torrent", "stats"],
    "dhtcrawler.sinks": ["SqliteSink", "PostgresSink", "JsonlSink"],
    "dhtcrawler.web.queries": ["search", "torrent", "stats"],
    "dhtcrawler.web.categories": ["category"],
    "dhtcrawler.app.search": ["search", "torrent", "stats"],
    "dhtcrawler.app.db": ["Database", "Connection"],
    "dhtcrawler.app.cli": ["main"],
}


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_documented_import_path_works(module):
    imported = importlib.import_module(module)
    for name in DOCUMENTED[module]:
        assert callable(getattr(imported, name)), f"{module}.{name}"
    if module == "dhtcrawler.search":  # the re-export is the application's own function
        assert imported.search is importlib.import_module("dhtcrawler.app.search").search


def test_postgresql_copy_writes_every_kind_of_value_alike_both_ways():
    """COPY's rows go through psycopg's write_row() under its C implementation (the fast
    extra) and through the text format written here otherwise: both store the same values,
    escapes, bytes, NULLs and times included."""
    from datetime import datetime, timezone

    from dhtcrawler.app.db.postgres import COPY_SLICE, connect

    rows = [(i, f"tab\there {i}", b"\x00\\x\xff", True, datetime(2026, 12, 6, 1, 2, 3, tzinfo=timezone.utc))
            for i in range(COPY_SLICE + 3)]  # more than one slice
    rows += [(-1, "new\nline \\N back\\slash\r ünï 東京", None, False, None), (-2, None, b"", None, None)]
    with pg_schema_uri("copy") as uri:
        driver = connect(uri)
        try:
            driver.execute("CREATE TABLE c (n bigint, s text, b bytea, f boolean, t timestamptz)")
            for in_c in (True, False):
                driver._rows_in_c = in_c
                driver.execute("TRUNCATE c")
                driver.copy("c", ("n", "s", "b", "f", "t"), iter(rows))
                stored = [(n, s, None if b is None else bytes(b), f, t)
                          for n, s, b, f, t in driver.execute("SELECT n, s, b, f, t FROM c ORDER BY n")]
                assert stored == sorted(rows, key=lambda r: r[0]), in_c
        finally:
            driver.close()
