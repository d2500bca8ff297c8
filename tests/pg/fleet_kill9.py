#!/usr/bin/env python3
"""kill -9 of a fleet member while it stores, again and again (issue 33): 0 lost, 0 stored
twice. Not run by CI (minutes); needs a PostgreSQL database, best a fresh schema:

    build/python-venv/bin/python tests/pg/fleet_kill9.py \\
        'postgresql://USER:PASS@127.0.0.1:5432/DB?options=-csearch_path%3Dkill9' [--kills 100] [--per-kill 40]

Two fleet members (tests/python/app/fleet_member.py: the CLI's acceptance policy over a
DatabaseSink, as ``crawl --store`` runs it) share the database. Each cycle offers a new batch
of torrents: half to the doomed member alone, half to both members at once (two crawlers
that met the same torrent). The doomed member is killed with SIGKILL at a random moment while
it stores, then:

- lost: a torrent it answered (accepted, so durable by the acceptance rule) that the
  database does not hold, checked right after the kill;
- the torrents it had not answered are offered to its successor, as the library would fetch
  them again, and the cycle waits until every torrent of the batch is held;
- stored twice: a torrent held by more than one row.

Prints one JSON line per cycle and a summary; exits 1 on any loss or duplicate."""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Set

from dhtcrawler.app.db import Database

MEMBER = str(Path(__file__).resolve().parents[1] / "python" / "app" / "fleet_member.py")


class Member:
    """A fleet_member.py process; collects the numbers it answered."""

    def __init__(self, uri: str) -> None:
        self.proc = subprocess.Popen([sys.executable, MEMBER, uri], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.answered: Set[int] = set()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.answered.update(json.loads(line).get("answered", []))
            except ValueError:
                pass

    def offer(self, numbers: List[int]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{n}\n" for n in numbers))
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.reader.join(timeout=10)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)
        self.reader.join(timeout=10)


def held(conn, numbers: List[int]) -> dict:
    """Rows per torrent number among ``numbers``."""
    names = [f"fleet torrent {n}" for n in numbers]
    rows = conn.execute("SELECT name, count(*) FROM torrents WHERE name = ANY(?) GROUP BY name", (names,))
    return {int(name.rsplit(" ", 1)[1]): int(c) for name, c in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("uri")
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--per-kill", type=int, default=40, help="torrents offered per cycle")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wait", type=float, default=60.0, help="seconds a cycle waits for its batch to be held")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    conn = Database(args.uri).connect()
    base = int(time.time()) * 10**6  # numbers no earlier run used
    steady = Member(args.uri)
    lost_total = dup_total = 0
    started = time.monotonic()
    for cycle in range(args.kills):
        batch = list(range(base + cycle * args.per_kill, base + (cycle + 1) * args.per_kill))
        alone, shared = batch[::2], batch[1::2]
        doomed = Member(args.uri)
        doomed.offer(alone + shared)
        steady.offer(shared)
        until = time.monotonic() + 30
        while not doomed.answered and time.monotonic() < until:  # it stores...
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.2))  # ... and dies somewhere inside that
        doomed.kill()
        answered = sorted(doomed.answered)
        counts = held(conn, answered)
        lost = [n for n in answered if counts.get(n, 0) == 0]
        successor = Member(args.uri)
        successor.offer([n for n in alone if n not in doomed.answered])
        successor.close()
        deadline = time.monotonic() + args.wait
        while True:
            counts = held(conn, batch)
            if len(counts) == len(batch) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        missing = [n for n in batch if n not in counts]
        twice = [n for n, c in counts.items() if c > 1]
        lost_total += len(lost) + len(missing)
        dup_total += len(twice)
        print(json.dumps({"cycle": cycle + 1, "answered_before_kill": len(answered), "lost": lost, "missing": missing,
                          "stored_twice": twice}), flush=True)
    steady.close()
    print(json.dumps({"kills": args.kills, "torrents": args.kills * args.per_kill, "lost": lost_total,
                      "stored_twice": dup_total, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    return 1 if lost_total or dup_total else 0


if __name__ == "__main__":
    sys.exit(main())
