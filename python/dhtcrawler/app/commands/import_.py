"""``dhtcrawler import``: dumps (JSON lines, .zst) or magnetico databases merged into the
database, their hashes marked delivered in the retry store beside it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ..._errors import StoreError
from .common import EXIT_OK, UsageError, database, db_flags, load_rules, open_failure, rules_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("import", help="merge dumps (JSON lines, .zst) or magnetico databases into the database")
    p.add_argument("files", nargs="+", metavar="FILE")
    db_flags(p)
    p.add_argument("--refetch", action="store_true",
                   help="do not mark the imported hashes delivered (a crawl fetches them again)")
    p.add_argument("--parse-later", action="store_true",
                   help="leave the release names the dump did not parse to `dhtcrawler reparse` "
                        "(parsing them takes about 2 ms a torrent)")
    rules_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..db.errors import DatabaseError
    from ..dumps import DumpError, import_files
    from ..progress import progress

    db = database(args)
    for path in args.files:
        if path != "-" and not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
    rules = load_rules(args)
    started = time.monotonic()
    try:
        with progress("importing") as shown:
            counts = import_files(db, args.files, refetch=args.refetch, progress=shown, rules=rules,
                                  parse=not args.parse_later)
    except DumpError as e:
        raise UsageError(str(e)) from None
    except StoreError as e:  # the retry store could not be created or migrated
        raise open_failure(db, e.message) from None
    except DatabaseError as e:
        raise open_failure(db, e) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{type(e).__name__}: {e}") from None
    secs = time.monotonic() - started
    print(f"dhtcrawler: imported {counts['read']} torrents into {db.describe()} ({counts['new']} new, "
          f"{counts['merged']} merged, {counts['dropped']} dropped by rules, {counts['parsed']} names parsed) "
          f"in {secs:.1f} s"
          + ("" if args.refetch else "; marked delivered"),
          file=sys.stderr)
    return EXIT_OK
