"""``dhtcrawler export``: the database's torrents as JSON lines (zstd for ``.zst``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, UsageError, connect_for_reading, database, db_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="write the database's torrents as JSON lines (.zst: compressed)")
    db_flags(p)
    p.add_argument("--since", metavar="TIME", help="only torrents seen at or after (RFC 3339, a date, Unix seconds)")
    p.add_argument("-o", "--output", metavar="FILE[.zst]", help="default: standard output")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..dumps import DumpError, export
    from ..progress import progress

    db = database(args)
    connect_for_reading(db).close()
    try:
        with progress("exporting") as shown:
            n = export(db, args.output, since=args.since, progress=shown)
    except DumpError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"-o {args.output}: {e.strerror or e}") from None
    if args.output not in (None, "-"):
        print(f"dhtcrawler: exported {n} torrents to {args.output}", file=sys.stderr)
    return EXIT_OK
