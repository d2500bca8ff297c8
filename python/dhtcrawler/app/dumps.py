"""Dumps: ``dhtcrawler export`` (JSON lines, optionally zstd) and ``dhtcrawler import``
(such dumps, or a magnetico SQLite database) into the torrent database, SQLite or
PostgreSQL (through the database layer).

A dump line is the torrent JSON form (docs/torrent-json.md) with the database's own fields
added (the form only gains fields): ``first_seen``, ``last_seen`` (RFC 3339) and
``times_seen``, and, once a scrape ran, ``seeders``, ``leechers`` and ``scraped_at`` (an
import keeps the newer estimate); ``discovered_at`` is the first sighting and ``peer`` the last one's. When
the crawl capped the file rows (``--max-files``), ``files`` holds the stored ones and
``num_files`` / ``total_size`` still count every file. Fields a source did not know
(magnetico has no piece length, version or private flag, and no v1/v2 split of its hash)
are ``null``, never invented.

Import merges (sinks.DatabaseSink.merge): a torrent held already, under any of its keys, is
one row: first_seen the earlier, last_seen the later, times_seen the larger (so importing
a dump twice changes nothing), unknown fields filled in. Every imported key is marked
delivered in the retry store (state done), so a crawl on that database does not fetch it
again, unless ``refetch``.
"""

from __future__ import annotations

import gc
import io
import json
import os
import sqlite3
from contextlib import contextmanager
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .classify import COLUMNS as PARSED_COLUMNS
from .db import Connection, Database, using
from .search import parse_time, rfc3339
from .sinks import DatabaseSink, keys_of

SQLITE_MAGIC = b"SQLite format 3\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
RETRY_DONE = 2  # core/retry/store.hpp hash_state::done


class DumpError(RuntimeError):
    """An unreadable input (not JSON lines, not a magnetico database) or a missing extra."""


def _zstandard() -> Any:
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        raise DumpError("zstd needs the zstandard package: pip install 'dhtcrawler[zstd]'") from None
    return zstandard


# ---- export -------------------------------------------------------------------------------

# Torrents read per query when exporting (with their files in one more query).
EXPORT_PAGE = 1000


def export_docs(db: Any, since: Any = None) -> Iterator[Dict[str, Any]]:
    """Every torrent seen at or after ``since`` (last_seen; Unix seconds or RFC 3339; None:
    all), oldest first, as its dump document. ``db``: anything the query functions take."""
    since_s = parse_time(since)
    with using(db) as conn:
        d = conn.dialect
        swarm = d.has_column(conn, "torrents", "scraped_at")
        parsed = d.has_column(conn, "torrents", "parsed")
        columns = ("id, info_hash, info_hash_v1, info_hash_v2, version, name, total_size, num_files, piece_length, "
                   "private, first_seen, last_seen, peer, times_seen, "
                   + ("seeders, leechers, scraped_at" if swarm else "NULL, NULL, NULL") + ", "
                   + ", ".join(PARSED_COLUMNS if parsed else ("NULL",) * len(PARSED_COLUMNS)))
        after = -1
        while True:  # pages in id order, each with its files in one query
            page = conn.execute(f"SELECT {columns} FROM torrents WHERE id > ?"
                                + (" AND hidden IS NULL" if parsed else "")
                                + (" AND last_seen >= ?" if since_s is not None else "") + " ORDER BY id LIMIT ?",
                                (after, *(() if since_s is None else (d.time(since_s),)), EXPORT_PAGE))
            if not page:
                return
            files: Dict[int, List[Dict[str, Any]]] = {}
            for tid, path, size in conn.execute("SELECT torrent, path, size FROM files WHERE torrent BETWEEN ? AND ? "
                                                "ORDER BY torrent, idx", (page[0][0], page[-1][0])):
                files.setdefault(int(tid), []).append({"path": path, "size": int(size)})
            for row in page:
                yield _doc(d, row, files.get(int(row[0]), []))
            after = page[-1][0]


def _doc(d: Any, row: Any, files: List[Dict[str, Any]]) -> Dict[str, Any]:
    (_tid, key, v1, v2, version, name, size, num_files, piece_length, private, first, last, peer, times,
     seeders, leechers, scraped_at) = row[:17]
    first, last, scraped_at = d.seconds(first), d.seconds(last), d.seconds(scraped_at)
    doc: Dict[str, Any] = {
        "schema": 1, "info_hash": bytes(key).hex(), "info_hash_v1": v1 and bytes(v1).hex(),
        "info_hash_v2": v2 and bytes(v2).hex(), "version": version, "name": name, "total_size": int(size),
        "num_files": int(num_files), "piece_length": None if piece_length is None else int(piece_length),
        "private": None if private is None else bool(private), "files": files}
    if peer is not None:
        doc["peer"] = peer
    doc.update(discovered_at=rfc3339(first), first_seen=rfc3339(first), last_seen=rfc3339(last),
               times_seen=int(times))
    if scraped_at is not None:  # the latest swarm estimate (null counts: nobody knew the swarm)
        doc.update(seeders=None if seeders is None else int(seeders),
                   leechers=None if leechers is None else int(leechers), scraped_at=rfc3339(scraped_at))
    if row[-1] is not None:  # parsed: the release name's fields (an import keeps them, after checks)
        doc.update(zip(PARSED_COLUMNS, row[17:]))
    return doc


def export(db: Union[str, Database], out: Optional[str], since: Any = None,
           progress: Optional[Callable[[int], None]] = None) -> int:
    """Writes the dump of ``db`` (a SQLite file, a ``postgresql://`` URI, or a Database) to
    ``out`` (``None`` or ``-``: standard output; a name ending in ``.zst``: zstd-compressed)
    and returns the number of torrents. ``progress(written)`` is called every EXPORT_PAGE."""
    import sys

    database = db if isinstance(db, Database) else Database(db)
    conn = database.connect(read_only=True)
    n = 0
    raw: Optional[IO[bytes]] = None
    try:
        if out in (None, "-"):
            stream: IO[bytes] = sys.stdout.buffer
        else:
            raw = open(out + ".part", "wb")
            stream = raw
        writer: Any = stream
        zw = None
        if out and out.endswith(".zst"):
            zw = _zstandard().ZstdCompressor(level=10).stream_writer(stream, closefd=False)
            writer = zw
        for doc in export_docs(conn, since):
            writer.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
            n += 1
            if progress is not None and n % EXPORT_PAGE == 0:
                progress(n)
        if zw is not None:
            zw.close()
        stream.flush()
        if raw is not None:
            os.fsync(raw.fileno())
            raw.close()
            raw = None
            os.replace(out + ".part", out)  # type: ignore[operator]
    finally:
        if raw is not None:
            raw.close()
            os.unlink(out + ".part")  # type: ignore[operator]
        conn.close()
    return n


# ---- import -------------------------------------------------------------------------------

def _json_loads() -> Callable[[bytes], Any]:
    """orjson's parser when installed (``pip install 'dhtcrawler[fast]'``: about 3 times
    json's speed on a dump line), else json's."""
    try:
        import orjson  # type: ignore[import-not-found]
    except ImportError:
        return json.loads
    return orjson.loads  # type: ignore[no-any-return]


# Unix seconds at midnight UTC of each day seen (a dump's times fall on few days).
_MIDNIGHTS: Dict[str, int] = {}


def _seconds(value: Any) -> Optional[int]:
    """parse_time(), with a fast path for the RFC 3339 form exports write
    (``2026-10-01T12:34:56Z``)."""
    if type(value) is str and len(value) == 20 and value[10] == "T" and value[19] == "Z" and value.isascii() \
            and value[13] == value[16] == ":" and value[11:13].isdigit() and value[14:16].isdigit() \
            and value[17:19].isdigit() and int(value[11:13]) < 24 and int(value[14:16]) < 60 \
            and int(value[17:19]) < 60:
        day = _MIDNIGHTS.get(value[:10])
        if day is None:
            day = parse_time(value[:10])
            if len(_MIDNIGHTS) < 100_000:
                _MIDNIGHTS[value[:10]] = day  # type: ignore[assignment]
        return day + int(value[11:13]) * 3600 + int(value[14:16]) * 60 + int(value[17:19])  # type: ignore[operator]
    return parse_time(value)


def _record(doc: Dict[str, Any]) -> Dict[str, Any]:
    get = doc.get
    for key in ("info_hash", "name", "total_size", "num_files", "files"):
        if key not in doc:
            raise DumpError(f"a line without {key!r}")
    first_text, last_text = get("first_seen") or get("discovered_at"), get("last_seen") or get("discovered_at")
    first = _seconds(first_text)
    last = first if last_text == first_text else _seconds(last_text)
    if first is None:
        first = last
    if first is None:
        raise DumpError(f"{doc['info_hash']}: no first_seen or discovered_at")
    rec = {"info_hash": doc["info_hash"], "info_hash_v1": get("info_hash_v1"),
           "info_hash_v2": get("info_hash_v2"), "version": get("version"), "name": doc["name"],
           "total_size": int(doc["total_size"]), "num_files": int(doc["num_files"]),
           "piece_length": get("piece_length"), "private": get("private"), "metadata_size": None,
           "files": [(f["path"], int(f["size"])) for f in doc["files"]], "first_seen": first,
           "last_seen": last if last is not None else first, "peer": get("peer"),
           "times_seen": int(get("times_seen") or 1),
           "scraped_at": None if get("scraped_at") is None else _seconds(doc["scraped_at"]),
           "seeders": get("seeders"), "leechers": get("leechers"),
           # A line's parsed fields are kept when they pass the checks; without them the
           # torrent waits for the backfill at the end of the import (import keeps its rate).
           "defer_parse": True}
    for c in PARSED_COLUMNS:
        rec[c] = get(c)
    return rec


def read_dump(path: str) -> Iterator[Dict[str, Any]]:
    """The records of a JSON-lines dump (zstd-compressed or not; ``-`` is standard input)."""
    import sys

    loads = _json_loads()
    f: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        head = f.peek(4)[:4] if hasattr(f, "peek") else b""
        stream: IO[bytes] = f
        if head == ZSTD_MAGIC:
            stream = io.BufferedReader(_zstandard().ZstdDecompressor().stream_reader(f), 1 << 20)  # type: ignore[arg-type]
        for number, line in enumerate(stream, 1):
            if not line.endswith(b"\n"):
                break  # a torn last line
            if line.isspace():
                continue
            try:
                doc = loads(line)
            except ValueError as e:
                raise DumpError(f"{path}:{number}: not JSON: {e}") from None
            if type(doc) is not dict:
                raise DumpError(f"{path}:{number}: not a JSON object")
            yield _record(doc)
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def read_magnetico(path: str) -> Iterator[Dict[str, Any]]:
    """The torrents of a magnetico database: torrents(id, info_hash, name, total_size,
    discovered_on) and files(torrent_id, size, path). Version, piece length, private flag
    and the v1/v2 split are unknown (None)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"torrents", "files"} <= tables:
            raise DumpError(f"{path}: a SQLite database without magnetico's torrents and files tables")
        if "schema_migrations" in tables:
            raise DumpError(f"{path}: a dhtcrawler database; export it and import the dump")
        for tid, key, name, size, discovered in conn.execute(
                "SELECT id, info_hash, name, total_size, discovered_on FROM torrents ORDER BY id").fetchall():
            key = bytes(key)
            if len(key) != 20:
                continue
            files = [(p, int(s)) for p, s in conn.execute(
                "SELECT path, size FROM files WHERE torrent_id = ? ORDER BY id", (tid,))]
            yield {"info_hash": key.hex(), "info_hash_v1": None, "info_hash_v2": None, "version": None,
                   "name": name, "total_size": int(size), "num_files": max(len(files), 1),
                   "piece_length": None, "private": None, "metadata_size": None, "files": files,
                   "first_seen": int(discovered), "last_seen": int(discovered), "peer": None, "times_seen": 1,
                   "defer_parse": True}
    finally:
        conn.close()


def read_any(path: str) -> Iterator[Dict[str, Any]]:
    if path != "-":
        with open(path, "rb") as f:
            if f.read(16) == SQLITE_MAGIC:
                return read_magnetico(path)
    return read_dump(path)


def mark_delivered(conn: Connection, keys: List[bytes], now: int) -> None:
    """Marks 20-byte keys done in the retry store's table (a key being fetched, leased,
    is left to its crawler)."""
    conn.dialect.mark_delivered(conn, keys, RETRY_DONE, now)


# How many torrents import reads and merges at a time: a batch holds about 10 MB of records.
# A transaction holds one batch, or on SQLite the batches of bulk_transaction_secs (the
# dialect's); a Ctrl-C loses at most the transaction being written, which a run again imports.
IMPORT_BATCH = 10_000


def _chunks(records: Iterator[Dict[str, Any]], size: int) -> Iterator[List[Dict[str, Any]]]:
    """Lists of up to ``size`` records. A reader's error comes after the records read before
    it (they are stored: a bad line loses nothing else)."""
    chunk: List[Dict[str, Any]] = []
    try:
        for rec in records:
            chunk.append(rec)
            if len(chunk) == size:
                yield chunk
                chunk = []
    except GeneratorExit:  # closed by its consumer: nothing more is wanted
        raise
    except BaseException:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


def _next(chunks: Iterator[List[Dict[str, Any]]]) -> Tuple[Optional[List[Dict[str, Any]]], Optional[Exception]]:
    """The next batch (None at the end), or the error reading it raised."""
    try:
        return next(chunks, None), None
    except Exception as e:  # noqa: BLE001 - raised by the caller, after the batch before it
        return None, e


def import_files(db: Union[str, Database], paths: List[str], *, refetch: bool = False,
                 progress: Optional[Callable[[int], None]] = None,
                 parse_progress: Optional[Callable[[int, int], None]] = None, rules: Any = None,
                 parse: bool = True) -> Dict[str, int]:
    """Merges every input into ``db`` (a SQLite file, a ``postgresql://`` URI, or a
    Database); returns counts ``{read, new, merged, dropped, parsed}``. Records are merged
    IMPORT_BATCH at a time, one or more batches a transaction (the merge rules are the
    sink's: DatabaseSink.merge_many; ``dropped`` counts those a content rule refused), and
    the tables are analyzed at the end for the query planner. Unless ``refetch``, the retry
    store's tables are created first, as a crawl would (dhtcrawler.migrate_store), and every
    key, dropped ones included (a crawl does not fetch them either), is marked done there. ``progress(read)`` is called after
    each batch. Torrents whose lines carried no (valid) parsed fields are parsed at the end,
    in batches (backfill.py; ``parse_progress(done, left)``), unless ``parse`` is False (then
    ``dhtcrawler reparse`` does it). Last, the search index is settled (Dialect.settle_search:
    on SQLite, merged into one segment when the import wrote a tenth of it or more)."""
    from .backfill import backfill

    import time

    from .. import migrate_store

    database = db if isinstance(db, Database) else Database(db)
    if not refetch:
        # The retry tables are the library's: it creates or migrates them (dhtc_store_migrate),
        # so their schema stays in one place, never copied here (docs/database.md).
        migrate_store(database.retry_store())
    sink = DatabaseSink(database, rules=rules)
    conn = sink.connection
    counts = {"read": 0, "new": 0, "merged": 0, "dropped": 0, "parsed": 0}
    try:
        now = int(time.time())
        with conn.dialect.bulk(conn), sink.index_aside(), _few_collections():
            for path in paths:
                chunks = _chunks(read_any(path), IMPORT_BATCH)
                chunk, error = _next(chunks)
                while chunk is not None:
                    with sink.batch():  # this batch, and the next ones while time allows
                        ends = time.monotonic() + conn.dialect.bulk_transaction_secs
                        while True:
                            keys = [keys_of(rec) for rec in chunk]
                            new, dropped = sink.merge_many(chunk, keys)
                            counts["new"] += new
                            counts["dropped"] += len(dropped)
                            counts["merged"] += len(chunk) - new - len(dropped)
                            if not refetch:
                                mark_delivered(conn, [k for ks in keys for k in ks], now)
                            counts["read"] += len(chunk)
                            if progress is not None:
                                progress(counts["read"])
                            going_on = time.monotonic() < ends
                            read_inside = going_on or sink.indexing_aside
                            if not read_inside:
                                break
                            # PostgreSQL writes this batch's search rows beside meanwhile. A
                            # reader's error is raised once the batches read are stored.
                            chunk, error = _next(chunks)
                            if chunk is None or not going_on:
                                break
                    if not read_inside:
                        # With SQLite's write lock released: a crawl writing the same file
                        # gets its turn here, not only when its busy handler wins a race.
                        chunk, error = _next(chunks)
                if error is not None:
                    raise error
        if parse:
            counts["parsed"] = backfill(sink, progress=parse_progress)
        with sink.lock:
            top = int(conn.value("SELECT coalesce(max(id), 0) FROM torrents"))
            conn.dialect.settle_search(conn, counts["new"] / max(1, top))
            conn.dialect.analyze(conn)
    finally:
        sink.close()
    return counts


@contextmanager
def _few_collections() -> Iterator[None]:
    """The cyclic garbage collector run less often: a batch makes hundreds of thousands of
    objects (none in a cycle), and each full collection walks every one of them."""
    threshold = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
