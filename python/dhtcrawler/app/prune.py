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

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .db import Connection, using
from .search import rfc3339

BATCH = 500
# A torrent's bytes besides its text: its row, its hashes, its index entries.
TORRENT_OVERHEAD = 120
FILE_ROW_OVERHEAD = 16


class PruneError(ValueError):
    """Not exactly one rule, or a bad value."""


@dataclass
class Victim:
    key: int          # torrents.id
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


# The removal order of each rule (the worst first for keep_top: the reverse of the kept order).
_ORDER = {
    "keep_top": "(t.seeders + t.leechers) IS NOT NULL, coalesce(t.seeders + t.leechers, 0), t.times_seen, "
                "t.last_seen, t.id",
    "age": "t.last_seen, t.times_seen, t.id",
}


def plan(db: Any, *, older_than: Optional[float] = None, max_size: Optional[int] = None,
         keep_top: Optional[int] = None, now: Optional[float] = None) -> Plan:
    """What a prune by the one given rule removes, in removal order. ``db``: anything the
    query functions take (dhtcrawler.app.search), on a database of the current schema (the
    sink migrates it)."""
    import time

    rules = [r for r in (older_than, max_size, keep_top) if r is not None]
    if len(rules) != 1:
        raise PruneError("give exactly one of --older-than, --max-size, --keep-top")
    if any(r < 0 for r in rules):
        raise PruneError("the prune limit must be >= 0")
    with using(db) as conn:
        return _plan(conn, older_than, max_size, keep_top, int(time.time() if now is None else now))


def _weight(conn: Connection) -> str:
    """What one torrent takes, estimated from its text (name, paths, file rows)."""
    d = conn.dialect
    return (f"({TORRENT_OVERHEAD} + {d.octet_length('t.name')} + coalesce((SELECT sum({FILE_ROW_OVERHEAD} + "
            f"2 * {d.octet_length('f.path')}) FROM files f WHERE f.torrent = t.id), 0))")


def _plan(conn: Connection, older_than: Optional[float], max_size: Optional[int], keep_top: Optional[int],
          now: int) -> Plan:
    d = conn.dialect
    n = int(conn.value("SELECT count(*) FROM torrents"))
    out = Plan(torrents=n)
    weight = _weight(conn)
    select = f"SELECT t.id, t.info_hash, t.name, t.last_seen, t.times_seen, {weight} FROM torrents t "

    def victims(sql: str, params: tuple = ()) -> List[Victim]:
        return [Victim(int(i), bytes(h).hex(), name, rfc3339(d.seconds(seen)), int(times), int(w))
                for i, h, name, seen, times, w in conn.execute(sql, params)]

    if older_than is not None:
        out.victims = victims(select + "WHERE t.last_seen < ? ORDER BY " + _ORDER["age"],
                              (d.time(now - int(older_than)),))
    elif keep_top is not None:
        out.victims = victims(select + "ORDER BY " + _ORDER["keep_top"] + " LIMIT ?", (max(0, n - int(keep_top)),))
    else:
        used, torrent_bytes = d.measure(conn)
        out.size, out.target = used, int(max_size or 0)
        if used > out.target:
            text = int(conn.value(f"SELECT coalesce(sum({weight}), 0) FROM torrents t"))
            every = victims(select + "ORDER BY " + _ORDER["age"])
            _scaled(every, text, torrent_bytes)
            out.victims = _pick(every, used, out.target)
    return out


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


def remove(db: Any, selected: Plan, progress: Optional[Callable[[int], None]] = None) -> int:
    """Deletes the torrents ``selected`` lists (those still there), each with its files, its
    hashes and its search-index entry, in transactions of BATCH; returns how many.
    ``progress(done)`` is called after each transaction."""
    removed = 0
    with using(db) as conn:
        d = conn.dialect
        for start in range(0, len(selected.victims), BATCH):
            with conn.transaction():
                for v in selected.victims[start:start + BATCH]:
                    row = conn.one("SELECT name FROM torrents WHERE id = ?", (v.key,))
                    if row is None:
                        continue  # gone since the plan
                    paths = [p for (p,) in conn.execute("SELECT path FROM files WHERE torrent = ? ORDER BY idx",
                                                        (v.key,))]
                    d.unindex_torrent(conn, v.key, "\n".join([row[0], *paths]))
                    conn.execute("DELETE FROM files WHERE torrent = ?", (v.key,))
                    conn.execute("DELETE FROM hashes WHERE torrent = ?", (v.key,))
                    conn.execute("DELETE FROM torrents WHERE id = ?", (v.key,))
                    removed += 1
            if progress is not None:
                progress(min(start + BATCH, len(selected.victims)))
    return removed


def compact(db: Any) -> Optional[bool]:
    """Gives the space a removal freed back (SQLite: VACUUM): True when done, False when the
    database is busy, None where the database reuses it instead (PostgreSQL)."""
    with using(db) as conn:
        return conn.dialect.compact(conn)


# ---- content rules ------------------------------------------------------------------------

@dataclass
class RulesPlan:
    """What the content rules say of the torrents held: ``drop`` (a Plan for remove()),
    the ids to hide, and the tags to add per id."""

    drop: Plan = field(default_factory=Plan)
    hide: List[int] = field(default_factory=list)
    tag: Dict[int, List[str]] = field(default_factory=dict)


def plan_rules(db: Any, rules: Any) -> RulesPlan:
    """Judges every torrent held (not yet hidden) by ``rules`` (app/rules.RuleSet), in id
    order, BATCH at a time with their files."""
    from .classify import COLUMNS

    out = RulesPlan()
    with using(db) as conn:
        d = conn.dialect
        out.drop.torrents = int(conn.value("SELECT count(*) FROM torrents"))
        after = -1
        while True:
            rows = conn.execute(f"SELECT id, info_hash, name, total_size, last_seen, times_seen, hidden, "
                                f"{', '.join(COLUMNS)} FROM torrents WHERE id > ? ORDER BY id LIMIT ?",
                                (after, BATCH))
            if not rows:
                return out
            files: Dict[int, List[Tuple[str, int]]] = {}
            for tid, path, size in conn.execute("SELECT torrent, path, size FROM files WHERE torrent BETWEEN ? AND ? "
                                                "ORDER BY torrent, idx", (rows[0][0], rows[-1][0])):
                files.setdefault(int(tid), []).append((path, int(size)))
            for row in rows:
                tid, key, name, size, last, times, hidden = row[:7]
                parsed = dict(zip(COLUMNS, row[7:]))
                verdict = rules.judge(name, files.get(int(tid), []), int(size), parsed)
                if verdict.dropped:
                    out.drop.victims.append(Victim(int(tid), bytes(key).hex(), name, rfc3339(d.seconds(last)),
                                                   int(times)))
                    continue
                if verdict.hidden and not hidden:
                    out.hide.append(int(tid))
                have = set((parsed.get("tags") or "").split(","))
                more = [t for t in verdict.tags if t not in have]
                if more:
                    out.tag[int(tid)] = more
            after = rows[-1][0]


def apply_rules(db: Any, selected: RulesPlan) -> Tuple[int, int, int]:
    """Carries out plan_rules(): (removed, hidden, tagged)."""
    from .sinks import merge_tags

    removed = remove(db, selected.drop)
    with using(db) as conn:
        with conn.transaction():
            for tid in selected.hide:
                conn.execute("UPDATE torrents SET hidden = 1 WHERE id = ?", (tid,))
            for tid, more in selected.tag.items():
                tags = conn.value("SELECT tags FROM torrents WHERE id = ?", (tid,))
                conn.execute("UPDATE torrents SET tags = ? WHERE id = ?", (merge_tags(tags, more), tid))
    return removed, len(selected.hide), len(selected.tag)
