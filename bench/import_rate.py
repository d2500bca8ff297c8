#!/usr/bin/env python3
"""Import rate: torrents per second of `dhtcrawler import` (dhtcrawler.app.dumps.import_files)
for a dump of the test network's torrents; prints one JSON line. Never run by the tests.

    python3 bench/import_rate.py [--torrents 2000] [--seed 1] [--testnet PATH]

The dump is the testnet's truth (--seed, --torrents) as JSON lines with discovery times;
it is imported into a fresh database twice: the first pass inserts every torrent (and
marks its keys delivered in the retry store), the second merges every one into its row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from db_size import TRUTH_EXTRAS, truth  # noqa: E402

from dhtcrawler.app.dumps import import_files  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torrents", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--testnet")
    args = ap.parse_args()
    if args.testnet:
        program = args.testnet
    else:
        from dhtcrawler.testnet import locate
        program = locate()
    with tempfile.TemporaryDirectory(prefix="dhtc-import.") as work:
        docs = truth(program, args.torrents, args.seed, work)
        dump = os.path.join(work, "dump.jsonl")
        with open(dump, "w", encoding="utf-8") as f:
            for i, d in enumerate(docs):
                d = {k: v for k, v in d.items() if k not in TRUTH_EXTRAS}
                d["discovered_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_790_000_000 + i))
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        db = os.path.join(work, "db.sqlite")
        out = {"bench": "import_rate", "torrents": len(docs), "file_rows": sum(len(d["files"]) for d in docs)}
        for label in ("insert", "merge"):
            t0 = time.monotonic()
            counts = import_files(db, [dump])
            secs = time.monotonic() - t0
            out[label] = {"torrents_per_sec": round(len(docs) / secs, 1), "secs": round(secs, 2), **counts}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
