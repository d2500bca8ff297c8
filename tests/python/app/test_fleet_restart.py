"""A fleet's database survives its server restarting: a private PostgreSQL cluster (initdb
and pg_ctl from Debian's postgresql package, in a temporary directory; not the shared test
server) is stopped and started again three times under two fleet members storing torrents
through the CLI's acceptance policy, torrents arriving while it is away. Every torrent is stored once, both members store again after each
restart (their counters, with bounded waits), torrents that could not be stored were
answered RETRY and stored later. A private cluster also makes a SQL_ASCII database, as initdb
does without a locale."""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from dhtcrawler.app.db import Database

from conftest import unused_loopback_port, wait_for

MEMBER = str(Path(__file__).with_name("fleet_member.py"))


class Cluster:
    """A PostgreSQL cluster of this test's own, run as the current user (or as ``postgres``
    when the current user is root, which the server refuses)."""

    def __init__(self, base: Path, encoding: str = "UTF8") -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not bins:
            pytest.skip("needs PostgreSQL's server programs (/usr/lib/postgresql/*/bin: the postgresql package)")
        self.bin = os.path.dirname(bins[-1])
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                pytest.skip("running as root needs the postgres user to run the server")
        self.data = base / "data"
        self.port = unused_loopback_port(kind=socket.SOCK_STREAM)
        if self.user is not None:
            shutil.chown(base, self.user)
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", encoding, "--locale=C",
                 "--no-sync")
        self.log = base / "server.log"
        self.options = f"-p {self.port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.uri = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, program: str, *args: str) -> None:
        argv = [os.path.join(self.bin, program), *args]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
        assert done.returncode == 0, f"{program} {' '.join(args)}: {done.stderr}"

    def ctl(self, *args: str) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self.options, "-w", "-t", "60", *args)


@contextmanager
def running_cluster(encoding: str = "UTF8") -> Iterator[Cluster]:
    # Not under pytest's tmp_path: the server's user (postgres, when the tests run as root)
    # must reach the directory.
    base = Path(tempfile.mkdtemp(prefix="dhtc-pg-"))
    try:
        c = Cluster(base, encoding)
        c.ctl("start")
        try:
            yield c
        finally:
            c.ctl("stop", "-m", "immediate")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as c:
        yield c


class Member:
    """A fleet member process and its latest counters."""

    def __init__(self, uri: str) -> None:
        self.proc = subprocess.Popen([sys.executable, MEMBER, uri], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.counters: Dict[str, Any] = {"accepted": 0, "seen_again": 0, "retries": 0, "pending": 0, "reconnects": 0}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.counters = json.loads(line)

    def offer(self, numbers: List[int]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{n}\n" for n in numbers))
        self.proc.stdin.flush()

    def answered(self) -> int:
        return self.counters["accepted"] + self.counters["seen_again"]

    def finish(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def test_fleet_stores_every_torrent_once_across_three_server_restarts(cluster: Cluster) -> None:
    members = [Member(cluster.uri), Member(cluster.uri)]
    try:
        offered = [0, 0]
        number = 0
        for phase in range(4):  # before the first restart, and across each of three
            if phase:
                cluster.ctl("stop", "-m", "fast")  # the connections drop
                retried = [m.counters["retries"] for m in members]
            for i, member in enumerate(members):
                # Each member's own torrents, and one both are given (stored once).
                own = list(range(number, number + 20))
                number += 20
                member.offer(own + [100_000 + phase])
                offered[i] += len(own) + 1
            if phase:  # torrents arrive while the server is away: answered RETRY, not lost
                for member, before in zip(members, retried):
                    assert wait_for(lambda m=member, b=before: m.counters["retries"] > b, 60, 0.05), member.counters
                cluster.ctl("start")
            for i, member in enumerate(members):
                assert wait_for(lambda m=member, n=offered[i]: m.answered() >= n, 90, 0.1), \
                    (phase, member.counters, member.proc.stderr.read() if member.proc.poll() is not None else "")
            # both stored again after the restart, each its own new torrents
            assert all(m.counters["accepted"] >= 20 * (phase + 1) for m in members)
        counters = [m.counters for m in members]
        for member in members:
            assert member.finish() == 0, member.proc.stderr.read()
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.proc.kill()
    conn = Database(cluster.uri).connect()
    try:
        names = [name for (name,) in conn.execute("SELECT name FROM torrents")]
        files = int(conn.value("SELECT count(*) FROM files"))
        times = {int(t) for (t,) in conn.execute("SELECT times_seen FROM torrents")}
    finally:
        conn.close()
    assert len(names) == len(set(names)) == number + 4  # every torrent, once
    assert files == 2 * len(names)
    assert times <= {1, 2}  # a shared torrent: seen by both members, one row
    assert sum(c["accepted"] for c in counters) == number + 4
    # The server went away under them: some torrents were answered RETRY and stored later,
    # and the members connected again.
    assert all(c["retries"] >= 3 and c["reconnects"] >= 3 for c in counters), counters


def test_serve_answers_after_the_server_restarted(cluster: Cluster) -> None:
    """The web server keeps PostgreSQL connections between requests; one the restart
    dropped is replaced, and the request still answers. (`dhtcrawler serve` itself, over
    HTTP: starlette's TestClient needs an extra HTTP client package.)"""
    pytest.importorskip("starlette")
    from webutil import Served

    from dhtcrawler.app.sinks import DatabaseSink

    def get_json(url: str) -> Any:
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.loads(r.read())

    DatabaseSink(Database(cluster.uri)).close()  # the tables
    server = Served(["serve", "--store", cluster.uri, "--listen", "127.0.0.1:0"])
    try:
        for _ in range(2):
            assert get_json(server.url + "api/v1/search?q=fleet")["total"] == 0
            cluster.ctl("restart", "-m", "fast")
        assert get_json(server.url + "api/v1/stats")["torrents"] == 0
    finally:
        assert server.stop() == 0


def test_a_sql_ascii_database_reads_as_utf8() -> None:
    """initdb without a locale (a slim container image) makes SQL_ASCII databases, where
    psycopg hands back bytes unless the client says UTF-8: migrations (the trigram index
    names its extension's schema), storing and searching a non-ASCII name all work."""
    from dhtcrawler import search as S
    from dhtcrawler.app.sinks import DatabaseSink
    from webutil import make_torrent

    with running_cluster("SQL_ASCII") as c:
        sink = DatabaseSink(Database(c.uri))
        try:
            name = "Caf\u00e9 \u65e5\u672c\u8a9e 2024"
            assert sink.add(make_torrent(1, name, [(f"{name}/a.mkv", 1 << 20)]))
            total, rows = S.search(sink, "Caf\u00e9")
            assert total == 1 and rows[0]["name"] == name
        finally:
            sink.close()
