"""Ending a run: SIGINT, SIGTERM and ``--duration`` shut the crawler down; the main
thread, waiting in slices, then closes everything in order."""

from __future__ import annotations

import signal
import time
from typing import Any, Callable, Dict, Optional

from .._crawler import Crawler


class Stopper:
    """SIGINT/SIGTERM and --duration end the run by shutting the crawler down; the main
    thread, waiting in slices, then closes everything in order."""

    def __init__(self, crawler: Crawler, duration: Optional[float]) -> None:
        self.crawler = crawler
        self.deadline = None if duration is None else time.monotonic() + duration
        self.reason: Optional[str] = None
        self._previous: Dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop(signal.Signals(signum).name)

    def stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.crawler.shutdown()

    def wait(self, until_done: Optional[Callable[[], bool]] = None) -> None:
        while not self.crawler.wait(0.1):
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.stop("duration")
            elif until_done is not None and until_done():
                self.stop("done")
