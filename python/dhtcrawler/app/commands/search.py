"""``dhtcrawler search``: the torrents matching a query, as a table or JSON lines."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import search as S
from ..classify import CONTENT_TYPES
from ..db.errors import DatabaseError
from .common import EXIT_OK, StartError, UsageError, connect_for_reading, count, database, db_flags, human_size, size


def add_parser(sub: Any) -> None:
    p = sub.add_parser("search", help="search the torrents in the database")
    p.add_argument("query", nargs="*", help="words, each to occur in the name or a file path; a quoted "
                                            "argument (\"two words\") is one phrase (none: every torrent)")
    db_flags(p, store_help="search a fleet's PostgreSQL database instead")
    p.add_argument("--limit", type=count, default=20, metavar="N", help="results to show (default 20)")
    p.add_argument("--offset", type=count, default=0, metavar="N", help="skip the first N results")
    p.add_argument("--sort", default="relevance",
                   help="relevance (default), size, first_seen, last_seen, files, name (A to Z), swarm "
                        "(seeders + leechers of the latest estimate; unmeasured torrents last)")
    p.add_argument("--order", choices=("asc", "desc"), help="for size, first_seen...: default desc (name: asc)")
    p.add_argument("--min-size", type=size, metavar="SIZE", help="e.g. 700M, 4G")
    p.add_argument("--max-size", type=size, metavar="SIZE")
    p.add_argument("--min-files", type=count, metavar="N")
    p.add_argument("--max-files", type=count, metavar="N")
    p.add_argument("--version", choices=("v1", "v2", "hybrid"), help="BitTorrent version of the torrent")
    p.add_argument("--since", metavar="TIME", help="first seen at or after (RFC 3339, a date, or Unix seconds)")
    p.add_argument("--window", type=count, default=S.DEFAULT_WINDOW, metavar="N",
                   help=f"candidates a query considers (default {S.DEFAULT_WINDOW}); the count is exact below, "
                        "an estimate (\"about N\") above")
    p.add_argument("--type", action="append", choices=CONTENT_TYPES, metavar="TYPE",
                   help="content type (repeatable): " + ", ".join(CONTENT_TYPES))
    p.add_argument("--cat", action="append", type=int, metavar="N", help="Torznab category (repeatable): 5000, 5040...")
    p.add_argument("--season", type=count, metavar="N", help="an episode of season N, or a pack holding it")
    p.add_argument("--episode", type=count, metavar="N", help="episode N")
    p.add_argument("--year", type=count, metavar="YYYY")
    p.add_argument("--resolution", metavar="RES", help="e.g. 1080p")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    conn = connect_for_reading(database(args))
    try:
        total, rows, estimate = S.search_page(conn, S.cli_query(args.query), limit=args.limit, offset=args.offset,
                                              sort=args.sort, order=args.order, min_size=args.min_size,
                                              max_size=args.max_size, min_files=args.min_files,
                                              max_files=args.max_files, version=args.version, since=args.since,
                                              content_type=args.type, categories=args.cat, season=args.season,
                                              episode=args.episode, year=args.year, resolution=args.resolution,
                                              window=args.window or None)
    except S.QueryError as e:
        raise UsageError(str(e)) from None
    except DatabaseError as e:
        raise StartError(f"--store: {e}") from None
    finally:
        conn.close()
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        return EXIT_OK
    print(f"{'about ' if estimate else ''}{total} found" + (f", showing {args.offset + 1}-{args.offset + len(rows)}" if rows else ""))
    if rows:
        print(f"{'size':>10}  {'files':>6}  {'first seen':<10}  {'version':<7}  {'swarm':>11}  {'type':<9}  "
              f"{'info hash':<40}  name")
        for r in rows:
            swarm = "?" if r["seeders"] is None else f"{r['seeders']}/{r['leechers']}"
            print(f"{human_size(r['total_size']):>10}  {r['num_files']:>6}  {r['first_seen'][:10]:<10}  "
                  f"{r['version'] or '?':<7}  {swarm:>11}  {r['content_type'] or '?':<9}  {r['info_hash']:<40}  "
                  f"{r['name']}")
    return EXIT_OK
