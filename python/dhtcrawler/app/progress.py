"""A progress display for long commands (import, export, prune): tqdm's bar when the
``progress`` extra (tqdm) is installed, else one line the standard library rewrites; shown
only when standard error is a terminal, so logs and pipes stay clean."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional


@contextmanager
def progress(what: str, total: Optional[int] = None) -> Iterator[Callable[[int], None]]:
    """Yields ``update(done)``: ``done`` is the count so far (of ``total`` when known)."""
    if not sys.stderr.isatty():
        yield lambda done: None
        return
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(total=total, desc=what, unit=" torrents", unit_scale=True, file=sys.stderr)

        def advance(done: int) -> None:
            bar.update(done - bar.n)

        try:
            yield advance
        finally:
            bar.close()
        return
    started, shown = time.monotonic(), [0.0]

    def line(done: int) -> None:
        now = time.monotonic()
        if now - shown[0] < 0.5:  # at most twice a second
            return
        shown[0] = now
        rate = done / max(now - started, 1e-9)
        of = f" of {total:,}" if total else ""
        sys.stderr.write(f"\r{what}: {done:,}{of} torrents, {rate:,.0f}/s ")
        sys.stderr.flush()

    try:
        yield line
    finally:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
