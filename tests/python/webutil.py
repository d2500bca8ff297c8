"""Shared pieces of the web server tests: a real crawl database written through SqliteSink,
and `dhtcrawler serve` started as a subprocess on a loopback port."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from dhtcrawler import Torrent, TorrentFile
from dhtcrawler.sinks import SqliteSink

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _hash(text: str, n: int = 40) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def make_torrent(i: int, name: str, files: Sequence[Tuple[str, int]], version: str = "v1") -> Torrent:
    v1 = _hash(f"v1-{i}") if version in ("v1", "hybrid") else None
    v2 = _hash(f"v2-{i}", 64) if version in ("v2", "hybrid") else None
    return Torrent(info_hash=v1 or (v2 or "")[:40], info_hash_v1=v1, info_hash_v2=v2, version=version, name=name,
                   total_size=sum(s for _p, s in files), num_files=len(files), piece_length=262144,
                   private=False, files=tuple(TorrentFile(path=p, size=s) for p, s in files),
                   peer="127.0.0.1:6881", discovered_at=T0 + timedelta(minutes=i), info=b"d4:name1:xe")


# A small catalogue: one of each category, a hybrid, a v2-only torrent, a CJK name, and
# 45 numbered "filler" torrents so that the page has several pages.
CATALOGUE: List[Torrent] = [
    make_torrent(0, "Big.Buck.Bunny.2008.1080p", [("Big.Buck.Bunny.2008.1080p.mkv", 900_000_000),
                                                  ("sample.txt", 1000)]),
    make_torrent(1, "Some.Show.S01E02.720p", [("Some.Show.S01E02.720p.mp4", 400_000_000)]),
    make_torrent(2, "Free Music Album", [("Album/01 - Song.flac", 30_000_000), ("Album/02 - Tune.flac", 31_000_000),
                                         ("Album/cover.jpg", 200_000)]),
    make_torrent(3, "debian-12.4.0-amd64-netinst", [("debian-12.4.0-amd64-netinst.iso", 650_000_000)],
                 version="hybrid"),
    make_torrent(4, "Public Domain Books", [("books/Alice in Wonderland.epub", 2_000_000),
                                            ("books/Moby Dick.pdf", 5_000_000)], version="v2"),
    make_torrent(5, "Random dataset", [("data/part1.csv", 10_000), ("data/part2.csv", 20_000)]),
    make_torrent(6, "日本語のテスト", [("ファイル/テスト.txt", 123)]),
] + [make_torrent(100 + k, f"filler torrent {k:02d}", [(f"filler/{k:02d}/a.bin.part", 1000 + k),
                                                      (f"filler/{k:02d}/b.dat", 10)])
     for k in range(45)]


def make_db(path: Path, torrents: Sequence[Torrent] = CATALOGUE) -> Path:
    sink = SqliteSink(str(path))
    try:
        for t in torrents:
            sink.add(t)
    finally:
        sink.close()
    return path


@contextlib.contextmanager
def served_postgresql(prefix: str, torrents: Sequence[Torrent]) -> Iterator[Tuple["Served", str]]:
    """`dhtcrawler serve --store` over a fresh PostgreSQL schema holding ``torrents``
    (written through PostgresSink); (the server, its URI). Skips without DHTC_TEST_PG."""
    from conftest import pg_schema_uri
    from dhtcrawler.sinks import PostgresSink

    with pg_schema_uri(prefix) as uri:
        sink = PostgresSink(uri)
        for t in torrents:
            sink.add(t)
        sink.close()
        s = Served(["serve", "--store", uri, "--listen", "127.0.0.1:0"])
        try:
            yield s, uri
        finally:
            assert s.stop() == 0


class Served:
    """`python -m dhtcrawler serve` in a subprocess; ``url`` once it is listening."""

    def __init__(self, args: Sequence[str], env: Optional[Dict[str, str]] = None,
                 prefix: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen([*prefix, sys.executable, "-m", "dhtcrawler", *args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})})
        self.lines: List[str] = []
        self.url = ""
        self.api_key: Optional[str] = None
        deadline = time.monotonic() + 60
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"API key .*: (\S+)$", line)
            if m:
                self.api_key = m.group(1)
            m = re.search(r"serving .* on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                return
        self.stop()
        raise RuntimeError("dhtcrawler serve did not start: " + "".join(self.lines))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
