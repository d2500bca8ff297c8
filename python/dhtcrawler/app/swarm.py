"""Swarm sizes for ``dhtcrawler crawl``: a BEP-33 scrape of each torrent when it is
delivered, and refreshes of the stored torrents at a bounded rate (``--scrape-rate``),
never-measured ones first, then the hottest (most often seen) and newest. Each answer is
stored with its time (sinks: ``set_swarm``); an answer no node could give (nobody knew the
swarm) records the time only, so the torrent waits for its next refresh. A scrape that asked
nobody (it timed out before the crawler knew a node) records nothing: the torrent is asked
for again.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Set

from .._errors import DhtcError
from .._types import Scrape

# A stored estimate older than this is refreshed (when the rate leaves room).
REFRESH_AFTER = 6 * 3600
# Requests waiting for their answer, at most (the library's queue is bounded too).
MAX_PENDING = 256
# An unanswered request is forgotten after this long (the crawler was busy, or shut down).
PENDING_TIMEOUT = 120.0


def parse_rate(text: str) -> float:
    """Scrapes per minute from ``N/min``, ``N/s``, ``N/h`` or a bare ``N`` (per minute)."""
    number, _, unit = text.strip().lower().partition("/")
    per = {"": 1.0, "min": 1.0, "m": 1.0, "s": 60.0, "sec": 60.0, "h": 1 / 60.0, "hour": 1 / 60.0}.get(unit)
    try:
        value = float(number) * (per if per is not None else float("nan"))
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise ValueError(f"expected a rate such as 30/min, got {text!r}")
    return value


class SwarmScraper:
    def __init__(self, crawler: Any, db: Any, rate_per_minute: float,
                 report: Optional[Callable[[str], None]] = None, refresh_after: float = REFRESH_AFTER) -> None:
        self.crawler, self.db = crawler, db
        self.rate = float(rate_per_minute)
        self.refresh_after = refresh_after
        self.report = report
        self.requested = 0
        self.answered = 0
        self.refused = 0
        self._pending: dict = {}  # info hash -> when requested
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        crawler.on_scrape(self.on_scrape)

    def request(self, info_hash: str) -> bool:
        """Asks for a scrape (at a delivery, or a refresh); False when it could not be asked."""
        with self._lock:
            now = time.monotonic()
            for h in [h for h, at in self._pending.items() if now - at > PENDING_TIMEOUT]:
                del self._pending[h]
            if info_hash in self._pending:
                return True
            if len(self._pending) >= MAX_PENDING:
                self.refused += 1
                return False
            try:
                self.crawler.request_scrape(info_hash)
            except DhtcError:  # shut down, or the library's queue is full
                self.refused += 1
                return False
            self._pending[info_hash] = now
            self.requested += 1
            return True

    def on_scrape(self, s: Scrape) -> None:
        with self._lock:
            self._pending.pop(s.info_hash, None)
            self.answered += 1
        if s.timed_out and s.queried == 0:
            return  # nobody was asked: nothing is known, and it stays due
        at = int((s.at.timestamp() if s.at else time.time()))
        try:
            if s.responders > 0:
                self.db.set_swarm(s.info_hash, s.seeders, s.leechers, at)
            else:
                self.db.set_swarm(s.info_hash, None, None, at)
        except Exception as e:  # noqa: BLE001 - an estimate lost is not worth stopping for
            if self.report is not None:
                self.report(f"could not store the swarm of {s.info_hash} ({type(e).__name__}: {e})")

    # ---- refreshes --------------------------------------------------------------------------

    def start(self) -> None:
        if self.rate <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="dhtcrawler-scrapes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        tokens, burst = 0.0, max(1.0, self.rate / 6)  # at most ten seconds' worth at once
        last = time.monotonic()
        while not self._stop.wait(1.0):
            now = time.monotonic()
            tokens = min(burst, tokens + (now - last) * self.rate / 60.0)
            last = now
            if tokens < 1:
                continue
            with self._lock:
                skip: Set[str] = set(self._pending)
            try:
                due = self.db.swarms_due(int(tokens) + len(skip), int(time.time() - self.refresh_after))
            except Exception:  # noqa: BLE001 - the database is busy: next second
                continue
            for h in due:
                if tokens < 1:
                    break
                if h in skip:
                    continue
                if self.request(h):
                    tokens -= 1
