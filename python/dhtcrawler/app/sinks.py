"""Where accepted torrents go: the torrent database (a SQLite file, or for a fleet
PostgreSQL, through the database layer) and a JSON-lines stream.

Both are written from the crawler's delivery thread, inside the torrent callback, before
the torrent is acknowledged: a torrent counts as accepted only once it is stored.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple

from .._types import Torrent
from .classify import COLUMNS as PARSED_COLUMNS, classify, valid_parsed
from .db import Connection, Database
from .db.dialect import POSTGRESQL
from .db.dialect import FTS_TOKENIZER
from .db.errors import DatabaseError, SchemaError
from .db.migrations import migrate
from .db.schema import COMPONENT, MIGRATIONS, SCHEMA_VERSION, prepare

__all__ = ["Dropped", "DatabaseSink", "SqliteSink", "PostgresSink", "JsonlSink", "read_jsonl", "record_of", "SchemaError",
           "COMPONENT", "MIGRATIONS", "SCHEMA_VERSION", "FTS_TOKENIZER", "migrate_torrents"]


# The longest pause between two attempts to reach a database that went away (seconds).
RECONNECT_PAUSE_MAX = 5.0


class Dropped(Exception):
    """A content rule drops the torrent: nothing of it was stored."""

    def __init__(self, verdict: Any) -> None:
        super().__init__(", ".join(r.label for r in verdict.rules))
        self.verdict = verdict


def merge_tags(tags: Optional[str], more: List[str]) -> str:
    """Comma-separated tags with ``more`` added, each once."""
    return ",".join(t for t in dict.fromkeys([*(tags or "").split(","), *more]) if t)


def migrate_torrents(conn: Connection) -> int:
    """Brings the torrent tables to SCHEMA_VERSION; returns the version found before."""
    return migrate(conn, COMPONENT, MIGRATIONS, prepare=prepare)


def _utc_now() -> int:
    return int(datetime.now(timezone.utc).timestamp())


def key_of(hex_hash: str) -> bytes:
    """The 20-byte DHT key of a hash: a v1 hash, or a v2 hash truncated."""
    return bytes.fromhex(hex_hash[:40])


def _unhex(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else bytes.fromhex(text)


def _bool(value: Any) -> Optional[bool]:
    return None if value is None else bool(value)


def keys_of(rec: dict) -> List[bytes]:
    """Every 20-byte key of a record (its key, v1 hash, v2 hash truncated), distinct."""
    key, v1, v2 = rec["info_hash"], rec.get("info_hash_v1"), rec.get("info_hash_v2")
    if not v2 and (not v1 or v1 == key):  # a v1 torrent under its hash (most): one key
        return [key_of(key)]
    return list(dict.fromkeys(key_of(h) for h in (key, v1, v2) if h))


def _text(rec: dict, files: List[Any]) -> str:
    """What the search index holds for a torrent: its name, then its stored paths, one per line."""
    return "\n".join([rec["name"], *(path for path, _size in files)])


def record_of(torrent: Torrent) -> dict:
    """A torrent as the row-shaped record the sink and the importer store."""
    at = torrent.discovered_at
    seen = int(at.timestamp()) if at else _utc_now()
    return {"info_hash": torrent.info_hash, "info_hash_v1": torrent.info_hash_v1,
            "info_hash_v2": torrent.info_hash_v2, "version": torrent.version, "name": torrent.name,
            "total_size": torrent.total_size, "num_files": torrent.num_files,
            "piece_length": torrent.piece_length, "private": torrent.private,
            "metadata_size": len(torrent.info) if torrent.info else None,
            "files": [(f.path, f.size) for f in torrent.files], "first_seen": seen, "last_seen": seen,
            "peer": torrent.peer, "times_seen": 1}


class IndexAside:
    """The search rows of a bulk import's batches, written on a connection and a thread of
    their own while the sink's connection writes the rest. On PostgreSQL the search index's
    GIN entries are most of the server's work for a new torrent (5 of 12 s at 100,000), and
    a second server process writes them on another core.

    A batch's search rows commit before the batch does (settle(), which the batch waits
    for): no torrent is ever stored without them. A batch that failed deletes them again
    (undo()); only a process killed between the two commits leaves rows whose torrent never
    came, which searches never show (they join the torrents) and the next import deletes
    (begin())."""

    def __init__(self, database: Database) -> None:
        self._conn = database.connect()
        self._held = ExitStack()  # unwound by close(): the bulk settings, then the connection
        self._held.callback(self._conn.close)
        try:
            self._held.enter_context(self._conn.dialect.bulk(self._conn))
        except BaseException:
            self._held.close()
            raise
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="dhtcrawler-index")
        self._pending: List[Future] = []
        self._ids: List[int] = []  # the rows of the batch being written

    def begin(self) -> int:
        """Deletes the rows an import killed before left (unless another import writes
        beside now); returns how many."""
        return self._conn.dialect.begin_index_aside(self._conn)

    def write(self, rows: List[Tuple[int, str]]) -> None:
        self._ids.extend(tid for tid, _text in rows)
        self._pending.append(self._thread.submit(self._write, rows))

    def _write(self, rows: List[Tuple[int, str]]) -> None:
        with self._conn.transaction():
            self._conn.dialect.index_torrents(self._conn, rows)

    def settle(self) -> None:
        """Waits until the batch's rows are committed; raises what writing them raised."""
        pending, self._pending = self._pending, []
        wait(pending)  # every one: undo() must not race one still writing
        for f in pending:
            f.result()
        self._ids = []

    def undo(self) -> None:
        """The batch failed: its rows, those already committed too, go again (best effort:
        a connection lost meanwhile leaves orphans, deleted by the next import)."""
        wait(self._pending)
        self._pending = []
        ids, self._ids = self._ids, []
        if ids and self._conn.healthy():
            try:
                with self._conn.transaction():
                    self._conn.dialect.unindex_torrents(self._conn, ids)
            except Exception:  # noqa: BLE001 - the batch's own error is the one to report
                pass

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._held.close()


class DatabaseSink:
    """Stores torrents in the torrent database, SQLite or PostgreSQL alike: one transaction
    per torrent, so a crash or SIGKILL loses at most the torrent being written. Storing is
    idempotent: a torrent seen again (under any of its hashes) updates ``last_seen``,
    ``peer`` and ``times_seen``. The tables are migrated when the sink opens.

    ``max_files``, when given, caps the file rows stored per torrent (the first N in the
    torrent's order); ``num_files`` and ``total_size`` still describe every file. The search
    index is written in the same transaction. A PostgreSQL connection lost mid-run is
    re-established before the torrent is given up (and so not acknowledged), with a back-off
    while the server stays away (_reconnect)."""

    def __init__(self, database: Database, *, max_files: Optional[int] = None, rules: Any = None) -> None:
        self.database = database
        self.path = database.describe()
        self.max_files = max_files
        self.rules = rules  # app/rules.RuleSet: judged on each new torrent (drop raises Dropped)
        self._rules_need_parse = bool(rules) and any(r.matcher in ("type", "resolution") for r in rules.rules)
        self._conn = database.connect()
        try:
            with self._conn.lock:
                self.schema_version_found = migrate_torrents(self._conn)
        except BaseException:
            self._conn.close()
            raise
        self.stored = 0   # new torrents
        self.updated = 0  # torrents seen again
        self.reconnects = 0           # connections made again after the server went away
        self.reconnect_failures = 0   # attempts that failed (the server still away)
        self._pause = 0.0             # the back-off between attempts
        self._reconnect_at = 0.0      # time.monotonic() of the next attempt
        self._aside: Optional[IndexAside] = None  # batches' search rows, written beside (index_aside)
        self._batching = False  # inside batch()

    @property
    def connection(self) -> Connection:
        """The sink's connection (for the query functions; take ``lock`` around its use
        when the sink is being written from another thread)."""
        return self._conn

    @property
    def lock(self) -> Any:
        return self._conn.lock

    def add(self, torrent: Torrent) -> bool:
        """Stores one torrent in its own transaction. True when it was new."""
        return self.merge(record_of(torrent), crawl=True)

    @contextmanager
    def batch(self) -> Iterator["DatabaseSink"]:
        """Every add() and merge() inside is one transaction: all stored, or (on any
        exception) none. Batched writes for bulk loads; a crawl stores one torrent per
        transaction, so that accepted means durable."""
        with self._conn.lock, self._conn.transaction():
            outer, self._batching = not self._batching, True
            done = False
            try:
                yield self
                if self._aside is not None and outer:
                    self._aside.settle()  # its search rows first: then the batch commits
                done = True
            finally:
                if outer:
                    self._batching = False
                    if self._aside is not None and not done:
                        self._aside.undo()

    @property
    def indexing_aside(self) -> bool:
        """True inside index_aside() where it writes beside (PostgreSQL)."""
        return self._aside is not None

    @contextmanager
    def index_aside(self) -> Iterator[None]:
        """Inside, batch()es of new torrents write their search rows beside, on a second
        connection (IndexAside), where the database gains from it (PostgreSQL); else a
        no-op. For bulk loads (import): the rows left by an import killed before are
        deleted first."""
        if not self._conn.dialect.index_aside or self._aside is not None:
            yield
            return
        aside = IndexAside(self.database)
        try:
            aside.begin()
            self._aside = aside
            yield
        finally:
            self._aside = None
            aside.close()

    def merge(self, rec: dict, *, crawl: bool = False, also: Optional[Callable[[Connection], None]] = None) -> bool:
        """Stores one record (record_of's form; hashes in hex, times in Unix seconds) in
        its own transaction; True when it was new. A torrent held already (under any of its
        keys) is combined with it: first_seen the earlier, last_seen the later, fields
        unknown so far filled in, and times_seen + 1 for a crawl's sighting, else the larger
        of the two (so importing the same dump twice changes nothing). ``also(conn)``, when
        given, runs in the same transaction (the importer marks the keys delivered)."""
        with self._conn.lock:
            try:
                new = self._merge(rec, crawl, also)
            except Exception:
                if self._conn.healthy() or self._conn.in_transaction:  # a batch fails whole
                    raise
                self._reconnect()  # the server restarted or the connection dropped: once more
                new = self._merge(rec, crawl, also)
            if new:
                self.stored += 1
            else:
                self.updated += 1
            return new

    def _reconnect(self) -> None:
        """Connects again, or raises (the torrent is then answered RETRY). While the server
        stays away, attempts back off (0.1 s doubling to RECONNECT_PAUSE_MAX): the torrents
        coming meanwhile fail at once instead of each waiting for a connection."""
        now = time.monotonic()
        if now < self._reconnect_at:
            raise DatabaseError(f"{self.path}: unreachable; connecting again in {self._reconnect_at - now:.1f} s")
        try:
            self._conn.reset()
        except Exception:
            self._pause = min(max(self._pause * 2, 0.1), RECONNECT_PAUSE_MAX)
            self._reconnect_at = time.monotonic() + self._pause
            self.reconnect_failures += 1
            raise
        self._pause = 0.0
        self.reconnects += 1

    def merge_many(self, recs: List[dict], keys: Optional[List[List[bytes]]] = None) -> Tuple[int, List[dict]]:
        """Merges records as merge() does, all in one transaction, and returns how many were
        new and the records a content rule dropped (nothing of them stored). Records none of
        whose keys the database (or an earlier record of the list) holds are inserted
        together, a statement per table for the lot; the others are then merged into their
        rows together too, by merge()'s rules, in the list's order (_merge_known).
        ``keys``: each record's keys_of(), when the caller has them."""
        conn, d = self._conn, self._conn.dialect
        dropped: List[dict] = []
        with conn.lock, conn.transaction():
            d.lock_identities(conn, [rec.get("info_hash_v1") or rec.get("info_hash_v2") or rec["info_hash"]
                                     for rec in recs])
            if keys is None:
                keys = [keys_of(rec) for rec in recs]
            owner = d.torrents_of(conn, [k for ks in keys for k in ks])  # key -> torrent id, for the keys held
            fresh, known = [], []
            taken = set(owner)
            for rec, ks in zip(recs, keys):
                if taken.isdisjoint(ks):
                    try:
                        fresh.append((rec, ks, self._judged(rec)))
                    except Dropped:
                        dropped.append(rec)
                        continue
                    taken.update(ks)
                else:
                    known.append((rec, ks))
            for tid, (_rec, ks, _judged) in zip(self._insert_many(fresh), fresh):
                for k in ks:
                    owner[k] = tid
            self._merge_known(known, owner)
            new = len(fresh)
        self.stored += new
        self.updated += len(recs) - new - len(dropped)
        return new, dropped

    def _merge_known(self, known: List[Tuple[dict, List[bytes]]], owner: Dict[bytes, int]) -> None:
        """_merge() of records whose torrent is held (``owner``: key -> torrent id), in one
        statement per table for the lot. As one by one: a record's torrent is the one its
        first key in hash order names (the index order _merge's lookup reads), its new keys
        name that torrent from then on, and a torrent merged twice takes both in order."""
        d, conn = self._conn.dialect, self._conn
        updates, hashes, swarms = [], [], []
        for rec, ks in known:
            tid = owner[min(k for k in ks if k in owner)]
            for k in ks:
                if k not in owner:
                    owner[k] = tid
                    hashes.append((k, tid))
            updates.append((tid, d.time(rec["first_seen"]), d.time(rec["last_seen"]), rec.get("peer"),
                            rec.get("times_seen") or 1, _unhex(rec.get("info_hash_v1")),
                            _unhex(rec.get("info_hash_v2")), rec.get("version"), rec.get("piece_length"),
                            _bool(rec.get("private")), rec.get("metadata_size")))
            if rec.get("scraped_at") is not None:  # a dump's swarm estimate: the newer one stays
                swarms.append((tid, rec.get("seeders"), rec.get("leechers"), d.time(rec["scraped_at"])))
        d.merge_sightings(conn, updates)
        d.add_hashes(conn, hashes)
        d.merge_swarms(conn, swarms)

    def _insert_many(self, fresh: List[Any]) -> List[int]:
        """_insert() for many records at once, each with its _judged() columns (ids
        allocated first; swarm estimates kept); returns their ids."""
        if not fresh:
            return []
        conn, d = self._conn, self._conn.dialect
        ids = d.allocate_ids(conn, len(fresh))
        stored = [(tid, r, self._files(r)) for tid, (r, _ks, _j) in zip(ids, fresh)]
        texts = [(tid, _text(r, files)) for tid, r, files in stored]
        aside = self._aside if self._batching else None
        if aside is not None:  # first, so it is written while the rest is
            aside.write(texts)
        t = d.time
        conn.copy("torrents", ("id", "info_hash", "info_hash_v1", "info_hash_v2", "version", "name", "total_size",
                               "num_files", "piece_length", "private", "metadata_size", "first_seen", "last_seen",
                               "peer", "times_seen", "seeders", "leechers", "scraped_at", *PARSED_COLUMNS, "hidden"),
                  [(tid, ks[0], _unhex(r.get("info_hash_v1")),
                    _unhex(r.get("info_hash_v2")), r.get("version"), r["name"], r["total_size"], r["num_files"],
                    r.get("piece_length"), _bool(r.get("private")), r.get("metadata_size"), t(r["first_seen"]),
                    t(r["last_seen"]), r.get("peer"), r.get("times_seen") or 1,
                    *((r.get("seeders"), r.get("leechers"), t(r["scraped_at"]))
                      if r.get("scraped_at") is not None else (None, None, None)), *judged)
                   for tid, (r, ks, judged) in zip(ids, fresh)])
        conn.copy("files", ("torrent", "idx", "path", "size"),
                  [(tid, i, path, size) for tid, _r, files in stored for i, (path, size) in enumerate(files)])
        conn.copy("hashes", ("hash", "torrent"), [(k, tid) for tid, (_r, ks, _j) in zip(ids, fresh) for k in ks])
        if aside is None:
            d.index_torrents(conn, texts)
        return ids

    def _files(self, r: dict) -> List[Any]:
        return r["files"] if self.max_files is None else r["files"][:self.max_files]

    def _merge(self, rec: dict, crawl: bool, also: Optional[Callable[[Connection], None]]) -> bool:
        conn, d = self._conn, self._conn.dialect
        with conn.transaction():
            # Every key of a torrent shares its v1 hash (or, v2-only, its v2 hash).
            d.lock_identity(conn, rec.get("info_hash_v1") or rec.get("info_hash_v2") or rec["info_hash"])
            keys = keys_of(rec)
            found = conn.one(f"SELECT torrent FROM hashes WHERE hash IN ({', '.join('?' * len(keys))}) LIMIT 1",
                             keys)
            if found is None:
                key = self._insert(rec)
            else:
                key = int(found[0])
                self._update(rec, key, crawl)
            conn.executemany("INSERT INTO hashes(hash, torrent) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING",
                             [(k, key) for k in keys])
            if rec.get("scraped_at") is not None:  # a dump's swarm estimate: the newer one stays
                at = d.time(rec["scraped_at"])
                conn.execute("UPDATE torrents SET seeders = ?, leechers = ?, scraped_at = ? "
                             "WHERE id = ? AND (scraped_at IS NULL OR scraped_at < ?)",
                             (rec.get("seeders"), rec.get("leechers"), at, key, at))
            if also is not None:
                also(conn)
        return found is None

    def parsed_of(self, r: dict) -> Optional[dict]:
        """The parsed columns to store with a new torrent: a dump's own, when they pass the
        checks; None when the record asks to leave them to the backfill (``defer_parse``);
        else parsed now (a crawl's torrent: its name, files and size)."""
        if r.get("parsed") is not None:
            kept = valid_parsed(r)
            if kept is not None:
                return kept
        if r.get("defer_parse") and not self._rules_need_parse:
            return None
        return classify(r["name"], r["files"], r["total_size"])

    def _judged(self, r: dict) -> Tuple[Any, ...]:
        """A new torrent's parsed columns and ``hidden``, in PARSED_COLUMNS' order, after the
        content rules: raises Dropped (before anything is written) when a rule drops it."""
        parsed = self.parsed_of(r) or {}
        if not self.rules:
            return (*map(parsed.get, PARSED_COLUMNS), None)
        verdict = self.rules.judge(r["name"], r["files"], r["total_size"], parsed)
        if verdict.dropped:
            raise Dropped(verdict)
        if verdict.tags:
            parsed = {**parsed, "tags": merge_tags(parsed.get("tags"), verdict.tags)}
        return (*map(parsed.get, PARSED_COLUMNS), 1 if verdict.hidden else None)

    def _insert(self, r: dict) -> int:
        conn, d = self._conn, self._conn.dialect
        tid = conn.insert(
            "INSERT INTO torrents(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, "
            f"num_files, piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen, "
            f"{', '.join(PARSED_COLUMNS)}, hidden) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
            + ", ?" * len(PARSED_COLUMNS) + ", ?)",
            (key_of(r["info_hash"]), _unhex(r.get("info_hash_v1")), _unhex(r.get("info_hash_v2")), r.get("version"),
             r["name"], r["total_size"], r["num_files"], r.get("piece_length"), _bool(r.get("private")),
             r.get("metadata_size"), d.time(r["first_seen"]), d.time(r["last_seen"]), r.get("peer"),
             r.get("times_seen") or 1, *self._judged(r)))
        files = self._files(r)
        conn.executemany("INSERT INTO files(torrent, idx, path, size) VALUES (?, ?, ?, ?)",
                         [(tid, i, path, size) for i, (path, size) in enumerate(files)])
        d.index_torrent(conn, tid, _text(r, files))
        return tid

    def _update(self, rec: dict, key: int, crawl: bool) -> None:
        conn, d = self._conn, self._conn.dialect
        first, last = d.time(rec["first_seen"]), d.time(rec["last_seen"])
        times = ("times_seen + 1", ()) if crawl else (d.greatest("times_seen", "?"), (rec.get("times_seen") or 1,))
        conn.execute(
            f"UPDATE torrents SET first_seen = {d.least('first_seen', '?')}, "
            "peer = CASE WHEN ? >= last_seen THEN coalesce(?, peer) ELSE peer END, "
            f"last_seen = {d.greatest('last_seen', '?')}, times_seen = {times[0]}, "
            "info_hash_v1 = coalesce(info_hash_v1, ?), info_hash_v2 = coalesce(info_hash_v2, ?), "
            "version = coalesce(version, ?), piece_length = coalesce(piece_length, ?), "
            "private = coalesce(private, ?), metadata_size = coalesce(metadata_size, ?) WHERE id = ?",
            (first, last, rec.get("peer"), last, *times[1], _unhex(rec.get("info_hash_v1")),
             _unhex(rec.get("info_hash_v2")), rec.get("version"), rec.get("piece_length"), _bool(rec.get("private")),
             rec.get("metadata_size"), key))

    def count(self) -> int:
        with self._conn.lock:
            return int(self._conn.value("SELECT count(*) FROM torrents"))

    def set_swarm(self, info_hash: str, seeders: Optional[int], leechers: Optional[int], at: int) -> None:
        """Stores a scrape's estimate (None, None: nobody knew the swarm; only the time is
        recorded, the last estimate stays) for the torrent any of whose keys is ``info_hash``."""
        with self._conn.lock:
            self._conn.execute(
                "UPDATE torrents SET seeders = coalesce(?, seeders), leechers = coalesce(?, leechers), "
                "scraped_at = ? WHERE id = (SELECT torrent FROM hashes WHERE hash = ?)",
                (seeders, leechers, self._conn.dialect.time(at), key_of(info_hash)))

    def swarms_due(self, limit: int, scraped_before: int) -> List[str]:
        """Up to ``limit`` torrents (their keys, hex) whose swarm is due for a scrape: never
        measured first, then measured before ``scraped_before``; the hottest (most often
        seen), then the newest, first."""
        with self._conn.lock:
            return [bytes(h).hex() for (h,) in self._conn.execute(
                "SELECT info_hash FROM torrents WHERE scraped_at IS NULL OR scraped_at < ? "
                "ORDER BY scraped_at IS NOT NULL, times_seen DESC, last_seen DESC LIMIT ?",
                (self._conn.dialect.time(scraped_before), int(limit)))]

    def close(self) -> None:
        with self._conn.lock:
            self._conn.close()


class SqliteSink(DatabaseSink):
    """The sink on a SQLite file (WAL)."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, max_files: Optional[int] = None) -> None:
        super().__init__(Database(os.fspath(path), busy_timeout_ms=busy_timeout_ms), max_files=max_files)
        self.path = os.fspath(path)


class PostgresSink(DatabaseSink):
    """The sink on a fleet's PostgreSQL database (a ``postgresql://`` URI)."""

    def __init__(self, conninfo: str, *, max_files: Optional[int] = None) -> None:
        super().__init__(Database(conninfo, dialect=POSTGRESQL), max_files=max_files)


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
