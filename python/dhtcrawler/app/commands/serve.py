"""``dhtcrawler serve``: the search page, the JSON API and Torznab over a crawl's database;
also the web server ``crawl --serve`` runs beside the crawl."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, Callable, Optional

from ... import __version__
from ..db import Database
from .common import (DEFAULT_DB, EXIT_OK, StartError, UsageError, database, db_flags, load_rules, open_failure,
                     rules_flags)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="the search page, a JSON API and Torznab over a crawl's database")
    db_flags(p, f"the crawl's SQLite database (default ./{DEFAULT_DB})")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:8080)")
    web_flags(p)
    rules_flags(p)
    p.set_defaults(run=run)


def web_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auth", choices=("auto", "on", "off"), default="auto",
                   help="require the API key: auto (default) requires it when listening beyond loopback")
    p.add_argument("--api-key", metavar="KEY",
                   help="the API key (default: $DHTCRAWLER_API_KEY, else a new one printed at start)")


def web_app(args: argparse.Namespace, db: Database, metrics: Optional[Callable[[], str]], spec: str,
            flag: str, rules: Any = None) -> Any:
    """The web server for ``serve`` and ``crawl --serve`` over ``db``: its address parsed,
    its key chosen (printed once when generated), its socket bound. Usage errors exit 2; an
    unreachable --store server is a start-up failure (exit 1)."""
    from ..metrics_server import parse_host_port

    try:
        address = parse_host_port(spec)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None
    try:
        from ..web import auth
        from ..web.app import create_app
        from ..web.server import WebServer
    except ImportError as e:
        raise StartError(f"{flag} needs the serve extra (pip install 'dhtcrawler[serve]'): {e}") from None
    key = None
    if auth.auth_required(address[0], args.auth):
        key, generated = auth.choose_key(args.api_key)
        if generated:
            print(f"dhtcrawler: API key (give it as ?apikey=, X-Api-Key, or the basic-auth password): {key}",
                  file=sys.stderr, flush=True)
    try:  # fails now, not at the first request
        conn = db.connect(read_only=True)
        try:
            conn.execute("SELECT 1 FROM torrents LIMIT 1")
        finally:
            conn.close()
    except Exception as e:  # sqlite3.Error (not a crawl database), DatabaseError
        raise open_failure(db, e) from None
    app = create_app(db, api_key=key, metrics=metrics, version=__version__, rules=rules)
    try:
        return WebServer(app, address)
    except OSError as e:
        raise UsageError(f"{flag} {spec}: {e.strerror or e}") from None


def run(args: argparse.Namespace) -> int:
    db = database(args, exclusive="give --db or --store, not both")
    if not db.exists():
        raise UsageError(f"--db {db.target}: no such file (crawl into it first)")
    rules = load_rules(args)
    server = web_app(args, db, None, args.listen, "--listen", rules=rules)
    print(f"dhtcrawler {__version__}: serving {db.describe()} on {server.url}", file=sys.stderr, flush=True)
    # uvicorn stops on SIGINT/SIGTERM and passes the signal on: to these, so the exit is clean.
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    finally:
        server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("dhtcrawler: stopped serving", file=sys.stderr, flush=True)
    return EXIT_OK
