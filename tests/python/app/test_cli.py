"""The `dhtcrawler` command end to end: option errors, an unanswered bootstrap, metrics, the
status line, crawls against the test network and against real libtorrent seeders (JSON
lines and SQLite checked against what they serve), a SIGINT mid-crawl, demo and testnet.

Every crawl here binds 127.0.0.1, allows private addresses and replaces the bootstrap
(--no-default-bootstrap), so nothing leaves loopback."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List

import jsonschema
import pytest

import dhtcrawler
import dhtcrawler.search
from dhtcrawler.app.status import StatusLine
from dhtcrawler.sinks import read_jsonl

from cliutil import LOOPBACK, Crawl, check_jsonl_matches_db, db_torrents, run_cli
from conftest import cli, expected_files, loopback_options, torrent_schema, unused_loopback_port, wait_for

# ---- arguments and options ---------------------------------------------------------------

def test_version():
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"dhtcrawler {dhtcrawler.__version__}"


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "dhtcrawler"
    assert script.exists(), script
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"dhtcrawler {dhtcrawler.__version__}"


@pytest.mark.parametrize("args, needle", [
    (["--bind", "not-an-address"], "--bind"),
    (["--port", "70000"], "--port"),
    (["--netmode", "ipv5"], "--netmode"),
    (["--duration", "-1"], "--duration"),
    (["--options", "/nonexistent/options.json"], "--options"),
    (["--metrics", "nohostport"], "--metrics"),
    (["--db", "/nonexistent/dir/x.sqlite"], "--db"),
])
def test_bad_flags_give_one_line_and_exit_2(tmp_path, args, needle):
    bounded = [] if "--duration" in args else ["--duration", "5"]  # should the error not come
    out = run_cli("crawl", *LOOPBACK, *args, *bounded, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert needle in out.stderr


@pytest.mark.parametrize("options, key_path", [
    ({"metadata": {"timout_secs": 1}}, "metadata.timout_secs"),
    ({"crawl": {"rate_limit": {"burst": "many"}}}, "crawl.rate_limit.burst"),
])
def test_bad_options_file_names_the_key_and_exits_2(tmp_path, options, key_path):
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    out = run_cli("crawl", *LOOPBACK, "--options", str(path), "--db", str(tmp_path / "d.sqlite"))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and key_path in out.stderr
    assert not (tmp_path / "d.sqlite").exists()  # nothing started


def test_options_file_that_is_not_json(tmp_path):
    path = tmp_path / "options.json"
    path.write_text("{port: 1")
    out = run_cli("crawl", *LOOPBACK, "--options", str(path))
    assert out.returncode == 2 and "not JSON" in out.stderr


def test_flags_override_the_options_file(tmp_path):
    from dhtcrawler.app.cli import build_parser
    from dhtcrawler.app.commands.crawl import crawl_options

    path = tmp_path / "options.json"
    path.write_text(json.dumps({"port": 7000, "netmode": "dual", "crawl": {"bootstrap": {"sources": ["a.example:1"]}}}))
    args = build_parser().parse_args(["crawl", "--options", str(path), "--port", "0", "--bootstrap", "127.0.0.1:9"])
    doc = crawl_options(args)
    assert doc["port"] == 0 and doc["netmode"] == "dual"
    assert doc["crawl"]["bootstrap"]["sources"] == ["a.example:1", "127.0.0.1:9"]
    args = build_parser().parse_args(["crawl", "--bootstrap", "127.0.0.1:9", "--no-default-bootstrap",
                                      "--bind", "::1", "--bind", "127.0.0.1"])
    doc = crawl_options(args)
    assert doc["crawl"]["bootstrap"]["sources"] == ["127.0.0.1:9"]
    assert doc["bind_v6"] == "::1" and doc["bind_v4"] == "127.0.0.1"
    # without --no-default-bootstrap, an extra node is added to the library's defaults
    args = build_parser().parse_args(["crawl", "--bootstrap", "127.0.0.1:9"])
    sources = crawl_options(args)["crawl"]["bootstrap"]["sources"]
    assert sources[-1] == "127.0.0.1:9" and len(sources) > 1


# ---- running without peers ---------------------------------------------------------------


def test_unanswered_bootstrap_runs_until_duration_and_leaves_a_database(tmp_path):
    out = run_cli("crawl", *LOOPBACK, "--bootstrap", f"127.0.0.1:{unused_loopback_port()}", "--duration", "2",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "stopped (duration): 0 torrents accepted" in out.stderr
    db = tmp_path / "dhtcrawler.sqlite"  # the default database, in the working directory
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version FROM schema_migrations WHERE component = 'torrents'").fetchone()[0] >= 1


def test_metrics_endpoint_serves_prometheus_text(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    crawl = Crawl("--metrics", f"127.0.0.1:{port}", "--db", str(tmp_path / "m.sqlite"), "--duration", "60")
    try:
        crawl.endpoint()

        def scrape():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return r.status, r.headers["Content-Type"], r.read().decode()
            except OSError:
                return None

        result = wait_for(scrape, 20, 0.1)
        assert result is not None
        status, ctype, body = result
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert "dhtc_udp_rx_packets_total" in body
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=2)
    finally:
        assert crawl.stop(signal.SIGTERM) == 0
    assert "stopped (SIGTERM)" in crawl.output()


def test_status_line_shows_nodes_hashes_fetched_failed():
    stream = io.StringIO()
    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.start()
        status = StatusLine(crawler, lambda: 0, stream=stream, pipe_interval=0.05)
        status.start()
        assert wait_for(lambda: stream.getvalue().count("\n") >= 2, 10)
        status.stop()
    line = stream.getvalue().splitlines()[0]
    for field in ("nodes 0", "hashes 0", "fetched 0", "failed 0", "stored 0"):
        assert field in line, line


def test_status_line_explains_an_unanswered_bootstrap_once():
    stream = io.StringIO()
    options = loopback_options(crawl={"bootstrap": {"sources": [f"127.0.0.1:{unused_loopback_port()}"]}})
    with dhtcrawler.Crawler(options) as crawler:
        crawler.start()
        status = StatusLine(crawler, lambda: 0, stream=stream, pipe_interval=0.05, hint_after=0.2)
        status.start()
        assert wait_for(lambda: "no DHT node has answered yet" in stream.getvalue(), 10)
        time.sleep(0.3)
        status.stop()
    assert stream.getvalue().count("no DHT node has answered yet") == 1
    assert "dhtcrawler demo" in stream.getvalue()


# ---- against the test network -------------------------------------------------------------

def test_crawl_against_the_test_network(tmp_path, testnet_binary):
    from dhtcrawler.testnet import TestNetwork

    torrents = 8
    net = TestNetwork(nodes=40, seeders=4, torrents=torrents, cidr="127.0.92.0/24", seed=3, duration=120,
                      binary=testnet_binary, truth=str(tmp_path / "truth.json"), stderr=subprocess.DEVNULL)
    out, db = tmp_path / "t.jsonl", tmp_path / "t.sqlite"
    with net:
        keys = {key for t in net.truth() for key in t.get("announce_keys", [t["info_hash"]])}
        crawl = Crawl("--bootstrap", net.bootstrap, "--out", str(out), "--db", str(db))
        try:
            crawl.endpoint()

            def delivered():
                return {line["info_hash"] for line in read_jsonl(str(out))} if out.exists() else set()

            # Wait for every torrent, but settle for most: whether the crawl finds each hash
            # in a small network is the engine's business; this test checks what is stored.
            wait_for(lambda: len(delivered()) >= torrents, 30, 0.2)
            assert len(delivered()) >= torrents * 3 // 4, crawl.output()
            assert delivered() <= keys
        finally:
            assert crawl.stop(signal.SIGTERM) == 0
    truth = net.truth()
    by_key = {key: t for t in truth for key in t.get("announce_keys", [t["info_hash"]])}
    lines = read_jsonl(str(out))
    check_jsonl_matches_db(lines, db_torrents(db))
    # a hybrid may be delivered under either of its keys, and only once
    assert len({by_key[line["info_hash"]]["info_hash"] for line in lines}) == len(lines)
    for line in lines:
        t = by_key[line["info_hash"]]
        for key in ("name", "version", "total_size", "num_files", "piece_length", "info_hash_v1", "info_hash_v2",
                    "private"):
            assert line[key] == t[key], key
        assert line["files"] == t["files"]
    assert f"{len(lines)} torrents accepted" in crawl.output()


def test_demo_shows_torrents_arriving(tmp_path, testnet_binary):
    out = tmp_path / "demo.jsonl"
    env = dict(os.environ, DHTCRAWLER_TESTNET=testnet_binary)
    r = subprocess.run(cli("demo", "--duration", "50", "--out", str(out)), capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = read_jsonl(str(out))
    m = re.search(r"demo: (\d+) of 6 torrents fetched and verified", r.stdout)
    assert m and int(m.group(1)) == len(lines) >= 4, r.stdout
    for line in lines:
        jsonschema.validate(line, torrent_schema())
        assert line["info_hash"] in r.stdout  # one readable line each
        # ...saying which seeder policy served it, over which transport and encryption.
        shown = next(text for text in r.stdout.splitlines() if line["info_hash"] in text)
        assert f"over {line['transport']}/{line['encryption']}" in shown, shown
        policy = re.search(r"\((\w+) seeder\)", shown).group(1)
        # The default policy tries uTP first: only the TCP-only seeder serves over TCP.
        assert line["transport"] == ("tcp" if policy == "tcp_only" else "utp"), shown
        if policy in ("pe_rc4", "utp_pe"):
            assert line["encryption"] == "rc4", shown
    # The mixed swarm's summary: one line per policy, adding up to what arrived.
    summary = re.findall(r"demo: served by the (\w+) seeder: (\d+)", r.stdout)
    assert [p for p, _ in summary] == ["plaintext", "pe_rc4", "pe_plain", "utp", "utp_pe", "tcp_only"], r.stdout
    assert sum(int(n) for _, n in summary) == len(lines), r.stdout


def test_testnet_subcommand_runs_the_program(testnet_binary):
    env = dict(os.environ, DHTCRAWLER_TESTNET=testnet_binary)
    r = subprocess.run(cli("testnet", "--help"), capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0
    assert "BOOTSTRAP" in r.stdout + r.stderr


def test_testnet_subcommand_without_the_program(tmp_path):
    env = dict(os.environ, DHTCRAWLER_TESTNET=str(tmp_path / "missing"))
    r = subprocess.run(cli("testnet", "--help"), capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "DHTCRAWLER_TESTNET" in r.stderr


# ---- against real libtorrent seeders ------------------------------------------------------

def check_against_swarm(lines: List[dict], db: Dict[str, dict], swarm_torrents: List[dict]) -> None:
    by_key = {}
    for ev in swarm_torrents:
        for key in ev["announce_hashes"]:
            by_key[key] = ev
    for line in lines:
        ev = by_key[line["info_hash"]]
        assert line["name"] == ev["name"]
        assert line["total_size"] == ev["content_size"]
        assert line["info_hash_v1"] == ev["info_hash_v1"] and line["info_hash_v2"] == ev["info_hash_v2"]
        assert line["version"] == ev["format"]
        if not ev["files_truncated"]:
            assert sorted((f["path"], f["size"]) for f in line["files"]) == sorted(expected_files(ev))
        assert db[line["info_hash"]]["metadata_size"] == ev["metadata_size"]


def test_crawl_against_libtorrent_seeders(tmp_path, lt_swarm_factory):
    out, db = tmp_path / "lt.jsonl", tmp_path / "lt.sqlite"
    crawl = Crawl("--out", str(out), "--db", str(db))
    try:
        endpoint = crawl.endpoint()
        swarm = lt_swarm_factory(endpoint, "127.0.70", sessions=3, torrents_per_session=2)
        torrents = swarm.wait_ready()
        assert len(torrents) == 6
        assert wait_for(lambda: out.exists() and len(read_jsonl(str(out))) >= 6, 90, 0.2), crawl.output()
    finally:
        assert crawl.stop(signal.SIGTERM) == 0
    lines = read_jsonl(str(out))
    assert len(lines) == 6
    rows = db_torrents(db)
    assert len(rows) == 6
    check_jsonl_matches_db(lines, rows)
    check_against_swarm(lines, rows, torrents)


def test_sigint_mid_crawl_loses_nothing_accepted(tmp_path, lt_swarm_factory):
    out, db = tmp_path / "int.jsonl", tmp_path / "int.sqlite"
    crawl = Crawl("--out", str(out), "--db", str(db))
    try:
        endpoint = crawl.endpoint()
        swarm = lt_swarm_factory(endpoint, "127.0.80", sessions=4, torrents_per_session=4,
                                 kinds="v1,hybrid,multi,v2")
        torrents = swarm.wait_ready()
        assert wait_for(lambda: out.exists() and len(read_jsonl(str(out))) >= 2, 90, 0.05), crawl.output()
        status = crawl.stop(signal.SIGINT)
    finally:
        crawl.stop(signal.SIGKILL, timeout=5)
    assert status == 0, crawl.output()
    log = crawl.output()
    m = re.search(r"stopped \(SIGINT\): (\d+) torrents accepted", log)
    assert m, log
    accepted = int(m.group(1))
    lines = read_jsonl(str(out))
    rows = db_torrents(db)
    assert accepted == len(lines) == len(rows) >= 2
    check_jsonl_matches_db(lines, rows)
    check_against_swarm(lines, rows, torrents)
    # the JSON-lines file holds complete lines only
    assert out.read_text().endswith("\n")
