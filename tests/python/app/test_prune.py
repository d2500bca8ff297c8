"""`dhtcrawler prune` on a real SQLite file and a real PostgreSQL server: --dry-run changes
nothing, a real run removes exactly the torrents the dry run listed (with their files,
hashes and search-index entries), for each rule: --older-than, --max-size, --keep-top."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from dhtcrawler import search as S
from dhtcrawler.sinks import PostgresSink, SqliteSink

from conftest import pg_schema_uri
from cliutil import run_cli
from test_search import make

DAY = 86400


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def corpus(n: int = 60):
    """n torrents, one a day back from now (torrent i last seen i days ago + an hour), each
    with a few files; every fifth a hybrid (two keys, one row)."""
    now = time.time()
    out = []
    for i in range(n):
        files = [(f"album {i}/track {k:02d} of torrent number {i}.flac", 1000 + k) for k in range(1 + i % 7)]
        files += [(f"album {i}/notes/{'commentary ' * (i % 13)}{k}.txt", 10) for k in range(i % 4)]
        out.append(make(f"prune corpus torrent {i:03d}", files, version="hybrid" if i % 5 == 0 else "v1",
                        at=iso(now - i * DAY - 3600)))
    return out


def listed(out) -> list:
    """The info hashes of prune's listing, in its order."""
    assert out.returncode == 0, out.stderr
    return [line.split("\t")[0] for line in out.stdout.splitlines()]


def held(db) -> set:
    return {r["info_hash"] for r in S.search(db, "", limit=1000)[1]}


def dump(path: str) -> list:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def index_hits(path: str, word: str) -> set:
    """The rowids the full-text index returns for a word (its trigrams), whether or not a
    torrent still has that id: an entry left behind by a deletion would show here."""
    conn = sqlite3.connect(path)
    try:
        match = " AND ".join(f'"{word[i:i + 3]}"' for i in range(len(word) - 2))
        return {r for (r,) in conn.execute("SELECT rowid FROM search WHERE search MATCH ?", (match,))}
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "prune.sqlite")
    sink = SqliteSink(path)
    for t in corpus():
        sink.add(t)
    sink.close()
    return path


def dry_run_then_prune(db: str, *rule: str, store: bool = False) -> list:
    """The dry run's list, checked to change nothing, then the real run's, checked to be the
    same list and to leave exactly the rest."""
    where = ("--store", db) if store else ("--db", db)
    before_rows = held(db)
    before = None if store else dump(db)
    planned = listed(run_cli("prune", *where, *rule, "--dry-run"))
    assert held(db) == before_rows
    if not store:
        assert dump(db) == before, "--dry-run changed the database"
    removed = listed(run_cli("prune", *where, *rule))
    assert removed == planned
    assert held(db) == before_rows - set(planned)
    return planned


def test_older_than_removes_what_the_dry_run_listed(db):
    all_before = held(db)
    gone = dry_run_then_prune(db, "--older-than", "30d")
    # torrents 30..59 were last seen 30 days and an hour ago or longer: oldest first
    names = [f"prune corpus torrent {i:03d}" for i in range(59, 29, -1)]
    by_hash = {t.info_hash: t.name for t in corpus()}
    assert [by_hash[h] for h in gone] == names
    assert len(held(db)) == len(all_before) - 30
    # the search index forgot them: no entry left behind for a removed name or path
    conn = sqlite3.connect(db)
    ids = {r for (r,) in conn.execute("SELECT id FROM torrents")}
    assert conn.execute("SELECT count(*) FROM hashes WHERE torrent NOT IN (SELECT id FROM torrents)").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM files WHERE torrent NOT IN (SELECT id FROM torrents)").fetchone() == (0,)
    conn.execute("INSERT INTO search(search, rank) VALUES ('integrity-check', 0)")
    # and so did the word index (every torrent of the corpus holds "corpus")
    conn.execute("INSERT INTO words(words, rank) VALUES ('integrity-check', 0)")
    assert {r for (r,) in conn.execute("SELECT rowid FROM words WHERE words MATCH 'corpus'")} == ids
    conn.close()
    for word in ("prune corpus", "torrent 045", "track 03 of torrent number 31", "flac"):
        assert index_hits(db, word) <= ids, word
    assert S.search(db, "torrent 045")[0] == 0 and S.search(db, '"torrent 012"')[0] == 1
    # nothing older than 30 days is left: a second run lists nothing
    assert listed(run_cli("prune", "--db", db, "--older-than", "30d", "--dry-run")) == []
    # a removed torrent stored again is one row, found once
    sink = SqliteSink(db)
    sink.add(corpus()[45])
    sink.close()
    assert S.search(db, '"torrent 045"')[0] == 1


def test_max_size_removes_the_least_recently_seen_until_under(tmp_path):
    def used(path: str) -> int:
        conn = sqlite3.connect(path)
        try:
            pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                                 for p in ("page_count", "freelist_count", "page_size"))
            return (pages - free) * size
        finally:
            conn.close()

    db = str(tmp_path / "big.sqlite")
    sink = SqliteSink(db)
    ts = corpus(600)
    for t in ts:
        sink.add(t)
    sink.close()
    size_before = used(db)
    limit = size_before // 2
    gone = dry_run_then_prune(db, "--max-size", str(limit))
    assert 200 < len(gone) < 400
    by_hash = {t.info_hash: t.name for t in ts}
    oldest_first = [t.name for t in reversed(ts)]
    assert [by_hash[h] for h in gone] == oldest_first[:len(gone)]
    assert os.path.getsize(db) < size_before  # VACUUM gave the pages back
    assert used(db) <= limit * 1.25, (used(db), limit)  # the estimate is close
    # a limit the database already meets removes nothing
    assert listed(run_cli("prune", "--db", db, "--max-size", "1G")) == []


def test_keep_top_keeps_the_largest_swarms_then_the_most_seen(db):
    ts = corpus()
    conn = sqlite3.connect(db)
    for i, (seeders, leechers) in {7: (50, 5), 3: (10, 1), 9: (0, 0)}.items():
        conn.execute("UPDATE torrents SET seeders = ?, leechers = ?, scraped_at = ? WHERE info_hash = ?",
                     (seeders, leechers, int(time.time()), bytes.fromhex(ts[i].info_hash)))
    conn.execute("UPDATE torrents SET times_seen = 9 WHERE info_hash = ?", (bytes.fromhex(ts[40].info_hash),))
    conn.commit()
    conn.close()
    dry_run_then_prune(db, "--keep-top", "5")
    # measured swarms first (7, 3, then 9's empty one), then the most seen (40), then the latest (0)
    assert held(db) == {ts[i].info_hash for i in (7, 3, 9, 40, 0)}
    assert listed(run_cli("prune", "--db", db, "--keep-top", "5")) == []


def test_prune_flags():
    assert run_cli("prune", "--db", "x.sqlite").returncode == 2  # no rule
    assert run_cli("prune", "--older-than", "1d", "--keep-top", "3").returncode == 2  # two rules
    assert run_cli("prune", "--older-than", "soon", "--db", "x").returncode == 2
    out = run_cli("prune", "--db", "/nonexistent/x.sqlite", "--older-than", "1d")
    assert out.returncode == 2 and "no such file" in out.stderr


def test_postgresql_prune_removes_what_the_dry_run_listed():
    with pg_schema_uri("prune") as uri:
        sink = PostgresSink(uri)
        ts = corpus(30)
        for t in ts:
            sink.add(t)
        sink.connection.execute("UPDATE torrents SET seeders = 4, leechers = 1, scraped_at = now() "
                                "WHERE info_hash = ?", (bytes.fromhex(ts[20].info_hash),))
        sink.close()
        gone = dry_run_then_prune(uri, "--older-than", "25d", store=True)
        assert len(gone) == 5
        kept = dry_run_then_prune(uri, "--keep-top", "3", store=True)
        assert len(kept) == 22 and ts[20].info_hash in held(uri)
        sized = dry_run_then_prune(uri, "--max-size", "1", store=True)  # everything goes
        assert len(sized) == 3 and held(uri) == set()
