"""The live status line of `dhtcrawler crawl`: nodes, hashes seen, fetched, failed, rates."""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any, Callable, Dict, Optional


def _get(doc: Dict[str, Any], *path: str) -> float:
    for key in path:
        if not isinstance(doc, dict):
            return 0
        doc = doc.get(key, 0)
    return doc if isinstance(doc, (int, float)) else 0


class StatusLine:
    """Redraws one line on a terminal every ``interval`` seconds (on a pipe or file it
    writes a full line every ``pipe_interval`` seconds instead)."""

    #: Set by the crawl when content rules are on: their counts end the line.
    rules: Any = None

    def __init__(self, crawler: Any, accepted: Callable[[], int], *, stream: Optional[IO[str]] = None,
                 interval: float = 1.0, pipe_interval: float = 10.0, hint_after: float = 20.0) -> None:
        self._crawler = crawler
        self._accepted = accepted
        self._stream = stream or sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._interval = interval if self._tty else pipe_interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dhtcrawler-status", daemon=True)
        self._started = time.monotonic()
        self._last = (self._started, 0.0, 0.0)  # time, hashes, fetched at the previous line
        self._hint_after = hint_after
        self._hinted = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()

    def line(self) -> str:
        stats = self._crawler.stats()
        obs = self._crawler.observability()
        now = time.monotonic()
        hashes = _get(obs, "metadata", "hashes_in")
        fetched = _get(obs, "metadata", "outcomes", "accepted")
        failed = _get(obs, "metadata", "outcomes", "fetch_failed")
        then, hashes_then, fetched_then = self._last
        span = max(now - then, 1e-3)
        self._last = (now, hashes, fetched)
        elapsed = int(now - self._started)
        return (f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
                f"  nodes {int(_get(stats, 'responsive_nodes'))} (pool {int(_get(stats, 'node_pool_size'))})"
                f"  hashes {int(hashes)} ({(hashes - hashes_then) / span:.1f}/s)"
                f"  fetched {int(fetched)} ({(fetched - fetched_then) * 60 / span:.1f}/min)"
                f"  failed {int(failed)}  stored {self._accepted()}"
                f"  in flight {int(_get(stats, 'metadata_in_flight'))}"
                + (f"  {self.rules.summary()}" if self.rules else ""))

    def hint(self) -> str:
        """A one-time explanation when nobody has answered yet (an offline machine)."""
        if self._hinted or time.monotonic() - self._started < self._hint_after:
            return ""
        stats = self._crawler.stats()
        if _get(stats, "responsive_nodes") or _get(stats, "node_pool_size"):
            return ""
        self._hinted = True
        return ("no DHT node has answered yet: the bootstrap nodes are unreachable from here (no internet?); "
                "they are retried with back-off. `dhtcrawler demo` shows the whole pipeline on loopback.")

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                text = self.line()
                hint = self.hint()
            except Exception:  # noqa: BLE001 - the crawler closed under us
                return
            if hint:
                self._stream.write(("\r\x1b[2K" if self._tty else "") + "dhtcrawler: " + hint + "\n")
            if self._tty:
                self._stream.write("\r\x1b[2K" + text)
            else:
                self._stream.write(text + "\n")
            self._stream.flush()
