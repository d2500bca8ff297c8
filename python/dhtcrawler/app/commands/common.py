"""What every subcommand shares: exit statuses and their errors, the database a command
names (``--db FILE`` or ``--store URI``), argument types, sizes for people."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Optional

from ..db import Connection, Database, is_postgres_uri

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_DB = "dhtcrawler.sqlite"


class UsageError(Exception):
    """A bad flag value or options file: one line on stderr, exit status 2."""


class StartError(Exception):
    """Something the command needs could not be opened (a database): one line, exit status 1."""


# ---- the database -------------------------------------------------------------------------

def database(args: argparse.Namespace, *, exclusive: str = "--db and --store exclude each other") -> Database:
    """The database ``--db`` or ``--store`` names (default ./dhtcrawler.sqlite)."""
    store = getattr(args, "store", None)
    if store:
        if args.db:
            raise UsageError(exclusive)
        if not is_postgres_uri(store):
            raise UsageError(f"--store {store}: expected a postgresql://user@host:port/database URI")
        return Database(store)
    return Database(args.db or DEFAULT_DB)


def flag_of(db: Database) -> str:
    return "--db" if db.is_file else "--store"


def open_failure(db: Database, e: object) -> Exception:
    """The error for a database that could not be opened: an unusable file is a bad flag
    (exit 2), an unreachable server a start-up failure (exit 1)."""
    if db.is_file:
        return UsageError(f"--db {db.target}: {e}")
    return StartError(f"--store: {e}")


def connect_for_reading(db: Database) -> Connection:
    """A read-only connection on a database that exists and holds the torrent tables, in
    the shape the queries read (schema.readable_from) and not newer than this package's."""
    from ..db.schema import COMPONENT, SCHEMA_VERSION, readable_from

    if not db.exists():
        raise UsageError(f"--db {db.target}: no such file")
    try:
        conn = db.connect(read_only=True)
    except Exception as e:  # sqlite3.Error, DatabaseError
        raise open_failure(db, e) from None
    try:
        version = int(conn.value("SELECT version FROM schema_migrations WHERE component = ?", (COMPONENT,)) or 0)
    except Exception as e:  # noqa: BLE001 - not a crawl database
        conn.close()
        raise open_failure(db, e) from None
    oldest = readable_from(db.dialect)
    if version < oldest:
        conn.close()
        raise UsageError(f"{flag_of(db)} {db.describe()}: no torrent tables of schema version {oldest} or later "
                         "(open it once with `dhtcrawler crawl` or a newer dhtcrawler to migrate it)")
    if version > SCHEMA_VERSION:
        conn.close()
        raise UsageError(f"{flag_of(db)} {db.describe()}: written by a newer dhtcrawler (schema {version})")
    return conn


# ---- messages ------------------------------------------------------------------------------

def error_printer(status: Any = None) -> Callable[[str], None]:
    """Writes "dhtcrawler: MESSAGE" on stderr (on a fresh line below a live status line)."""
    def report(message: str) -> None:
        sys.stderr.write(("\n" if status is not None and status._tty else "") + f"dhtcrawler: {message}\n")
        sys.stderr.flush()

    return report


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


# ---- argument types ------------------------------------------------------------------------

def _seconds(text: str, *, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (value >= 0 if zero else value > 0) or value != value or value == float("inf"):
        kind = "non-negative" if zero else "positive"
        raise argparse.ArgumentTypeError(f"expected a {kind} number of seconds, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    return _seconds(text, zero=False)


def non_negative_seconds(text: str) -> float:
    return _seconds(text, zero=True)


def port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return int(text)


def size(text: str) -> int:
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


def count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def age(text: str) -> float:
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


def scrape_rate(text: str) -> float:
    from ..swarm import parse_rate

    try:
        return parse_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def db_flags(p: argparse.ArgumentParser, db_help: Optional[str] = None, store_help: Optional[str] = None) -> None:
    p.add_argument("--db", metavar="FILE.sqlite", help=db_help or f"the database (default ./{DEFAULT_DB})")
    p.add_argument("--store", metavar="postgresql://...",
                   help=store_help or "a fleet's PostgreSQL database, instead of --db")


def rules_flags(p: argparse.ArgumentParser) -> None:
    """--rules FILE (repeatable) and --no-default-rules: the content rules (docs/rules.md)."""
    p.add_argument("--rules", action="append", default=[], metavar="FILE",
                   help="content rules: drop, hide or tag torrents by keywords, regex, type, extension, size "
                        "(docs/rules.md; repeatable; after the default rules)")
    p.add_argument("--no-default-rules", action="store_true",
                   help="without the default rules (well-known keywords of child sexual abuse material: drop)")


def load_rules(args: argparse.Namespace) -> Any:
    """The RuleSet the flags name; a bad rule is a usage error naming its file and line."""
    from ..rules import RulesError, load

    try:
        return load(args.rules, defaults=not args.no_default_rules)
    except RulesError as e:
        raise UsageError(str(e)) from None
