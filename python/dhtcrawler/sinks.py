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
    ("small on disk: binary hashes, an integer torrent key, times as Unix seconds; "
     "the full-text index", (
        """CREATE TABLE torrents2 (
            id            INTEGER PRIMARY KEY,   -- the key of files, hashes and the search index
            info_hash     BLOB NOT NULL,         -- 20 bytes: the DHT key it was first delivered under
            info_hash_v1  BLOB,                  -- 20 bytes, or NULL (v2-only, or unknown: see version)
            info_hash_v2  BLOB,                  -- 32 bytes, or NULL (v1-only, or unknown)
            version       TEXT,                  -- v1, v2, hybrid; NULL = unknown (imported from magnetico)
            name          TEXT NOT NULL,
            total_size    INTEGER NOT NULL,
            num_files     INTEGER NOT NULL,      -- every file, even when fewer rows are stored
            piece_length  INTEGER,               -- NULL = unknown
            private       INTEGER,               -- 0/1; NULL = unknown
            metadata_size INTEGER,               -- bytes of the info dict; NULL = unknown
            first_seen    INTEGER NOT NULL,      -- Unix seconds, UTC
            last_seen     INTEGER NOT NULL,
            peer          TEXT,                  -- the peer that served it last
            times_seen    INTEGER NOT NULL DEFAULT 1
        )""",
        "INSERT INTO torrents2(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, num_files, "
        "piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen) "
        "SELECT dhtc_unhex(info_hash), dhtc_unhex(info_hash_v1), dhtc_unhex(info_hash_v2), version, name, "
        "total_size, num_files, piece_length, private, metadata_size, CAST(strftime('%s', first_seen) AS INTEGER), "
        "CAST(strftime('%s', last_seen) AS INTEGER), peer, times_seen FROM torrents ORDER BY first_seen, info_hash",
        """CREATE TABLE files2 (
            torrent INTEGER NOT NULL,            -- torrents.id
            idx     INTEGER NOT NULL,
            path    TEXT NOT NULL,
            size    INTEGER NOT NULL,
            PRIMARY KEY (torrent, idx)
        ) WITHOUT ROWID""",
        "INSERT INTO files2(torrent, idx, path, size) SELECT t.id, f.idx, f.path, f.size "
        "FROM files f JOIN torrents2 t ON t.info_hash = dhtc_unhex(f.info_hash) ORDER BY t.id, f.idx",
        # Every 20-byte DHT key of a torrent: its v1 hash, its v2 hash truncated to 20 bytes
        # (a full v2 hash is looked up by its first 20 bytes), and the key it came under.
        """CREATE TABLE hashes2 (
            hash    BLOB PRIMARY KEY,
            torrent INTEGER NOT NULL             -- torrents.id
        ) WITHOUT ROWID""",
        "INSERT OR IGNORE INTO hashes2(hash, torrent) SELECT dhtc_unhex(substr(h.hash, 1, 40)), t.id "
        "FROM hashes h JOIN torrents2 t ON t.info_hash = dhtc_unhex(h.info_hash)",
        "INSERT OR IGNORE INTO hashes2(hash, torrent) SELECT info_hash, id FROM torrents2",
        "DROP TABLE hashes",
        "DROP TABLE files",
        "DROP TABLE torrents",
        "ALTER TABLE torrents2 RENAME TO torrents",
        "ALTER TABLE files2 RENAME TO files",
        "ALTER TABLE hashes2 RENAME TO hashes",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
        # The search index: one document per torrent (its name, then the paths of its stored
        # files, one per line), contentless (the text is in torrents and files), rowid =
        # torrents.id. With trigram it records which trigrams occur, not where (detail=none):
        # search.py looks up candidates by trigram and checks each word on the stored text.
        # Written by the sink with the torrent.
        "CREATE VIRTUAL TABLE search USING fts5(text, content='', {fts_options})",
        "INSERT INTO search(rowid, text) SELECT t.id, t.name || coalesce(char(10) || p.paths, '') FROM torrents t "
        "LEFT JOIN (SELECT torrent, group_concat(path, char(10)) AS paths FROM "
        "(SELECT torrent, path FROM files ORDER BY torrent, idx) GROUP BY torrent) p ON p.torrent = t.id",
    )),
    ("swarm sizes: the latest BEP-33 estimate of seeders and leechers, and when it was made", (
        # NULL until a scrape answered (the columns cost nothing in rows written before).
        "ALTER TABLE torrents ADD COLUMN seeders INTEGER",
        "ALTER TABLE torrents ADD COLUMN leechers INTEGER",
        "ALTER TABLE torrents ADD COLUMN scraped_at INTEGER",  # Unix seconds, UTC
    )),
)

SCHEMA_VERSION = len(MIGRATIONS)


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


def _unhex(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else bytes.fromhex(text)


def migrate(conn: sqlite3.Connection) -> int:
    """Brings the ``torrents`` component's tables to SCHEMA_VERSION in one transaction and
    returns the version found before. The connection must be in autocommit mode."""
    # SQLite's own unhex() is 3.41+; the migration from version 1 uses this one.
    conn.create_function("dhtc_unhex", 1, _unhex, deterministic=True)
    migrations = [(d, [s.replace("{fts_options}", FTS_OPTIONS) for s in statements])
                  for d, statements in MIGRATIONS]
    return apply_migrations(lambda sql, params: conn.execute(sql, tuple(params)).fetchall(), migrations,
                            param=lambda _n: "?", begin="BEGIN IMMEDIATE")


def _utc_now() -> int:
    return int(datetime.now(timezone.utc).timestamp())


def _key(hex_hash: str) -> bytes:
    """The 20-byte DHT key of a hash: a v1 hash, or a v2 hash truncated."""
    return bytes.fromhex(hex_hash[:40])


def record_of(torrent: Torrent) -> dict:
    """A torrent as the row-shaped record both sinks and the importer store."""
    at = torrent.discovered_at
    seen = int(at.timestamp()) if at else _utc_now()
    return {"info_hash": torrent.info_hash, "info_hash_v1": torrent.info_hash_v1,
            "info_hash_v2": torrent.info_hash_v2, "version": torrent.version, "name": torrent.name,
            "total_size": torrent.total_size, "num_files": torrent.num_files,
            "piece_length": torrent.piece_length, "private": torrent.private,
            "metadata_size": len(torrent.info) if torrent.info else None,
            "files": [(f.path, f.size) for f in torrent.files], "first_seen": seen, "last_seen": seen,
            "peer": torrent.peer, "times_seen": 1}


class SqliteSink:
    """Stores torrents in a SQLite file (WAL): one transaction per torrent, so a crash or
    SIGKILL loses at most the torrent being written. Storing is idempotent: a torrent seen
    again (under any of its hashes) updates ``last_seen``, ``peer`` and ``times_seen``.

    ``max_files``, when given, caps the file rows stored per torrent (the first N in the
    torrent's order); ``num_files`` and ``total_size`` still describe every file. The search
    index (search.py) is written in the same transaction."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, max_files: Optional[int] = None) -> None:
        self.path = path
        self.max_files = max_files
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

    @property
    def connection(self) -> sqlite3.Connection:
        """The sink's connection (for search.py's queries; take ``lock`` around them when
        the sink is being written from another thread)."""
        return self._conn

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def add(self, torrent: Torrent) -> bool:
        """Stores one torrent in its own transaction. True when it was new."""
        return self.merge(record_of(torrent), crawl=True)

    def merge(self, rec: dict, *, crawl: bool = False,
              also: Optional[Callable[[sqlite3.Connection], None]] = None) -> bool:
        """Stores one record (record_of's form; hashes in hex, times in Unix seconds) in
        its own transaction; True when it was new. A torrent held already (under any of its
        keys) is combined with it: first_seen the earlier, last_seen the later, fields
        unknown so far filled in, and times_seen + 1 for a crawl's sighting, else the larger
        of the two (so importing the same dump twice changes nothing). ``also(conn)``, when
        given, runs in the same transaction (the importer marks the keys delivered)."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                key = self._existing_key(rec)
                if key is None:
                    key = self._insert(rec)
                    new = True
                else:
                    times = "times_seen + 1" if crawl else "max(times_seen, :times_seen)"
                    conn.execute(
                        "UPDATE torrents SET first_seen = min(first_seen, :first_seen), "
                        "peer = CASE WHEN :last_seen >= last_seen THEN coalesce(:peer, peer) ELSE peer END, "
                        f"last_seen = max(last_seen, :last_seen), times_seen = {times}, "
                        "info_hash_v1 = coalesce(info_hash_v1, :v1), info_hash_v2 = coalesce(info_hash_v2, :v2), "
                        "version = coalesce(version, :version), piece_length = coalesce(piece_length, :piece_length), "
                        "private = coalesce(private, :private), metadata_size = coalesce(metadata_size, :metadata_size) "
                        "WHERE id = :id",
                        {"first_seen": rec["first_seen"], "last_seen": rec["last_seen"], "peer": rec.get("peer"),
                         "times_seen": rec.get("times_seen") or 1, "v1": _unhex(rec.get("info_hash_v1")),
                         "v2": _unhex(rec.get("info_hash_v2")), "version": rec.get("version"),
                         "piece_length": rec.get("piece_length"), "private": _bool_int(rec.get("private")),
                         "metadata_size": rec.get("metadata_size"), "id": key})
                    new = False
                self._insert_hashes(rec, key)
                if rec.get("scraped_at") is not None:  # a dump's swarm estimate: the newer one stays
                    conn.execute("UPDATE torrents SET seeders = ?, leechers = ?, scraped_at = ? "
                                 "WHERE id = ? AND (scraped_at IS NULL OR scraped_at < ?)",
                                 (rec.get("seeders"), rec.get("leechers"), rec["scraped_at"], key, rec["scraped_at"]))
                if also is not None:
                    also(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if new:
                self.stored += 1
            else:
                self.updated += 1
            return new

    def _existing_key(self, rec: dict) -> Optional[int]:
        # A hybrid may come back under its other key: any of its keys identifies it.
        keys = [_key(h) for h in _hashes(rec)]
        marks = ",".join("?" * len(keys))
        row = self._conn.execute(f"SELECT torrent FROM hashes WHERE hash IN ({marks}) LIMIT 1", keys).fetchone()
        return int(row[0]) if row else None

    def _insert(self, r: dict) -> int:
        cur = self._conn.execute(
            "INSERT INTO torrents(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
            "num_files, piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_key(r["info_hash"]), _unhex(r.get("info_hash_v1")), _unhex(r.get("info_hash_v2")), r.get("version"),
             r["name"], r["total_size"], r["num_files"], r.get("piece_length"), _bool_int(r.get("private")),
             r.get("metadata_size"), r["first_seen"], r["last_seen"], r.get("peer"), r.get("times_seen") or 1))
        tid = int(cur.lastrowid)
        files = r["files"] if self.max_files is None else r["files"][:self.max_files]
        self._conn.executemany("INSERT INTO files(torrent, idx, path, size) VALUES (?, ?, ?, ?)",
                               ((tid, i, path, size) for i, (path, size) in enumerate(files)))
        self._conn.execute("INSERT INTO search(rowid, text) VALUES (?, ?)",
                           (tid, "\n".join([r["name"], *(path for path, _size in files)])))
        return tid

    def _insert_hashes(self, r: dict, key: int) -> None:
        self._conn.executemany("INSERT OR IGNORE INTO hashes(hash, torrent) VALUES (?, ?)",
                               [(_key(h), key) for h in _hashes(r)])

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM torrents").fetchone()[0])

    def set_swarm(self, info_hash: str, seeders: Optional[int], leechers: Optional[int], at: int) -> None:
        """Stores a scrape's estimate (None, None: nobody knew the swarm; only the time is
        recorded, the last estimate stays) for the torrent any of whose keys is ``info_hash``."""
        with self._lock:
            self._conn.execute(
                "UPDATE torrents SET seeders = coalesce(?, seeders), leechers = coalesce(?, leechers), "
                "scraped_at = ? WHERE id = (SELECT torrent FROM hashes WHERE hash = ?)",
                (seeders, leechers, at, _key(info_hash)))

    def swarms_due(self, limit: int, scraped_before: int) -> List[str]:
        """Up to ``limit`` torrents (their keys, hex) whose swarm is due for a scrape: never
        measured first, then measured before ``scraped_before``; the hottest (most often
        seen), then the newest, first."""
        with self._lock:
            return [bytes(h).hex() for (h,) in self._conn.execute(
                "SELECT info_hash FROM torrents WHERE scraped_at IS NULL OR scraped_at < ? "
                "ORDER BY scraped_at IS NOT NULL, times_seen DESC, last_seen DESC LIMIT ?",
                (scraped_before, int(limit)))]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _hashes(rec: dict) -> List[str]:
    return [h for h in (rec["info_hash"], rec.get("info_hash_v1"), rec.get("info_hash_v2")) if h]


def _bool_int(value: Any) -> Optional[int]:
    return None if value is None else int(bool(value))


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
    ("search: a pg_trgm index on the names, when the extension can be had", (
        # Without the extension (or the right to create it) search scans: still correct.
        """DO $$ BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
            EXECUTE 'CREATE INDEX torrents_name_trgm ON torrents USING gin (lower(name) gin_trgm_ops)';
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'dhtcrawler: no pg_trgm index (%), search scans', SQLERRM;
        END $$""",
        "CREATE INDEX torrents_by_first_seen ON torrents(first_seen)",
    )),
    ("swarm sizes: the latest BEP-33 estimate of seeders and leechers, and when it was made", (
        "ALTER TABLE torrents ADD COLUMN seeders BIGINT",
        "ALTER TABLE torrents ADD COLUMN leechers BIGINT",
        "ALTER TABLE torrents ADD COLUMN scraped_at TIMESTAMPTZ",
    )),
)


class PostgresSink:
    """Stores torrents in PostgreSQL, the fleet's shared database: one transaction per
    torrent, idempotent like SqliteSink. A connection lost mid-run is re-established once
    per torrent before the torrent is given up (and so not acknowledged)."""

    def __init__(self, conninfo: str) -> None:
        from ._pg import Connection, describe

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

    @property
    def connection(self) -> Any:
        """The sink's connection (a dhtcrawler._pg.Connection, for search.py; take ``lock``)."""
        return self._conn

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def _migrate(self) -> int:
        return apply_migrations(self._conn.execute, PG_MIGRATIONS, param=lambda n: f"${n}",
                                lock=("SELECT pg_advisory_xact_lock($1)", (PG_SCHEMA_LOCK,)))

    def add(self, torrent: Torrent) -> bool:
        """Stores one torrent in its own transaction. True when it was new."""
        from ._pg import PgError

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

    def set_swarm(self, info_hash: str, seeders: Optional[int], leechers: Optional[int], at: int) -> None:
        """SqliteSink.set_swarm for the fleet's database."""
        when = datetime.fromtimestamp(at, timezone.utc).isoformat()
        with self._lock:
            self._conn.execute(
                "UPDATE torrents SET seeders = coalesce($1::bigint, seeders), leechers = coalesce($2::bigint, leechers), "
                "scraped_at = $3::timestamptz WHERE info_hash = $4 OR info_hash IN "
                "(SELECT h.info_hash FROM hashes h WHERE left(h.hash, 40) = $4)",
                (seeders, leechers, when, info_hash))

    def swarms_due(self, limit: int, scraped_before: int) -> List[str]:
        """SqliteSink.swarms_due for the fleet's database."""
        when = datetime.fromtimestamp(scraped_before, timezone.utc).isoformat()
        with self._lock:
            return [h for (h,) in self._conn.execute(
                "SELECT info_hash FROM torrents WHERE scraped_at IS NULL OR scraped_at < $1::timestamptz "
                "ORDER BY scraped_at IS NOT NULL, times_seen DESC, last_seen DESC LIMIT $2", (when, int(limit)))]

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
