#!/usr/bin/env python3
"""Bytes on disk per torrent and per file row of the CLI's SQLite database (search index
included), for the torrents of the test network: prints one JSON line. Never run by the
tests.

    python3 bench/db_size.py [--torrents 2000] [--seed 1] [--testnet PATH]

The testnet program (dhtcrawler-testnet, from the installed package or --testnet) writes
its truth file (every torrent's JSON form) after a run of a few seconds; each torrent then
goes through SqliteSink.add as a crawl would store it (a seeder as its peer, discovery
times one second apart), one transaction each, into two fresh databases: one with the
file-row cap at 0 (torrents, hashes, the name in the search index) and one with every file
row. bytes_per_torrent = size(cap 0) / torrents; bytes_per_file_row = (size(all) -
size(cap 0)) / file rows. Sizes are of the database file after a WAL checkpoint, not
vacuumed (as a crawl leaves it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone

from dhtcrawler import Torrent
from dhtcrawler.sinks import FTS_TOKENIZER, SqliteSink


# What the test network adds to the parser's JSON form of each torrent (tools/testnet/README.md).
TRUTH_EXTRAS = ("announce_keys", "first_served_at", "seeders", "seeder_policies", "seeder_behaviours",
                "holders", "holders_shared_ip")


def truth(program: str, torrents: int, seed: int, work: str) -> list:
    path = os.path.join(work, "truth.json")
    subprocess.run([program, "--nodes", "20", "--seeders", "5", "--torrents", str(torrents), "--seed", str(seed),
                    "--range", "127.93.0.0/24", "--duration", "2", "--quiet", "--truth", path],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fill(path: str, docs: list, max_files) -> int:
    sink = SqliteSink(path, max_files=max_files)
    start = datetime(2026, 12, 1, tzinfo=timezone.utc)
    for i, doc in enumerate(docs):
        d = {k: v for k, v in doc.items() if k not in TRUTH_EXTRAS}
        d["peer"] = (doc.get("seeders") or ["127.0.0.1:6881"])[0]
        d["discovered_at"] = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        sink.add(Torrent.from_doc(d, info=b"x" * 3000))
    sink.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sink.close()
    return os.path.getsize(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torrents", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--testnet", help="the dhtcrawler-testnet program (default: the installed package's)")
    args = ap.parse_args()
    if args.testnet:
        program = args.testnet
    else:
        from dhtcrawler.testnet import locate
        program = locate()
    with tempfile.TemporaryDirectory(prefix="dhtc-dbsize.") as work:
        docs = truth(program, args.torrents, args.seed, work)
        files = sum(len(d["files"]) for d in docs)
        bare = fill(os.path.join(work, "bare.sqlite"), docs, 0)
        full = fill(os.path.join(work, "full.sqlite"), docs, None)
    print(json.dumps({"bench": "db_size", "torrents": len(docs), "seed": args.seed, "file_rows": files,
                      "tokenizer": FTS_TOKENIZER, "db_bytes": full,
                      "bytes_per_torrent": round(bare / len(docs), 1),
                      "bytes_per_file_row": round((full - bare) / files, 1),
                      "bytes_per_torrent_with_files": round(full / len(docs), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
