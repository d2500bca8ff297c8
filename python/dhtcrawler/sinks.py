"""Where accepted torrents go: an embedded SQLite database (or, for a fleet, PostgreSQL) and
a JSON-lines stream.

Both are written from the crawler's delivery thread, inside the torrent callback, before
the torrent is acknowledged: a torrent counts as accepted only once it is stored.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any, Callable, List, Optional, Sequence, Tuple

from ._types import Torrent

# ---- SQLite -------------------------------------------------------------------------------

# The version table is shared with other components that keep tables in the same file (the
# retry store uses component "retry" and its retry_* tables): one row per component.
SCHEMA_MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
)"""

COMPONENT = "torrents"

# (description, statements) per version; see apply_migrations().
Migrations = Sequence[Tuple[str, Sequence[str]]]

# Forward migrations of this component, in order: entry i brings the schema to version i+1.
# Never edit a released entry; append a new one.
MIGRATIONS: Migrations = (
    ("torrents, their files and every hash that names them", (
        """CREATE TABLE torrents (
            info_hash     TEXT PRIMARY KEY,      -- the DHT key it was first delivered under
            info_hash_v1  TEXT,                  -- 40 hex, or NULL for v2-only
            info_hash_v2  TEXT,                  -- 64 hex, or NULL for v1-only
            version       TEXT NOT NULL,         -- v1, v2 or hybrid
            name          TEXT NOT NULL,
            total_size    INTEGER NOT NULL,
            num_files     INTEGER NOT NULL,
            piece_length  INTEGER NOT NULL,
            private       INTEGER NOT NULL,
            metadata_size INTEGER NOT NULL,      -- bytes of the info dict
            first_seen    TEXT NOT NULL,         -- RFC 3339 UTC
            last_seen     TEXT NOT NULL,
            peer          TEXT,                  -- the peer that served it last
            times_seen    INTEGER NOT NULL DEFAULT 1
        )""",
        """CREATE TABLE files (
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE,
            idx       INTEGER NOT NULL,
            path      TEXT NOT NULL,
            size      INTEGER NOT NULL,
            PRIMARY KEY (info_hash, idx)
        ) WITHOUT ROWID""",
        """CREATE TABLE hashes (
            hash      TEXT PRIMARY KEY,          -- a v1 hash (40 hex) or a full v2 hash (64 hex)
            kind      TEXT NOT NULL CHECK (kind IN ('v1', 'v2')),
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE
        ) WITHOUT ROWID""",
        "CREATE INDEX hashes_by_torrent ON hashes(info_hash)",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
    )),
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaError(RuntimeError):
    """The database was written by a newer version of this package."""


def apply_migrations(run: Callable[[str, Sequence[Any]], Sequence[Tuple[Any, ...]]],
                     migrations: Migrations, *, param: Callable[[int], str],
                     begin: str = "BEGIN", lock: Optional[Tuple[str, Sequence[Any]]] = None,
                     component: str = COMPONENT) -> int:
    """Brings ``component``'s tables to version ``len(migrations)`` in one transaction,
    recording it in schema_migrations, and returns the version found before.

    The one migration path of both sinks (the C++ retry store has its twin in
    core/retry/migrations.cpp). What differs between the databases is passed in: ``run``
    executes one statement with parameters and returns its rows; ``param(n)`` spells the
    n-th placeholder (``?`` or ``$n``); ``begin`` opens the transaction; ``lock``, when
    given, is run first inside it (PostgreSQL's advisory schema lock)."""
    target = len(migrations)
    run(begin, ())
    try:
        if lock is not None:
            run(*lock)
        run(SCHEMA_MIGRATIONS_DDL, ())
        rows = run(f"SELECT version FROM schema_migrations WHERE component = {param(1)}", (component,))
        found = int(rows[0][0]) if rows else 0
        if found > target:
            raise SchemaError(f"the database's {component} schema is version {found}; "
                              f"this dhtcrawler knows up to {target}")
        for _description, statements in migrations[found:]:
            for statement in statements:
                run(statement, ())
        run(f"INSERT INTO schema_migrations(component, version) VALUES ({param(1)}, {param(2)}) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version", (component, target))
        run("COMMIT", ())
        return found
    except BaseException:
        run("ROLLBACK", ())
        raise


def migrate(conn: sqlite3.Connection) -> int:
    """Brings the ``torrents`` component's tables to SCHEMA_VERSION in one transaction and
    returns the version found before. The connection must be in autocommit mode."""
    return apply_migrations(lambda sql, params: conn.execute(sql, tuple(params)).fetchall(), MIGRATIONS,
                            param=lambda _n: "?", begin="BEGIN IMMEDIATE")


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SqliteSink:
    """Stores torrents in a SQLite file (WAL): one transaction per torrent, so a crash or
    SIGKILL loses at most the torrent being written. Storing is idempotent: a torrent seen
    again (under any of its hashes) updates ``last_seen``, ``peer`` and ``times_seen``."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._lock = threading.Lock()
        # Autocommit mode: transactions are explicit. Written from the delivery thread,
        # read from others, hence check_same_thread=False and the lock.
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                     timeout=busy_timeout_ms / 1000.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against a process crash in WAL mode (only power loss can undo
        # the last commits).
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self.schema_version_found = migrate(self._conn)
        self.stored = 0   # new torrents
        self.updated = 0  # torrents seen again

    def add(self, torrent: Torrent) -> bool:
        """Stores one torrent in its own transaction. True when it was new."""
        seen = (torrent.discovered_at.strftime("%Y-%m-%dT%H:%M:%SZ")
                if torrent.discovered_at else _utc_now())
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                key = self._existing_key(torrent)
                if key is None:
                    self._insert(torrent, seen)
                else:
                    conn.execute(
                        "UPDATE torrents SET last_seen = max(last_seen, ?), peer = coalesce(?, peer), "
                        "times_seen = times_seen + 1 WHERE info_hash = ?", (seen, torrent.peer, key))
                    self._insert_hashes(torrent, key)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if key is None:
                self.stored += 1
            else:
                self.updated += 1
            return key is None

    def _existing_key(self, torrent: Torrent) -> Optional[str]:
        # A hybrid may come back under its other key: any of its hashes identifies it.
        hashes = list(torrent.hashes) or [torrent.info_hash]
        marks = ",".join("?" * len(hashes))
        row = self._conn.execute(
            f"SELECT info_hash FROM hashes WHERE hash IN ({marks}) "
            "UNION ALL SELECT info_hash FROM torrents WHERE info_hash = ? LIMIT 1",
            (*hashes, torrent.info_hash)).fetchone()
        return row[0] if row else None

    def _insert(self, t: Torrent, seen: str) -> None:
        self._conn.execute(
            "INSERT INTO torrents(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
            "num_files, piece_length, private, metadata_size, first_seen, last_seen, peer) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size,
             t.num_files, t.piece_length, int(t.private), len(t.info), seen, seen, t.peer))
        self._conn.executemany(
            "INSERT INTO files(info_hash, idx, path, size) VALUES (?, ?, ?, ?)",
            ((t.info_hash, i, f.path, f.size) for i, f in enumerate(t.files)))
        self._insert_hashes(t, t.info_hash)

    def _insert_hashes(self, t: Torrent, key: str) -> None:
        rows = [(h, kind, key) for h, kind in ((t.info_hash_v1, "v1"), (t.info_hash_v2, "v2")) if h]
        self._conn.executemany("INSERT OR IGNORE INTO hashes(hash, kind, info_hash) VALUES (?, ?, ?)", rows)

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM torrents").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# ---- PostgreSQL (fleet mode) -------------------------------------------------------------

# The same tables and semantics as in SQLite, in PostgreSQL's types. Several crawlers write
# to one database: migrations run under the advisory lock that every component's schema
# changes take (the retry store's too), and a torrent is written under a lock on its
# identity, so two crawlers storing the same torrent at once still make one row.
PG_SCHEMA_LOCK = 7305042
PG_MIGRATIONS: Migrations = (
    ("torrents, their files and every hash that names them", (
        """CREATE TABLE torrents (
            info_hash     TEXT PRIMARY KEY,
            info_hash_v1  TEXT,
            info_hash_v2  TEXT,
            version       TEXT NOT NULL,
            name          TEXT NOT NULL,
            total_size    BIGINT NOT NULL,
            num_files     BIGINT NOT NULL,
            piece_length  BIGINT NOT NULL,
            private       BOOLEAN NOT NULL,
            metadata_size BIGINT NOT NULL,
            first_seen    TIMESTAMPTZ NOT NULL,
            last_seen     TIMESTAMPTZ NOT NULL,
            peer          TEXT,
            times_seen    BIGINT NOT NULL DEFAULT 1
        )""",
        """CREATE TABLE files (
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE,
            idx       BIGINT NOT NULL,
            path      TEXT NOT NULL,
            size      BIGINT NOT NULL,
            PRIMARY KEY (info_hash, idx)
        )""",
        """CREATE TABLE hashes (
            hash      TEXT PRIMARY KEY,
            kind      TEXT NOT NULL CHECK (kind IN ('v1', 'v2')),
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE
        )""",
        "CREATE INDEX hashes_by_torrent ON hashes(info_hash)",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
    )),
)


class PostgresSink:
    """Stores torrents in PostgreSQL, the fleet's shared database: one transaction per
    torrent, idempotent like SqliteSink. A connection lost mid-run is re-established once
    per torrent before the torrent is given up (and so not acknowledged)."""

    def __init__(self, conninfo: str) -> None:
        from ._libpq import Connection, describe

        self.path = describe(conninfo)
        self._lock = threading.Lock()
        self._conn = Connection(conninfo)
        try:
            self.schema_version_found = self._migrate()
        except BaseException:
            self._conn.close()
            raise
        self.stored = 0
        self.updated = 0

    def _migrate(self) -> int:
        return apply_migrations(self._conn.execute, PG_MIGRATIONS, param=lambda n: f"${n}",
                                lock=("SELECT pg_advisory_xact_lock($1)", (PG_SCHEMA_LOCK,)))

    def add(self, torrent: Torrent) -> bool:
        """Stores one torrent in its own transaction. True when it was new."""
        from ._libpq import PgError

        seen = (torrent.discovered_at.isoformat() if torrent.discovered_at
                else datetime.now(timezone.utc).isoformat())
        with self._lock:
            try:
                new = self._store(torrent, seen)
            except PgError:
                if self._conn.healthy():
                    raise
                self._conn.reset()  # the server restarted or the connection dropped: once more
                new = self._store(torrent, seen)
            if new:
                self.stored += 1
            else:
                self.updated += 1
            return new

    def _store(self, t: Torrent, seen: str) -> bool:
        c = self._conn
        c.execute("BEGIN")
        try:
            # Every key of a torrent shares its v1 hash (or, v2-only, its v2 hash).
            c.execute("SELECT pg_advisory_xact_lock(hashtext($1))", (t.info_hash_v1 or t.info_hash_v2 or t.info_hash,))
            hashes = list(t.hashes) or [t.info_hash]
            rows = c.execute("SELECT info_hash FROM hashes WHERE hash = ANY($1::text[]) "
                             "UNION ALL SELECT info_hash FROM torrents WHERE info_hash = $2 LIMIT 1",
                             ("{" + ",".join(hashes) + "}", t.info_hash))
            key = rows[0][0] if rows else None
            if key is None:
                c.execute(
                    "INSERT INTO torrents(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
                    "num_files, piece_length, private, metadata_size, first_seen, last_seen, peer) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)",
                    (t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, t.num_files,
                     t.piece_length, "true" if t.private else "false", len(t.info), seen, t.peer))
                for i, f in enumerate(t.files):
                    c.execute("INSERT INTO files(info_hash, idx, path, size) VALUES ($1, $2, $3, $4)",
                              (t.info_hash, i, f.path, f.size))
                key = t.info_hash
                new = True
            else:
                c.execute("UPDATE torrents SET last_seen = greatest(last_seen, $1::timestamptz), "
                          "peer = coalesce($2, peer), times_seen = times_seen + 1 WHERE info_hash = $3",
                          (seen, t.peer, key))
                new = False
            for h, kind in ((t.info_hash_v1, "v1"), (t.info_hash_v2, "v2")):
                if h:
                    c.execute("INSERT INTO hashes(hash, kind, info_hash) VALUES ($1, $2, $3) "
                              "ON CONFLICT (hash) DO NOTHING", (h, kind, key))
            c.execute("COMMIT")
            return new
        except BaseException:
            if self._conn.healthy():
                c.execute("ROLLBACK")
            raise

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM torrents")[0][0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# ---- JSON lines ---------------------------------------------------------------------------

class JsonlSink:
    """Writes each torrent's JSON form (with ``peer`` and ``discovered_at``) as one line,
    flushed per line. ``"-"`` is standard output; a file is appended to, unbuffered, and a
    line that could not be written whole (disk full) is cut off again, so the file never
    holds a torn line of a torrent that was not stored."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._owned: Optional[IO[bytes]] = None
        self._stream: IO[str] = sys.stdout
        if target != "-":
            self._owned = open(target, "ab", buffering=0)
        self.written = 0

    def add(self, torrent: Torrent) -> None:
        # The library's text is already one compact line; anything else is re-encoded.
        line = torrent.json if torrent.json and "\n" not in torrent.json else _dumps(torrent)
        with self._lock:
            if self._owned is None:
                self._stream.write(line + "\n")
                self._stream.flush()
            else:
                self._append((line + "\n").encode("utf-8"))
            self.written += 1

    def _append(self, data: bytes) -> None:
        assert self._owned is not None
        fd = self._owned.fileno()
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            try:
                os.ftruncate(fd, size)  # the part written, if any, goes again
            except OSError:
                pass  # not a regular file
            raise

    def close(self) -> None:
        with self._lock:
            if self._owned is not None:
                if stat.S_ISREG(os.fstat(self._owned.fileno()).st_mode):
                    os.fsync(self._owned.fileno())
                self._owned.close()
                self._owned = None
            else:
                self._stream.flush()


def _dumps(torrent: Torrent) -> str:
    import json

    return json.dumps(torrent.to_dict(), ensure_ascii=False, separators=(",", ":"))


def read_jsonl(path: str) -> List[dict]:
    """Every complete line of a JSON-lines file (a torn last line is skipped)."""
    import json

    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                out.append(json.loads(line))
    return out
