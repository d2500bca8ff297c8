"""One member of a test fleet: the CLI's acceptance policy (Acceptance over a DatabaseSink,
as ``crawl --store`` runs it) offered torrents the test names on standard input, one
``NUMBER`` a line. A torrent answered RETRY is offered again (the library would fetch it
again), after a pause, until stored. After every answer a JSON line of counters goes to
standard output, with the numbers answered since the line before (``answered``). Run by
test_fleet_restart.py and tests/pg/fleet_kill9.py; stops at end of input once nothing is
pending.

    python fleet_member.py POSTGRESQL_URI"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

from dhtcrawler import Answer, Torrent
from dhtcrawler.app.acceptance import Acceptance
from dhtcrawler.app.db import Database
from dhtcrawler.app.sinks import DatabaseSink


def torrent(number: int) -> Torrent:
    key = f"{number:040x}"
    doc = {"schema": 1, "info_hash": key, "info_hash_v1": key, "info_hash_v2": None, "version": "v1",
           "name": f"fleet torrent {number}", "total_size": 1000 + number, "num_files": 2, "piece_length": 16384,
           "private": False, "files": [{"path": f"a/{number}.bin", "size": 1000}, {"path": "b.txt", "size": number}],
           "peer": "127.0.0.1:1", "discovered_at": "2026-12-01T00:00:00Z"}
    return Torrent.from_json(json.dumps(doc))


def main() -> int:
    sink = DatabaseSink(Database(sys.argv[1]))
    accept = Acceptance(sink, None, report=lambda _line: None)
    offered: "queue.Queue[int]" = queue.Queue()
    done = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            offered.put(int(line))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    retries = 0
    pending = []
    answered: list = []  # since the last line: the numbers stored or found stored
    while not (done.is_set() and offered.empty() and not pending):
        try:
            pending.append(offered.get(timeout=0.05))
        except queue.Empty:
            pass
        for number in list(pending):
            if accept(torrent(number)) is Answer.RETRY:
                retries += 1
                time.sleep(0.05)  # the library's retry comes later; the test's comes soon
                break
            pending.remove(number)
            answered.append(number)
        print(json.dumps({"accepted": accept.accepted, "seen_again": accept.seen_again, "retries": retries,
                          "pending": len(pending), "reconnects": sink.reconnects, "answered": answered}), flush=True)
        answered = []
    accept.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
