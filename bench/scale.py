#!/usr/bin/env python3
"""Search and import at scale, on SQLite and PostgreSQL: prints one JSON line per backend.
Never run by the tests.

    python3 bench/scale.py --torrents 1000000 [--data DIR] [--sqlite] [--store URI] [--queries 60]
                           [--more 100000] [--import-only]

The generator writes a dump (JSON lines, the import format) of ``--torrents`` torrents into
``--data`` (default build/bench-scale), kept between runs, as is each backend's database
(SQLite: DIR/scale-gG-N.sqlite, G the generator's version; PostgreSQL: the ``--store``
database, filled only when it holds none: give it a fresh schema,
``?options=-csearch_path%3DNAME``). A torrent has a release-style name and about 8 files
(1..16; their paths below the torrent's folder, a third of them with a subfolder), drawn
from English words at their real frequencies (a rank-frequency table of common words, Zipf's
law beyond it), with one torrent in eight named in Japanese or Chinese and one in eight in
Russian.

Each line carries the indexer's parsed fields (as an export writes them; drawn to pass the
checks, not from classify(), whose milliseconds a million names would not afford).

Reported per backend, when its database was empty: the import rate (``import_files`` as
``dhtcrawler import`` runs it: batched, keys marked delivered, ANALYZE at the end) into the
empty database, then into the populated one: the first ``--more`` torrents again (every one
merged), ``--more`` new ones, and ``--more`` new ones without parsed fields (their parsing
left to the backfill: ``--parse-later``); with the load average at the end of each. Then bytes
per torrent with every index (Dialect.measure), and (unless ``--import-only``) the JSON API's
latency (``GET /api/v1/search`` from a ``dhtcrawler serve`` over HTTP on loopback, one
kept-alive connection) p50 / p95 for one-, two- and three-word queries and a quoted phrase,
each also with a size sort, the first page of 20 with its total or estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from typing import Any, Dict, List

COMMON = ("the of and to in a is that for it as was with be by on not he this are or his from at which but "
          "have an they you were her she there all one had we new live best world music love life time man "
          "night day black white dark city war story movie season complete collection edition remastered "
          "deluxe official original soundtrack album greatest hits volume part book audio video game software "
          "windows linux mac ultimate pro final first last king queen star space house summer winter blue red "
          "green gold golden american english french german spanish italian japanese korean chinese russian "
          "classic rock jazz blues metal pop dance electronic piano guitar orchestra symphony concert tour "
          "documentary history nature planet earth ocean mountain river fire water ice stone dragon shadow "
          "ghost legend hero empire kingdom secret lost hidden wild free young old little big great high deep "
          "true dead alive blood heart soul mind dream angel devil god heaven hell road home family friends "
          "school college science physics math lesson course tutorial guide manual anthology chronicles "
          "adventures return rise fall beginning end revolution").split()
CJK = ("東京 大阪 京都 夜景 写真集 音楽 映画 アニメ 第一話 完全版 日本語 字幕 中文 电影 音乐 全集 高清 纪录片 "
       "北京 上海 动画 游戏 小说 漫画 ドラマ 劇場版 主題歌 ベスト").split()
CYRILLIC = ("фильм музыка сборник лучшее москва россия война мир история книга аудиокнига сериал сезон "
            "концерт альбом коллекция классика русский полная версия документальный природа").split()
FOLDERS = ["Subs", "Sample", "Extras", "CD2", "Season 1", "Artwork", "Bonus", "Covers", "Scans", "Featurettes"]
# Bumped when the generator's output changes: its dumps and databases are named by it.
GENERATOR = 2
QUALITY = ["1080p", "720p", "2160p", "WEB-DL", "BluRay", "x264", "x265", "HEVC", "FLAC", "MP3 320", "ISO", "PDF",
           "EPUB", ""]
EXT = {"video": ["mkv", "mp4", "avi"], "audio": ["flac", "mp3"], "other": ["txt", "nfo", "jpg", "pdf", "epub"]}


def vocabulary(rng: random.Random, tail: int = 30_000) -> List[str]:
    """The common words by rank, then an invented tail (names, places, rare words)."""
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "zo", "be", "do", "fu", "gi", "ha", "ji", "ku", "ma", "no",
            "pe", "sa", "te", "wa", "yo", "ar", "el", "on", "is", "ur"]
    words = list(dict.fromkeys(COMMON))
    seen = set(words)
    while len(words) < len(COMMON) + tail:
        w = "".join(rng.choice(syll) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


class Generator:
    def __init__(self, seed: int, with_parsed: bool = True) -> None:
        self.rng = random.Random(seed)
        self.with_parsed = with_parsed
        from dhtcrawler.app.classify import PARSER_VERSION

        self.parser_version = PARSER_VERSION
        self.vocab = vocabulary(self.rng)
        self.weights = [1.0 / (rank + 1) for rank in range(len(self.vocab))]  # Zipf's law
        self.cum = list(__import__("itertools").accumulate(self.weights))

    def words(self, k: int) -> List[str]:
        script = self.rng.random()
        if script < 0.125:
            return self.rng.choices(CJK, k=k)
        if script < 0.25:
            return self.rng.choices(CYRILLIC, k=k)
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=k)

    def doc(self, i: int) -> Dict[str, Any]:
        rng = self.rng
        words = self.words(rng.randint(2, 6))
        joiner = rng.choice([" ", ".", " "])
        name = joiner.join(w.capitalize() for w in words)
        year = None
        quality = ""
        if rng.random() < 0.5:
            year, quality = rng.randint(1960, 2026), rng.choice(QUALITY)
            name += joiner + str(year) + joiner + quality
        kind = rng.choice(list(EXT))
        n = max(1, min(16, int(rng.expovariate(1 / 8))))
        # A path is below the torrent's folder, whose name is not part of it (as the crawler
        # stores it: docs/torrent-json.md); a third of multi-file torrents put some files in
        # a subfolder, and half of them name their main file as the release. (Before
        # generator 2, every path began with the name: twice the text.)
        folder = rng.choice(FOLDERS) if n > 1 and rng.random() < 0.3 else None
        files = []
        for j in range(n):
            if j == 0 and rng.random() < 0.5:  # the main file named as the release
                stem = name
            else:
                stem = " ".join(self.words(rng.randint(1, 3))) if rng.random() < 0.6 else f"{words[0]} {j + 1:02d}"
            ext = rng.choice(EXT[kind] if j == 0 or rng.random() < 0.7 else EXT["other"])
            path = f"{folder}/{stem}.{ext}" if folder and j > 0 and rng.random() < 0.5 else f"{stem}.{ext}"
            files.append({"path": path, "size": rng.randint(1_000, 4_000_000_000 if j == 0 else 50_000_000)})
        key = rng.randbytes(20).hex()
        seen = 1_600_000_000 + i * 20  # one torrent every 20 s, oldest first
        return {"info_hash": key, "info_hash_v1": key, "info_hash_v2": None, "version": "v1", "name": name,
                "total_size": sum(f["size"] for f in files), "num_files": n, "piece_length": 1 << rng.randint(15, 24),
                "private": False, "files": files, "first_seen": _rfc(seen), "last_seen": _rfc(seen), "times_seen": 1,
                **self.parsed(kind, words, year, quality)}

    def parsed(self, kind: str, words: List[str], year: Any, quality: str) -> Dict[str, Any]:
        """The indexer's parsed fields as an export carries them (the issue's dumps do),
        drawn to pass classify.valid_parsed: a generated name is not worth classify()'s
        milliseconds here, the bench measures the import."""
        if not self.with_parsed:
            return {}
        ctype = {"video": "movie", "audio": "music", "other": "ebook"}[kind]
        resolution = quality if quality.endswith("p") else None
        return {"content_type": ctype, "category": {"movie": 2040 if resolution else 2000, "music": 3010,
                                                    "ebook": 7020}[ctype],
                "title": " ".join(words).title(), "year": year, "season": None, "season_end": None, "episode": None,
                "episode_end": None, "resolution": resolution, "source": None,
                "video_codec": quality if quality in ("x264", "x265", "HEVC") else None, "release_group": None,
                "languages": None, "tags": None, "parsed": self.parser_version}

    def queries(self, n: int) -> Dict[str, List[str]]:
        """Queries as users type them: words drawn by the same frequencies (so some match
        hundreds of thousands of torrents, some a handful), phrases from generated names."""
        out: Dict[str, List[str]] = {"1 word": [], "2 words": [], "3 words": [], "phrase": []}
        for _ in range(n):
            out["1 word"].append(" ".join(self.words(1)))
            out["2 words"].append(" ".join(self.words(2)))
            out["3 words"].append(" ".join(self.words(3)))
            name = self.doc(0)["name"].replace(".", " ").split()
            out["phrase"].append('"' + " ".join(name[:2]) + '"')
        return out


def _rfc(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def dump_for(data: str, n: int, seed: int, parsed: bool = True) -> str:
    path = os.path.join(data, f"dump-g{GENERATOR}-{n}-{seed}{'-parsed' if parsed else ''}.jsonl")
    if os.path.exists(path):
        return path
    gen = Generator(seed, with_parsed=parsed)
    with open(path + ".part", "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps(gen.doc(i), ensure_ascii=False, separators=(",", ":")) + "\n")
    os.replace(path + ".part", path)
    return path


def percentile(values: List[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def timed_import(database: Any, dump: str, parse: bool = True) -> Dict[str, Any]:
    """``import_files`` as ``dhtcrawler import`` runs it (keys marked delivered, the default
    content rules judging every new torrent), timed."""
    from dhtcrawler.app import rules
    from dhtcrawler.app.dumps import import_files

    t0 = time.monotonic()
    counts = import_files(database, [dump], parse=parse, rules=rules.load())
    secs = time.monotonic() - t0
    return {"torrents_per_sec": round(counts["read"] / secs), "secs": round(secs, 1), **counts,
            "load_average": round(os.getloadavg()[0], 2)}


def head_of(dump: str, n: int, data: str) -> str:
    """The dump's first ``n`` lines, as a dump of their own."""
    path = os.path.join(data, f"head-{n}-{os.path.basename(dump)}")
    if not os.path.exists(path):
        with open(dump, encoding="utf-8") as f, open(path + ".part", "w", encoding="utf-8") as h:
            for _, line in zip(range(n), f):
                h.write(line)
        os.replace(path + ".part", path)
    return path


def import_rates(database: Any, dump: str, n: int, seed: int, data: str, more: int) -> Dict[str, Any]:
    """Import into the empty database; then into the populated one: ``more`` torrents it
    holds (every one merged), ``more`` new ones, and ``more`` new ones from a dump without
    the parsed fields (their parsing left to the backfill, timed apart)."""
    out: Dict[str, Any] = {"import_empty": timed_import(database, dump)}
    out["import_populated_merge"] = timed_import(database, head_of(dump, more, data))
    out["import_populated_new"] = timed_import(database, dump_for(data, more, seed + 1000))
    out["import_populated_new_unparsed"] = timed_import(database, dump_for(data, more, seed + 2000, parsed=False),
                                                        parse=False)
    return out


def bench(target: str, dump: str, n: int, queries: Dict[str, List[str]], data: str, seed: int = 1,
          more: int = 20_000, search: bool = True) -> Dict[str, Any]:
    from dhtcrawler.app import search as S
    from dhtcrawler.app.db import Database

    database = Database(target)
    out: Dict[str, Any] = {"bench": "scale", "backend": database.dialect.name, "torrents": n}
    held = 0
    if database.exists():
        try:
            held = S.stats(target)["torrents"]
        except Exception:
            held = 0
    if held == 0:
        out.update(import_rates(database, dump, n, seed, data, more))
    conn = database.connect(read_only=True)
    try:
        used, torrents = conn.dialect.measure(conn)
    finally:
        conn.close()
    out["bytes_per_torrent"] = round(used / n)
    if search:
        out["search_json_api"] = search_latency(database, queries)
    return out


def search_latency(database: Any, queries: Dict[str, List[str]]) -> Dict[str, Any]:
    """Each query through ``dhtcrawler serve``'s JSON API over HTTP, as a client sees it:
    the server started on a free loopback port, one kept-alive connection."""
    import http.client
    import socket
    import subprocess
    from urllib.parse import urlencode

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    where = ["--db", database.target] if database.is_file else ["--store", database.target]
    cli = os.path.join(os.path.dirname(sys.executable), "dhtcrawler")
    server = subprocess.Popen([cli, "serve", *where, "--listen", f"127.0.0.1:{port}", "--auth", "off"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for _ in range(600):  # up to a minute for the server to listen
            try:
                client.request("GET", "/api/v1/stats")
                client.getresponse().read()
                break
            except OSError:
                client.close()
                time.sleep(0.1)
        latency: Dict[str, Any] = {}
        for label, qs in queries.items():
            for sort in ("relevance", "size"):
                times, estimates = [], 0
                for q in qs:
                    t0 = time.perf_counter()
                    client.request("GET", "/api/v1/search?" + urlencode({"q": q, "sort": sort}))
                    r = client.getresponse()
                    body = r.read()
                    times.append((time.perf_counter() - t0) * 1000)
                    assert r.status == 200, body[:500]
                    estimates += bool(json.loads(body).get("total_is_estimate"))
                latency[f"{label}, {sort}"] = {"p50_ms": round(statistics.median(times), 1),
                                               "p95_ms": round(percentile(times, 95), 1), "estimates": estimates}
        return latency
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torrents", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                   "bench-scale"))
    ap.add_argument("--sqlite", action="store_true", help="bench SQLite (DATA/scale-gG-N.sqlite)")
    ap.add_argument("--store", help="bench this PostgreSQL database (filled when it holds fewer torrents)")
    ap.add_argument("--queries", type=int, default=60, help="queries of each kind")
    ap.add_argument("--more", type=int, default=100_000,
                    help="torrents imported into the populated database (held ones, new ones, new unparsed ones)")
    ap.add_argument("--import-only", action="store_true", help="no search timings")
    args = ap.parse_args()
    os.makedirs(args.data, exist_ok=True)
    t0 = time.monotonic()
    dump = dump_for(args.data, args.torrents, args.seed)
    print(json.dumps({"dump": dump, "bytes": os.path.getsize(dump), "secs": round(time.monotonic() - t0, 1)}),
          file=sys.stderr)
    queries = Generator(args.seed + 1).queries(args.queries)
    targets = ([os.path.join(args.data, f"scale-g{GENERATOR}-{args.torrents}.sqlite")] if args.sqlite else []) + \
        ([args.store] if args.store else [])
    for target in targets:
        print(json.dumps(bench(target, dump, args.torrents, queries, args.data, args.seed, args.more,
                               search=not args.import_only), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
