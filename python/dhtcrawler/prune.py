"""``dhtcrawler prune``: removing torrents from the database, by age, by size, or keeping
the best N, with a dry run that lists exactly what a real run removes.

Three rules, one per run:

- ``older_than`` (seconds): torrents last seen longer ago than that go, oldest first.
- ``max_size`` (bytes): torrents go, least recently seen first (then least often seen),
  until the database's torrents fit. The size is the database's, not the file's: on SQLite
  the pages in use (the file less its free pages; a real run ends with VACUUM, which gives
  the freed pages back to the file system), on PostgreSQL the torrent tables with their
  indexes and TOAST (pg_total_relation_size; the space is reused by later writes, and
  returned by a VACUUM FULL the operator may run). What one torrent takes is estimated
  from its text (name, paths, file rows), scaled so the estimates add up to the measured
  size.
- ``keep_top`` (a count): the N best torrents stay, the rest go. Best: the largest
  measured swarm (seeders + leechers of the latest BEP-33 estimate) first, then torrents
  never measured; ties by times seen, then last seen.

plan() selects, remove() deletes what plan() selected, each torrent with its files, its
hashes and its search-index entry in the same transaction (batches of BATCH). A pruned
hash stays marked delivered in the retry store: a crawl does not fetch it again.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional

from .search import _is_pg, _pg_connection, _pg_time, rfc3339

BATCH = 500
# A torrent's bytes besides its text: its row, its hashes, its index entries.
TORRENT_OVERHEAD = 120
FILE_ROW_OVERHEAD = 16


class PruneError(ValueError):
    """Not exactly one rule, or a bad value."""


@dataclass
class Victim:
    key: Any          # the torrent's key: torrents.id (SQLite) or info_hash (PostgreSQL)
    info_hash: str
    name: str
    last_seen: Optional[str]
    times_seen: int
    estimated_bytes: int = 0


@dataclass
class Plan:
    victims: List[Victim] = field(default_factory=list)
    torrents: int = 0                # torrents held before
    size: Optional[int] = None       # the measured size (max_size only)
    target: Optional[int] = None     # max_size

    @property
    def freed(self) -> int:
        return sum(v.estimated_bytes for v in self.victims)


def plan(db: Any, *, older_than: Optional[float] = None, max_size: Optional[int] = None,
         keep_top: Optional[int] = None, now: Optional[float] = None) -> Plan:
    """What a prune by the one given rule removes, in removal order. ``db``: a SQLite
    connection or a PostgreSQL one (search.py's forms), on a database of the current schema
    (the sinks migrate it)."""
    rules = [r for r in (older_than, max_size, keep_top) if r is not None]
    if len(rules) != 1:
        raise PruneError("give exactly one of --older-than, --max-size, --keep-top")
    if any(r < 0 for r in rules):
        raise PruneError("the prune limit must be >= 0")
    if _is_pg(db):
        return _pg_plan(db, older_than, max_size, keep_top, time.time() if now is None else now)
    return _sqlite_plan(db, older_than, max_size, keep_top, int(time.time() if now is None else now))


def _order(rule: str) -> str:
    """The removal order of a rule (torrent columns as t.*)."""
    if rule == "keep_top":  # the worst first: the reverse of the kept order
        return ("(t.seeders + t.leechers) IS NOT NULL, coalesce(t.seeders + t.leechers, 0), "
                "t.times_seen, t.last_seen, {id}")
    return "t.last_seen, t.times_seen, {id}"


def _pick(victims: Iterable[Victim], size: int, target: int) -> List[Victim]:
    """The first victims whose estimated bytes bring ``size`` down to ``target``."""
    out: List[Victim] = []
    for v in victims:
        if size <= target:
            break
        out.append(v)
        size -= v.estimated_bytes
    return out


def _scaled(victims: List[Victim], text_bytes: int, size: int) -> None:
    """Scales the victims' estimates so that all torrents' (text_bytes) add up to size."""
    scale = size / text_bytes if text_bytes else 0.0
    for v in victims:
        v.estimated_bytes = int(v.estimated_bytes * scale)


# ---- SQLite -------------------------------------------------------------------------------

_SQLITE_WEIGHT = (f"({TORRENT_OVERHEAD} + length(CAST(t.name AS BLOB)) + coalesce((SELECT sum("
                  f"{FILE_ROW_OVERHEAD} + 2 * length(CAST(f.path AS BLOB))) FROM files f WHERE f.torrent = t.id), 0))")


def _sqlite_plan(conn: sqlite3.Connection, older_than: Optional[float], max_size: Optional[int],
                 keep_top: Optional[int], now: int) -> Plan:
    n = int(conn.execute("SELECT count(*) FROM torrents").fetchone()[0])
    out = Plan(torrents=n)
    select = (f"SELECT t.id, t.info_hash, t.name, t.last_seen, t.times_seen, {_SQLITE_WEIGHT} FROM torrents t ")

    def victims(sql: str, params: tuple = ()) -> List[Victim]:
        return [Victim(i, bytes(h).hex(), name, rfc3339(seen), int(times), int(w))
                for i, h, name, seen, times, w in conn.execute(sql, params)]

    if older_than is not None:
        out.victims = victims(select + "WHERE t.last_seen < ? ORDER BY " + _order("age").format(id="t.id"),
                              (now - int(older_than),))
    elif keep_top is not None:
        out.victims = victims(select + "ORDER BY " + _order("keep_top").format(id="t.id") + " LIMIT ?",
                              (max(0, n - int(keep_top)),))
    else:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        used = (int(conn.execute("PRAGMA page_count").fetchone()[0])
                - int(conn.execute("PRAGMA freelist_count").fetchone()[0])) * page_size
        out.size, out.target = used, int(max_size or 0)
        if used > out.target:
            text = int(conn.execute(f"SELECT coalesce(sum({_SQLITE_WEIGHT}), 0) FROM torrents t").fetchone()[0])
            every = victims(select + "ORDER BY " + _order("size").format(id="t.id"))
            _scaled(every, text, _torrent_bytes(conn, used, page_size))
            out.victims = _pick(every, used, out.target)
    return out


_TORRENT_TABLES = "name IN ('torrents', 'files', 'hashes', 'torrents_by_last_seen') OR name LIKE 'search%'"


def _torrent_bytes(conn: sqlite3.Connection, used: int, page_size: int) -> int:
    """The bytes the torrents take, less the root page every table and index keeps when
    empty: the torrent tables' pages from SQLite's dbstat table when it has one, else every
    table's (the retry tables beside them then count as torrents' too)."""
    try:
        pages = int(conn.execute(f"SELECT count(*) FROM dbstat WHERE {_TORRENT_TABLES}").fetchone()[0])
        roots = int(conn.execute(f"SELECT count(*) FROM sqlite_master WHERE rootpage > 0 AND ({_TORRENT_TABLES})"
                                 ).fetchone()[0])
    except sqlite3.Error:
        pages = used // page_size
        roots = 1 + int(conn.execute("SELECT count(*) FROM sqlite_master WHERE rootpage > 0").fetchone()[0])
    return max(0, pages - roots) * page_size


def _sqlite_remove(conn: sqlite3.Connection, victims: List[Victim]) -> int:
    removed = 0
    for start in range(0, len(victims), BATCH):
        batch = [v.key for v in victims[start:start + BATCH]]
        conn.execute("BEGIN IMMEDIATE")
        try:
            for tid in batch:
                row = conn.execute("SELECT name FROM torrents WHERE id = ?", (tid,)).fetchone()
                if row is None:
                    continue  # gone since the plan
                # The index is contentless: an entry is deleted by giving the text it was
                # written with (the sink's: the name, then the stored paths, one per line).
                paths = [p for (p,) in conn.execute("SELECT path FROM files WHERE torrent = ? ORDER BY idx", (tid,))]
                conn.execute("INSERT INTO search(search, rowid, text) VALUES ('delete', ?, ?)",
                             (tid, "\n".join([row[0], *paths])))
                conn.execute("DELETE FROM files WHERE torrent = ?", (tid,))
                conn.execute("DELETE FROM hashes WHERE torrent = ?", (tid,))
                conn.execute("DELETE FROM torrents WHERE id = ?", (tid,))
                removed += 1
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return removed


# ---- PostgreSQL ---------------------------------------------------------------------------

_PG_WEIGHT = (f"({TORRENT_OVERHEAD} + octet_length(t.name) + coalesce((SELECT sum({FILE_ROW_OVERHEAD} + "
              "2 * octet_length(f.path)) FROM files f WHERE f.info_hash = t.info_hash), 0))")


def _pg_plan(db: Any, older_than: Optional[float], max_size: Optional[int], keep_top: Optional[int],
             now: float) -> Plan:
    from datetime import datetime, timezone

    with _pg_connection(db) as conn:
        n = int(conn.execute("SELECT count(*) FROM torrents")[0][0])
        out = Plan(torrents=n)
        select = f"SELECT t.info_hash, t.name, t.last_seen, t.times_seen, {_PG_WEIGHT} FROM torrents t "

        def victims(sql: str, params: tuple = ()) -> List[Victim]:
            return [Victim(h, h, name, _pg_time(seen), int(times), int(w))
                    for h, name, seen, times, w in conn.execute(sql, params)]

        if older_than is not None:
            cutoff = datetime.fromtimestamp(now - float(older_than), timezone.utc).isoformat()
            out.victims = victims(select + "WHERE t.last_seen < $1::timestamptz ORDER BY "
                                  + _order("age").format(id="t.info_hash"), (cutoff,))
        elif keep_top is not None:
            out.victims = victims(select + "ORDER BY " + _order("keep_top").format(id="t.info_hash") + " LIMIT $1",
                                  (max(0, n - int(keep_top)),))
        else:
            used = int(conn.execute("SELECT pg_total_relation_size('torrents') + pg_total_relation_size('files') "
                                    "+ pg_total_relation_size('hashes')")[0][0])
            out.size, out.target = used, int(max_size or 0)
            if used > out.target:
                text = int(conn.execute(f"SELECT coalesce(sum({_PG_WEIGHT}), 0) FROM torrents t")[0][0])
                every = victims(select + "ORDER BY " + _order("size").format(id="t.info_hash"))
                _scaled(every, text, used)
                out.victims = _pick(every, used, out.target)
        return out


def _pg_remove(db: Any, victims: List[Victim]) -> int:
    removed = 0
    with _pg_connection(db) as conn:
        for start in range(0, len(victims), BATCH):
            keys = [v.key for v in victims[start:start + BATCH]]
            conn.execute("BEGIN")
            try:  # files and hashes go with their torrent (ON DELETE CASCADE)
                rows = conn.execute("DELETE FROM torrents WHERE info_hash = ANY($1::text[]) RETURNING info_hash",
                                    ("{" + ",".join(keys) + "}",))
                conn.execute("COMMIT")
            except BaseException:
                if conn.healthy():
                    conn.execute("ROLLBACK")
                raise
            removed += len(rows)
    return removed


def remove(db: Any, selected: Plan) -> int:
    """Deletes the torrents ``selected`` lists (those still there) and returns how many."""
    if _is_pg(db):
        return _pg_remove(db, selected.victims)
    return _sqlite_remove(db, selected.victims)


def vacuum(conn: sqlite3.Connection) -> bool:
    """Shrinks the SQLite file to its pages in use; False when the database is busy. The
    search index first merges its segments: FTS5 records a deletion as a marker, and only a
    merge drops the deleted entries."""
    try:
        conn.execute("INSERT INTO search(search) VALUES ('optimize')")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True
    except sqlite3.OperationalError:
        return False
