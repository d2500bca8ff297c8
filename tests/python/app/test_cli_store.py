"""Where `dhtcrawler crawl` keeps its state: torrents and retry state together in the --db
SQLite file, or with --store in a fleet's PostgreSQL (several crawlers, one database, each
torrent delivered once across them), and the start-up errors of a bad --store.

Crawls bind 127.0.0.1 and bootstrap only from the loopback test network. The PostgreSQL
tests use the server tests/run.sh starts (DHTC_TEST_PG), each in a schema of its own."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

from dhtcrawler.app.db import Database
from dhtcrawler.sinks import read_jsonl

from conftest import pg_schema_uri, unused_loopback_port, wait_for
from cliutil import Crawl, check_jsonl_matches_db, db_torrents, run_cli

RETRY_DONE = 2
RETRY_LEASED = 1


def start_testnet(tmp_path: Path, binary: str, cidr: str, torrents: int):
    from dhtcrawler.testnet import TestNetwork

    return TestNetwork(nodes=60, seeders=5, torrents=torrents, cidr=cidr, seed=11, duration=150,
                       binary=binary, truth=str(tmp_path / "truth.json"), stderr=subprocess.DEVNULL)


def torrent_identity(net) -> Dict[str, str]:
    """Each announced key -> the torrent it names (a hybrid has two keys)."""
    return {key: t["info_hash"] for t in net.truth() for key in t.get("announce_keys", [t["info_hash"]])}


def delivered(path: Path) -> List[dict]:
    return read_jsonl(str(path)) if path.exists() else []


# ---- --db: torrents and retry state in one SQLite file ------------------------------------

def test_db_holds_torrents_and_retry_state(tmp_path, testnet_binary):
    torrents = 6
    out, db = tmp_path / "t.jsonl", tmp_path / "t.sqlite"
    with start_testnet(tmp_path, testnet_binary, "127.0.93.0/24", torrents) as net:
        crawl = Crawl("--bootstrap", net.bootstrap, "--out", str(out), "--db", str(db), "--quiet")
        try:
            wait_for(lambda: len(delivered(out)) >= torrents, 40, 0.2)
            assert len(delivered(out)) >= torrents // 2, crawl.output()
        finally:
            assert crawl.stop(signal.SIGTERM) == 0, crawl.output()
    lines = delivered(out)
    check_jsonl_matches_db(lines, db_torrents(db))
    with sqlite3.connect(db) as conn:
        components = dict(conn.execute("SELECT component, version FROM schema_migrations"))
        assert set(components) == {"torrents", "retry"}
        states = {h.lower(): s for h, s in conn.execute("SELECT hex(info_hash), state FROM retry_hashes")}
    # every delivered hash is remembered as done, so no later run fetches it again
    for line in lines:
        assert states.get(line["info_hash"]) == RETRY_DONE, line["info_hash"]
    assert RETRY_LEASED not in states.values()  # leases are given back at shutdown


# ---- --store: start-up errors -------------------------------------------------------------

def test_db_and_store_exclude_each_other(tmp_path):
    r = run_cli("crawl", "--db", str(tmp_path / "x.sqlite"), "--store", "postgresql://u@127.0.0.1/x",
                "--no-default-bootstrap", "--duration", "1")
    assert r.returncode == 2 and "--db and --store" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_store_that_is_not_a_postgresql_uri_is_a_usage_error(tmp_path):
    r = run_cli("crawl", "--store", "mysql://u@127.0.0.1/x", "--no-default-bootstrap", "--duration", "1",
                cwd=tmp_path)
    assert r.returncode == 2 and "postgresql://" in r.stderr


def test_malformed_connection_string_names_the_option(tmp_path):
    r = run_cli("crawl", "--store", "postgresql://u@127.0.0.1:notaport/x", "--no-default-bootstrap",
                "--duration", "1", cwd=tmp_path)
    assert r.returncode in (1, 2), r.stderr
    assert "error:" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("wait", ["0", "1.5"])
def test_unreachable_server_is_a_clear_error_at_start(tmp_path, wait):
    url = f"postgresql://nobody:secret@127.0.0.1:{unused_loopback_port(socket.SOCK_STREAM)}/nothing"
    r = run_cli("crawl", *("--port", "0", "--bind", "127.0.0.1", "--no-default-bootstrap"),
                "--store", url, "--store-wait", wait, "--duration", "30", cwd=tmp_path, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert "cannot connect" in lines[-1] and "127.0.0.1" in lines[-1]
    # with a wait, one line says so first; then the same error as without
    assert len(lines) == (1 if wait == "0" else 2), r.stderr
    assert wait == "0" or lines[0].startswith("dhtcrawler: waiting up to 1.5 s for ")
    assert "secret" not in r.stderr  # the password is never printed
    assert not (tmp_path / "dhtcrawler.sqlite").exists()


class _Flaky:
    """A Database.connect that refuses ``refusals`` times, then connects."""

    def __init__(self, refusals: int, error: type) -> None:
        self.refusals, self.error, self.calls = refusals, error, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.refusals:
            raise self.error("cannot connect to 127.0.0.1: Connection refused")
        return type("Conn", (), {"close": lambda self: None})()


def _wait(monkeypatch, refusals: int, error: type, store_wait: float, pauses: List[float]) -> int:
    """Runs the start-up wait on a manual clock, noting each pause; returns the connect calls."""
    import argparse

    from dhtcrawler.app.commands import crawl

    flaky = _Flaky(refusals, error)
    monkeypatch.setattr(Database, "connect", flaky)
    now = [0.0]

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    args = argparse.Namespace(store="postgresql://u@127.0.0.1/x", db=None, store_wait=store_wait)
    crawl._wait_for_store(args, clock=lambda: now[0], sleep=sleep)
    return flaky.calls


def test_crawl_waits_for_a_server_that_starts_after_it(monkeypatch):
    from dhtcrawler.app.db.postgres import PgConnectError

    pauses: List[float] = []
    assert _wait(monkeypatch, 4, PgConnectError, 60, pauses) == 5
    assert pauses == [0.5, 1.0, 2.0, 4.0]  # backing off, then connected


def test_crawl_waits_no_longer_than_store_wait(monkeypatch):
    from dhtcrawler.app.commands.common import StartError
    from dhtcrawler.app.db.postgres import PgConnectError

    pauses: List[float] = []
    with pytest.raises(StartError, match="cannot connect"):
        _wait(monkeypatch, 1000, PgConnectError, 20, pauses)
    assert 15 <= sum(pauses) <= 20 and max(pauses) == 5.0


def test_crawl_does_not_wait_for_a_bad_password_or_uri(monkeypatch):
    from dhtcrawler.app.commands.common import StartError
    from dhtcrawler.app.db.postgres import PgError

    pauses: List[float] = []
    with pytest.raises(StartError):
        _wait(monkeypatch, 1000, PgError, 60, pauses)
    assert pauses == []


# ---- --store: a fleet on one PostgreSQL ---------------------------------------------------

@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A connection string whose search_path is a fresh schema, dropped afterwards."""
    with pg_schema_uri("cli", missing="fail") as uri:
        yield uri


def test_fleet_delivers_each_torrent_once_into_postgresql(tmp_path, testnet_binary, pg_schema):
    torrents = 8
    outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    with start_testnet(tmp_path, testnet_binary, "127.0.94.0/24", torrents) as net:
        identity = torrent_identity(net)
        crawls = [Crawl("--bootstrap", net.bootstrap, "--store", pg_schema, "--out", str(out)) for out in outs]
        try:
            for crawl in crawls:
                crawl.endpoint()

            def found() -> Set[str]:
                return {identity[line["info_hash"]] for out in outs for line in delivered(out)}

            wait_for(lambda: len(found()) >= torrents, 30, 0.2)
            assert len(found()) >= torrents * 3 // 4, [c.output() for c in crawls]
        finally:
            for crawl in crawls:
                assert crawl.stop(signal.SIGTERM) == 0, crawl.output()
    lines = [line for out in outs for line in delivered(out)]
    # exactly once across the fleet: no torrent in both streams, none twice in one
    assert len({identity[line["info_hash"]] for line in lines}) == len(lines)
    conn = Database(pg_schema).connect()
    try:
        rows = {r[0]: r for r in conn.execute(
            "SELECT encode(info_hash, 'hex'), name, total_size, times_seen, peer FROM torrents")}
        assert set(rows) == {line["info_hash"] for line in lines}
        for line in lines:
            _, name, size, times_seen, peer = rows[line["info_hash"]]
            assert (name, int(size)) == (line["name"], line["total_size"])
            # A lease holds one key. A hybrid announced under both can be fetched by two
            # crawlers at once (that both keys are one torrent shows only in its info dict):
            # the database then counts it seen twice, and it was still written out once.
            assert int(times_seen) == 1 or (line["version"] == "hybrid" and int(times_seen) == 2)
            if int(times_seen) == 1:
                assert peer == line["peer"]
        files = int(conn.execute("SELECT count(*) FROM files")[0][0])
        assert files == sum(len(line["files"]) for line in lines)
        states = {h: int(s) for h, s in conn.execute("SELECT encode(info_hash, 'hex'), state FROM retry_hashes")}
        for line in lines:
            assert states.get(line["info_hash"]) == RETRY_DONE
        assert RETRY_LEASED not in states.values()
        components = {c for (c,) in conn.execute("SELECT component FROM schema_migrations")}
        assert components == {"torrents", "retry"}
    finally:
        conn.close()
