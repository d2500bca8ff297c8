"""``dhtcrawler prune``: torrents removed by age or size, or all but the best N, with a dry
run that lists exactly what a real run removes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (EXIT_OK, UsageError, age, count, database, db_flags, human_size, load_rules, open_failure,
                     rules_flags, size)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("prune", help="remove torrents by age or size, or keep the top N (--dry-run lists them)")
    db_flags(p)
    rule = p.add_mutually_exclusive_group(required=True)
    rule.add_argument("--apply-rules", action="store_true",
                      help="apply the content rules (the default set and --rules FILE) to every torrent held: "
                           "drop removes, hide hides, tag tags")
    rule.add_argument("--older-than", type=age, metavar="AGE",
                      help="remove torrents last seen longer ago than AGE (90s, 30m, 12h, 30d, 2w)")
    rule.add_argument("--max-size", type=size, metavar="SIZE",
                      help="remove the least recently seen torrents until the torrents take at most SIZE (e.g. 2G)")
    rule.add_argument("--keep-top", type=count, metavar="N",
                      help="keep the N best (largest measured swarm, then most often and latest seen)")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; change nothing")
    rules_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Lists (with --dry-run) or removes the torrents the rule selects: one line per torrent
    on stdout (info hash, last seen, times seen, name), a summary on stderr."""
    from .. import prune as P
    from ..progress import progress
    from ..sinks import DatabaseSink

    db = database(args)
    if not db.exists():
        raise UsageError(f"--db {db.target}: no such file")
    try:
        sink = DatabaseSink(db)  # migrates the schema as a crawl would
    except Exception as e:  # sqlite3.Error, DatabaseError, SchemaError
        raise open_failure(db, e) from None
    try:
        if args.apply_rules:
            return _apply_rules(args, sink)
        try:
            selected = P.plan(sink, older_than=args.older_than, max_size=args.max_size, keep_top=args.keep_top)
        except P.PruneError as e:
            raise UsageError(str(e)) from None
        for v in selected.victims:
            print(f"{v.info_hash}\t{v.last_seen}\t{v.times_seen}\t{v.name}")
        sizes = "" if selected.size is None else (
            f"; the torrents take {human_size(selected.size)}, the limit is {human_size(selected.target or 0)}")
        if args.dry_run:
            print(f"dhtcrawler prune: would remove {len(selected.victims)} of {selected.torrents} torrents "
                  f"(about {human_size(selected.freed)}){sizes}", file=sys.stderr)
            return EXIT_OK
        with progress("pruning", len(selected.victims)) as shown:
            removed = P.remove(sink, selected, shown)
        compacted = P.compact(sink) if removed else None
        shrunk = {None: "", True: "; file compacted",
                  False: "; the file is busy: its free pages are reused, not returned"}[compacted]
        print(f"dhtcrawler prune: removed {removed} of {selected.torrents} torrents "
              f"(about {human_size(selected.freed)}){sizes}{shrunk}", file=sys.stderr)
        return EXIT_OK
    finally:
        sink.close()


def _apply_rules(args: argparse.Namespace, sink: Any) -> int:
    """prune --apply-rules: lists the torrents the rules drop (as the other rules list what
    they remove), then carries out drop, hide and tag unless --dry-run."""
    from .. import prune as P

    rules = load_rules(args)
    selected = P.plan_rules(sink, rules)
    for v in selected.drop.victims:
        print(f"{v.info_hash}\t{v.last_seen}\t{v.times_seen}\t{v.name}")
    if args.dry_run:
        print(f"dhtcrawler prune: the rules would remove {len(selected.drop.victims)}, hide {len(selected.hide)} "
              f"and tag {len(selected.tag)} of {selected.drop.torrents} torrents", file=sys.stderr)
        return EXIT_OK
    removed, hidden, tagged = P.apply_rules(sink, selected)
    print(f"dhtcrawler prune: the rules removed {removed}, hid {hidden} and tagged {tagged} of "
          f"{selected.drop.torrents} torrents; {rules.summary()}", file=sys.stderr)
    return EXIT_OK
