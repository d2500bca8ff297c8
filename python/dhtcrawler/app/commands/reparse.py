"""``dhtcrawler reparse``: the backfill of parsed release names (app/backfill.py) on an
existing database, batched and resumable, with progress on stderr."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .common import EXIT_OK, UsageError, count, database, db_flags, open_failure


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reparse", help="parse the release names of torrents stored before the indexer "
                                       "(batched, resumable)")
    db_flags(p)
    p.add_argument("--batch", type=count, default=1000, metavar="N", help="torrents per transaction (default 1000)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..backfill import backfill
    from ..sinks import DatabaseSink

    db = database(args)
    if not db.exists():
        raise UsageError(f"--db {db.target}: no such file")
    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    try:
        sink = DatabaseSink(db)  # migrates the schema as a crawl would
    except Exception as e:  # sqlite3.Error, DatabaseError, SchemaError
        raise open_failure(db, e) from None
    started = time.monotonic()

    def progress(done: int, left: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-3)
        print(f"dhtcrawler: parsed {done} torrents, {left} left ({rate:.0f}/s)", file=sys.stderr)

    try:
        n = backfill(sink, batch=args.batch, progress=progress)
    finally:
        sink.close()
    print(f"dhtcrawler: reparse done: {n} torrents parsed in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return EXIT_OK
