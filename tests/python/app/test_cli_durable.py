"""`dhtcrawler crawl`: acceptance means durable. A torrent counts as accepted only once every
sink holds it; a sink that fails (disk full, database locked, PostgreSQL down) makes the CLI
answer RETRY, say in one line that it will be fetched again, and not count it; the torrent
is stored when it comes back (the next announce, or the retry store's schedule).

The in-process tests run the CLI's own torrent callback (dhtcrawler.app.acceptance.Acceptance) on a real crawler fed by
the BEP-9 peer of conftest.py. They need the core that implements DHTC_ANSWER_RETRY."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest

import dhtcrawler
from dhtcrawler import Answer
from dhtcrawler.app.acceptance import Acceptance
from dhtcrawler.sinks import JsonlSink, SqliteSink, read_jsonl

from conftest import Announcer, MetadataPeer, fixture_infos, loopback_options, port_of, wait_for
from cliutil import Crawl


class FailsOnce:
    """A sink whose first add raises ``error``; then it is the real sink."""

    def __init__(self, sink, error: Exception) -> None:
        self.sink, self.error, self.failures = sink, error, 0

    def add(self, torrent):
        if self.failures == 0:
            self.failures += 1
            raise self.error
        return self.sink.add(torrent)

    def __getattr__(self, name):
        return getattr(self.sink, name)


def retry_options(kind: str, tmp_path: Path) -> dict:
    if kind == "none":
        return {"store": {"kind": "none"}}
    # Due again a second after the failed round (not 90 s), and a fresh sighting of a dormant
    # hash makes it due at once: the retry or the re-announce fetches it.
    return {"store": {"kind": "sqlite", "path": str(tmp_path / "retry.sqlite")},
            "policy": {"ladder_secs": [1], "jitter_percent": 0, "reactivation_percent": 0,
                       "reactivation_min_secs": 0}}


@pytest.mark.parametrize("store_kind", ["none", "sqlite"])
@pytest.mark.parametrize("failing", ["db", "jsonl"])
def test_a_sink_failing_once_means_retry_then_stored(tmp_path, store_kind, failing, metadata_peer, announcer):
    key = next(iter(metadata_peer.infos))
    db = SqliteSink(str(tmp_path / "t.sqlite"))
    jsonl = JsonlSink(str(tmp_path / "t.jsonl"))
    if failing == "db":
        db = FailsOnce(db, sqlite3.OperationalError("database is locked"))
    else:
        jsonl = FailsOnce(jsonl, OSError(28, "No space left on device"))
    lines, answers, completions = [], [], []
    store = Acceptance(db, jsonl, report=lines.append)

    def on_torrent(t):
        answers.append(store(t))
        return answers[-1]

    with dhtcrawler.Crawler(loopback_options(retry=retry_options(store_kind, tmp_path))) as crawler:
        crawler.on_torrent(on_torrent, ack=True)
        crawler.on_completion(completions.append)
        crawler.start()
        port = port_of(crawler.endpoints[0])
        announcer.announce(port, key, metadata_peer.port)
        assert wait_for(lambda: completions, 20)
        assert answers == [Answer.RETRY]
        assert store.accepted == 0 and store.sink_failures == 1
        assert completions[0].outcome == "sink_failed", completions

        def stored():
            if not any(c.outcome == "accepted" for c in completions):
                announcer.announce(port, key, metadata_peer.port)  # the next announce
            return any(c.outcome == "accepted" for c in completions)

        assert wait_for(stored, 30, 0.5), completions
    assert answers == [Answer.RETRY, Answer.ACCEPT]
    assert len(lines) == 1 and "will be fetched again" in lines[0] and key.hex() in lines[0], lines
    assert store.accepted == 1
    assert db.count() == 1
    assert [line["info_hash"] for line in read_jsonl(str(tmp_path / "t.jsonl"))] == [key.hex()]
    store.close()


def test_store_answers_retry_on_any_sink_exception_and_counts_nothing(tmp_path, delivered_torrents):
    torrent = delivered_torrents["v1_multi"]

    class Down:
        def add(self, _t):
            raise RuntimeError("server closed the connection unexpectedly")

        def close(self):
            pass

    lines = []
    store = Acceptance(Down(), None, report=lines.append)
    assert store(torrent) is Answer.RETRY
    assert store.accepted == 0 and store.seen_again == 0 and store.sink_failures == 1
    assert len(lines) == 1 and "RuntimeError" in lines[0] and "fetched again" in lines[0]


def test_jsonl_disk_full_leaves_no_torn_line(tmp_path, delivered_torrents):
    """A line that could not be written whole is cut off again: nothing of a torrent that was
    not stored stays in the file."""
    import os

    path = tmp_path / "x.jsonl"
    sink = JsonlSink(str(path))
    t = delivered_torrents["v1_single"]
    sink.add(t)
    real_write = os.write
    calls = []

    def half_then_full(fd, data):
        calls.append(1)
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    os.write = half_then_full
    try:
        with pytest.raises(OSError):
            sink.add(delivered_torrents["v1_multi"])
    finally:
        os.write = real_write
    sink.add(delivered_torrents["v2_single"])
    sink.close()
    assert [line["info_hash"] for line in read_jsonl(str(path))] == \
        [t.info_hash, delivered_torrents["v2_single"].info_hash]
    assert path.read_text().count("\n") == 2


def test_cli_with_a_full_disk_retries_and_counts_nothing(tmp_path):
    """--out /dev/full: every JSON line fails (ENOSPC). The CLI answers RETRY, says so, and
    its summary counts no torrent as accepted."""
    peer = MetadataPeer(fixture_infos("v1_single"))
    announcer = Announcer()
    crawl = Crawl("--out", "/dev/full", "--db", str(tmp_path / "c.sqlite"))
    try:
        port = port_of(crawl.endpoint())
        key = next(iter(peer.infos))
        announcer.announce(port, key, peer.port)
        assert wait_for(lambda: "will be fetched again" in "".join(crawl.stderr), 20), crawl.output()
        status = crawl.stop(signal.SIGTERM)
    finally:
        crawl.stop(signal.SIGKILL, timeout=5)
        announcer.close()
        peer.close()
    out = crawl.output()
    assert status == 0, out
    assert "stopped (SIGTERM): 0 torrents accepted" in out, out
    assert "could not be stored" in out
    failure_lines = [line for line in out.splitlines() if "will be fetched again" in line]
    assert failure_lines and all(key.hex() in line for line in failure_lines), out
