"""The application's one database layer, for SQLite and PostgreSQL.

- :class:`Database` names a database (a SQLite file, or a PostgreSQL URI): its dialect, how
  to connect, how to describe it in messages, and the retry store's options for it.
- :class:`Connection` is one connection of either: statements with ``?`` placeholders,
  explicit transactions, a lock for the threads that share it, and its ``dialect``
  (dialect.py: what differs between the two).
- :func:`using` turns whatever the query functions accept (a Connection, a sink, a
  ``sqlite3.Connection``, a file path or a ``postgresql://`` URI) into a Connection.

Migrations (one format for every component, the retry store's too): migrations.py; the
torrent tables: schema.py.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .dialect import POSTGRESQL, SQLITE, Dialect
from .errors import DatabaseError, SchemaError

Row = Tuple[Any, ...]

__all__ = ["Connection", "Database", "DatabaseError", "SchemaError", "Dialect", "using", "is_postgres_uri"]


def is_postgres_uri(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


class _SqliteDriver:
    """sqlite3's connection with the driver interface the layer uses."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> List[Row]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.conn.execute(sql, tuple(params)).lastrowid)  # RETURNING needs SQLite 3.35

    def healthy(self) -> bool:
        return True

    def reset(self) -> None:
        pass

    def close(self) -> None:
        self.conn.close()


class Connection:
    """One connection and its dialect. Used by one thread at a time: a connection shared by
    threads (a sink's) is used under ``lock``."""

    def __init__(self, dialect: Dialect, driver: Any, where: str, *, owned: bool = True) -> None:
        self.dialect = dialect
        self.where = where
        self.lock = threading.RLock()
        self._driver = driver
        self._owned = owned
        self._depth = 0  # transactions open (nested ones join the outermost)
        #: What the dialect keeps between statements of this connection (the word index's
        #: statistics), by name.
        self.memo: Dict[str, Any] = {}
        dialect.prepare(self)

    @property
    def raw(self) -> Any:
        """The driver's connection (sqlite3.Connection), for what only the dialect does."""
        return getattr(self._driver, "conn", self._driver)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> List[Row]:
        return self._driver.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._driver.executemany(sql, rows)

    def copy(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Inserts many rows into ``table``: COPY on PostgreSQL, executemany on SQLite."""
        copy = getattr(self._driver, "copy", None)
        if copy is not None:
            copy(table, columns, rows)
        else:
            self.executemany(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             rows)

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        """Runs an INSERT into a table keyed by ``id`` and returns the new row's id."""
        return int(self._driver.insert(sql, params))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Optional[Row]:
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    @contextmanager
    def transaction(self) -> Iterator["Connection"]:
        """BEGIN (SQLite: IMMEDIATE) ... COMMIT, or ROLLBACK on any exception. A transaction
        opened inside another joins it: batched writes run many single writes in one."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        self.execute(self.dialect.begin)
        self._depth = 1
        try:
            yield self
        except BaseException:
            if self.healthy():
                self.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0
        self.execute("COMMIT")

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def healthy(self) -> bool:
        """False once the server went away (PostgreSQL): reset() reconnects."""
        return bool(self._driver.healthy())

    def reset(self) -> None:
        self._driver.reset()

    def close(self) -> None:
        if self._owned:
            self._driver.close()


class Database:
    """Where the torrents are: a SQLite file (``--db``) or a PostgreSQL database (``--store``
    URI)."""

    def __init__(self, target: str, *, busy_timeout_ms: int = 5000, dialect: Optional[Dialect] = None) -> None:
        self.target = target
        self.dialect: Dialect = dialect or (POSTGRESQL if is_postgres_uri(target) else SQLITE)
        self.busy_timeout_ms = busy_timeout_ms

    @property
    def is_file(self) -> bool:
        return self.dialect is SQLITE

    def describe(self) -> str:
        """For messages: the file, or the URI without its password."""
        if self.is_file:
            return self.target
        from .postgres import describe

        return describe(self.target)

    def exists(self) -> bool:
        return not self.is_file or os.path.exists(self.target)

    def connect(self, *, read_only: bool = False) -> Connection:
        raw = self.dialect.connect(self.target, read_only=read_only,  # type: ignore[attr-defined]
                                   busy_timeout_ms=self.busy_timeout_ms)
        driver = _SqliteDriver(raw) if self.is_file else raw
        return Connection(self.dialect, driver, self.describe())

    def retry_store(self) -> Dict[str, Any]:
        """The crawler's ``retry.store`` options for this database (retry state lives
        beside the torrents)."""
        if self.is_file:
            return {"kind": "sqlite", "path": os.path.abspath(self.target)}
        return {"kind": "postgresql", "conninfo": self.target}


def wrap(conn: sqlite3.Connection) -> Connection:
    """A caller's own sqlite3 connection, used but not closed by the layer."""
    return Connection(SQLITE, _SqliteDriver(conn), "SQLite", owned=False)


@contextmanager
def using(db: Any) -> Iterator[Connection]:
    """A Connection for ``db``: a Connection or anything with one as ``connection`` (a
    sink; used under its lock), a ``sqlite3.Connection`` (the caller's), or a Database, a
    path or a ``postgresql://`` URI (opened read-only for the one call)."""
    if isinstance(db, Connection):
        with db.lock:
            yield db
    elif isinstance(getattr(db, "connection", None), Connection):
        conn = db.connection
        with conn.lock:
            yield conn
    elif isinstance(db, sqlite3.Connection):
        yield wrap(db)
    else:
        conn = (db if isinstance(db, Database) else Database(os.fspath(db))).connect(read_only=True)
        try:
            yield conn
        finally:
            conn.close()
