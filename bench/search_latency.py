#!/usr/bin/env python3
"""Search latency on SQLite at 1,000,000 synthetic torrents: p50/p95 of dhtcrawler.search.
search() for one-word and three-word queries; prints one JSON line. Never run by the tests.

    python3 bench/search_latency.py [--torrents 1000000] [--queries 200] [--db FILE] [--keep]

The database has the CLI's schema (SqliteSink's migrations); the rows are written in
batches of 10,000 (a crawl writes one transaction per torrent: the same rows, faster to
make). Each torrent: a name of 2..6 words drawn from a vocabulary of 20,000 made-up words
(Zipf-like: a few words common, most rare), a release-style suffix, and 1..12 files whose
paths repeat name words. Queries draw their words from the same vocabulary with the same
weights, so a one-word query matches anywhere from one torrent to a few per cent of them;
a three-word query is three such words. Each query asks for the first page (limit 20,
sort relevance) with its total count, as `dhtcrawler search` and the web page do.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

from dhtcrawler import search as S
from dhtcrawler.sinks import SqliteSink

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "zo", "be", "do", "fu", "gi", "ha", "ji", "ku",
             "ma", "no", "pe", "qu", "sa", "te", "wa", "xe", "yo"]


def vocabulary(rng: random.Random, n: int) -> list:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def build(path: str, n: int, rng: random.Random, vocab: list, weights: list) -> int:
    sink = SqliteSink(path)
    conn = sink.connection
    conn.execute("PRAGMA synchronous=OFF")
    files_total = 0
    start = 1_700_000_000
    tid = 0
    while tid < n:
        batch = min(10_000, n - tid)
        torrents, files, docs, hashes = [], [], [], []
        for _ in range(batch):
            tid += 1
            words = rng.choices(vocab, weights, k=rng.randint(2, 6))
            name = " ".join(words) + rng.choice(["", " 1080p", " x264", " FLAC", " (2019)", " v2.1", " ISO"])
            nfiles = rng.randint(1, 12)
            paths = [f"{rng.choice(words)}/{rng.choice(words)} {i:02d}.{rng.choice(['mkv', 'flac', 'txt', 'jpg'])}"
                     for i in range(nfiles)]
            sizes = [rng.randint(1000, 2_000_000_000) for _ in paths]
            key = rng.randbytes(20)
            torrents.append((tid, key, key, None, "v1", name, sum(sizes), nfiles, 262144, 0, 10_000,
                             start + tid, start + tid, "10.0.0.1:6881", 1))
            files += [(tid, i, p, s) for i, (p, s) in enumerate(zip(paths, sizes))]
            docs.append((tid, "\n".join([name, *paths])))
            hashes.append((key, tid))
            files_total += nfiles
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO torrents(id, info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
                         "num_files, piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", torrents)
        conn.executemany("INSERT INTO files(torrent, idx, path, size) VALUES (?, ?, ?, ?)", files)
        conn.dialect.index_torrents(conn, docs)  # the search index and the word index (schema 9)
        conn.executemany("INSERT OR IGNORE INTO hashes(hash, torrent) VALUES (?, ?)", hashes)
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sink.close()
    return files_total


def percentile(values: list, p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torrents", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--db", help="the database file (default: a temporary one; an existing file is reused)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary database")
    ap.add_argument("--window", type=int, default=S.DEFAULT_WINDOW,
                    help=f"search()'s candidate window (default {S.DEFAULT_WINDOW}; 0: none)")
    args = ap.parse_args()
    rng = random.Random(42)
    vocab = vocabulary(rng, 20_000)
    weights = [1.0 / (i + 1) ** 0.9 for i in range(len(vocab))]
    rng.shuffle(vocab)
    work = None
    path = args.db
    if path is None:
        work = tempfile.mkdtemp(prefix="dhtc-search.")
        path = os.path.join(work, "search.sqlite")
    built = 0.0
    if not os.path.exists(path):
        t0 = time.monotonic()
        build(path, args.torrents, rng, vocab, weights)
        built = time.monotonic() - t0
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = conn.execute("SELECT count(*) FROM torrents").fetchone()[0]
    qrng = random.Random(7)
    out = {"bench": "search_latency", "torrents": n, "tokenizer": S.tokenizer(conn),
           "db_bytes": os.path.getsize(path), "build_secs": round(built, 1), "queries": args.queries,
           "window": args.window or None}
    for label, k in (("one_word", 1), ("three_words", 3)):
        times, totals = [], []
        queries = [" ".join(qrng.choices(vocab, weights, k=k)) for _ in range(args.queries)]
        S.search(conn, queries[0])  # warm the page cache
        for q in queries:
            t0 = time.perf_counter()
            total, _rows = S.search(conn, q, limit=20, window=args.window or None)
            times.append((time.perf_counter() - t0) * 1000)
            totals.append(total)
        out[label] = {"p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2),
                      "max_ms": round(max(times), 2), "median_matches": statistics.median(totals),
                      "max_matches": max(totals)}
    conn.close()
    print(json.dumps(out))
    if work is not None and not args.keep:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
