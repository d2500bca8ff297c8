"""Queries over the torrent database: full-text search, one torrent, statistics.

The functions here are what ``dhtcrawler search`` and ``dhtcrawler serve`` call. Each takes
``db``: a ``sqlite3.Connection`` on a database the sink wrote (schema version 2+), a sink
(its connection, under its lock), a connection of the database layer
(:mod:`dhtcrawler.app.db`), or a path to a SQLite file or a ``postgresql://`` URI (opened
read-only for the one call). SQLite and PostgreSQL answer alike; the queries are written
once, and the database layer's dialect supplies what differs.

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
disk); candidates are the torrents holding the trigrams that cover every word (every other
one and the last), each then checked word by word on the stored text (LIKE for an ASCII
word, else GLOB with each letter's cases). A word shorter than 3 characters has no trigram:
it is checked on the candidates of the other words, or, when every word is that short, on
the newest torrents. Without trigram the index is ``unicode61`` (whole words; CJK text runs
are one word).

On PostgreSQL the words are matched with LIKE on the ``search`` table, each torrent's name
and stored paths one per line, lower-cased, helped by a pg_trgm index on that text when the
extension could be installed: the candidates hold every word of 3 characters or more
already, and a shorter word is checked on them, as on SQLite. With btree_gin too (schema 8)
the index is by id bucket as well, and a query looks its words up bucket by bucket, newest
first, until its window is full (see PostgresDialect.candidates). Both databases bound a
query's work alike, by the candidate window (search_page()'s ``window``), and report
``total`` exactly up to it and as an estimate above.

Relevance (the ``score`` of a row; FTS5's bm25 needs positions, which the index does not
keep): the number of query words found in the name, plus the share of the name they
cover (0..1); equal scores go to the newer torrent.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union
from urllib.parse import quote

from .classify import CONTENT_TYPES, COLUMNS as PARSED_COLUMNS, TYPE_CATEGORIES
from .db import Connection, using

__all__ = ["search", "search_page", "Page", "torrent", "stats", "facets", "arrivals", "largest_files", "magnet",
           "parse_time", "rfc3339", "query_words",
           "cli_query", "tokenizer", "QueryError", "SORTS", "VERSIONS", "MAX_LIMIT", "DEFAULT_WINDOW"]

SORTS = ("relevance", "size", "first_seen", "last_seen", "files", "name", "swarm")
VERSIONS = ("v1", "v2", "hybrid")
MAX_LIMIT = 1000
DEFAULT_WINDOW = 1_000

_BASE_COLUMNS = ("t.id, t.info_hash, t.info_hash_v1, t.info_hash_v2, t.version, t.name, t.total_size, "
                 "t.num_files, t.piece_length, t.private, t.first_seen, t.last_seen, t.times_seen, t.peer, "
                 "t.metadata_size")
_SWARM = "t.seeders, t.leechers, t.scraped_at"
_NO_SWARM = "NULL, NULL, NULL"  # a database from before schema 3, opened read-only
# The parsed release name (classify.py), NULLs on a database from before the indexer.
_PARSED = ", ".join(f"t.{c}" for c in PARSED_COLUMNS)
_NO_PARSED = ", ".join("NULL" for _ in PARSED_COLUMNS)
#: The fields of a row that come from the parsed name (``parsed`` itself is left out).
PARSED_FIELDS = PARSED_COLUMNS[:-1]
# The swarm sort: measured swarms first, largest first.
_SWARM_ORDER = "(t.seeders + t.leechers) IS NULL, (t.seeders + t.leechers) {desc}"


class QueryError(ValueError):
    """A bad argument to search() (unknown sort or version, negative limit...)."""


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


def _row(d: Any, r: Tuple[Any, ...], score: Optional[float] = None) -> Dict[str, Any]:
    """The one row form, from _columns(): the id, binary hashes, the dialect's times."""
    info_hash, v1, v2, name = _hex(r[1]), _hex(r[2]), _hex(r[3]), r[5]
    return {"info_hash": info_hash, "info_hash_v1": v1, "info_hash_v2": v2, "version": r[4], "name": name,
            "total_size": int(r[6]), "num_files": int(r[7]), "piece_length": _opt_int(r[8]),
            "private": None if r[9] is None else bool(r[9]), "first_seen": rfc3339(d.seconds(r[10])),
            "last_seen": rfc3339(d.seconds(r[11])), "times_seen": int(r[12]), "peer": r[13],
            "metadata_size": _opt_int(r[14]), "seeders": _opt_int(r[15]), "leechers": _opt_int(r[16]),
            "scraped_at": rfc3339(d.seconds(r[17])),
            **{f: (None if v is None else int(v) if isinstance(v, int) else v)
               for f, v in zip(PARSED_FIELDS, r[18:18 + len(PARSED_FIELDS)])},
            "magnet": magnet(info_hash, name, v2, v1), "score": score}


def _columns(conn: Connection) -> str:
    """The selected columns of a row: _BASE_COLUMNS and the swarm estimate (NULLs when the
    database predates it)."""
    swarm = conn.dialect.has_column(conn, "torrents", "scraped_at")
    parsed = conn.dialect.has_column(conn, "torrents", "parsed")
    return f"{_BASE_COLUMNS}, {_SWARM if swarm else _NO_SWARM}, {_PARSED if parsed else _NO_PARSED}"


def _category_filter(categories: List[int]) -> Tuple[str, List[Any]]:
    """SQL for Torznab categories: a parent (5000) is its content types, 8000 the
    unclassified, a subcategory (5040) itself."""
    terms: List[str] = []
    params: List[Any] = []
    for cat in dict.fromkeys(categories):
        if cat % 1000 == 0:
            types = TYPE_CATEGORIES.get(cat)
            if cat == 8000:
                terms.append("t.content_type IS NULL")
            elif types:
                terms.append(f"t.content_type IN ({', '.join('?' * len(types))})")
                params += types
            # a parent we fill nothing of (1000 Console) matches nothing
        else:
            terms.append("t.category = ?")
            params.append(cat)
    return ("(" + " OR ".join(terms) + ")") if terms else "1 = 0", params


def tokenizer(db: Any) -> str:
    """How the database's search index finds words (see stats())."""
    with using(db) as conn:
        return conn.dialect.tokenizer(conn)


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


class Page(NamedTuple):
    """What search_page() answers: ``total`` (exact, or an estimate when
    ``total_is_estimate``) and the page's ``rows``."""

    total: int
    rows: List[Dict[str, Any]]
    total_is_estimate: bool


def search(db: Any, query: str = "", **kwargs: Any) -> Tuple[int, List[Dict[str, Any]]]:
    """``(total, rows)`` of search_page() (same arguments): see there."""
    page = search_page(db, query, **kwargs)
    return page.total, page.rows


def search_page(db: Any, query: str = "", *, limit: int = 20, offset: int = 0, sort: str = "relevance",
                order: Optional[str] = None, min_size: Optional[int] = None, max_size: Optional[int] = None,
                min_files: Optional[int] = None, max_files: Optional[int] = None, version: Optional[str] = None,
                since: Union[None, int, str, datetime] = None,
                content_type: Optional[Sequence[str]] = None, categories: Optional[Sequence[int]] = None,
                season: Optional[int] = None, episode: Optional[int] = None, year: Optional[int] = None,
                resolution: Optional[str] = None,
                window: Optional[int] = DEFAULT_WINDOW,
                max_words: Optional[int] = None) -> Page:
    """Torrents matching ``query`` and the filters: a :class:`Page`, ``total`` counting
    every match, ``rows`` the page ``offset .. offset+limit`` (limit 0..1000).

    ``query``: words, see the module text; empty matches every torrent (then ``relevance``
    sorts newest first). Filters: ``min_size``/``max_size`` (bytes, inclusive),
    ``min_files``/``max_files``, ``version`` (``v1``, ``v2`` or ``hybrid``; torrents of
    unknown version match none), ``since`` (first seen at or after: Unix seconds, datetime
    or RFC 3339 text). From the parsed release name (docs/indexer.md): ``content_type`` (any
    of these types), ``categories`` (Torznab: a parent such as 5000 is its content types, a
    subcategory such as 5040 itself, 8000 the unclassified), ``season`` (an episode of it,
    or a pack holding it), ``episode`` (that episode, or a multi-episode file holding it;
    season packs do not match), ``year``, ``resolution`` (``1080p``...). These filters run
    in the query, so a page of N is N matches.

    ``sort``: ``relevance`` (best first: see the module text), ``size``, ``first_seen``,
    ``last_seen``, ``files``, ``swarm`` (seeders + leechers of the latest estimate;
    torrents never measured come last, by relevance). ``order``: ``desc`` (default; relevance is always best first) or
    ``asc``. Ties go to the newer torrent.

    ``window`` bounds the work of a query, on both databases alike: a query with words
    considers only the newest ``window`` torrents the search index finds for it (before
    the words are checked and the filters applied), so a common word's oldest torrents are
    left out of the page. ``total`` is exact while the index finds fewer candidates than
    ``window`` (and, for a query without words, while fewer than ``window`` torrents pass
    the filters); above, it is an estimate (``total_is_estimate``): the matches among the
    window scaled by the share of the database's ids the window spans. ``None`` considers
    every candidate and counts exactly (slower: see docs/performance.md). ``max_words``,
    when given, keeps only the query's first that many (distinct) words.

    ``name`` sorts by name, case-insensitively, A to Z unless ``order="desc"``."""
    if sort not in SORTS:
        raise QueryError(f"unknown sort {sort!r} (one of {', '.join(SORTS)})")
    if order not in (None, "asc", "desc"):
        raise QueryError(f"unknown order {order!r} (asc or desc)")
    if version is not None and version not in VERSIONS:
        raise QueryError(f"unknown version {version!r} (v1, v2 or hybrid)")
    if not 0 <= int(limit) <= MAX_LIMIT or int(offset) < 0:
        raise QueryError(f"limit must be 0..{MAX_LIMIT} and offset >= 0")
    if window is not None and int(window) < 1:
        raise QueryError("window must be 1 or more (or None)")
    since_s = parse_time(since)
    words = query_words(query, max_words)
    types = list(content_type or ())
    for t in types:
        if t not in CONTENT_TYPES:
            raise QueryError(f"unknown content type {t!r} (one of {', '.join(CONTENT_TYPES)})")
    parsed_filters = bool(types or categories or season is not None or episode is not None or year is not None
                          or resolution)
    with using(db) as conn:
        d = conn.dialect
        if parsed_filters and not d.has_column(conn, "torrents", "parsed"):
            raise QueryError("this database predates parsed release names: open it once with a crawl, "
                             "import or reparse (which migrate it)")
        where: List[str] = []
        params: List[Any] = []
        if words:
            candidates, looked_up, unchecked = d.candidates(conn, words, window)
            # The relevance's tests of the name (name_hits: a join of the dialect's, if any).
            hits_join, hits_join_params, name_hits = d.name_hits(words)
            params = [*looked_up, *hits_join_params]
            # The window's size and its oldest id ride along with each candidate (for the estimate).
            source = (f"(SELECT id, count(*) OVER () AS n, min(id) OVER () AS lo FROM ({candidates}) c) s "
                      f"JOIN torrents t ON t.id = s.id{hits_join}")
            for w in unchecked:  # each word, exactly: in the name or in a stored path
                sql, args = d.holds(conn, w)
                where.append(sql)
                params += args
        else:
            source = "torrents t"
        if d.has_column(conn, "torrents", "hidden"):
            where.append("t.hidden IS NULL")  # hidden by a content rule: never served
        if types:
            where.append(f"t.content_type IN ({', '.join('?' * len(types))})")
            params += types
        if categories:
            sql, args = _category_filter(list(categories))
            where.append(sql)
            params += args
        if season is not None:  # an episode of the season, or a pack holding it
            where.append("(t.season <= ? AND coalesce(t.season_end, t.season) >= ?)")
            params += [int(season), int(season)]
        if episode is not None:
            where.append("(t.episode <= ? AND coalesce(t.episode_end, t.episode) >= ?)")
            params += [int(episode), int(episode)]
        for cond, value in (("t.total_size >= ?", min_size), ("t.total_size <= ?", max_size),
                            ("t.num_files >= ?", min_files), ("t.num_files <= ?", max_files),
                            ("t.version = ?", version), ("t.first_seen >= ?", d.time(since_s)),
                            ("t.year = ?", year), ("t.resolution = ?", resolution)):
            if value is not None:
                where.append(cond)
                params.append(value)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        # relevance: words found in the name, then the share of the name they cover
        if words:
            hits = " + ".join(sql for sql, _ in name_hits)
            cover = " + ".join(f"{sql} * ?" for sql, _ in name_hits)
            share = d.least("1.0", f"(0.0 + {cover}) / {d.greatest('1', 'length(t.name)')}")
            score = f"(({hits}) + {share})"
            score_params: List[Any] = [arg for _, args in name_hits for arg in args]
            for (_, args), w in zip(name_hits, words):
                score_params += [*args, len(w)]
        else:
            score, score_params = "NULL", []
        desc = "ASC" if order == "asc" else "DESC"
        by = {"size": f"t.total_size {desc}", "first_seen": f"t.first_seen {desc}",
              "last_seen": f"t.last_seen {desc}", "files": f"t.num_files {desc}",
              "name": d.name_order(order == "desc")}.get(sort)
        columns = _columns(conn)
        if by is None:  # relevance
            by = "score DESC, t.first_seen DESC" if words else "t.first_seen DESC"
        if sort == "swarm" and _SWARM in columns:
            by = _SWARM_ORDER.format(desc=desc) + ", " + by
        # A query with words counts beside the page (its work is the window's); one without
        # counts apart, at most `window` rows (the page itself comes from the sort's index).
        counted = ", count(*) OVER (), s.n, s.lo" if words else ""
        rows: List[Any] = []
        if limit > 0:
            rows = conn.execute(f"SELECT {columns}, {score} AS score{counted} FROM {source}{clause} "
                                f"ORDER BY {by}, t.id DESC LIMIT ? OFFSET ?",
                                (*score_params, *params, int(limit), int(offset)))
        width = 4 if words else 1
        if words and rows:
            found, n, lo = (int(v) for v in rows[0][-3:])
        elif words:
            # An empty page: the matches counted apart (none when it is the first page), the
            # window from the candidates alone (a full one, none of which matched, is no
            # proof that nothing does: the total is then an estimate).
            found = 0 if limit > 0 and offset == 0 else int(conn.value(f"SELECT count(*) FROM {source}{clause}", params))
            n, lo = (int(v or 0) for v in conn.one(f"SELECT count(*), min(id) FROM ({candidates}) c", looked_up))
        else:
            n, lo = (int(v or 0) for v in conn.one(
                f"SELECT count(*), min(id) FROM (SELECT t.id FROM torrents t{clause} "
                f"ORDER BY t.id DESC{'' if window is None else ' LIMIT ?'}) w",
                (*params, *(() if window is None else (int(window),)))))
            found = n
        total, estimate = found, window is not None and n >= int(window)
        if estimate:
            total = _estimate(conn, found, lo)
        return Page(total, [_row(d, r[:-width], None if r[-width] is None else round(float(r[-width]), 4))
                            for r in rows], estimate)


def _estimate(conn: Connection, found: int, lo: int) -> int:
    """The matches of a full window scaled to the whole database: ``found`` among the ids
    ``lo`` .. the newest, as dense over every id."""
    # Two subqueries: each is one step down the primary key, where min() and max() side by
    # side in one SELECT scan the whole table (86 ms at 1 M on SQLite).
    first, last = conn.one("SELECT (SELECT min(id) FROM torrents), (SELECT max(id) FROM torrents)") or (None, None)
    if first is None or last is None or last < lo:
        return found
    return max(found, round(found * (int(last) - int(first) + 1) / (int(last) - lo + 1)))


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
    with using(db) as conn:
        hidden = " AND t.hidden IS NULL" if conn.dialect.has_column(conn, "torrents", "hidden") else ""
        r = conn.one(f"SELECT {_columns(conn)} FROM hashes h JOIN torrents t ON t.id = h.torrent "
                     f"WHERE h.hash = ?{hidden}", (key,))
        if r is None:
            return None
        out = _row(conn.dialect, r)
        del out["score"]
        out["files"] = [{"path": p, "size": int(s)} for p, s in conn.execute(
            f"SELECT path, size FROM files WHERE torrent = ? ORDER BY idx{cap}", (r[0],))]
        out["files_stored"] = len(out["files"])
        if max_files is not None and len(out["files"]) >= max_files:
            out["files_stored"] = int(conn.value("SELECT count(*) FROM files WHERE torrent = ?", (r[0],)))
        return out


def largest_files(db: Any, info_hash: str, limit: int) -> List[Tuple[str, int]]:
    """``(path, size)`` of the ``limit`` largest stored files of the torrent named by
    ``info_hash`` (any of its hashes, as torrent() takes), largest first; [] when not held."""
    key = _key(info_hash)
    if key is None:
        return []
    with using(db) as conn:
        return [(p, int(s)) for p, s in conn.execute(
            "SELECT path, size FROM files WHERE torrent = (SELECT torrent FROM hashes WHERE hash = ?) "
            "ORDER BY size DESC, idx LIMIT ?", (key, int(limit)))]


def stats(db: Any) -> Dict[str, Any]:
    """Counts over the database: ``torrents``, ``files`` (sum of num_files), ``files_stored``
    (file rows), ``total_size``, ``versions`` ({v1, v2, hybrid, unknown}), ``first_seen`` and
    ``last_seen`` (the earliest and latest, RFC 3339, None when empty) and the search
    ``tokenizer`` (SQLite: ``trigram`` or ``unicode61``; PostgreSQL: ``pg_trgm`` when its
    index is there, else ``scan``)."""
    with using(db) as conn:
        d = conn.dialect
        n, files, size, first, last = conn.one(
            "SELECT count(*), coalesce(sum(num_files), 0), coalesce(sum(total_size), 0), min(first_seen), "
            "max(last_seen) FROM torrents") or (0, 0, 0, None, None)
        versions = {"v1": 0, "v2": 0, "hybrid": 0, "unknown": 0}
        for v, c in conn.execute("SELECT version, count(*) FROM torrents GROUP BY version"):
            versions[v if v in versions else "unknown"] += int(c)
        stored = int(conn.value("SELECT count(*) FROM files"))
        return {"torrents": int(n), "files": int(files), "files_stored": stored, "total_size": int(size),
                "versions": versions, "first_seen": rfc3339(d.seconds(first)), "last_seen": rfc3339(d.seconds(last)),
                "tokenizer": d.tokenizer(conn)}


FACETS = ("content_type", "resolution", "year")


def facets(db: Any, limit: int = 30) -> Dict[str, List[Dict[str, Any]]]:
    """Counts of the torrents served (not hidden) by content type, resolution and year,
    the largest first (years: the newest first), at most ``limit`` values each; {} on a
    database from before the parsed names."""
    with using(db) as conn:
        if not conn.dialect.has_column(conn, "torrents", "parsed"):
            return {}
        # One pass over the table for every facet (a scan each: 0.53-0.59 s at 1 M on PostgreSQL):
        # the combinations are few (types x resolutions x years), summed here.
        counts: Dict[str, Dict[Any, int]] = {column: {} for column in FACETS}
        for *values, n in conn.execute(f"SELECT {', '.join(FACETS)}, count(*) FROM torrents WHERE hidden IS NULL "
                                       f"GROUP BY {', '.join(FACETS)}"):
            for column, value in zip(FACETS, values):
                if value is not None:
                    counts[column][value] = counts[column].get(value, 0) + int(n)
        out: Dict[str, List[Dict[str, Any]]] = {}
        for column, found in counts.items():
            # Years newest first; the others the most common first, then by value.
            order = ((lambda kv: -kv[0]) if column == "year" else (lambda kv: (-kv[1], kv[0])))
            out[column] = [{"value": v, "count": n} for v, n in sorted(found.items(), key=order)[:int(limit)]]
        return out


def arrivals(db: Any, now: int, recent: int = 100_000) -> Dict[str, Any]:
    """Torrents first seen per minute over the last hour and per hour over the last day
    (oldest first; among the newest ``recent`` torrents, which bounds the work), the count,
    and the database's size (bytes used, bytes of the torrents)."""
    with using(db) as conn:
        d = conn.dialect
        since = now - 86400
        times = [d.seconds(t) for (t,) in conn.execute(
            "SELECT first_seen FROM (SELECT first_seen FROM torrents ORDER BY id DESC LIMIT ?) r WHERE first_seen >= ?",
            (int(recent), d.time(since)))]
        per_minute, per_hour = [0] * 60, [0] * 24
        for t in times:
            if t is None or t > now:
                continue
            age = now - t
            per_hour[23 - min(23, age // 3600)] += 1
            if age < 3600:
                per_minute[59 - age // 60] += 1
        used, torrents_bytes = d.measure(conn)
        return {"now": rfc3339(now), "per_minute": per_minute, "per_hour": per_hour, "last_day": sum(per_hour),
                "torrents": int(conn.value("SELECT count(*) FROM torrents")), "database_bytes": used,
                "torrent_bytes": torrents_bytes}
