"""The queries the web server answers, against the torrents schema of dhtcrawler.sinks
(tables torrents, files, hashes).

A thin adapter with plain LIKE matching: dhtcrawler.search is to replace it with ranked full
text search behind the same three functions:

    search(conn, q, limit, offset, sort) -> (total, rows)
    torrent(conn, info_hash) -> dict or None
    stats(conn) -> dict

with, beside them, ``SORTS`` (the sort names search() takes), ``is_info_hash(text)`` and
``largest_files(conn, info_hash, limit)`` (for the Torznab category). ``conn`` is a sqlite3
connection. Rows are plain dicts in the JSON API's form (docs/api.md).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

# sort name -> ORDER BY clause. "relevance" with LIKE: a match in the name before a match in
# a file path only, then the most often seen, then the most recently seen.
SORTS: Dict[str, str] = {
    "relevance": "name_match DESC, t.times_seen DESC, t.last_seen DESC",
    "size": "t.total_size DESC",
    "files": "t.num_files DESC",
    "first_seen": "t.first_seen DESC",
    "last_seen": "t.last_seen DESC",
    "name": "t.name COLLATE NOCASE ASC",
}
DEFAULT_SORT = "relevance"
MAX_LIMIT = 100
MAX_QUERY_WORDS = 8
MAX_QUERY_CHARS = 256
MAX_FILES = 10000  # files listed by torrent(); the rest is counted, not listed

_HEX = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")

_COLUMNS = ("t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, t.num_files, "
            "t.piece_length, t.private, t.first_seen, t.last_seen, t.times_seen")


def is_info_hash(text: str) -> bool:
    return bool(_HEX.match(text))


def magnet(info_hash_v1: Optional[str], info_hash_v2: Optional[str], name: str) -> str:
    """A magnet link naming every hash of the torrent (btih for v1, btmh multihash for v2)."""
    parts = []
    if info_hash_v1:
        parts.append(f"xt=urn:btih:{info_hash_v1}")
    if info_hash_v2:
        parts.append(f"xt=urn:btmh:1220{info_hash_v2}")
    parts.append("dn=" + quote(name, safe=""))
    return "magnet:?" + "&".join(parts)


def _row(r: sqlite3.Row) -> Dict[str, Any]:
    return {
        "info_hash": r["info_hash"],
        "info_hash_v1": r["info_hash_v1"],
        "info_hash_v2": r["info_hash_v2"],
        "version": r["version"],
        "name": r["name"],
        "total_size": int(r["total_size"]),
        "num_files": int(r["num_files"]),
        "piece_length": int(r["piece_length"]),
        "private": bool(r["private"]),
        "first_seen": r["first_seen"],
        "last_seen": r["last_seen"],
        "times_seen": int(r["times_seen"]),
        # Swarm estimates (BEP-33) are not measured yet: unknown, not zero.
        "seeders": None,
        "leechers": None,
        "magnet": magnet(r["info_hash_v1"], r["info_hash_v2"], r["name"]),
    }


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def words(q: str) -> List[str]:
    """The words of a query: split on white space, at most MAX_QUERY_WORDS."""
    return q.split()[:MAX_QUERY_WORDS]


def search(conn: sqlite3.Connection, q: str, limit: int, offset: int,
           sort: str = DEFAULT_SORT) -> Tuple[int, List[Dict[str, Any]]]:
    """Torrents whose name or a file path contains every word of ``q`` (case-insensitive for
    ASCII), or every torrent for an empty ``q``. Returns (number of matches, one page)."""
    if sort not in SORTS:
        raise ValueError(f"unknown sort {sort!r}")
    conn.row_factory = sqlite3.Row
    where, params = [], []
    name_terms = []
    for w in words(q):
        pattern = _like(w)
        where.append("(t.name LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM files f "
                     "WHERE f.info_hash = t.info_hash AND f.path LIKE ? ESCAPE '\\'))")
        params += [pattern, pattern]
        name_terms.append(pattern)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    total = int(conn.execute(f"SELECT count(*) FROM torrents t {clause}", params).fetchone()[0])
    name_match = (" AND ".join("t.name LIKE ? ESCAPE '\\'" for _ in name_terms)) or "1"
    rows = conn.execute(
        f"SELECT {_COLUMNS}, ({name_match}) AS name_match FROM torrents t {clause} "
        f"ORDER BY {SORTS[sort]}, t.info_hash LIMIT ? OFFSET ?",
        [*name_terms, *params, limit, offset]).fetchall()
    return total, [_row(r) for r in rows]


def files_of(conn: sqlite3.Connection, info_hash: str, limit: int = MAX_FILES) -> List[Dict[str, Any]]:
    rows = conn.execute("SELECT path, size FROM files WHERE info_hash = ? ORDER BY idx LIMIT ?",
                        (info_hash, limit)).fetchall()
    return [{"path": r[0], "size": int(r[1])} for r in rows]


def largest_files(conn: sqlite3.Connection, info_hash: str, limit: int) -> List[Tuple[str, int]]:
    """(path, size) of a torrent's ``limit`` largest files, largest first."""
    return [(r[0], int(r[1])) for r in conn.execute(
        "SELECT path, size FROM files WHERE info_hash = ? ORDER BY size DESC LIMIT ?", (info_hash, limit))]


def torrent(conn: sqlite3.Connection, info_hash: str) -> Optional[Dict[str, Any]]:
    """One torrent by any of its hashes (v1, v2, or the key it was stored under), with its
    files (the first MAX_FILES), or None."""
    info_hash = info_hash.lower()
    conn.row_factory = sqlite3.Row
    r = conn.execute(
        f"SELECT {_COLUMNS} FROM torrents t WHERE t.info_hash = (SELECT coalesce("
        "(SELECT info_hash FROM hashes WHERE hash = ?), "
        "(SELECT info_hash FROM torrents WHERE info_hash = ?)))", (info_hash, info_hash)).fetchone()
    if r is None:
        return None
    doc = _row(r)
    doc["files"] = files_of(conn, r["info_hash"])
    doc["files_truncated"] = len(doc["files"]) < doc["num_files"]
    return doc


def stats(conn: sqlite3.Connection) -> Dict[str, Any]:
    """Counts over the whole database."""
    n, size, oldest, newest = conn.execute(
        "SELECT count(*), coalesce(sum(total_size), 0), min(first_seen), max(last_seen) FROM torrents").fetchone()
    versions = {"v1": 0, "v2": 0, "hybrid": 0}
    for version, count in conn.execute("SELECT version, count(*) FROM torrents GROUP BY version"):
        versions[str(version)] = int(count)
    files = int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
    return {"torrents": int(n), "files": files, "total_size": int(size), "versions": versions,
            "oldest_first_seen": oldest, "newest_last_seen": newest}
