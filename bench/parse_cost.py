#!/usr/bin/env python3
"""What parsing a release name costs at ingest: classify() (app/classify.py) per torrent on
the labelled sample (tests/data/release_names), beside the parser alone (PTN.parse) as the
reference of the same run; p50/p95/mean in ms; prints one JSON line. Never run by the tests.

    build/python-venv/bin/python bench/parse_cost.py [--rounds 20]   (the package installed: tests/run.sh python)
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import PTN

from dhtcrawler.app.classify import classify

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "release_names" / "release_names.tsv"


def files_of(row):
    if not row["files"]:
        return [(row["name"], int(row["total_size"]))]
    return [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in row["files"].split("|")]


def timed(fn, items, rounds):
    out = []
    for _ in range(rounds):
        for item in items:
            started = time.perf_counter()
            fn(item)
            out.append((time.perf_counter() - started) * 1000)
    out.sort()
    return {"p50_ms": round(out[len(out) // 2], 3), "p95_ms": round(out[int(len(out) * 0.95)], 3),
            "mean_ms": round(statistics.fmean(out), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    with open(SAMPLE, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    items = [(r["name"], files_of(r), int(r["total_size"])) for r in rows]
    print(json.dumps({"names": len(items), "rounds": args.rounds,
                      "classify": timed(lambda i: classify(*i), items, args.rounds),
                      "ptn_parse_alone": timed(lambda i: PTN.parse(i[0]), items, args.rounds)}))


if __name__ == "__main__":
    main()
