"""The classifier's accuracy on the labelled sample (tests/data/release_names): a table by
content type (docs/indexer.md).

    python3 tools/release_accuracy.py [--part held|tune|all] [--sample FILE.tsv] [--errors]

Needs the dhtcrawler package importable (with parse-torrent-title).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Dict, List

from dhtcrawler.app.classify import classify

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "release_names" / "release_names.tsv"


def files_of(row: Dict[str, str]):
    if not row["files"]:
        return [(row["name"], int(row["total_size"]))]
    return [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in row["files"].split("|")]


def _int(text: str):
    return int(text) if text else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="held", choices=("held", "tune", "all"))
    ap.add_argument("--sample", default=str(SAMPLE),
                    help="the labelled sample (default release_names.tsv; held_3502.tsv is the second held sample)")
    ap.add_argument("--errors", action="store_true", help="print every miss")
    args = ap.parse_args()
    with open(args.sample, encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if args.part in ("all", r["part"])]
    by_type: Dict[str, List[int]] = {}  # type -> [names, type right, season/episode right (tv), year right]
    spent = 0.0
    for r in rows:
        started = time.perf_counter()
        got = classify(r["name"], files_of(r), int(r["total_size"]))
        spent += time.perf_counter() - started
        t = by_type.setdefault(r["type"], [0, 0, 0, 0, 0])
        t[0] += 1
        type_ok = got["content_type"] == r["type"]
        t[1] += type_ok
        se_ok = all(got[k] == _int(r[k]) for k in ("season", "season_end", "episode", "episode_end"))
        t[2] += se_ok
        year_ok = r["type"] != "movie" or got["year"] == _int(r["year"])
        t[3] += year_ok
        t[4] += not r["resolution"] or got["resolution"] == r["resolution"]
        if args.errors and not (type_ok and (se_ok or r["type"] != "tv_show") and year_ok):
            print(f"MISS {r['type']:>9} {r['name']!r}: {got}", file=sys.stderr)
    print(f"part: {args.part} ({len(rows)} names); {spent / len(rows) * 1000:.2f} ms per name")
    print("| type | names | content type | season/episode | year (movies) | resolution |")
    print("|---|---:|---:|---:|---:|---:|")
    tot = [0, 0, 0, 0, 0]
    for ctype in sorted(by_type):
        t = by_type[ctype]
        tot = [a + b for a, b in zip(tot, t)]
        se = f"{100 * t[2] / t[0]:.1f}%" if ctype == "tv_show" else ""
        yr = f"{100 * t[3] / t[0]:.1f}%" if ctype == "movie" else ""
        print(f"| {ctype} | {t[0]} | {100 * t[1] / t[0]:.1f}% | {se} | {yr} | {100 * t[4] / t[0]:.1f}% |")
    print(f"| all | {tot[0]} | {100 * tot[1] / tot[0]:.1f}% | | | {100 * tot[4] / tot[0]:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
