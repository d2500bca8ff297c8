"""The `dhtcrawler` command as the tests run it: a subprocess per command, a crawl read as
it runs, and the checks of a crawl's SQLite database against its JSON lines. Shared by the
application and web tests."""

from __future__ import annotations

import queue
import re
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import jsonschema

import dhtcrawler.search

from conftest import cli, torrent_schema

LOOPBACK = ["--port", "0", "--bind", "127.0.0.1", "--allow-private", "--no-default-bootstrap"]


def run_cli(*args: str, timeout: float = 60, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd)


class Crawl:
    """`dhtcrawler crawl` as a subprocess; stderr is read on a thread."""

    def __init__(self, *args: str, cwd: Optional[Path] = None) -> None:
        self.proc = subprocess.Popen(cli("crawl", *LOOPBACK, *args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        self.stderr: List[str] = []
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def endpoint(self, timeout: float = 20) -> str:
        """The crawler's UDP endpoint, from its start-up line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            m = re.search(r"crawling on (127\.0\.0\.1:\d+)", line)
            if m:
                return m.group(1)
        raise AssertionError("no start-up line: " + "".join(self.stderr))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)

    def output(self) -> str:
        time.sleep(0.1)
        return "".join(self.stderr)


def db_torrents(path: Path) -> Dict[str, dict]:
    with sqlite3.connect(path) as conn:
        out = {}
        for (key,) in conn.execute("SELECT hex(info_hash) FROM torrents"):
            t = dhtcrawler.search.torrent(conn, key)
            t["files"] = [(f["path"], f["size"]) for f in t["files"]]
            t["hashes"] = sorted(h for h in (t["info_hash_v1"], t["info_hash_v2"]) if h)
            out[t["info_hash"]] = t
        return out


def check_jsonl_matches_db(lines: List[dict], db: Dict[str, dict]) -> None:
    """Every JSON line is a valid torrent and is in the database with the same content."""
    schema = torrent_schema()
    for line in lines:
        jsonschema.validate(line, schema)
        assert line["peer"] and line["discovered_at"]
        row = db[line["info_hash"]]
        assert row["name"] == line["name"] and row["total_size"] == line["total_size"]
        assert row["files"] == [(f["path"], f["size"]) for f in line["files"]]
        assert row["hashes"] == sorted(h for h in (line["info_hash_v1"], line["info_hash_v2"]) if h)
    assert len({line["info_hash"] for line in lines}) == len(lines)
