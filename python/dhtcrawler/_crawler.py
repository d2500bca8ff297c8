"""The Crawler: one native crawler, its callbacks, and its lifecycle, the Python way."""

from __future__ import annotations

import atexit
import json
import logging
import threading
import weakref
from typing import Any, Callable, Dict, Mapping, Optional, TypeVar

from . import _native
from ._errors import DhtcError, OptionsError, StateError, from_native
from ._types import Completion, Observation, Torrent

log = logging.getLogger("dhtcrawler")

F = TypeVar("F", bound=Callable[..., Any])

# How long run() waits in one slice before letting Python look at its signals.
_WAIT_SLICE_MS = 100

# Crawlers still open at interpreter exit are closed before the interpreter goes away, so
# the delivery thread never needs the GIL of a finalizing interpreter.
_open_crawlers: "weakref.WeakSet[Crawler]" = weakref.WeakSet()


@atexit.register
def _close_open_crawlers() -> None:
    for crawler in list(_open_crawlers):
        try:
            crawler.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def default_options() -> Dict[str, Any]:
    """The options document with every key at its default (docs/options.md)."""
    try:
        return json.loads(_native.default_options())
    except _native.NativeError as e:
        raise from_native(e) from None


def _error_deliverer(crawler_ref: "weakref.ReferenceType[Crawler]") -> Callable[[str], None]:
    def deliver(text: str) -> None:
        try:
            message = json.loads(text).get("message", text)
        except ValueError:
            message = text
        crawler = crawler_ref()
        if crawler is not None:
            crawler._report_message(message)
        else:
            log.error("%s", message)

    return deliver


def _options_json(options: Optional[Mapping[str, Any]], overrides: Mapping[str, Any]) -> str:
    doc: Dict[str, Any] = dict(options or {})
    doc.update(overrides)
    try:
        return json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise OptionsError(_native.ERR_INVALID_JSON, _native.status_name(_native.ERR_INVALID_JSON),
                           f"(document): not representable as JSON: {e}") from None


class Crawler:
    """A DHT crawler.

    ``Crawler({"port": 6881})`` or ``Crawler(port=6881, netmode="dual")``: the options are
    the JSON document of docs/options.md (keyword arguments override the mapping's keys).
    Bad options raise :class:`OptionsError` with the offending ``key_path``.

    Register callbacks before :meth:`start`/:meth:`run`; they run on the library's delivery
    thread, one at a time, in order. An exception raised in a callback is reported (to the
    error callback when there is one, else to the ``dhtcrawler`` logger) and, for the gate and
    a torrent callback with acknowledgement, counts as a rejection. Use it as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, /, **overrides: Any) -> None:
        text = _options_json(options, overrides)
        try:
            self._native = _native.NativeCrawler(text)
        except _native.NativeError as e:
            raise from_native(e) from None
        self._error_fn: Optional[Callable[[str], Any]] = None
        self._started = False
        self._lock = threading.Lock()
        self.callback_errors = 0  # exceptions raised by this crawler's callbacks
        # The library's runtime errors always reach Python: the error callback when one is
        # set, else the "dhtcrawler" logger.
        self._call(self._native.set_error, _error_deliverer(weakref.ref(self)))
        _open_crawlers.add(self)

    # ---- callbacks -------------------------------------------------------------------------

    def on_gate(self, fn: Optional[Callable[[str], bool]]) -> Optional[Callable[[str], bool]]:
        """``fn(info_hash) -> bool`` before a hash first goes to peers (False: skip it)."""
        wrapped = None if fn is None else self._guard("gate", fn, lambda h: bool(fn(h)), False)
        self._call(self._native.set_gate, wrapped)
        return fn

    def on_torrent(self, fn: Optional[Callable[[Torrent], Any]] = None, *, ack: bool = False) -> Any:
        """``fn(torrent)`` for every verified torrent. With ``ack=True`` the return value
        accepts (truthy) or rejects the torrent. Usable as a decorator, with or without
        arguments: ``@crawler.on_torrent`` or ``@crawler.on_torrent(ack=True)``."""
        if fn is None and not ack:
            self._call(self._native.set_torrent, None, False)
            return None
        if fn is None:
            return lambda f: self.on_torrent(f, ack=ack)

        def deliver(text: str, info: bytes) -> bool:
            result = fn(Torrent.from_json(text, info))
            return bool(result) if ack else True

        self._call(self._native.set_torrent, self._guard("torrent", fn, deliver, False), ack)
        return fn

    def on_completion(self, fn: Optional[Callable[[Completion], Any]]) -> Any:
        """``fn(completion)`` once per gated round."""
        wrapped = None if fn is None else self._guard(
            "completion", fn, lambda text: fn(Completion.from_json(text)), None)
        self._call(self._native.set_completion, wrapped)
        return fn

    def on_observation(self, fn: Optional[Callable[[Observation], Any]]) -> Any:
        """``fn(observation)`` for hashes seen without a peer (dropped when you fall behind)."""
        wrapped = None if fn is None else self._guard(
            "observation", fn, lambda text: fn(Observation.from_json(text)), None)
        self._call(self._native.set_observation, wrapped)
        return fn

    def on_error(self, fn: Optional[Callable[[str], Any]]) -> Any:
        """``fn(message)`` for runtime errors, including exceptions raised by other callbacks."""
        self._error_fn = fn
        return fn

    def _guard(self, what: str, user_fn: Callable[..., Any], call: Callable[..., Any],
               on_failure: Any) -> Callable[..., Any]:
        """Wraps a callback so that nothing it raises leaves Python: the exception is
        reported and ``on_failure`` returned (a rejection for gate and ack). Holds the crawler
        weakly, so the native side's reference to the wrapper does not keep it alive."""
        crawler_ref = weakref.ref(self)
        name = getattr(user_fn, "__qualname__", repr(user_fn))

        def guarded(*args: Any) -> Any:
            try:
                return call(*args)
            except BaseException as e:  # noqa: BLE001 - nothing may cross into C
                crawler = crawler_ref()
                if crawler is not None:
                    crawler._report_exception(what, name, e)
                if isinstance(e, (KeyboardInterrupt, SystemExit)) and crawler is not None:
                    crawler.shutdown()
                return on_failure

        return guarded

    def _report_exception(self, what: str, name: str, e: BaseException) -> None:
        self.callback_errors += 1
        message = f"{what} callback {name} raised {type(e).__name__}: {e}"
        if self._error_fn is not None:
            self._report_message(message)
        else:
            log.error("%s", message, exc_info=(type(e), e, e.__traceback__))

    def _report_message(self, message: str) -> None:
        fn = self._error_fn
        if fn is None:
            log.error("%s", message)
            return
        try:
            fn(message)
        except Exception:  # noqa: BLE001 - the error handler itself failed
            log.exception("error callback raised while reporting: %s", message)

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Starts the crawler's threads and returns."""
        with self._lock:
            self._call(self._native.start)
            self._started = True

    def run(self) -> None:
        """Starts (if needed) and blocks until :meth:`shutdown`. The GIL is released while it
        waits, in slices, so signal handlers run and Ctrl-C works: a KeyboardInterrupt shuts
        the crawler down and propagates."""
        try:
            # A Ctrl-C that lands while the native start runs is raised as it returns: it
            # must shut the crawler down too.
            if not self._started:
                try:
                    self.start()
                except StateError:
                    if self.wait(0):  # shut down before it ran: nothing to wait for
                        return
                    raise
            while not self.wait(_WAIT_SLICE_MS / 1000.0):
                pass
        except BaseException:
            self.shutdown()
            raise

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the crawler has been shut down, at most ``timeout`` seconds (None: no
        limit, in slices). True once shut down."""
        if timeout is None:
            while not self._call(self._native.wait, _WAIT_SLICE_MS):
                pass
            return True
        return bool(self._call(self._native.wait, max(0, int(timeout * 1000))))

    def shutdown(self) -> None:
        """Stops crawling and fetching. Any thread, also inside a callback; idempotent."""
        self._call(self._native.shutdown)

    def close(self) -> None:
        """Shuts down and frees the crawler; afterwards no callback runs. From inside a
        callback it only shuts down (the library cannot free itself from its own thread):
        the crawler is freed when the object is dropped or closed again elsewhere."""
        if self._native.closed:
            return
        if _native.in_callback():
            self.shutdown()
            return
        self._call(self._native.destroy)
        _open_crawlers.discard(self)

    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def __enter__(self) -> "Crawler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and not native.closed and not _native.in_callback():
            try:
                native.destroy()
            except Exception:  # noqa: BLE001 - nothing to report to at collection time
                pass

    # ---- observation ---------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """The runtime snapshot (docs/metrics.md)."""
        return json.loads(self._call(self._native.stats))

    def observability(self) -> Dict[str, Any]:
        """Every counter, every drop, the histograms (docs/metrics.md)."""
        return json.loads(self._call(self._native.observability))

    def metrics(self) -> str:
        """The metrics as Prometheus text (version 0.0.4)."""
        return str(self._call(self._native.metrics))

    @property
    def endpoints(self) -> list:
        """The bound UDP endpoints (``"127.0.0.1:40123"``), the real port when bound to 0."""
        return list(self.stats().get("endpoints", []))

    # ---- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except _native.NativeError as e:
            raise from_native(e) from None


__all__ = ["Crawler", "default_options", "DhtcError", "OptionsError", "StateError"]
