"""asyncio helper: the crawler's torrents as an async iterator.

    async with dhtcrawler.aio.AsyncCrawler(port=6881) as crawler:
        async for torrent in crawler:
            await save(torrent)

Torrents travel from the delivery thread to the event loop through a bounded buffer. When
the buffer is full the torrent is answered ``Answer.RETRY`` (not taken: the library fetches
it again later) and counted in ``dropped``: a slow consumer slows nobody down and exhausts
no memory.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Mapping, Optional

from ._crawler import Crawler
from ._types import Answer, Torrent


class AsyncCrawler:
    """A started crawler whose torrents are read with ``async for``."""

    def __init__(self, options: Optional[Mapping[str, Any]] = None, /, *, buffer: int = 1024,
                 **overrides: Any) -> None:
        if buffer < 1:
            raise ValueError("buffer must be at least 1")
        self.crawler = Crawler(options, **overrides)
        self.dropped = 0
        self._capacity = buffer
        self._in_buffer = 0
        self._count_lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._queue: "Optional[asyncio.Queue[Optional[Torrent]]]" = None  # made on the loop
        self.crawler.on_torrent(self._deliver, ack=True)

    def _deliver(self, torrent: Torrent) -> Answer:
        # Runs on the delivery thread: reserve a slot, then hand over to the loop.
        with self._count_lock:
            if self._in_buffer >= self._capacity or self._loop is None:
                self.dropped += 1
                return Answer.RETRY
            self._in_buffer += 1
        assert self._queue is not None
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, torrent)
        except RuntimeError:  # the loop is closed
            with self._count_lock:
                self._in_buffer -= 1
                self.dropped += 1
            return Answer.RETRY
        return Answer.ACCEPT

    async def start(self) -> "AsyncCrawler":
        self._queue = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.crawler.start()
        return self

    async def close(self) -> None:
        """Shuts down and frees the crawler (off the event loop's thread); the iterator then
        ends after the torrents already buffered."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.crawler.close)
        if self._queue is not None:
            self._queue.put_nowait(None)

    def shutdown(self) -> None:
        """Stops the crawler (any thread); iteration ends once the buffer is drained."""
        self.crawler.shutdown()
        if self._loop is not None and self._queue is not None:
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
            except RuntimeError:
                pass

    async def __aenter__(self) -> "AsyncCrawler":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Torrent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Torrent]:
        if self._queue is None:
            raise RuntimeError("start the AsyncCrawler first (async with AsyncCrawler(...) as c)")
        while True:
            torrent = await self._queue.get()
            if torrent is None:
                return
            with self._count_lock:
                self._in_buffer -= 1
            yield torrent


async def torrents(options: Optional[Mapping[str, Any]] = None, /, *, buffer: int = 1024,
                   **overrides: Any) -> AsyncIterator[Torrent]:
    """``async for t in dhtcrawler.aio.torrents(port=6881): ...``: crawls while iterated."""
    async with AsyncCrawler(options, buffer=buffer, **overrides) as crawler:
        async for torrent in crawler:
            yield torrent
