"""PostgreSQL through psycopg 3 (the optional extra: ``pip install 'dhtcrawler[postgresql]'``):
one driver connection as the database layer uses it.

Statements are written with ``?`` placeholders, as for SQLite; parameters are always sent
apart from the SQL, never spliced into it. Every failure is a :class:`PgError`, with the
server's or libpq's message on one line.
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from .errors import DatabaseError

Row = Tuple[Any, ...]

# A single-quoted literal (kept as it is), or a ? placeholder outside one.
_LITERAL_OR_MARK = re.compile(r"'(?:[^']|'')*'|\?")


class PgError(DatabaseError):
    """A connection or a statement failed; the message is the server's (or libpq's), on
    one line."""


class PgConnectError(PgError):
    """The server did not accept a connection (down, starting, unreachable): worth trying
    again later, unlike a bad URI or a missing driver."""


def _worth_retrying(e: Any) -> bool:
    """A server down, starting or full: yes. A bad URI, password, user or database: no."""
    state = getattr(e, "sqlstate", None)
    if state is not None:
        return state in ("57P03", "53300")  # cannot_connect_now (starting), too_many_connections
    return "invalid" not in str(e)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise PgError("PostgreSQL (--store) needs psycopg: pip install 'dhtcrawler[postgresql]'") from None
    return psycopg


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def is_uri(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def describe(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    if "://" in conninfo:
        scheme, _, rest = conninfo.partition("://")
        if "@" in rest:
            user, _, host = rest.rpartition("@")
            return f"{scheme}://{user.split(':', 1)[0]}@{host}"
        return conninfo
    return " ".join(part for part in conninfo.split() if not part.startswith("password="))


def to_format(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled; a ``?`` inside a
    quoted literal stays)."""
    sql = sql.replace("%", "%%")
    return _LITERAL_OR_MARK.sub(lambda m: "%s" if m.group(0) == "?" else m.group(0), sql)


# Rows a COPY sends at a time without psycopg's C implementation.
COPY_SLICE = 2000


def _copy_field(value: Any) -> str:
    """A value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\\\x" + bytes(value).hex()  # bytea's hex form, its backslash escaped
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


#: Settings every connection gets unless its connection string's options set them.
SESSION_DEFAULTS = (
    # The planner's cost of a random page read, as for a database on SSD or in memory
    # (PostgreSQL's default, 4, is a spinning disk's): otherwise it joins a search's 10,000
    # candidates by scanning the whole torrents table (87 ms at 1 M) rather than looking
    # each up (23 ms).
    ("random_page_cost", "1.1"),
    # New rows of a GIN index wait in its pending list, which every lookup in the index
    # reads whole, once per bucket of a search (PostgresDialect.candidates): at the default
    # 4 MB, up to 3 ms a bucket (1 M torrents). A crawl's sink, inserting a few rows a
    # second, flushes its list at 256 kB; a bulk import sets it back (PostgresDialect.bulk).
    ("gin_pending_list_limit", "256"),
    # The memory of a bitmap of the rows an index finds before it turns lossy (whole pages,
    # every row of which is tested again): 4 MB by default, about 58,000 pages. A lossy
    # bitmap from the word index tests each row's words again (dhtc_words, ~20 µs a row:
    # 63 s for two dense words at 10 M torrents); 32 MB keeps 460,000 pages exact.
    ("work_mem", "32MB"),
)


class PgDriver:
    """One connection in autocommit mode (transactions are explicit ``BEGIN``/``COMMIT``
    statements), used from one thread at a time (the caller locks)."""

    def __init__(self, conninfo: str) -> None:
        self._psycopg = _psycopg()
        self._conninfo = conninfo
        self._conn: Any = None
        # psycopg's C implementation (psycopg[binary] or [c], the fast extra) encodes a COPY
        # row faster than anything written here; its pure-Python one takes ~30 us a row,
        # slower than _copy_field.
        self._rows_in_c = self._psycopg.pq.__impl__ in ("c", "binary")
        self._connect()

    def _connect(self) -> None:
        psycopg = self._psycopg
        # A default connect_timeout, so an unreachable server fails in seconds; one in the
        # connection string wins.
        try:
            given = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        except psycopg.Error as e:
            raise PgError(f"cannot connect to {describe(self._conninfo)}: {_one_line(e)}") from None
        extra: Dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": 5}
        # Text as UTF-8 even from a SQL_ASCII database (initdb's choice without a locale),
        # where psycopg would otherwise hand back bytes.
        if "client_encoding" not in given:
            extra["client_encoding"] = "utf8"
        options = given.get("options", "")
        for name, value in SESSION_DEFAULTS:
            if name not in options:  # a value in the connection string's options wins
                options += f" -c {name}={value}"
        extra["options"] = options.strip()
        try:
            self._conn = psycopg.connect(self._conninfo, autocommit=True, **extra)
        except psycopg.Error as e:
            raise (PgConnectError if _worth_retrying(e) else PgError)(f"cannot connect to {describe(self._conninfo)}: {_one_line(e)}") from None

    def _cursor(self) -> Any:
        if self._conn is None or self._conn.closed:
            raise PgError("the connection is closed")
        return self._conn.cursor()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> List[Row]:
        """Runs one statement; returns its rows."""
        cur = self._cursor()
        try:
            cur.execute(to_format(sql) if params else sql, tuple(params) if params else None, prepare=False)
            return list(cur.fetchall()) if cur.description is not None else []
        except self._psycopg.Error as e:
            raise PgError(_one_line(e) or type(e).__name__) from None
        finally:
            cur.close()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        cur = self._cursor()
        try:
            cur.executemany(to_format(sql), [tuple(r) for r in rows])
        except self._psycopg.Error as e:
            raise PgError(_one_line(e) or type(e).__name__) from None
        finally:
            cur.close()

    def copy(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Loads rows with COPY (one round trip for the lot: executemany's pipeline still
        costs ~100 us a row in the driver)."""
        cur = self._cursor()
        try:
            with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
                if self._rows_in_c:
                    for row in rows:
                        cp.write_row(row)
                else:
                    # Sent a slice at a time: the server stores one while the next is encoded.
                    rows = iter(rows)
                    while chunk := list(itertools.islice(rows, COPY_SLICE)):
                        cp.write("".join("\t".join(map(_copy_field, row)) + "\n" for row in chunk).encode("utf-8"))
        except self._psycopg.Error as e:
            raise PgError(_one_line(e) or type(e).__name__) from None
        finally:
            cur.close()

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.execute(sql + " RETURNING id", params)[0][0])

    def healthy(self) -> bool:
        if self._conn is None or self._conn.closed or self._conn.broken:
            return False
        return bool(self._conn.info.status == self._psycopg.pq.ConnStatus.OK)

    def reset(self) -> None:
        """Reconnects with the same parameters (after the server went away)."""
        self.close()
        self._connect()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


def connect(conninfo: str) -> PgDriver:
    return PgDriver(conninfo)

