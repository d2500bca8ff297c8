"""The backfill: release names parsed for torrents stored before the indexer (or by an
older classifier, or imported from a dump without parsed fields).

Batched (one transaction per batch of ``batch`` torrents, in id order) and resumable: a
torrent is done once its ``parsed`` column holds the classifier's version, so a backfill
stopped halfway starts again where it was, having lost at most one batch's work. Run by
``dhtcrawler reparse`` and at the end of ``dhtcrawler import``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .classify import COLUMNS, PARSER_VERSION, classify
from .db import using

DEFAULT_BATCH = 1000
FILES_PER_TORRENT = 100  # the largest files are what the classifier weighs


def pending(db: Any) -> int:
    """Torrents the backfill has still to parse."""
    with using(db) as conn:
        return int(conn.value("SELECT count(*) FROM torrents WHERE parsed IS NULL OR parsed < ?", (PARSER_VERSION,)))


def backfill(db: Any, *, batch: int = DEFAULT_BATCH, progress: Optional[Callable[[int, int], None]] = None,
             max_batches: Optional[int] = None) -> int:
    """Parses every torrent not parsed by this classifier; returns how many.
    ``progress(done, left)`` is called after each batch; ``max_batches`` stops early (the
    rest waits for the next run)."""
    done = 0
    with using(db) as conn:
        left = int(conn.value("SELECT count(*) FROM torrents WHERE parsed IS NULL OR parsed < ?", (PARSER_VERSION,)))
        after, batches = -1, 0
        assign = ", ".join(f"{c} = ?" for c in COLUMNS)
        while max_batches is None or batches < max_batches:
            rows: List[Tuple[Any, ...]] = conn.execute(
                "SELECT id, name, total_size FROM torrents WHERE id > ? AND (parsed IS NULL OR parsed < ?) "
                "ORDER BY id LIMIT ?", (after, PARSER_VERSION, int(batch)))
            if not rows:
                break
            files: Dict[int, List[Tuple[str, int]]] = {}
            for tid, path, size in conn.execute(
                    "SELECT torrent, path, size FROM files WHERE torrent BETWEEN ? AND ? ORDER BY torrent, size DESC",
                    (rows[0][0], rows[-1][0])):
                kept = files.setdefault(int(tid), [])
                if len(kept) < FILES_PER_TORRENT:
                    kept.append((path, int(size)))
            with conn.transaction():
                for tid, name, size in rows:
                    parsed = classify(name, files.get(int(tid), []), int(size))
                    conn.execute(f"UPDATE torrents SET {assign} WHERE id = ?",
                                 (*(parsed[c] for c in COLUMNS), tid))
            done += len(rows)
            left = max(0, left - len(rows))
            after = rows[-1][0]
            batches += 1
            if progress is not None:
                progress(done, left)
    return done
