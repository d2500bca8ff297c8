#!/usr/bin/env python3
"""Ctrl-C latency of the Python binding: SIGINT to KeyboardInterrupt out of Crawler.run()
while a callback is blocked on its own thread.

Each run starts the child of tests/python/test_lifecycle.py (a crawler whose observation
callback blocks on an event), sends it SIGINT once the callback blocks, and takes the time
between the signal and the KeyboardInterrupt (CLOCK_MONOTONIC, shared by the processes).
Prints one JSON line. Needs the package installed (pip install .).

    build/python-venv/bin/python bench/python_ctrl_c.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from test_lifecycle import run_ctrl_c_child  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    latencies, blocked = [], 0
    for _ in range(args.runs):
        r = run_ctrl_c_child(hold=10.0)
        if not r.get("interrupted"):
            raise SystemExit(f"run() did not raise KeyboardInterrupt: {r}")
        latencies.append((r["at"] - r["sent"]) * 1000.0)
        blocked += bool(r["callback_still_blocked"])
    latencies.sort()
    print(json.dumps({
        "bench": "python_ctrl_c",
        "runs": args.runs,
        "raised_while_callback_blocked": blocked,
        "median_ms": round(statistics.median(latencies), 2),
        "p90_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.9))], 2),
        "max_ms": round(latencies[-1], 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
