"""The application's acceptance policy: the torrent callback of ``crawl`` (and ``demo``),
which answers each torrent by what its sinks did with it."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from .._types import Answer, Torrent
from .commands.common import error_printer
from .sinks import Dropped, JsonlSink


class Acceptance:
    """The CLI's torrent callback: a torrent is accepted only once every sink holds it.
    One the database holds already (a fleet's other crawler stored it, maybe under a
    hybrid's other key) is acknowledged but not written out again: each torrent reaches
    the JSON lines once per database.

    Acceptance means durable: when a sink fails (disk full, database locked, PostgreSQL
    down) the torrent is answered RETRY, not counted, and said so in one line; the library
    fetches it again (on the retry store's short schedule, or at its next announce). A
    torrent the database took but the JSON lines did not is written out when it comes back."""

    def __init__(self, db: Optional[Any], jsonl: Optional[JsonlSink],
                 show: Optional[Callable[[Torrent], None]] = None,
                 report: Optional[Callable[[str], None]] = None) -> None:
        self.db, self.jsonl, self.show = db, jsonl, show
        self.report = report or error_printer(None)
        self.accepted = 0
        self.seen_again = 0
        self.sink_failures = 0
        self.dropped = 0  # by a content rule
        self._not_written: set = set()  # in the database, not yet in the JSON lines
        self._lock = threading.Lock()
        self.on_new: Optional[Callable[[str], Any]] = None  # a new torrent stored (its key): the scrape

    def __call__(self, torrent: Torrent) -> Answer:
        try:
            with self._lock:
                new = self.db is None or self.db.add(torrent)
                if not new and torrent.info_hash not in self._not_written:
                    self.seen_again += 1
                    return Answer.ACCEPT
                if self.jsonl is not None:
                    self._not_written.add(torrent.info_hash)
                    self.jsonl.add(torrent)
                self._not_written.discard(torrent.info_hash)
                self.accepted += 1
        except Dropped:  # a content rule: never stored; REJECT, so the library does not fetch it again
            self.dropped += 1
            return Answer.REJECT
        except Exception as e:  # noqa: BLE001 - any sink failure: not stored, fetched again
            self.sink_failures += 1
            self.report(f"could not store {torrent.info_hash} ({type(e).__name__}: {e}); "
                        "it will be fetched again")
            return Answer.RETRY
        if self.show is not None:
            self.show(torrent)
        if self.on_new is not None:
            self.on_new(torrent.info_hash)
        return Answer.ACCEPT

    def close(self) -> None:
        for sink in (self.jsonl, self.db):
            if sink is not None:
                sink.close()
