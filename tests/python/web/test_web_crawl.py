"""`dhtcrawler crawl --serve`: one process crawls the loopback test network and serves what
it stores, the search API and /metrics included."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

import pytest

pytest.importorskip("starlette", reason="the serve extra (starlette, uvicorn) is not installed")

from conftest import pg_schema_uri, wait_for  # noqa: E402
from cliutil import Crawl  # noqa: E402


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str) -> Optional[Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
            return json.loads(body) if r.headers["Content-Type"].startswith("application/json") else body
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_crawl_serve_shows_torrents_as_they_arrive(tmp_path, testnet_binary, store):
    with contextlib.ExitStack() as stack:
        if store == "postgresql":  # crawl --store URI --serve: the fleet's database, served
            where = ["--store", stack.enter_context(pg_schema_uri("webcrawl"))]
        else:
            where = ["--db", str(tmp_path / "c.sqlite")]
        crawl_and_serve(tmp_path, testnet_binary, where)


def crawl_and_serve(tmp_path, testnet_binary, where) -> None:
    from dhtcrawler.testnet import TestNetwork

    torrents = 6
    net = TestNetwork(nodes=30, seeders=3, torrents=torrents, cidr="127.0.93.0/24", seed=5, duration=120,
                      binary=testnet_binary, truth=str(tmp_path / "truth.json"), stderr=subprocess.DEVNULL)
    port = free_tcp_port()
    base = f"http://127.0.0.1:{port}/"
    with net:
        crawl = Crawl("--bootstrap", net.bootstrap, *where, "--serve",
                      f"127.0.0.1:{port}")
        try:
            crawl.endpoint()
            assert f"serving on {base}" in crawl.output()
            assert "API key" not in crawl.output()  # loopback: no key by default
            stats = wait_for(lambda: (fetch(base + "api/v1/stats") or {}).get("torrents", 0) >= torrents // 2
                             and fetch(base + "api/v1/stats"), 40, 0.3)
            assert stats, crawl.output()
            names = {t["name"] for t in net.truth()}
            some = fetch(base + "api/v1/search?limit=100")
            assert some["total"] >= stats["torrents"]  # more may have arrived meanwhile
            found = some["results"][0]
            assert found["name"] in names
            word = found["name"].split()[0]
            hits = fetch(base + "api/v1/search?q=" + urllib.parse.quote(word))
            assert found["info_hash"] in {r["info_hash"] for r in hits["results"]}
            metrics = fetch(base + "metrics")
            assert isinstance(metrics, str) and "dhtc_udp_rx_packets_total" in metrics
            page = fetch(base)
            assert isinstance(page, str) and "<title>dhtcrawler search</title>" in page
        finally:
            assert crawl.stop(signal.SIGTERM) == 0
    assert "stopped (SIGTERM)" in crawl.output()
    # The server went with the crawl.
    with pytest.raises(OSError):
        urllib.request.urlopen(base + "api/v1/stats", timeout=2)


def test_serve_without_metrics_has_no_metrics_route_and_bad_flags_exit_2(tmp_path):
    from cliutil import run_cli

    from webutil import Served, make_db

    db = make_db(tmp_path / "s.sqlite")
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(s.url + "metrics", timeout=5)
        assert e.value.code == 404
    finally:
        assert s.stop() == 0
    for args, needle in ((["serve", "--db", str(tmp_path / "missing.sqlite")], "no such file"),
                         (["serve", "--db", str(db), "--listen", "nohostport"], "--listen"),
                         (["serve", "--db", str(tmp_path)], "--db")):
        out = run_cli(*args)
        assert out.returncode == 2 and needle in out.stderr, out.stderr
