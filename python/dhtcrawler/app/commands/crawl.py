"""``dhtcrawler crawl``: the DHT into the torrent database (SQLite, or a fleet's
PostgreSQL) and JSON lines, with swarm scrapes, a status line, metrics and the web server
beside it."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from typing import Any, Dict, Optional, Sequence

from ... import __version__
from ..._crawler import Crawler, default_options
from ..._errors import StoreError
from ..acceptance import Acceptance
from ..db.postgres import PgConnectError, PgError
from ..signals import Stopper
from ..sinks import RECONNECT_PAUSE_MAX, DatabaseSink, JsonlSink
from ..status import StatusLine
from .common import (DEFAULT_DB, EXIT_OK, StartError, UsageError, age, count, database, error_printer, load_rules,
                     rules_flags,
                     non_negative_seconds, open_failure, port, positive_seconds, scrape_rate)
from .serve import web_app, web_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("crawl", help="crawl the DHT into SQLite (and JSON lines)")
    p.add_argument("--port", type=port, help="DHT UDP port (default 6881; 0: any free port)")
    p.add_argument("--bind", action="append", metavar="ADDR",
                       help="local address (IPv4 or IPv6; repeat for both)")
    p.add_argument("--netmode", choices=("ipv4", "ipv6", "dual"))
    p.add_argument("--bootstrap", action="append", default=[], metavar="HOST:PORT",
                       help="extra bootstrap node (repeatable)")
    p.add_argument("--no-default-bootstrap", action="store_true",
                       help="use only the --bootstrap nodes, not the public routers")
    p.add_argument("--allow-private", action="store_true",
                       help="admit private and loopback nodes (labs, tests)")
    p.add_argument("--out", metavar="FILE.jsonl|-", help="also write JSON lines (- is stdout)")
    p.add_argument("--db", metavar="FILE.sqlite",
                       help=f"SQLite database for torrents and retry state (default ./{DEFAULT_DB})")
    p.add_argument("--store", metavar="postgresql://...",
                       help="join a fleet: torrents and retry state in this PostgreSQL database")
    p.add_argument("--store-wait", type=non_negative_seconds, default=60.0, metavar="SECONDS",
                       help="with --store: wait up to this long for the server to accept connections at "
                            "start, as when a fleet and its database start together (default 60; 0: fail "
                            "at once)")
    p.add_argument("--duration", type=positive_seconds, metavar="SECONDS", help="stop after this long")
    p.add_argument("--options", metavar="FILE.json", help="options document (flags override it)")
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus text at /metrics")
    p.add_argument("--serve", metavar="HOST:PORT",
                       help="also serve the search page, API, Torznab and /metrics (see dhtcrawler serve)")
    web_flags(p)
    rules_flags(p)
    p.add_argument("--quiet", action="store_true", help="no status line")
    p.add_argument("--scrape-rate", type=scrape_rate, default=30.0, metavar="N/min",
                       help="BEP-33 swarm refreshes of stored torrents, at most N a minute (never measured "
                            "first, then the hottest and newest; 0: none; default 30/min). Each new torrent "
                            "is scraped at delivery besides")
    p.add_argument("--scrape-every", type=age, default=6 * 3600.0, metavar="AGE",
                       help="refresh a stored swarm estimate once it is older than AGE (default 6h)")
    p.add_argument("--no-scrape", action="store_true", help="no swarm scrapes at all")
    p.add_argument("--max-files", type=count, metavar="N",
                       help="store at most N file rows per torrent (the file count and total "
                            "size still cover every file; default: all)")

    p.set_defaults(run=run)


# ---- options ------------------------------------------------------------------------------

def _set_path(doc: Dict[str, Any], path: Sequence[str], value: Any) -> None:
    for key in path[:-1]:
        child = doc.get(key)
        if not isinstance(child, dict):
            child = {}
            doc[key] = child
        doc = child
    doc[path[-1]] = value


def _get_path(doc: Dict[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def load_options_file(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise UsageError(f"--options {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"--options {path}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--options {path}: expected a JSON object")
    return doc


def crawl_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The options document: --options FILE first, then every flag given on top of it."""
    doc = load_options_file(args.options) if args.options else {}
    if args.port is not None:
        doc["port"] = args.port
    if args.netmode is not None:
        doc["netmode"] = args.netmode
    for address in args.bind or []:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise UsageError(f"--bind {address}: not an IPv4 or IPv6 address") from None
        doc["bind_v6" if ip.version == 6 else "bind_v4"] = str(ip)
    if args.allow_private:
        doc["allow_private_addresses"] = True
    sources_path = ("crawl", "bootstrap", "sources")
    if args.no_default_bootstrap:
        _set_path(doc, sources_path, list(args.bootstrap))
    elif args.bootstrap:
        base = _get_path(doc, sources_path)
        if base is None:
            base = _get_path(default_options(), sources_path) or []
        _set_path(doc, sources_path, list(base) + list(args.bootstrap))
    _choose_retry_store(doc, args)
    return doc


def _choose_retry_store(doc: Dict[str, Any], args: argparse.Namespace) -> None:
    """Retry state lives beside the torrents: in the --db file, or with --store in the
    fleet's PostgreSQL. An options file that names a retry store keeps it, unless --store
    or --db says otherwise on the command line."""
    if args.store or args.db or _get_path(doc, ("retry", "store", "kind")) is None:
        db = database(args, exclusive="--db and --store exclude each other (with --store, torrents and retry "
                                      "state go to PostgreSQL)")
        _set_path(doc, ("retry", "store"), db.retry_store())


def _serve_metrics(spec: Optional[str], text: Any) -> Any:
    if not spec:
        return None
    from ..metrics_server import MetricsServer, parse_host_port

    try:
        address = parse_host_port(spec)
    except ValueError as e:
        raise UsageError(f"--metrics: {e}") from None
    try:
        server = MetricsServer(address, text)
    except OSError as e:
        raise UsageError(f"--metrics {spec}: {e.strerror or e}") from None
    server.start()
    return server


def _open_sinks(args: argparse.Namespace) -> tuple:
    """The torrent database (SQLite, or PostgreSQL with --store) and the --out stream. An
    unreachable server is a start-up failure (exit 1); a bad file or path a usage error (2)."""
    where = database(args)
    try:
        db = DatabaseSink(where, max_files=args.max_files, rules=load_rules(args))
    except Exception as e:  # sqlite3.Error, DatabaseError, SchemaError, OSError
        raise open_failure(where, e) from None
    try:
        jsonl = JsonlSink(args.out) if args.out else None
    except OSError as e:
        db.close()
        raise UsageError(f"--out {args.out}: {e}") from None
    return db, jsonl


def _create_crawler(args: argparse.Namespace, options: Dict[str, Any]) -> Crawler:
    """The crawler opens its retry store at once: an unusable --db file is a bad flag
    (exit 2), an unreachable --store server a start-up failure (exit 1)."""
    try:
        return Crawler(options)  # OptionsError: exit 2 (main)
    except StoreError as e:
        if args.store:
            raise StartError(f"--store: {e.message}") from None
        if args.db:
            raise UsageError(f"--db {args.db}: {e.message}") from None
        raise StartError(e.message) from None


def _wait_for_store(args: argparse.Namespace, *, clock: Any = time.monotonic, sleep: Any = time.sleep) -> None:
    """With --store, waits (up to --store-wait seconds, backing off from 0.5 s to the sink's
    RECONNECT_PAUSE_MAX) until the server accepts a connection: in a compose file or after a
    reboot the crawler often starts before its database, and a crawler that exits then only
    restarts in a loop. A server still unreachable at the end is the start-up failure it
    always was."""
    if not args.store or args.store_wait <= 0:
        return
    db = database(args)
    deadline = clock() + args.store_wait
    pause, said = 0.5, False
    while True:
        try:
            db.connect().close()
            return
        except PgError as e:
            # Only a server that did not answer is waited for; a bad URI, password or
            # database, or no driver, fails at once.
            if not isinstance(e, PgConnectError) or clock() + pause > deadline:
                raise open_failure(db, e) from None
            if not said:
                print(f"dhtcrawler: waiting up to {args.store_wait:g} s for {db.describe()}: {e}",
                      file=sys.stderr, flush=True)
                said = True
        try:
            sleep(pause)
        except KeyboardInterrupt:
            raise StartError(f"--store: interrupted while waiting for {db.describe()}") from None
        pause = min(pause * 2, RECONNECT_PAUSE_MAX)


def run(args: argparse.Namespace) -> int:
    _wait_for_store(args)
    crawler = _create_crawler(args, crawl_options(args))
    db = jsonl = None
    metrics = status = web = scraper = None
    try:
        db, jsonl = _open_sinks(args)
        store = Acceptance(db, jsonl)
        crawler.on_torrent(store, ack=True)
        if not args.no_scrape:
            from ..swarm import SwarmScraper

            scraper = SwarmScraper(crawler, db, args.scrape_rate, refresh_after=args.scrape_every)
            store.on_new = scraper.request
        rules = db.rules

        def metrics_text() -> str:  # the library's, then the content rules' counters
            return crawler.metrics() + (rules.metrics() if rules else "")

        metrics = _serve_metrics(args.metrics, metrics_text)
        if args.serve:
            web = web_app(args, db.database, metrics_text, args.serve, "--serve", rules=rules)
            web.start()
        if not args.quiet:
            status = StatusLine(crawler, lambda: store.accepted)
            status.rules = rules
        store.report = error_printer(status)
        crawler.on_error(store.report)
        if scraper is not None:
            scraper.report = store.report
        stopper = Stopper(crawler, args.duration)
        stopper.install()
        try:
            crawler.start()
            if not args.quiet:
                endpoints = ", ".join(crawler.endpoints)
                print(f"dhtcrawler {__version__}: crawling on {endpoints}; storing into {db.path}"
                      + (f" and {args.out}" if args.out else "")
                      + (f"; metrics on http://{args.metrics}/metrics" if args.metrics else "")
                      + (f"; serving on {web.url}" if web is not None else ""),
                      file=sys.stderr, flush=True)
            if status is not None:
                status.start()
            if scraper is not None:
                scraper.start()
            stopper.wait()
        finally:
            if scraper is not None:
                scraper.stop()
            # No torrent callback after this: the sinks can close. A torrent being stored is
            # waited for, however long it takes (acceptance means durable).
            crawler.close(timeout=None)
            stopper.restore()
        if not args.quiet:
            if status is not None:
                status.stop()
                status = None
            again = f" ({store.seen_again} stored already)" if store.seen_again else ""
            if store.sink_failures:
                again += f" ({store.sink_failures} could not be stored, to be fetched again)"
            if store.dropped:
                again += f" ({store.dropped} dropped by rules)"
            print(f"dhtcrawler: stopped ({stopper.reason or 'shutdown'}): {store.accepted} torrents "
                  f"accepted{again}, {db.count()} in {db.path}", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        if status is not None:
            status.stop()
        if metrics is not None:
            metrics.close()
        if web is not None:
            web.close()
        crawler.close(timeout=None)
        for sink in (jsonl, db):
            if sink is not None:
                sink.close()


