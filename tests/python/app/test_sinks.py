"""The SQLite and JSON-lines sinks, on real SQLite files: schema versioning and forward
migration, idempotent upserts, hybrids under either key, and durability under SIGKILL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from dhtcrawler import Torrent
from dhtcrawler.search import parse_time, torrent
from dhtcrawler.sinks import COMPONENT, MIGRATIONS, SCHEMA_VERSION, JsonlSink, SchemaError, SqliteSink, read_jsonl



@pytest.fixture
def fixture_torrent(delivered_torrents):
    """A fixture torrent as delivered, with the peer and discovery time given."""
    def make(name: str, peer: str = "127.0.0.1:6881", at: str = "2026-12-02T18:00:00Z") -> Torrent:
        t = delivered_torrents[name]
        doc = json.loads(t.json)
        doc.update(peer=peer, discovered_at=at)
        return Torrent.from_json(json.dumps(doc, ensure_ascii=False, separators=(",", ":")), t.info)
    return make


def rows(path, sql, *args):
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, args).fetchall()


def test_fresh_database_gets_every_migration_and_wal(tmp_path):
    db_path = str(tmp_path / "t.sqlite")
    sink = SqliteSink(db_path)
    assert sink.schema_version_found == 0
    sink.close()
    assert rows(db_path, "SELECT component, version FROM schema_migrations") == [(COMPONENT, SCHEMA_VERSION)]
    assert rows(db_path, "PRAGMA journal_mode") == [("wal",)]
    tables = {r[0] for r in rows(db_path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"schema_migrations", "torrents", "files", "hashes"} <= tables
    # Reopening applies nothing and keeps the version.
    again = SqliteSink(db_path)
    assert again.schema_version_found == SCHEMA_VERSION
    again.close()


def test_other_components_rows_and_tables_are_left_alone(tmp_path):
    db_path = str(tmp_path / "shared.sqlite")
    with sqlite3.connect(db_path) as conn:  # as the retry store would leave the file
        conn.execute("CREATE TABLE schema_migrations (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_migrations VALUES ('retry', 7)")
        conn.execute("CREATE TABLE retry_items (info_hash TEXT PRIMARY KEY)")
    SqliteSink(db_path).close()
    assert sorted(rows(db_path, "SELECT component, version FROM schema_migrations")) == [
        ("retry", 7), (COMPONENT, SCHEMA_VERSION)]
    assert rows(db_path, "SELECT count(*) FROM retry_items") == [(0,)]


def test_a_newer_schema_is_refused_and_left_unchanged(tmp_path):
    db_path = str(tmp_path / "newer.sqlite")
    SqliteSink(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE schema_migrations SET version = ? WHERE component = ?", (SCHEMA_VERSION + 1, COMPONENT))
    with pytest.raises(SchemaError):
        SqliteSink(db_path)
    assert rows(db_path, "SELECT version FROM schema_migrations WHERE component = ?", COMPONENT) == [
        (SCHEMA_VERSION + 1,)]


def test_migrations_are_forward_only_and_ordered():
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 1
    for m in MIGRATIONS:
        assert m.description and (m.sqlite or m.postgresql)


def test_store_is_idempotent_and_keeps_first_and_last_seen(tmp_path, fixture_torrent):
    db_path = str(tmp_path / "t.sqlite")
    sink = SqliteSink(db_path)
    first = fixture_torrent("v1_multi", at="2026-12-02T18:00:00Z")
    assert sink.add(first) is True
    assert sink.add(fixture_torrent("v1_multi", peer="127.0.0.2:1", at="2026-12-02T19:00:00Z")) is False
    sink.close()
    (row,) = rows(db_path, "SELECT hex(info_hash), name, num_files, total_size, first_seen, last_seen, peer, "
                           "times_seen, metadata_size FROM torrents")
    assert row == (first.info_hash.upper(), first.name, first.num_files, first.total_size,
                   parse_time("2026-12-02T18:00:00Z"), parse_time("2026-12-02T19:00:00Z"), "127.0.0.2:1", 2,
                   len(first.info))
    assert rows(db_path, "SELECT path, size FROM files ORDER BY idx") == [(f.path, f.size) for f in first.files]
    assert rows(db_path, "SELECT hex(hash) FROM hashes") == [(first.info_hash_v1.upper(),)]
    held = torrent(db_path, first.info_hash)
    assert held["first_seen"] == "2026-12-02T18:00:00Z" and held["last_seen"] == "2026-12-02T19:00:00Z"
    assert held["files"] == [{"path": f.path, "size": f.size} for f in first.files]


def test_a_hybrid_under_its_other_key_is_the_same_torrent(tmp_path, fixture_torrent):
    db_path = str(tmp_path / "t.sqlite")
    sink = SqliteSink(db_path)
    hybrid = fixture_torrent("hybrid_multi")
    assert hybrid.version == "hybrid"
    sink.add(hybrid)
    doc = json.loads(hybrid.json)
    doc["info_hash"] = hybrid.info_hash_v2[:40]  # delivered later under the truncated v2 key
    assert sink.add(Torrent.from_json(json.dumps(doc), hybrid.info)) is False
    v2_only = fixture_torrent("v2_single")
    assert sink.add(v2_only) is True
    sink.close()
    assert rows(db_path, "SELECT count(*) FROM torrents") == [(2,)]
    # Both 20-byte keys of the hybrid (v1, truncated v2) name its one row.
    assert sorted(rows(db_path, "SELECT hex(h.hash) FROM hashes h JOIN torrents t ON t.id = h.torrent "
                                "WHERE t.info_hash = ?", bytes.fromhex(hybrid.info_hash))) == sorted(
        [(hybrid.info_hash_v1.upper(),), (hybrid.info_hash_v2[:40].upper(),)])
    for key in (hybrid.info_hash_v1, hybrid.info_hash_v2, hybrid.info_hash_v2[:40]):
        got = torrent(db_path, key)
        assert got["info_hash"] == hybrid.info_hash and got["version"] == "hybrid"
        assert got["info_hash_v2"] == hybrid.info_hash_v2
    assert hashlib.sha256(v2_only.info).hexdigest() == v2_only.info_hash_v2
    assert torrent(db_path, v2_only.info_hash_v2)["info_hash"] == v2_only.info_hash


def test_sigkill_loses_nothing_committed(tmp_path, fixture_torrent):
    db_path = str(tmp_path / "kill.sqlite")
    # A writer that stores torrents one transaction each, says how many are committed,
    # and is then killed mid-stream.
    script = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from dhtcrawler import Torrent\n"
        "from dhtcrawler.sinks import SqliteSink\n"
        "sink = SqliteSink(sys.argv[1])\n"
        "base = json.loads(sys.argv[3])\n"
        "i = 0\n"
        "while True:\n"
        "    base['info_hash'] = base['info_hash_v1'] = '%040x' % i\n"
        "    sink.add(Torrent.from_json(json.dumps(base)))\n"
        "    print(i, flush=True)\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, db_path, os.path.dirname(__file__),
                             fixture_torrent("v1_single").json],
                            stdout=subprocess.PIPE, text=True)
    committed = -1
    try:
        for line in proc.stdout:
            committed = int(line)
            if committed >= 200:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert committed >= 200
    (count,) = rows(db_path, "SELECT count(*) FROM torrents")[0]
    assert count >= committed + 1  # everything reported committed is there
    assert rows(db_path, "PRAGMA integrity_check") == [("ok",)]


def test_jsonl_sink_writes_one_line_per_torrent_and_appends(tmp_path, fixture_torrent):
    path = str(tmp_path / "out.jsonl")
    for name in ("unicode_multi", "v2_multi"):
        sink = JsonlSink(path)
        sink.add(fixture_torrent(name))
        sink.close()
    lines = read_jsonl(path)
    assert [line["name"] for line in lines] == [fixture_torrent("unicode_multi").name, fixture_torrent("v2_multi").name]
    assert all(line["peer"] == "127.0.0.1:6881" and line["discovered_at"] for line in lines)
