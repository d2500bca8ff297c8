"""The one migration format, on SQLite and PostgreSQL.

Every component that keeps tables in a database (the torrent tables here, ``torrents``; the
retry store in core/retry/migrations.cpp, ``retry``) records its schema version in one
table, one row per component::

    schema_migrations(component TEXT PRIMARY KEY, version INTEGER NOT NULL)

A component's migrations are a list, forward only: entry i brings its tables to version
i + 1, and a released entry is never edited (append one). A database at a version newer
than the list is refused (:class:`SchemaError`) and left unchanged. On PostgreSQL every
component migrates under one advisory lock (dialect.PG_SCHEMA_LOCK), so crawlers starting
together migrate once.

Consecutive migrations run in one transaction, with the new version recorded in it: all or
nothing. A migration marked ``transactional=False`` runs apart, its steps one by one outside
any transaction (PostgreSQL refuses ``CREATE INDEX CONCURRENTLY`` inside one, and an index
built online does not block a fleet's writers). Its version is recorded only once every step
succeeded, so an interrupted one runs again whole: each of its steps must be safe to run
again (an :class:`~.dialect.Index` step is; plain SQL there uses ``IF NOT EXISTS``). SQLite
has no online build: there such a migration runs inside the transaction like the others.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence, Union

from . import Connection
from .dialect import Index
from .errors import SchemaError

SCHEMA_MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
)"""

#: SQL text, or an Index built as the dialect builds indexes.
Step = Union[str, Index]


class Migration(NamedTuple):
    """One version of a component's schema: its steps on each database."""

    description: str
    sqlite: Sequence[Step]
    postgresql: Sequence[Step]
    #: False: the steps run outside a transaction on PostgreSQL, each safe to run again.
    transactional: bool = True

    def steps(self, dialect_name: str) -> Sequence[Step]:
        return self.sqlite if dialect_name == "sqlite" else self.postgresql


def recorded_version(conn: Connection, component: str) -> int:
    """The version schema_migrations holds for ``component`` (0: none, or no table)."""
    conn.execute(SCHEMA_MIGRATIONS_DDL)
    return int(conn.value("SELECT version FROM schema_migrations WHERE component = ?", (component,)) or 0)


def _record(conn: Connection, component: str, version: int) -> None:
    conn.execute("INSERT INTO schema_migrations(component, version) VALUES (?, ?) "
                 "ON CONFLICT (component) DO UPDATE SET version = excluded.version", (component, version))


def _run(conn: Connection, step: Step) -> None:
    if isinstance(step, Index):
        conn.dialect.build_index(conn, step)
    else:
        conn.execute(step)


def migrate(conn: Connection, component: str, migrations: Sequence[Migration], *,
            prepare: Any = None) -> int:
    """Brings ``component``'s tables to version ``len(migrations)`` and returns the
    version found before. ``prepare(step)``, when given, rewrites each SQL step first
    (e.g. to fill in what depends on the SQLite library)."""
    dialect = conn.dialect
    target = len(migrations)

    def outside(version: int) -> bool:  # runs apart, outside a transaction
        return dialect.runs_outside_transactions and not migrations[version].transactional

    def run(step: Step) -> None:
        _run(conn, prepare(step) if prepare is not None and isinstance(step, str) else step)

    with dialect.schema_lock(conn):
        found = recorded_version(conn, component)
        if found > target:
            raise SchemaError(f"the database's {component} schema is version {found}; "
                              f"this dhtcrawler knows up to {target}")
        version = found
        while version < target:
            if outside(version):
                for step in migrations[version].steps(dialect.name):
                    run(step)
                version += 1
                _record(conn, component, version)
                continue
            end = version + 1
            while end < target and not outside(end):
                end += 1
            with conn.transaction():
                # Another process may have moved on meanwhile (SQLite has no schema lock:
                # its write lock is taken here).
                start = max(version, recorded_version(conn, component))
                for m in migrations[start:end]:
                    for step in m.steps(dialect.name):
                        run(step)
                if start < end:
                    _record(conn, component, end)
            version = end
    return found
