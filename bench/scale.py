#!/usr/bin/env python3
"""Search and import at scale, on SQLite and PostgreSQL: prints one JSON line per backend.
Never run by the tests.

    python3 bench/scale.py --torrents 1000000 [--data DIR] [--sqlite] [--store URI] [--queries 60]

The generator writes a dump (JSON lines, the import format) of ``--torrents`` torrents into
``--data`` (default build/bench-scale), kept between runs, as is each backend's database
(SQLite: DIR/scale-N.sqlite; PostgreSQL: the ``--store`` database, filled only when it holds
fewer torrents). A torrent has a release-style name and about 8 files (1..16), drawn from
English words at their real frequencies (a rank-frequency table of common words, Zipf's law
beyond it), with one torrent in eight named in Japanese or Chinese and one in eight in
Russian.

Reported per backend: the import rate into the empty database (``import_files``: batched,
ANALYZE at the end) and the rate of importing the first 20,000 again (every one merged into a
populated database), bytes per torrent with every index (Dialect.measure), and the JSON API's
latency (``GET /api/v1/search`` through the ASGI app, one connection per request as served)
p50 / p95 for one-, two- and three-word queries and a quoted phrase, each also with a size
sort, the first page of 20 with its total or estimate.
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
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
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
        if rng.random() < 0.5:
            name += joiner + str(rng.randint(1960, 2026)) + joiner + rng.choice(QUALITY)
        kind = rng.choice(list(EXT))
        n = max(1, min(16, int(rng.expovariate(1 / 8))))
        files = []
        for j in range(n):
            stem = " ".join(self.words(rng.randint(1, 3))) if rng.random() < 0.6 else f"{words[0]} {j + 1:02d}"
            ext = rng.choice(EXT[kind] if j == 0 or rng.random() < 0.7 else EXT["other"])
            path = f"{name}/{stem}.{ext}" if n > 1 else f"{stem}.{ext}"
            files.append({"path": path, "size": rng.randint(1_000, 4_000_000_000 if j == 0 else 50_000_000)})
        key = rng.randbytes(20).hex()
        seen = 1_600_000_000 + i * 20  # one torrent every 20 s, oldest first
        return {"info_hash": key, "info_hash_v1": key, "info_hash_v2": None, "version": "v1", "name": name,
                "total_size": sum(f["size"] for f in files), "num_files": n, "piece_length": 1 << rng.randint(15, 24),
                "private": False, "files": files, "first_seen": _rfc(seen), "last_seen": _rfc(seen), "times_seen": 1}

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


def dump_for(data: str, n: int, seed: int) -> str:
    path = os.path.join(data, f"dump-{n}-{seed}.jsonl")
    if os.path.exists(path):
        return path
    gen = Generator(seed)
    with open(path + ".part", "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps(gen.doc(i), ensure_ascii=False, separators=(",", ":")) + "\n")
    os.replace(path + ".part", path)
    return path


def percentile(values: List[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def bench(target: str, dump: str, n: int, queries: Dict[str, List[str]], data: str) -> Dict[str, Any]:
    from starlette.testclient import TestClient

    from dhtcrawler.app import search as S
    from dhtcrawler.app.db import Database
    from dhtcrawler.app.dumps import import_files
    from dhtcrawler.app.web.app import create_app

    database = Database(target)
    out: Dict[str, Any] = {"bench": "scale", "backend": database.dialect.name, "torrents": n}
    held = 0
    if database.exists():
        try:
            held = S.stats(target)["torrents"]
        except Exception:
            held = 0
    if held < n:
        t0 = time.monotonic()
        counts = import_files(database, [dump], refetch=True)
        secs = time.monotonic() - t0
        out["import_empty"] = {"torrents_per_sec": round(counts["read"] / secs), "secs": round(secs, 1), **counts}
        head = os.path.join(data, "head.jsonl")
        with open(dump, encoding="utf-8") as f, open(head, "w", encoding="utf-8") as h:
            for _, line in zip(range(20_000), f):
                h.write(line)
        t0 = time.monotonic()
        counts = import_files(database, [head], refetch=True)
        secs = time.monotonic() - t0
        out["import_populated_merge"] = {"torrents_per_sec": round(counts["read"] / secs), **counts}
    conn = database.connect(read_only=True)
    try:
        used, torrents = conn.dialect.measure(conn)
    finally:
        conn.close()
    out["bytes_per_torrent"] = round(used / n)
    client = TestClient(create_app(database))
    latency: Dict[str, Any] = {}
    for label, qs in queries.items():
        for sort in ("relevance", "size"):
            times, estimates = [], 0
            for q in qs:
                t0 = time.perf_counter()
                r = client.get("/api/v1/search", params={"q": q, "sort": sort})
                times.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200, r.text
                estimates += bool(r.json().get("total_is_estimate"))
            latency[f"{label}, {sort}"] = {"p50_ms": round(statistics.median(times), 1),
                                           "p95_ms": round(percentile(times, 95), 1), "estimates": estimates}
    out["search_json_api"] = latency
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torrents", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                   "bench-scale"))
    ap.add_argument("--sqlite", action="store_true", help="bench SQLite (DATA/scale-N.sqlite)")
    ap.add_argument("--store", help="bench this PostgreSQL database (filled when it holds fewer torrents)")
    ap.add_argument("--queries", type=int, default=60, help="queries of each kind")
    args = ap.parse_args()
    os.makedirs(args.data, exist_ok=True)
    t0 = time.monotonic()
    dump = dump_for(args.data, args.torrents, args.seed)
    print(json.dumps({"dump": dump, "bytes": os.path.getsize(dump), "secs": round(time.monotonic() - t0, 1)}),
          file=sys.stderr)
    queries = Generator(args.seed + 1).queries(args.queries)
    targets = ([os.path.join(args.data, f"scale-{args.torrents}.sqlite")] if args.sqlite else []) + \
        ([args.store] if args.store else [])
    for target in targets:
        print(json.dumps(bench(target, dump, args.torrents, queries, args.data), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
