"""Queries over the torrent database: full-text search, one torrent, statistics.

The functions here are what ``dhtcrawler search`` and ``dhtcrawler serve`` call. Each takes
``db``: a ``sqlite3.Connection`` on a database the SQLite sink wrote (schema version 2+),
a :class:`~dhtcrawler.sinks.SqliteSink` (its connection, under its lock), or a path to
such a file (opened read-only for the one call); or, for a fleet's PostgreSQL, a
``postgresql://`` URI (connected for the one call), a ``dhtcrawler._pg.Connection`` or a
:class:`~dhtcrawler.sinks.PostgresSink` (see the PostgreSQL part at the end).

Rows are plain dicts, JSON-ready::

    {"info_hash": "40 hex", "info_hash_v1": "40 hex" | None, "info_hash_v2": "64 hex" | None,
     "version": "v1" | "v2" | "hybrid" | None,      # None: unknown (imported from magnetico)
     "name": str, "total_size": int, "num_files": int,
     "piece_length": int | None, "private": bool | None,
     "first_seen": "RFC 3339 UTC", "last_seen": "RFC 3339 UTC", "times_seen": int,
     "peer": str | None, "metadata_size": int | None,
     "seeders": int | None, "leechers": int | None,  # the latest BEP-33 estimate; None: not measured
     "scraped_at": "RFC 3339 UTC" | None,           # when it was made
     "magnet": "magnet:?xt=urn:btih:...", "score": float | None}

How a query matches: the query is split on white space, except inside double quotes: a
quoted phrase (``"two words"``) is one word, spaces included (an unclosed quote runs to
the end of the query; apostrophes and backslashes are plain characters); every word must occur in the torrent's name or in one of its stored file paths,
as a substring, case-insensitively for Latin, Greek and Cyrillic letters (SQLite's LIKE
folds only ASCII, the trigram index folds the rest, so the check is done on what the
index found). The index is SQLite FTS5 with the ``trigram`` tokenizer when the SQLite
library has it (3.34+), recording which trigrams a torrent has (``detail=none``: small on
disk); candidates are the torrents holding every trigram of every word, each then checked
word by word on the stored text. A word shorter than 3 characters has no trigram: it is
checked on the candidates of the other words, or, when every word is that short, on every
torrent (a scan). Without trigram the index is ``unicode61`` (whole words; CJK text runs
are one word).

Relevance (the ``score`` of a row; FTS5's bm25 needs positions, which the index does not
keep): the number of query words found in the name, plus the share of the name they
cover (0..1); equal scores go to the newer torrent.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union
from urllib.parse import quote

SORTS = ("relevance", "size", "first_seen", "last_seen", "files", "name", "swarm")
VERSIONS = ("v1", "v2", "hybrid")
MAX_LIMIT = 1000
DEFAULT_WINDOW = 10_000

_BASE_COLUMNS = ("t.id, t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, "
                 "t.num_files, t.piece_length, t.private, t.first_seen, t.last_seen, t.times_seen, t.peer, "
                 "t.metadata_size")
_SWARM = "t.seeders, t.leechers, t.scraped_at"
_NO_SWARM = "NULL, NULL, NULL"  # a database from before schema 3, opened read-only
# The swarm sort: measured swarms first, largest first.
_SWARM_ORDER = "(t.seeders + t.leechers) IS NULL, (t.seeders + t.leechers) {desc}"


class QueryError(ValueError):
    """A bad argument to search() (unknown sort or version, negative limit...)."""


@contextmanager
def _connection(db: Any, functions: bool = False) -> Iterator[sqlite3.Connection]:
    if isinstance(db, sqlite3.Connection):
        if functions:
            _prepare(db)
        yield db
    elif hasattr(db, "connection") and hasattr(db, "lock"):
        with db.lock:
            if functions:
                _prepare(db.connection)
            yield db.connection
    else:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            if functions:
                _prepare(conn)
            yield conn
        finally:
            conn.close()


def _has_sql(column: str, word: str) -> Tuple[str, str]:
    """SQL testing that ``column`` holds ``word``, and its argument: LIKE for an ASCII word
    (its case folding is then exact, and it is native), else dhtc_has."""
    if word.isascii():
        return f"{column} LIKE ? ESCAPE '\\'", _like(word)
    return f"dhtc_has({column}, ?)", word.lower()


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _prepare(conn: sqlite3.Connection) -> None:
    """Registers dhtc_has (search() needs it). SQLite refuses while another statement of the
    connection runs: it is then taken to be registered by an earlier call."""
    try:
        conn.create_function("dhtc_has", 2, _has, deterministic=True)
    except sqlite3.OperationalError:
        pass


def rfc3339(seconds: Optional[int]) -> Optional[str]:
    if seconds is None:
        return None
    return datetime.fromtimestamp(int(seconds), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Union[None, int, float, str, datetime]) -> Optional[int]:
    """Unix seconds from Unix seconds, a datetime, or an RFC 3339 / ISO 8601 text (a date
    alone is midnight UTC; no zone means UTC)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, datetime):
        dt = value
    else:
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise QueryError(f"not a time: {value!r} (expected RFC 3339 or Unix seconds)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp())


def magnet(info_hash: str, name: Optional[str] = None, info_hash_v2: Optional[str] = None,
           info_hash_v1: Optional[str] = None) -> str:
    """A magnet link naming every hash of the torrent: ``xt=urn:btih:`` with the v1 hash
    (or ``info_hash`` when neither hash is known, as for a magnetico import) and
    ``xt=urn:btmh:1220...`` with the v2 hash. A v2-only torrent gets no btih: its stored
    key is a truncated v2 hash, not a v1 hash."""
    parts = []
    btih = info_hash_v1 or (None if info_hash_v2 else info_hash)
    if btih:
        parts.append(f"xt=urn:btih:{btih}")
    if info_hash_v2:
        parts.append(f"xt=urn:btmh:1220{info_hash_v2}")
    if name:
        parts.append(f"dn={quote(name, safe='')}")
    return "magnet:?" + "&".join(parts)


def _hex(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else bytes(b).hex()


def _opt_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _shape(r: Tuple[Any, ...], first_seen: Optional[str], last_seen: Optional[str],
           score: Optional[float], scraped_at: Optional[str]) -> Dict[str, Any]:
    """The one row form, from (info_hash, v1, v2 as hex, version, name, total_size,
    num_files, piece_length, private, _, _, times_seen, peer, metadata_size, seeders,
    leechers, _) and the times."""
    info_hash, v1, v2, name = r[0], r[1], r[2], r[4]
    return {"info_hash": info_hash, "info_hash_v1": v1, "info_hash_v2": v2, "version": r[3], "name": name,
            "total_size": int(r[5]), "num_files": int(r[6]), "piece_length": _opt_int(r[7]),
            "private": None if r[8] is None else bool(r[8]), "first_seen": first_seen, "last_seen": last_seen,
            "times_seen": int(r[11]), "peer": r[12], "metadata_size": _opt_int(r[13]),
            "seeders": _opt_int(r[14]), "leechers": _opt_int(r[15]), "scraped_at": scraped_at,
            "magnet": magnet(info_hash, name, v2, v1), "score": score}


def _row(r: Tuple[Any, ...], score: Optional[float] = None) -> Dict[str, Any]:
    """A SQLite row (_columns(): the id first, binary hashes, Unix seconds)."""
    return _shape((_hex(r[1]), _hex(r[2]), _hex(r[3]), *r[4:]), rfc3339(r[10]), rfc3339(r[11]), score,
                  rfc3339(r[17]))


def _columns(conn: sqlite3.Connection) -> str:
    """The selected columns of a row: _BASE_COLUMNS and the swarm estimate (NULLs when the
    database predates it)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(torrents)")}
    return f"{_BASE_COLUMNS}, {_SWARM if 'scraped_at' in have else _NO_SWARM}"


def tokenizer(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'search'").fetchone()
    return "trigram" if row and "trigram" in row[0] else "unicode61"


def query_words(query: str, max_words: Optional[int] = None) -> List[str]:
    """The distinct words of a query (double quotes group a word with spaces), only the
    first ``max_words`` of them when given."""
    return list(dict.fromkeys(_words(query or "")))[:max_words]


_WORD = re.compile(r'"([^"]*)(?:"|$)|([^\s"]+)')


def _words(query: str) -> List[str]:
    """The words and quoted phrases of ``query``, in order (a phrase's inner white space
    collapsed to single spaces)."""
    words = (" ".join((phrase if phrase is not None else word).split())
             for phrase, word in (m.groups() for m in _WORD.finditer(query)))
    return [w for w in words if w]


def cli_query(args: List[str]) -> str:
    """The query text for command-line arguments: each argument is one word or phrase as the
    shell gave it (``search "two words"`` is the phrase), unless it holds a double quote,
    when it is query text itself (``search '"two words" other'``)."""
    return " ".join(a if '"' in a or len(a.split()) < 2 else f'"{a}"' for a in args)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match(words: List[str], trigram: bool) -> Optional[str]:
    """The FTS5 MATCH expression that finds the candidates, or None (no word the index can
    look up). With trigram (detail=none: no positions) a word is the AND of its trigrams,
    so candidates are a superset, checked afterwards; with unicode61 each word is a phrase."""
    terms: List[str] = []
    for w in words:
        if not trigram:
            terms.append(_quote(w))
        elif len(w) >= 3:
            terms.extend(_quote(w[i:i + 3]) for i in range(len(w) - 2))
    seen: Dict[str, None] = dict.fromkeys(terms)
    return " AND ".join(seen) or None


def _has(text: Optional[str], needle: str) -> int:
    """SQL dhtc_has(text, needle): 1 when the lower-cased text holds ``needle`` (given
    lower-cased). Unicode-aware, unlike LIKE."""
    return 1 if text is not None and needle in text.lower() else 0


def search(db: Any, query: str = "", *, limit: int = 20, offset: int = 0, sort: str = "relevance",
           order: Optional[str] = None, min_size: Optional[int] = None, max_size: Optional[int] = None,
           min_files: Optional[int] = None, max_files: Optional[int] = None, version: Optional[str] = None,
           since: Union[None, int, str, datetime] = None,
           window: Optional[int] = DEFAULT_WINDOW,
           max_words: Optional[int] = None) -> Tuple[int, List[Dict[str, Any]]]:
    """Torrents matching ``query`` and the filters: ``(total, rows)``, ``total`` counting
    every match, ``rows`` the page ``offset .. offset+limit`` (limit 0..1000).

    ``query``: words, see the module text; empty matches every torrent (then ``relevance``
    sorts newest first). Filters: ``min_size``/``max_size`` (bytes, inclusive),
    ``min_files``/``max_files``, ``version`` (``v1``, ``v2`` or ``hybrid``; torrents of
    unknown version match none), ``since`` (first seen at or after: Unix seconds, datetime
    or RFC 3339 text).

    ``sort``: ``relevance`` (best first: see the module text), ``size``, ``first_seen``,
    ``last_seen``, ``files``, ``swarm`` (seeders + leechers of the latest estimate;
    torrents never measured come last, by relevance). ``order``: ``desc`` (default; relevance is always best first) or
    ``asc``. Ties go to the newer torrent.

    ``window`` bounds the work of a query with words: only the newest ``window`` torrents
    the index finds for it (before the words are checked and the filters applied) are
    considered, so ``total`` counts matches among those and a common word's oldest
    torrents are left out. ``None`` considers every candidate (slower: see
    docs/performance.md). A query without words is never windowed. ``max_words``, when
    given, keeps only the query's first that many (distinct) words.

    ``name`` sorts by name, case-insensitively, A to Z unless ``order="desc"``."""
    if sort not in SORTS:
        raise QueryError(f"unknown sort {sort!r} (one of {', '.join(SORTS)})")
    if order not in (None, "asc", "desc"):
        raise QueryError(f"unknown order {order!r} (asc or desc)")
    if version is not None and version not in VERSIONS:
        raise QueryError(f"unknown version {version!r} (v1, v2 or hybrid)")
    if not 0 <= int(limit) <= MAX_LIMIT or int(offset) < 0:
        raise QueryError(f"limit must be 0..{MAX_LIMIT} and offset >= 0")
    since_s = parse_time(since)
    if _is_pg(db):
        since_dt = None if since_s is None else datetime.fromtimestamp(since_s, timezone.utc)
        return _pg_search(db, query_words(query, max_words), limit=int(limit), offset=int(offset),
                          sort=sort, order=order,
                          filters=[("t.total_size >= ?", min_size), ("t.total_size <= ?", max_size),
                                   ("t.num_files >= ?", min_files), ("t.num_files <= ?", max_files),
                                   ("t.version = ?", version), ("t.first_seen >= ?", since_dt)])
    with _connection(db, functions=True) as conn:
        words = query_words(query, max_words)
        match = _match(words, tokenizer(conn) == "trigram")
        where: List[str] = []
        params: List[Any] = []
        cap = "" if window is None else f" LIMIT {int(window)}"
        if match is not None:  # the newest `window` candidates of the index
            source = (f"(SELECT rowid AS id FROM search WHERE search MATCH ? ORDER BY rowid DESC{cap}) s "
                      "JOIN torrents t ON t.id = s.id")
            params.append(match)
        elif words:  # only short words: the newest `window` torrents
            source = f"(SELECT id FROM torrents ORDER BY id DESC{cap}) s JOIN torrents t ON t.id = s.id"
        else:
            source = "torrents t"
        for w in words:  # each word, exactly: in the name or in a stored path
            in_name, arg = _has_sql("t.name", w)
            in_path, _ = _has_sql("f.path", w)
            where.append(f"({in_name} OR EXISTS (SELECT 1 FROM files f WHERE f.torrent = t.id AND {in_path}))")
            params += [arg, arg]
        for cond, value in (("t.total_size >= ?", min_size), ("t.total_size <= ?", max_size),
                            ("t.num_files >= ?", min_files), ("t.num_files <= ?", max_files),
                            ("t.version = ?", version), ("t.first_seen >= ?", since_s)):
            if value is not None:
                where.append(cond)
                params.append(value)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        # relevance: words found in the name, then the share of the name they cover
        if words:
            tests = [_has_sql("t.name", w) for w in words]
            hits = " + ".join(f"({sql})" for sql, _ in tests)
            cover = " + ".join(f"({sql}) * ?" for sql, _ in tests)
            score = f"(({hits}) + min(1.0, (0.0 + {cover}) / max(1, length(t.name))))"
            score_params: List[Any] = [arg for _, arg in tests]
            for (_, arg), w in zip(tests, words):
                score_params += [arg, len(w)]
        else:
            score, score_params = "NULL", []
        desc = "ASC" if order == "asc" else "DESC"
        by = {"size": f"t.total_size {desc}", "first_seen": f"t.first_seen {desc}",
              "last_seen": f"t.last_seen {desc}", "files": f"t.num_files {desc}",
              "name": f"t.name COLLATE NOCASE {'DESC' if order == 'desc' else 'ASC'}"}.get(sort)
        columns = _columns(conn)
        if by is None:  # relevance
            by = "score DESC, t.first_seen DESC" if words else "t.first_seen DESC"
        if sort == "swarm" and _SWARM in columns:
            by = _SWARM_ORDER.format(desc=desc) + ", " + by
        rows = []
        if limit > 0:  # one pass: the page, and the count of every match beside it
            rows = conn.execute(f"SELECT {columns}, {score} AS score, count(*) OVER () FROM {source}{clause} "
                                f"ORDER BY {by}, t.id DESC LIMIT ? OFFSET ?",
                                (*score_params, *params, int(limit), int(offset))).fetchall()
        if rows:
            total = int(rows[0][-1])
        elif limit > 0 and offset == 0:
            total = 0  # the first page is empty: nothing matches
        else:
            total = int(conn.execute(f"SELECT count(*) FROM {source}{clause}", params).fetchone()[0])
        return total, [_row(r[:-2], None if r[-2] is None else round(float(r[-2]), 4)) for r in rows]


def _key(info_hash: str) -> Optional[bytes]:
    text = info_hash.strip().lower()
    if len(text) not in (40, 64):
        return None
    try:
        return bytes.fromhex(text[:40])
    except ValueError:
        return None


def torrent(db: Any, info_hash: str, *, max_files: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """One torrent by any of its hashes (v1 or v2, 40 or 64 hex), with ``files``: the stored
    file rows ``[{"path", "size"}]`` in the torrent's order (fewer than ``num_files`` when
    the crawl capped them; ``files_stored`` says how many are stored), only the first
    ``max_files`` when given. None when not held."""
    key = _key(info_hash)
    if key is None:
        return None
    cap = "" if max_files is None else f" LIMIT {int(max_files)}"
    if _is_pg(db):
        return _pg_torrent(db, info_hash, cap)
    with _connection(db) as conn:
        r = conn.execute(f"SELECT {_columns(conn)} FROM hashes h JOIN torrents t ON t.id = h.torrent "
                         "WHERE h.hash = ?", (key,)).fetchone()
        if r is None:
            return None
        out = _row(r)
        del out["score"]
        out["files"] = [{"path": p, "size": s} for p, s in conn.execute(
            f"SELECT path, size FROM files WHERE torrent = ? ORDER BY idx{cap}", (r[0],))]
        out["files_stored"] = len(out["files"])
        if max_files is not None and len(out["files"]) >= max_files:
            out["files_stored"] = conn.execute("SELECT count(*) FROM files WHERE torrent = ?", (r[0],)).fetchone()[0]
        return out


def largest_files(db: Any, info_hash: str, limit: int) -> List[Tuple[str, int]]:
    """``(path, size)`` of the ``limit`` largest stored files of the torrent named by
    ``info_hash`` (any of its hashes, as torrent() takes), largest first; [] when not held."""
    key = _key(info_hash)
    if key is None:
        return []
    if _is_pg(db):
        with _pg_connection(db) as pg:
            return [(p, int(s)) for p, s in pg.execute(
                "SELECT path, size FROM files WHERE info_hash = (SELECT t.info_hash FROM torrents t "
                "WHERE t.info_hash = $1 UNION SELECT h.info_hash FROM hashes h WHERE h.hash = $1 LIMIT 1) "
                "ORDER BY size DESC, idx LIMIT $2", (info_hash.strip().lower(), int(limit)))]
    with _connection(db) as conn:
        return [(p, int(s)) for p, s in conn.execute(
            "SELECT path, size FROM files WHERE torrent = (SELECT torrent FROM hashes WHERE hash = ?) "
            "ORDER BY size DESC, idx LIMIT ?", (key, int(limit)))]


def stats(db: Any) -> Dict[str, Any]:
    """Counts over the database: ``torrents``, ``files`` (sum of num_files), ``files_stored``
    (file rows), ``total_size``, ``versions`` ({v1, v2, hybrid, unknown}), ``first_seen`` and
    ``last_seen`` (the earliest and latest, RFC 3339, None when empty) and the search
    ``tokenizer`` (on PostgreSQL: ``pg_trgm`` when its index is there, else ``scan``)."""
    if _is_pg(db):
        return _pg_stats(db)
    with _connection(db) as conn:
        n, files, size, first, last = conn.execute(
            "SELECT count(*), coalesce(sum(num_files), 0), coalesce(sum(total_size), 0), min(first_seen), "
            "max(last_seen) FROM torrents").fetchone()
        versions = {"v1": 0, "v2": 0, "hybrid": 0, "unknown": 0}
        for v, c in conn.execute("SELECT version, count(*) FROM torrents GROUP BY version"):
            versions[v if v in versions else "unknown"] += c
        stored = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        return {"torrents": n, "files": files, "files_stored": stored, "total_size": size, "versions": versions,
                "first_seen": rfc3339(first), "last_seen": rfc3339(last), "tokenizer": tokenizer(conn)}


# ---- PostgreSQL (--store) ------------------------------------------------------------------
#
# The fleet's schema (sinks.PG_MIGRATIONS) keeps hex hashes and timestamptz; its search is
# the same words-as-substrings rule with ILIKE (case folding by the database's ctype), on
# the names and the file paths, helped by a pg_trgm index on lower(name) when the extension
# could be installed (PG migration 2; without it a query scans). No candidate window.

def _is_pg(db: Any) -> bool:
    from ._pg import Connection

    if isinstance(db, str):
        return db.startswith(("postgresql://", "postgres://"))
    return isinstance(db, Connection) or isinstance(getattr(db, "connection", None), Connection)


@contextmanager
def _pg_connection(db: Any) -> Iterator[Any]:
    from ._pg import Connection

    if isinstance(db, str):
        conn = Connection(db)
        try:
            yield conn
        finally:
            conn.close()
    elif isinstance(db, Connection):
        yield db
    else:
        with db.lock:
            yield db.connection


_PG_BASE_COLUMNS = ("t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, t.num_files, "
                    "t.piece_length, t.private, t.first_seen, t.last_seen, t.times_seen, t.peer, t.metadata_size")


def _pg_columns(conn: Any) -> str:
    have = conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
                        "AND table_name = 'torrents' AND column_name = 'scraped_at'")[0][0]
    return f"{_PG_BASE_COLUMNS}, {_SWARM if int(have) else _NO_SWARM}"


def _pg_time(value: Any) -> Optional[str]:
    if value is None:
        return None
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pg_row(r: Tuple[Any, ...], score: Optional[float] = None) -> Dict[str, Any]:
    """A PostgreSQL row (_pg_columns: hex hashes, timestamptz)."""
    return _shape(r, _pg_time(r[9]), _pg_time(r[10]), score, _pg_time(r[16]))


def _pg_like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _pg_search(db: Any, words: List[str], *, limit: int, offset: int, sort: str, order: Optional[str],
               filters: List[Tuple[str, Any]]) -> Tuple[int, List[Dict[str, Any]]]:
    params: List[Any] = []

    def p(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    where: List[str] = []
    for w in words:
        k = p(_pg_like(w))
        where.append(f"(t.name ILIKE {k} OR EXISTS (SELECT 1 FROM files f WHERE f.info_hash = t.info_hash "
                     f"AND f.path ILIKE {k}))")
    for cond, value in filters:
        if value is not None:
            where.append(cond.replace("?", p(value)))
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    if words:
        ks = [f"${i + 1}" for i in range(len(words))]  # the words' patterns come first
        hits = " + ".join(f"(t.name ILIKE {k})::int" for k in ks)
        cover = " + ".join(f"(t.name ILIKE {k})::int * {len(w)}" for k, w in zip(ks, words))
        score = f"(({hits}) + least(1.0, ({cover})::float8 / greatest(1, length(t.name))))"
    else:
        score = "NULL::float8"
    desc = "ASC" if order == "asc" else "DESC"
    by = {"size": f"t.total_size {desc}", "first_seen": f"t.first_seen {desc}",
          "last_seen": f"t.last_seen {desc}", "files": f"t.num_files {desc}",
          "name": f"lower(t.name) {'DESC' if order == 'desc' else 'ASC'}, t.name"}.get(sort)
    if by is None:
        by = "score DESC, t.first_seen DESC" if words else "t.first_seen DESC"
    with _pg_connection(db) as conn:
        columns = _pg_columns(conn)
        if sort == "swarm" and _SWARM in columns:
            by = _SWARM_ORDER.format(desc=desc) + ", " + by
        total = int(conn.execute(f"SELECT count(*) FROM torrents t{clause}", params)[0][0])
        if limit == 0 or offset >= total:
            return total, []
        n = len(params)
        rows = conn.execute(f"SELECT {columns}, {score} AS score FROM torrents t{clause} "
                            f"ORDER BY {by}, t.info_hash LIMIT ${n + 1} OFFSET ${n + 2}",
                            (*params, int(limit), int(offset)))
    return total, [_pg_row(r[:-1], None if r[-1] is None else round(float(r[-1]), 4)) for r in rows]


def _pg_torrent(db: Any, info_hash: str, cap: str = "") -> Optional[Dict[str, Any]]:
    text = info_hash.strip().lower()
    with _pg_connection(db) as conn:
        rows = conn.execute(
            f"SELECT {_pg_columns(conn)} FROM torrents t WHERE t.info_hash = $1 OR t.info_hash IN "
            "(SELECT h.info_hash FROM hashes h WHERE h.hash = $1 OR (length(h.hash) = 64 AND left(h.hash, 40) = $1) "
            "OR left($1, 40) = h.hash) LIMIT 1", (text,))
        if not rows:
            return None
        out = _pg_row(rows[0])
        del out["score"]
        out["files"] = [{"path": path, "size": int(size)} for path, size in conn.execute(
            f"SELECT path, size FROM files WHERE info_hash = $1 ORDER BY idx{cap}", (out["info_hash"],))]
        out["files_stored"] = len(out["files"])
        if cap:
            out["files_stored"] = int(conn.execute("SELECT count(*) FROM files WHERE info_hash = $1",
                                                   (out["info_hash"],))[0][0])
        return out


def _pg_stats(db: Any) -> Dict[str, Any]:
    with _pg_connection(db) as conn:
        n, files, size, first, last = conn.execute(
            "SELECT count(*), coalesce(sum(num_files), 0), coalesce(sum(total_size), 0), min(first_seen), "
            "max(last_seen) FROM torrents")[0]
        versions = {"v1": 0, "v2": 0, "hybrid": 0, "unknown": 0}
        for v, c in conn.execute("SELECT version, count(*) FROM torrents GROUP BY version"):
            versions[v if v in versions else "unknown"] += int(c)
        stored = int(conn.execute("SELECT count(*) FROM files")[0][0])
        trgm = bool(conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'torrents_name_trgm' "
                                 "AND schemaname = current_schema()")[0][0])
    return {"torrents": int(n), "files": int(files), "files_stored": stored, "total_size": int(size),
            "versions": versions, "first_seen": _pg_time(first), "last_seen": _pg_time(last),
            "tokenizer": "pg_trgm" if trgm else "scan"}
