"""The `dhtcrawler` command: crawl into SQLite (or, in a fleet, PostgreSQL) and JSON lines,
serve the search page, JSON API and Torznab, run the test network, demo.

Exit status: 0 after a clean stop (--duration, SIGINT, SIGTERM), 2 for bad options or
arguments (one line on stderr), 1 for other failures.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import __version__
from ._crawler import Crawler, default_options
from ._errors import DhtcError, OptionsError, StoreError
from ._types import Answer, Torrent
from .sinks import JsonlSink, PostgresSink, SqliteSink
from .status import StatusLine

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_DB = "dhtcrawler.sqlite"


class UsageError(Exception):
    """A bad flag value or options file: one line on stderr, exit status 2."""


class StartError(Exception):
    """Something the crawl needs could not be opened (a database): one line, exit status 1."""


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
    if args.store:
        if args.db:
            raise UsageError("--db and --store exclude each other (with --store, torrents and retry "
                             "state go to PostgreSQL)")
        if not args.store.startswith(("postgresql://", "postgres://")):
            raise UsageError(f"--store {args.store}: expected a postgresql://user@host:port/database URI")
        _set_path(doc, ("retry", "store"), {"kind": "postgresql", "conninfo": args.store})
    elif args.db or _get_path(doc, ("retry", "store", "kind")) is None:
        _set_path(doc, ("retry", "store"), {"kind": "sqlite", "path": os.path.abspath(args.db or DEFAULT_DB)})


# ---- crawl --------------------------------------------------------------------------------

class _Store:
    """The CLI's torrent callback: a torrent is accepted only once every sink holds it.
    One the database holds already (a fleet's other crawler stored it, maybe under a
    hybrid's other key) is acknowledged but not written out again: each torrent reaches
    the JSON lines once per database.

    Acceptance means durable: when a sink fails (disk full, database locked, PostgreSQL
    down) the torrent is answered RETRY, not counted, and said so in one line; the library
    fetches it again (on the retry store's short schedule, or at its next announce). A
    torrent the database took but the JSON lines did not is written out when it comes back."""

    def __init__(self, db: Optional[Any], jsonl: Optional[JsonlSink],
                 show: Optional[Callable[[Torrent], None]] = None,
                 report: Optional[Callable[[str], None]] = None) -> None:
        self.db, self.jsonl, self.show = db, jsonl, show
        self.report = report or _error_printer(None)
        self.accepted = 0
        self.seen_again = 0
        self.sink_failures = 0
        self._not_written: set = set()  # in the database, not yet in the JSON lines
        self._lock = threading.Lock()
        self.on_new: Optional[Callable[[str], Any]] = None  # a new torrent stored (its key): the scrape

    def __call__(self, torrent: Torrent) -> Answer:
        try:
            with self._lock:
                new = self.db is None or self.db.add(torrent)
                if not new and torrent.info_hash not in self._not_written:
                    self.seen_again += 1
                    return Answer.ACCEPT
                if self.jsonl is not None:
                    self._not_written.add(torrent.info_hash)
                    self.jsonl.add(torrent)
                self._not_written.discard(torrent.info_hash)
                self.accepted += 1
        except Exception as e:  # noqa: BLE001 - any sink failure: not stored, fetched again
            self.sink_failures += 1
            self.report(f"could not store {torrent.info_hash} ({type(e).__name__}: {e}); "
                        "it will be fetched again")
            return Answer.RETRY
        if self.show is not None:
            self.show(torrent)
        if self.on_new is not None:
            self.on_new(torrent.info_hash)
        return Answer.ACCEPT

    def close(self) -> None:
        for sink in (self.jsonl, self.db):
            if sink is not None:
                sink.close()


class _Stopper:
    """SIGINT/SIGTERM and --duration end the run by shutting the crawler down; the main
    thread, waiting in slices, then closes everything in order."""

    def __init__(self, crawler: Crawler, duration: Optional[float]) -> None:
        self.crawler = crawler
        self.deadline = None if duration is None else time.monotonic() + duration
        self.reason: Optional[str] = None
        self._previous: Dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop(signal.Signals(signum).name)

    def stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.crawler.shutdown()

    def wait(self, until_done: Optional[Callable[[], bool]] = None) -> None:
        while not self.crawler.wait(0.1):
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.stop("duration")
            elif until_done is not None and until_done():
                self.stop("done")


def _error_printer(status: Optional[StatusLine]) -> Callable[[str], None]:
    def report(message: str) -> None:
        sys.stderr.write(("\n" if status is not None and status._tty else "") + f"dhtcrawler: {message}\n")
        sys.stderr.flush()

    return report


def _serve_metrics(spec: Optional[str], crawler: Crawler) -> Any:
    if not spec:
        return None
    from .metrics_server import MetricsServer, parse_host_port

    try:
        address = parse_host_port(spec)
    except ValueError as e:
        raise UsageError(f"--metrics: {e}") from None
    try:
        server = MetricsServer(address, crawler.metrics)
    except OSError as e:
        raise UsageError(f"--metrics {spec}: {e.strerror or e}") from None
    server.start()
    return server


def _web_app(args: argparse.Namespace, db_path: Optional[str], metrics: Optional[Callable[[], str]], spec: str,
             flag: str) -> Any:
    """The web server for ``serve`` and ``crawl --serve``, over ``db_path`` (a SQLite file)
    or, when it is None, ``args.store`` (PostgreSQL): its address parsed, its key chosen
    (printed once when generated), its socket bound. Usage errors exit 2; an unreachable
    --store server is a start-up failure (exit 1)."""
    from .metrics_server import parse_host_port

    try:
        address = parse_host_port(spec)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None
    try:
        from .web import auth
        from .web.app import PostgresDatabase, SqliteDatabase, create_app
        from .web.server import WebServer
    except ImportError as e:
        raise StartError(f"{flag} needs the serve extra (pip install 'dhtcrawler[serve]'): {e}") from None
    key = None
    if auth.auth_required(address[0], args.auth):
        key, generated = auth.choose_key(args.api_key)
        if generated:
            print(f"dhtcrawler: API key (give it as ?apikey=, X-Api-Key, or the basic-auth password): {key}",
                  file=sys.stderr, flush=True)
    db: Any
    if db_path is None:
        from ._pg import PgError

        try:
            db = PostgresDatabase(args.store)
        except PgError as e:
            raise StartError(f"--store: {e}") from None
    else:
        try:
            db = SqliteDatabase(db_path)
        except Exception as e:  # sqlite3.Error: not a crawl database
            raise UsageError(f"--db {db_path}: {e}") from None
    app = create_app(db, api_key=key, metrics=metrics, version=__version__)
    try:
        return WebServer(app, address)
    except OSError as e:
        raise UsageError(f"{flag} {spec}: {e.strerror or e}") from None


def run_serve(args: argparse.Namespace) -> int:
    if args.store and args.db:
        raise UsageError("give --db or --store, not both")
    path = None if args.store else (args.db or DEFAULT_DB)
    if path is not None and not os.path.exists(path):
        raise UsageError(f"--db {path}: no such file (crawl into it first)")
    server = _web_app(args, path, None, args.listen, "--listen")
    if path is None:
        from ._pg import describe

        what = describe(args.store)
    else:
        what = path
    print(f"dhtcrawler {__version__}: serving {what} on {server.url}", file=sys.stderr, flush=True)
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


def _open_sinks(args: argparse.Namespace) -> tuple:
    """The torrent database (SQLite, or PostgreSQL with --store) and the --out stream. An
    unreachable server is a start-up failure (exit 1); a bad file or path a usage error (2)."""
    from ._pg import PgError

    try:
        db = (PostgresSink(args.store) if args.store
              else SqliteSink(args.db or DEFAULT_DB, max_files=args.max_files))
    except PgError as e:
        raise StartError(f"--store: {e}") from None
    except Exception as e:  # sqlite3.Error, SchemaError, OSError
        raise UsageError(f"--db {args.db or DEFAULT_DB}: {e}") from None
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


def run_crawl(args: argparse.Namespace) -> int:
    crawler = _create_crawler(args, crawl_options(args))
    db = jsonl = None
    metrics = status = web = scraper = None
    try:
        db, jsonl = _open_sinks(args)
        store = _Store(db, jsonl)
        crawler.on_torrent(store, ack=True)
        if not args.no_scrape:
            from .swarm import SwarmScraper

            scraper = SwarmScraper(crawler, db, args.scrape_rate, refresh_after=args.scrape_every)
            store.on_new = scraper.request
        metrics = _serve_metrics(args.metrics, crawler)
        if args.serve:
            web = _web_app(args, None if args.store else db.path, crawler.metrics, args.serve, "--serve")
            web.start()
        if not args.quiet:
            status = StatusLine(crawler, lambda: store.accepted)
        store.report = _error_printer(status)
        crawler.on_error(store.report)
        if scraper is not None:
            scraper.report = store.report
        stopper = _Stopper(crawler, args.duration)
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


# ---- search -------------------------------------------------------------------------------

def _open_db_for_reading(args: argparse.Namespace) -> Any:
    """A read-only connection on --db (it must exist and hold the torrent tables)."""
    import sqlite3

    from .sinks import COMPONENT, SCHEMA_VERSION

    path = args.db or DEFAULT_DB
    if not os.path.exists(path):
        raise UsageError(f"--db {path}: no such file")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        row = conn.execute("SELECT version FROM schema_migrations WHERE component = ?", (COMPONENT,)).fetchone()
    except sqlite3.Error as e:
        raise UsageError(f"--db {path}: {e}") from None
    if row is None or int(row[0]) < 2:
        conn.close()
        raise UsageError(f"--db {path}: no torrent tables of schema version 2 or later "
                         "(open it once with `dhtcrawler crawl` or a newer dhtcrawler to migrate it)")
    if int(row[0]) > SCHEMA_VERSION:
        conn.close()
        raise UsageError(f"--db {path}: written by a newer dhtcrawler (schema {row[0]})")
    return conn


def run_search(args: argparse.Namespace) -> int:
    from . import search as S

    from ._pg import Connection, PgError

    if args.store:
        if args.db:
            raise UsageError("--db and --store exclude each other")
        if not args.store.startswith(("postgresql://", "postgres://")):
            raise UsageError(f"--store {args.store}: expected a postgresql://user@host:port/database URI")
        try:
            conn: Any = Connection(args.store)
        except PgError as e:
            raise StartError(f"--store: {e}") from None
    else:
        conn = _open_db_for_reading(args)
    try:
        total, rows = S.search(conn, S.cli_query(args.query), limit=args.limit, offset=args.offset, sort=args.sort,
                               order=args.order, min_size=args.min_size, max_size=args.max_size,
                               min_files=args.min_files, max_files=args.max_files, version=args.version,
                               since=args.since)
    except S.QueryError as e:
        raise UsageError(str(e)) from None
    except PgError as e:
        raise StartError(f"--store: {e}") from None
    finally:
        conn.close()
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        return EXIT_OK
    print(f"{total} found" + (f", showing {args.offset + 1}-{args.offset + len(rows)}" if rows else ""))
    if rows:
        print(f"{'size':>10}  {'files':>6}  {'first seen':<10}  {'version':<7}  {'swarm':>11}  {'info hash':<40}  name")
        for r in rows:
            swarm = "?" if r["seeders"] is None else f"{r['seeders']}/{r['leechers']}"
            print(f"{_human_size(r['total_size']):>10}  {r['num_files']:>6}  {r['first_seen'][:10]:<10}  "
                  f"{r['version'] or '?':<7}  {swarm:>11}  {r['info_hash']:<40}  {r['name']}")
    return EXIT_OK


# ---- export, import ------------------------------------------------------------------------

def _ensure_retry_store(path: str) -> None:
    """Opens (and so creates or migrates) the retry store in the database file, as a crawl
    on it would, without starting anything."""
    options = {"port": 0, "bind_v4": "127.0.0.1", "allow_private_addresses": True,
               "crawl": {"bootstrap": {"sources": []}},
               "retry": {"store": {"kind": "sqlite", "path": os.path.abspath(path)}}}
    try:
        Crawler(options).close(timeout=None)
    except StoreError as e:
        raise UsageError(f"--db {path}: {e.message}") from None


def run_export(args: argparse.Namespace) -> int:
    from .dumps import DumpError, export

    conn = _open_db_for_reading(args)
    conn.close()
    try:
        n = export(args.db or DEFAULT_DB, args.output, since=args.since)
    except DumpError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"-o {args.output}: {e.strerror or e}") from None
    if args.output not in (None, "-"):
        print(f"dhtcrawler: exported {n} torrents to {args.output}", file=sys.stderr)
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    from .dumps import DumpError, import_files

    for path in args.files:
        if path != "-" and not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
    db = args.db or DEFAULT_DB
    started = time.monotonic()
    try:
        counts = import_files(db, args.files, refetch=args.refetch, ensure_retry_store=_ensure_retry_store)
    except DumpError as e:
        raise UsageError(str(e)) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{type(e).__name__}: {e}") from None
    secs = time.monotonic() - started
    print(f"dhtcrawler: imported {counts['read']} torrents into {db} ({counts['new']} new, {counts['merged']} "
          f"merged) in {secs:.1f} s" + ("" if args.refetch else "; marked delivered"), file=sys.stderr)
    return EXIT_OK


# ---- prune --------------------------------------------------------------------------------

def run_prune(args: argparse.Namespace) -> int:
    """Lists (with --dry-run) or removes the torrents the rule selects: one line per torrent
    on stdout (info hash, last seen, times seen, name), a summary on stderr."""
    import sqlite3

    from . import prune as P
    from .sinks import SchemaError

    if args.store and args.db:
        raise UsageError("--db and --store exclude each other")
    if args.store:
        if not args.store.startswith(("postgresql://", "postgres://")):
            raise UsageError(f"--store {args.store}: expected a postgresql://user@host:port/database URI")
        try:
            sink: Any = PostgresSink(args.store)
        except Exception as e:  # psycopg's errors, the schema's
            raise StartError(f"--store: {e}") from None
        db: Any = sink
    else:
        path = args.db or DEFAULT_DB
        if not os.path.exists(path):
            raise UsageError(f"--db {path}: no such file")
        try:
            sink = SqliteSink(path)  # migrates the schema as a crawl would
        except (sqlite3.Error, SchemaError) as e:
            raise UsageError(f"--db {path}: {e}") from None
        db = sink.connection
    try:
        try:
            selected = P.plan(db, older_than=args.older_than, max_size=args.max_size, keep_top=args.keep_top)
        except P.PruneError as e:
            raise UsageError(str(e)) from None
        for v in selected.victims:
            print(f"{v.info_hash}\t{v.last_seen}\t{v.times_seen}\t{v.name}")
        sizes = "" if selected.size is None else (
            f"; the torrents take {_human_size(selected.size)}, the limit is {_human_size(selected.target or 0)}")
        if args.dry_run:
            print(f"dhtcrawler prune: would remove {len(selected.victims)} of {selected.torrents} torrents "
                  f"(about {_human_size(selected.freed)}){sizes}", file=sys.stderr)
            return EXIT_OK
        removed = P.remove(db, selected)
        shrunk = "" if args.store or not removed else (
            "; file compacted" if P.vacuum(db) else "; the file is busy: its free pages are reused, not returned")
        print(f"dhtcrawler prune: removed {removed} of {selected.torrents} torrents "
              f"(about {_human_size(selected.freed)}){sizes}{shrunk}", file=sys.stderr)
        return EXIT_OK
    finally:
        sink.close()


def _scrape_rate(text: str) -> float:
    from .swarm import parse_rate

    try:
        return parse_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _age(text: str) -> float:
    """Seconds from 90s, 30m, 12h, 30d, 2w (a bare number: seconds)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    t = text.strip().lower()
    unit = units.get(t[-1:], None)
    try:
        value = float(t[:-1] if unit else t) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an age such as 90s, 30m, 12h, 30d or 2w, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected an age >= 0, got {text!r}")
    return value


# ---- demo ---------------------------------------------------------------------------------

def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


#: The demo's swarm: one seeder of each connection policy the test network has (see
#: tools/testnet/README.md): plaintext allowed, PE forced with RC4, PE forced with a plaintext
#: payload allowed (these three over TCP and uTP, as libtorrent by default), uTP only, uTP
#: only with PE forced, TCP only.
DEMO_POLICIES = ("plaintext", "pe_rc4", "pe_plain", "utp", "utp_pe", "tcp_only")


def run_demo(args: argparse.Namespace) -> int:
    from .testnet import TestNetwork

    readable = sys.stderr if args.out == "-" else sys.stdout
    try:
        net = TestNetwork(nodes=args.nodes, seeders=len(DEMO_POLICIES), torrents=args.torrents,
                          cidr="127.0.90.0/24", seed=args.seed, duration=args.duration + 30,
                          stderr=subprocess_devnull(), policy_mix=",".join(f"{p}=1" for p in DEMO_POLICIES))
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    print(f"demo: starting a test network of {args.nodes} nodes seeding {args.torrents} torrents "
          f"on 127.0.90.0/24 (loopback only), one seeder of each policy: {', '.join(DEMO_POLICIES)}",
          file=readable, flush=True)
    served_by: Dict[str, Dict[str, int]] = {p: {} for p in DEMO_POLICIES}
    with net:
        policy_of = {seeder: policy for t in net.truth()
                     for seeder, policy in zip(t.get("seeders", []), t.get("seeder_policies", []))}
        # The default connection policy (uTP first, MSE preferred) reaches every seeder policy.
        crawler = Crawler({"port": 0, "bind_v4": "127.0.0.1", "allow_private_addresses": True,
                           "crawl": {"bootstrap": {"sources": [net.bootstrap]}}})
        jsonl = JsonlSink(args.out) if args.out else None

        def show(t: Torrent) -> None:
            stream = f"{t.transport or '?'}/{t.encryption or '?'}"
            policy = policy_of.get(t.peer or "", "?")
            counts = served_by.setdefault(policy, {})
            counts[stream] = counts.get(stream, 0) + 1
            print(f"  + {t.name!r}  {t.version}, {t.num_files} file{'s' if t.num_files != 1 else ''}, "
                  f"{_human_size(t.total_size)}  {t.info_hash}  from {t.peer} ({policy} seeder) over {stream}",
                  file=readable, flush=True)

        store = _Store(None, jsonl, show)
        crawler.on_torrent(store, ack=True)
        crawler.on_error(_error_printer(None))
        stopper = _Stopper(crawler, args.duration)
        stopper.install()
        started = time.monotonic()
        try:
            crawler.start()
            print(f"demo: crawler on {', '.join(crawler.endpoints)}, bootstrapping from {net.bootstrap}",
                  file=readable, flush=True)
            stopper.wait(until_done=lambda: store.accepted >= args.torrents)
        finally:
            crawler.close(timeout=None)
            stopper.restore()
            store.close()
    print(f"demo: {store.accepted} of {args.torrents} torrents fetched and verified in "
          f"{time.monotonic() - started:.0f} s ({stopper.reason})", file=readable, flush=True)
    for policy, counts in served_by.items():
        streams = ", ".join(f"{n} over {stream}" for stream, n in sorted(counts.items())) or "none"
        print(f"demo: served by the {policy} seeder: {sum(counts.values())} ({streams})", file=readable, flush=True)
    return EXIT_OK


def subprocess_devnull() -> Any:
    import subprocess

    return subprocess.DEVNULL


# ---- testnet ------------------------------------------------------------------------------

def run_testnet(argv: List[str]) -> int:
    from .testnet import locate

    try:
        program = locate()
    except FileNotFoundError as e:
        print(f"dhtcrawler: {e}", file=sys.stderr)
        return EXIT_USAGE
    os.execv(program, [program, *argv])
    return EXIT_FAILURE  # not reached


# ---- arguments ----------------------------------------------------------------------------

def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return int(text)


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in units and t[-1:] else ""
    number = t[:-1] if unit else t
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size (bytes, or with K, M, G, T), got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected a size >= 0, got {text!r}")
    return int(value)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _web_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auth", choices=("auto", "on", "off"), default="auto",
                   help="require the API key: auto (default) requires it when listening beyond loopback")
    p.add_argument("--api-key", metavar="KEY",
                   help="the API key (default: $DHTCRAWLER_API_KEY, else a new one printed at start)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dhtcrawler", description="BitTorrent DHT crawler.")
    parser.add_argument("--version", action="version", version=f"dhtcrawler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    crawl = sub.add_parser("crawl", help="crawl the DHT into SQLite (and JSON lines)")
    crawl.add_argument("--port", type=_port, help="DHT UDP port (default 6881; 0: any free port)")
    crawl.add_argument("--bind", action="append", metavar="ADDR",
                       help="local address (IPv4 or IPv6; repeat for both)")
    crawl.add_argument("--netmode", choices=("ipv4", "ipv6", "dual"))
    crawl.add_argument("--bootstrap", action="append", default=[], metavar="HOST:PORT",
                       help="extra bootstrap node (repeatable)")
    crawl.add_argument("--no-default-bootstrap", action="store_true",
                       help="use only the --bootstrap nodes, not the public routers")
    crawl.add_argument("--allow-private", action="store_true",
                       help="admit private and loopback nodes (labs, tests)")
    crawl.add_argument("--out", metavar="FILE.jsonl|-", help="also write JSON lines (- is stdout)")
    crawl.add_argument("--db", metavar="FILE.sqlite",
                       help=f"SQLite database for torrents and retry state (default ./{DEFAULT_DB})")
    crawl.add_argument("--store", metavar="postgresql://...",
                       help="join a fleet: torrents and retry state in this PostgreSQL database")
    crawl.add_argument("--duration", type=_positive_seconds, metavar="SECONDS", help="stop after this long")
    crawl.add_argument("--options", metavar="FILE.json", help="options document (flags override it)")
    crawl.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus text at /metrics")
    crawl.add_argument("--serve", metavar="HOST:PORT",
                       help="also serve the search page, API, Torznab and /metrics (see dhtcrawler serve)")
    _web_flags(crawl)
    crawl.add_argument("--quiet", action="store_true", help="no status line")
    crawl.add_argument("--scrape-rate", type=_scrape_rate, default=30.0, metavar="N/min",
                       help="BEP-33 swarm refreshes of stored torrents, at most N a minute (never measured "
                            "first, then the hottest and newest; 0: none; default 30/min). Each new torrent "
                            "is scraped at delivery besides")
    crawl.add_argument("--scrape-every", type=_age, default=6 * 3600.0, metavar="AGE",
                       help="refresh a stored swarm estimate once it is older than AGE (default 6h)")
    crawl.add_argument("--no-scrape", action="store_true", help="no swarm scrapes at all")
    crawl.add_argument("--max-files", type=_count, metavar="N",
                       help="store at most N file rows per torrent (SQLite only; the file count and total "
                            "size still cover every file; default: all)")

    search = sub.add_parser("search", help="search the torrents in the database")
    search.add_argument("query", nargs="*", help="words, each to occur in the name or a file path; a quoted "
                                                 "argument (\"two words\") is one phrase (none: every torrent)")
    search.add_argument("--db", metavar="FILE.sqlite", help=f"the database (default ./{DEFAULT_DB})")
    search.add_argument("--store", metavar="postgresql://...", help="search a fleet's PostgreSQL database instead")
    search.add_argument("--limit", type=_count, default=20, metavar="N", help="results to show (default 20)")
    search.add_argument("--offset", type=_count, default=0, metavar="N", help="skip the first N results")
    search.add_argument("--sort", default="relevance",
                        help="relevance (default), size, first_seen, last_seen, files, name (A to Z), swarm "
                             "(seeders + leechers of the latest estimate; unmeasured torrents last)")
    search.add_argument("--order", choices=("asc", "desc"), help="for size, first_seen...: default desc (name: asc)")
    search.add_argument("--min-size", type=_size, metavar="SIZE", help="e.g. 700M, 4G")
    search.add_argument("--max-size", type=_size, metavar="SIZE")
    search.add_argument("--min-files", type=_count, metavar="N")
    search.add_argument("--max-files", type=_count, metavar="N")
    search.add_argument("--version", choices=("v1", "v2", "hybrid"), help="BitTorrent version of the torrent")
    search.add_argument("--since", metavar="TIME", help="first seen at or after (RFC 3339, a date, or Unix seconds)")
    search.add_argument("--json", action="store_true", help="one JSON object per line")

    export = sub.add_parser("export", help="write the database's torrents as JSON lines (.zst: compressed)")
    export.add_argument("--db", metavar="FILE.sqlite", help=f"the database (default ./{DEFAULT_DB})")
    export.add_argument("--since", metavar="TIME", help="only torrents seen at or after (RFC 3339, a date, Unix seconds)")
    export.add_argument("-o", "--output", metavar="FILE[.zst]", help="default: standard output")

    imp = sub.add_parser("import", help="merge dumps (JSON lines, .zst) or magnetico databases into the database")
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--db", metavar="FILE.sqlite", help=f"the database (default ./{DEFAULT_DB})")
    imp.add_argument("--refetch", action="store_true",
                     help="do not mark the imported hashes delivered (a crawl fetches them again)")

    prune = sub.add_parser("prune", help="remove torrents by age or size, or keep the top N (--dry-run lists them)")
    prune.add_argument("--db", metavar="FILE.sqlite", help=f"the database (default ./{DEFAULT_DB})")
    prune.add_argument("--store", metavar="postgresql://...", help="a fleet's PostgreSQL database, instead of --db")
    rule = prune.add_mutually_exclusive_group(required=True)
    rule.add_argument("--older-than", type=_age, metavar="AGE",
                      help="remove torrents last seen longer ago than AGE (90s, 30m, 12h, 30d, 2w)")
    rule.add_argument("--max-size", type=_size, metavar="SIZE",
                      help="remove the least recently seen torrents until the torrents take at most SIZE (e.g. 2G)")
    rule.add_argument("--keep-top", type=_count, metavar="N",
                      help="keep the N best (largest measured swarm, then most often and latest seen)")
    prune.add_argument("--dry-run", action="store_true", help="list what would be removed; change nothing")

    serve = sub.add_parser("serve", help="the search page, a JSON API and Torznab over a crawl's database")
    serve.add_argument("--db", metavar="FILE.sqlite", help=f"the crawl's SQLite database (default ./{DEFAULT_DB})")
    serve.add_argument("--store", metavar="postgresql://...", help="a fleet's PostgreSQL database, instead of --db")
    serve.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:8080)")
    _web_flags(serve)

    demo = sub.add_parser("demo", help="a loopback test network and a crawler, torrents arriving")
    demo.add_argument("--duration", type=_positive_seconds, default=60.0, metavar="SECONDS")
    demo.add_argument("--out", metavar="FILE.jsonl|-")
    demo.add_argument("--torrents", type=int, default=6, help=argparse.SUPPRESS)
    demo.add_argument("--nodes", type=int, default=30, help=argparse.SUPPRESS)
    demo.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)

    sub.add_parser("testnet", help="run the loopback test network (dhtcrawler-testnet; see its --help)",
                   add_help=False)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "testnet":
        return run_testnet(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "crawl":
            return run_crawl(args)
        if args.command == "demo":
            return run_demo(args)
        if args.command == "search":
            return run_search(args)
        if args.command == "export":
            return run_export(args)
        if args.command == "import":
            return run_import(args)
        if args.command == "serve":
            return run_serve(args)
        if args.command == "prune":
            return run_prune(args)
    except UsageError as e:
        print(f"dhtcrawler {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OptionsError as e:
        print(f"dhtcrawler {args.command}: error: bad option: {e.message}", file=sys.stderr)
        return EXIT_USAGE
    except DhtcError as e:
        print(f"dhtcrawler {args.command}: error: {e.message or e.status_name}", file=sys.stderr)
        return EXIT_FAILURE
    except StartError as e:
        print(f"dhtcrawler {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except RuntimeError as e:  # e.g. the test network did not start
        print(f"dhtcrawler {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
