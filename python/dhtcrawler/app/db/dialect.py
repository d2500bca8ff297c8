"""What differs between SQLite and PostgreSQL, in one object per database.

Both hold the same tables in the same shape (``torrents`` with an integer ``id``, 20-byte
binary hashes, ``files`` and ``hashes`` keyed by that id): feature code writes one query,
with ``?`` placeholders, and asks the dialect only for what really differs:

- opening a connection (the driver, its settings) and starting a transaction;
- times: SQLite keeps Unix seconds, PostgreSQL ``timestamptz`` (:meth:`Dialect.time` to
  bind, :meth:`Dialect.seconds` to read back);
- a few expressions (``least``/``greatest``, a case-insensitive substring test, the name
  order, a text's size in bytes);
- the search index (SQLite's FTS5 table written beside each torrent; PostgreSQL scans, with
  a pg_trgm index on names where the extension could be installed), the database's size,
  compacting, and locks (a torrent's identity; the schema).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

if TYPE_CHECKING:
    from . import Connection

# The advisory lock every component's schema changes take on PostgreSQL (the retry store's
# too, in core/retry/postgres_store.cpp).
PG_SCHEMA_LOCK = 7305042


def like_pattern(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Index:
    """A migration step that builds an index: on PostgreSQL online (``CREATE INDEX
    CONCURRENTLY``, which must run outside a transaction: see migrations.Migration), on
    SQLite as a plain ``CREATE INDEX``. Safe to run again, also after an interrupted build."""

    def __init__(self, name: str, table: str, columns: str, *, unique: bool = False, using: str = "") -> None:
        self.name, self.table, self.columns, self.unique, self.using = name, table, columns, unique, using

    def __repr__(self) -> str:
        return f"Index({self.name!r} ON {self.table} ({self.columns}))"


class Dialect:
    """The base: what both databases spell alike."""

    name = ""
    #: Opens a write transaction.
    begin = "BEGIN"
    #: True when a migration step may run outside a transaction (PostgreSQL's online index
    #: builds); False runs such steps inside one, with their neighbours.
    runs_outside_transactions = False

    # ---- values -----------------------------------------------------------------------------

    def time(self, seconds: Optional[int]) -> Any:
        """A time (Unix seconds) as this database's time columns take it."""
        return seconds

    def seconds(self, value: Any) -> Optional[int]:
        """A time column's value as Unix seconds."""
        return None if value is None else int(value)

    # ---- expressions ------------------------------------------------------------------------

    def least(self, *exprs: str) -> str:
        return f"least({', '.join(exprs)})"

    def greatest(self, *exprs: str) -> str:
        return f"greatest({', '.join(exprs)})"

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        """SQL testing that ``column`` holds ``word`` case-insensitively, and its argument."""
        raise NotImplementedError

    def name_order(self, descending: bool) -> str:
        """ORDER BY terms sorting names case-insensitively."""
        raise NotImplementedError

    def octet_length(self, expr: str) -> str:
        return f"octet_length({expr})"

    # ---- connections, locks, schema -----------------------------------------------------------

    def prepare(self, conn: "Connection") -> None:
        """Readies a new connection (functions the queries call)."""

    def lock_identity(self, conn: "Connection", identity: str) -> None:
        """Inside a transaction: serialises writers storing the same torrent."""

    @contextmanager
    def schema_lock(self, conn: "Connection") -> Iterator[None]:
        """Held while a component migrates (beside other processes migrating)."""
        yield

    def build_index(self, conn: "Connection", index: Index) -> None:
        unique = "UNIQUE " if index.unique else ""
        conn.execute(f"CREATE {unique}INDEX IF NOT EXISTS {index.name} ON {index.table} ({index.columns})")

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        raise NotImplementedError

    # ---- the search index, size, compaction -----------------------------------------------------

    def search_source(self, conn: "Connection", words: List[str],
                      window: Optional[int]) -> Tuple[str, List[Any]]:
        """FROM clause (torrents as ``t``) over the candidates of a query's words."""
        raise NotImplementedError

    def index_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        """Adds a stored torrent's text (its name, then its stored paths, one per line)."""

    def unindex_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        """Removes what index_torrent() added, before the torrent's rows go."""

    def tokenizer(self, conn: "Connection") -> str:
        """How the search index finds words (stats)."""
        raise NotImplementedError

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """(bytes the database uses, bytes of it the torrents take)."""
        raise NotImplementedError

    def compact(self, conn: "Connection") -> Optional[bool]:
        """Gives freed space back after a prune: True when done, False when the database
        was busy, None when this database reuses the space instead."""
        return None


# ---- SQLite -------------------------------------------------------------------------------

def _fts_tokenizer() -> str:
    """trigram when this SQLite has it (3.34+: substrings in any script, CJK included),
    else unicode61 (whole words)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        return "trigram"
    except sqlite3.Error:
        return "unicode61"
    finally:
        conn.close()


FTS_TOKENIZER = _fts_tokenizer()
FTS_OPTIONS = ("tokenize='trigram', detail=none" if FTS_TOKENIZER == "trigram"
               else "tokenize='unicode61 remove_diacritics 2'")


def _unhex(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else bytes.fromhex(text)


def _has(text: Optional[str], needle: str) -> int:
    """SQL dhtc_has(text, needle): 1 when the lower-cased text holds ``needle`` (given
    lower-cased). Unicode-aware, unlike LIKE."""
    return 1 if text is not None and needle in text.lower() else 0


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_match(words: List[str], trigram: bool) -> Optional[str]:
    """The FTS5 MATCH expression that finds the candidates, or None (no word the index can
    look up). With trigram (detail=none: no positions) a word is the AND of its trigrams,
    so candidates are a superset, checked afterwards; with unicode61 each word is a phrase."""
    terms: List[str] = []
    for w in words:
        if not trigram:
            terms.append(_quote(w))
        elif len(w) >= 3:
            terms.extend(_quote(w[i:i + 3]) for i in range(len(w) - 2))
    return " AND ".join(dict.fromkeys(terms)) or None


# The tables whose pages are the torrents' (prune --max-size).
_TORRENT_TABLES = "name IN ('torrents', 'files', 'hashes', 'torrents_by_last_seen') OR name LIKE 'search%'"


class SqliteDialect(Dialect):
    """An embedded file (WAL), times as Unix seconds, search through FTS5."""

    name = "sqlite"
    begin = "BEGIN IMMEDIATE"  # the write lock at once: no upgrade that could fail busy

    def connect(self, path: str, *, read_only: bool = False, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
        if read_only:
            uri = "file:" + Path(path).resolve().as_posix() + "?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000.0, check_same_thread=False,
                                   isolation_level=None)
        # Autocommit mode (transactions are explicit); written from the delivery thread and
        # read from others, hence check_same_thread=False and the connection's lock.
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_ms / 1000.0)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against a process crash in WAL mode (only power loss can undo
        # the last commits).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def least(self, *exprs: str) -> str:
        return f"min({', '.join(exprs)})"

    def greatest(self, *exprs: str) -> str:
        return f"max({', '.join(exprs)})"

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        # LIKE for an ASCII word (its case folding is then exact, and it is native), else
        # dhtc_has (LIKE folds only ASCII).
        if word.isascii():
            return f"{column} LIKE ? ESCAPE '\\'", like_pattern(word)
        return f"dhtc_has({column}, ?)", word.lower()

    def name_order(self, descending: bool) -> str:
        return f"t.name COLLATE NOCASE {'DESC' if descending else 'ASC'}"

    def octet_length(self, expr: str) -> str:
        return f"length(CAST({expr} AS BLOB))"

    def prepare(self, conn: "Connection") -> None:
        # SQLite refuses while another statement of the connection runs: the functions are
        # then taken to be registered by an earlier call.
        raw = conn.raw
        try:
            raw.create_function("dhtc_has", 2, _has, deterministic=True)
            # SQLite's own unhex() is 3.41+; the migration from version 1 uses this one.
            raw.create_function("dhtc_unhex", 1, _unhex, deterministic=True)
        except sqlite3.OperationalError:
            pass

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))

    def search_source(self, conn: "Connection", words: List[str],
                      window: Optional[int]) -> Tuple[str, List[Any]]:
        cap = "" if window is None else f" LIMIT {int(window)}"
        match = fts_match(words, self.tokenizer(conn) == "trigram")
        if match is not None:  # the newest `window` candidates of the index
            return (f"(SELECT rowid AS id FROM search WHERE search MATCH ? ORDER BY rowid DESC{cap}) s "
                    "JOIN torrents t ON t.id = s.id", [match])
        if words:  # only short words: the newest `window` torrents
            return f"(SELECT id FROM torrents ORDER BY id DESC{cap}) s JOIN torrents t ON t.id = s.id", []
        return "torrents t", []

    def index_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        conn.execute("INSERT INTO search(rowid, text) VALUES (?, ?)", (torrent_id, text))

    def unindex_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        # The index is contentless: an entry is deleted by giving the text it was written with.
        conn.execute("INSERT INTO search(search, rowid, text) VALUES ('delete', ?, ?)", (torrent_id, text))

    def tokenizer(self, conn: "Connection") -> str:
        row = conn.one("SELECT sql FROM sqlite_master WHERE name = 'search'")
        return "trigram" if row and "trigram" in row[0] else "unicode61"

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """The pages in use (the file less its free pages), and the torrent tables' pages
        less the root page every table and index keeps when empty: from SQLite's dbstat
        table when it has one, else every table's (the retry tables then count as
        torrents' too)."""
        page_size = int(conn.value("PRAGMA page_size"))
        used = (int(conn.value("PRAGMA page_count")) - int(conn.value("PRAGMA freelist_count"))) * page_size
        try:
            pages = int(conn.value(f"SELECT count(*) FROM dbstat WHERE {_TORRENT_TABLES}"))
            roots = int(conn.value(f"SELECT count(*) FROM sqlite_master WHERE rootpage > 0 AND ({_TORRENT_TABLES})"))
        except sqlite3.Error:
            pages = used // page_size
            roots = 1 + int(conn.value("SELECT count(*) FROM sqlite_master WHERE rootpage > 0"))
        return used, max(0, pages - roots) * page_size

    def compact(self, conn: "Connection") -> Optional[bool]:
        """Shrinks the file to its pages in use. The search index first merges its
        segments: FTS5 records a deletion as a marker, and only a merge drops the entries."""
        try:
            conn.execute("INSERT INTO search(search) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return True
        except sqlite3.OperationalError:
            return False


# ---- PostgreSQL ---------------------------------------------------------------------------

class PostgresDialect(Dialect):
    """A fleet's shared server (psycopg 3), times as timestamptz, search by ILIKE (helped by
    a pg_trgm index on lower(name) when the extension could be installed)."""

    name = "postgresql"
    runs_outside_transactions = True

    def connect(self, conninfo: str, *, read_only: bool = False, busy_timeout_ms: int = 5000) -> Any:
        from .postgres import connect

        return connect(conninfo)

    def time(self, seconds: Optional[int]) -> Any:
        return None if seconds is None else datetime.fromtimestamp(int(seconds), timezone.utc)

    def seconds(self, value: Any) -> Optional[int]:
        if value is None:
            return None
        if isinstance(value, datetime):
            return int(value.timestamp())
        return int(value)

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        # Case folding by the database's ctype.
        return f"{column} ILIKE ?", like_pattern(word)

    def name_order(self, descending: bool) -> str:
        return f"lower(t.name) {'DESC' if descending else 'ASC'}, t.name"

    def lock_identity(self, conn: "Connection", identity: str) -> None:
        # Two crawlers of a fleet storing one torrent at once still make one row.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (identity,))

    @contextmanager
    def schema_lock(self, conn: "Connection") -> Iterator[None]:
        # A session lock, held across the transactions and the steps outside them; the
        # retry store's runner takes the same key inside its transaction.
        conn.execute("SELECT pg_advisory_lock(?)", (PG_SCHEMA_LOCK,))
        try:
            yield
        finally:
            if conn.healthy():
                conn.execute("SELECT pg_advisory_unlock(?)", (PG_SCHEMA_LOCK,))

    def build_index(self, conn: "Connection", index: Index) -> None:
        """CREATE INDEX CONCURRENTLY, outside a transaction. A build that was interrupted
        leaves an invalid index behind: it is dropped and built again; a valid one is kept."""
        row = conn.one("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                       "WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace", (index.name,))
        if row is not None and row[0]:
            return
        if row is not None:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}")
        unique = "UNIQUE " if index.unique else ""
        using = f" USING {index.using}" if index.using else ""
        conn.execute(f"CREATE {unique}INDEX CONCURRENTLY {index.name} ON {index.table}{using} ({index.columns})")

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        return bool(conn.value("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                               "current_schema() AND table_name = ? AND column_name = ?", (table, column)))

    def search_source(self, conn: "Connection", words: List[str],
                      window: Optional[int]) -> Tuple[str, List[Any]]:
        return "torrents t", []  # every torrent; the words are checked on each (no window)

    def tokenizer(self, conn: "Connection") -> str:
        trgm = conn.value("SELECT count(*) FROM pg_indexes WHERE indexname = 'torrents_name_trgm' "
                          "AND schemaname = current_schema()")
        return "pg_trgm" if trgm else "scan"

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """The torrent tables with their indexes and TOAST: the space is reused by later
        writes (a VACUUM FULL the operator runs returns it)."""
        used = int(conn.value("SELECT pg_total_relation_size('torrents') + pg_total_relation_size('files') "
                              "+ pg_total_relation_size('hashes')"))
        return used, used


SQLITE = SqliteDialect()
POSTGRESQL = PostgresDialect()
DIALECTS: Dict[str, Dialect] = {d.name: d for d in (SQLITE, POSTGRESQL)}

