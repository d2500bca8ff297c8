"""The queries the web server answers: a thin layer over dhtcrawler.search (the ranked
full-text search of ``dhtcrawler search``), with the JSON API's bounds and field names
(docs/api.md):

    search(conn, q, limit, offset, sort) -> (total, rows)
    search_page(conn, q, limit, offset, sort) -> Page(total, rows, total_is_estimate)
    torrent(conn, info_hash) -> dict or None
    stats(conn) -> dict

with, beside them, ``SORTS`` (the sort names search() takes), ``is_info_hash(text)`` and
``largest_files(conn, info_hash, limit)`` (for the Torznab category). ``conn`` is a
connection of the database layer (dhtcrawler.app.db), SQLite or PostgreSQL alike. Rows are
dhtcrawler.app.search's (one shape, one magnet link).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .. import search as _search  # dhtcrawler.app.search

SORTS: Tuple[str, ...] = ("relevance", "size", "files", "first_seen", "last_seen", "name")
DEFAULT_SORT = "relevance"
MAX_LIMIT = 100
MAX_QUERY_WORDS = 8
MAX_QUERY_CHARS = 256
MAX_FILES = 10000  # files listed by torrent(); the rest is counted, not listed

_HEX = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def is_info_hash(text: str) -> bool:
    return bool(_HEX.match(text))


def search(conn: Any, q: str, limit: int, offset: int,
           sort: str = DEFAULT_SORT, **filters: Any) -> Tuple[int, List[Dict[str, Any]]]:
    """Torrents matching the first MAX_QUERY_WORDS words of ``q`` (every torrent for an
    empty ``q``): (number of matches, one page). ``name`` sorts A to Z, the others best,
    largest or newest first. ``filters``: dhtcrawler.app.search.search_page's content_type,
    categories, season, episode, year, resolution."""
    page = search_page(conn, q, limit, offset, sort, **filters)
    return page.total, page.rows


def search_page(conn: Any, q: str, limit: int, offset: int, sort: str = DEFAULT_SORT,
                **filters: Any) -> "_search.Page":
    """search()'s answer with ``total_is_estimate``: ``total`` is exact up to the search's
    candidate window, an estimate above it (dhtcrawler.app.search.search_page)."""
    if sort not in SORTS:
        raise ValueError(f"unknown sort {sort!r}")
    return _search.search_page(conn, q, limit=limit, offset=offset, sort=sort, max_words=MAX_QUERY_WORDS,
                               **filters)


def largest_files(conn: Any, info_hash: str, limit: int) -> List[Tuple[str, int]]:
    """(path, size) of a torrent's ``limit`` largest files, largest first."""
    return _search.largest_files(conn, info_hash, limit)


def torrent(conn: Any, info_hash: str) -> Optional[Dict[str, Any]]:
    """One torrent by any of its hashes, with its files (the first MAX_FILES) and
    ``files_truncated`` (fewer listed than it has), or None."""
    doc = _search.torrent(conn, info_hash, max_files=MAX_FILES)
    if doc is not None:
        doc["files_truncated"] = len(doc["files"]) < doc["num_files"]
    return doc


def stats(conn: Any) -> Dict[str, Any]:
    """dhtcrawler.search.stats, plus the API's first names of its two times."""
    doc = _search.stats(conn)
    doc["oldest_first_seen"] = doc["first_seen"]
    doc["newest_last_seen"] = doc["last_seen"]
    return doc
