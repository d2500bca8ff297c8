"""The Crawler: one native crawler, its callbacks, and its lifecycle, the Python way."""

from __future__ import annotations

import atexit
import json
import logging
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, TypeVar, Union

from . import _native
from ._errors import CloseTimeoutError, DhtcError, OptionsError, StateError, from_native
from ._types import (Answer, Completion, Event, GateRequest, Observation, Retry, Scrape, Torrent, TorrentRequest,
                     decode_event)

log = logging.getLogger("dhtcrawler")

F = TypeVar("F", bound=Callable[..., Any])

# How long close() waits for a running callback by default, in seconds.
CLOSE_TIMEOUT = 10.0

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


def migrate_store(store: Mapping[str, Any]) -> None:
    """Creates or migrates the retry store's tables without a crawler: ``store`` is the
    ``retry.store`` options object (``{"kind": "sqlite", "path": FILE}`` or ``{"kind":
    "postgresql", "conninfo": URI}``). What creating a Crawler on it would do to the
    database, without sockets or threads. Raises OptionsError for a bad object and
    StoreError when the database cannot be opened or is newer than this library."""
    try:
        _native.store_migrate(json.dumps({"retry": {"store": dict(store)}}))
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
        self._retry_fn: Optional[Callable[[Retry], Any]] = None
        self._unknown_types: set = set()
        self._polling = False
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
        """``fn(torrent)`` for every verified torrent. With ``ack=True`` the return value is
        the answer: an :class:`Answer`, or a bool (True: ACCEPT; False or None: REJECT);
        return ``Answer.RETRY`` when the torrent could not be stored now (it is fetched
        again). A raised exception rejects. Usable as a decorator, with or without
        arguments: ``@crawler.on_torrent`` or ``@crawler.on_torrent(ack=True)``."""
        if fn is None and not ack:
            self._call(self._native.set_torrent, None, False)
            return None
        if fn is None:
            return lambda f: self.on_torrent(f, ack=ack)

        def deliver(text: str, info: bytes) -> int:
            result = fn(Torrent.from_json(text, info))
            return int(Answer.of(result)) if ack else int(Answer.ACCEPT)

        self._call(self._native.set_torrent, self._guard("torrent", fn, deliver, int(Answer.REJECT)), ack)
        return fn

    def on_completion(self, fn: Optional[Callable[[Completion], Any]]) -> Any:
        """``fn(completion)`` once per gated round (outcome accepted, fetch_failed,
        delivery_rejected, sink_failed or cancelled)."""
        if fn is None:
            self._call(self._native.set_completion, None)
            return fn
        crawler_ref = weakref.ref(self)

        def deliver(text: str) -> None:
            doc = json.loads(text)
            kind = doc.get("type", "completion")
            if kind == "completion":
                fn(Completion.from_doc(doc))
                return
            crawler = crawler_ref()
            if crawler is None:
                return
            if kind == "retry":  # a library from before the retry callback sent them here
                if crawler._retry_fn is not None:
                    crawler._retry_fn(Retry.from_doc(doc))
            else:
                crawler._ignore_unknown(kind)

        self._call(self._native.set_completion, self._guard("completion", fn, deliver, None))
        return fn

    def on_retry(self, fn: Optional[Callable[[Retry], Any]]) -> Any:
        """``fn(retry)`` after the retry store committed what it made of a round (only with a
        retry store): ``dormant`` with its ``next_retry_at``, or ``done``."""
        self._retry_fn = fn
        wrapped = None if fn is None else self._guard("retry", fn, lambda text: fn(Retry.from_json(text)), None)
        self._call(self._native.set_retry, wrapped)
        return fn

    def on_observation(self, fn: Optional[Callable[[Observation], Any]]) -> Any:
        """``fn(observation)`` for the hashes the DHT side saw: looked up, sampled, or announced
        (with the announcing node and port); dropped when you fall behind."""
        wrapped = None if fn is None else self._guard(
            "observation", fn, lambda text: fn(Observation.from_json(text)), None)
        self._call(self._native.set_observation, wrapped)
        return fn

    def on_scrape(self, fn: Optional[Callable[[Scrape], Any]]) -> Any:
        """``fn(scrape)`` with the answer to each :meth:`request_scrape` (dropped and counted
        when you fall behind)."""
        wrapped = None if fn is None else self._guard("scrape", fn, lambda text: fn(Scrape.from_json(text)), None)
        self._call(self._native.set_scrape, wrapped)
        return fn

    def request_scrape(self, info_hash: Union[str, bytes]) -> None:
        """Asks for a BEP-33 scrape of a torrent (40 hex characters or 20 bytes; a v2 hash
        truncated to 20 bytes): its swarm estimate comes as one :class:`Scrape` event, to
        :meth:`on_scrape` or from :meth:`poll`, within seconds, and at the latest
        ``crawl.scrape.timeout_secs`` after the request (``timed_out``: no node to ask, or
        answers missing). A hash already waiting is not scraped twice. Any thread, before or after start, also inside callbacks. Raises
        :class:`DhtcError` (``DHTC_ERR_STATE``) after shutdown or when the request queue is
        full (ask again later)."""
        raw = bytes.fromhex(info_hash) if isinstance(info_hash, str) else bytes(info_hash)
        if len(raw) != 20:
            raise ValueError("info_hash must be 40 hex characters or 20 bytes")
        self._call(self._native.request_scrape, raw)

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

    def _ignore_unknown(self, kind: Any) -> None:
        # The library may add event types: they are skipped, said once per type.
        if kind not in self._unknown_types:
            self._unknown_types.add(kind)
            log.warning("ignoring events of type %r, which this version of the package does not know", kind)

    # ---- polling ---------------------------------------------------------------------------

    def enable_polling(self) -> None:
        """Switches event delivery to :meth:`poll` (before start): callbacks are then not
        used. Every event type is polled; gate and torrent requests are answered with
        :meth:`answer`."""
        self._call(self._native.enable_polling)
        self._polling = True

    def poll(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event (any thread), waiting at most ``timeout`` seconds (None: no limit):
        a :class:`GateRequest`, :class:`TorrentRequest`, :class:`Completion`, :class:`Retry`,
        :class:`Observation`, :class:`Scrape` or :class:`Error`. None when the time ran out. Events of a type
        this package does not know are skipped (one ``dhtcrawler`` log line per type). Once
        the crawler is shut down and every event was taken it raises :class:`StateError`."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        while True:
            got = self._call(self._native.poll, ms)
            if got is None:
                return None
            text, info = got
            try:
                event = decode_event(text, info)
            except Exception as e:  # noqa: BLE001 - a malformed event never reaches the user
                log.error("could not decode a polled event (%s: %s): %.200s", type(e).__name__, e, text)
                event = None
                try:
                    doc = json.loads(text)
                    if doc.get("type") == "torrent" and "id" in doc:
                        self.answer(int(doc["id"]), Answer.RETRY)  # not taken: fetched again
                except Exception:  # noqa: BLE001
                    pass
                continue
            if event is None:
                try:
                    kind = json.loads(text).get("type")
                except Exception:  # noqa: BLE001
                    kind = None
                self._ignore_unknown(kind)
                continue
            return event

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """``for event in crawler.events(): ...``: :meth:`poll` until the crawler is shut
        down and drained (or ``timeout`` seconds pass without an event)."""
        while True:
            try:
                event = self.poll(timeout)
            except StateError:
                return
            if event is None:
                return
            yield event

    def answer(self, event_id: Union[int, GateRequest, TorrentRequest], answer: Union[Answer, bool]) -> bool:
        """Answers a polled gate (True: fetch) or torrent (an :class:`Answer`, or a bool)
        request, by its id or the request itself. False when it was answered already or its
        time ran out."""
        if not isinstance(event_id, int):
            event_id = event_id.id
        return bool(self._call(self._native.answer, event_id, int(Answer.of(answer))))

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
        waits, and signal handlers run every few milliseconds: Ctrl-C raises
        KeyboardInterrupt at once, also while a callback is running (it finishes on its own
        thread). The crawler is then shut down (without waiting for anything) and the
        exception propagates; :meth:`close` waits for the callback."""
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
            self.wait()
        except BaseException:
            self.shutdown()  # never blocks
            raise

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the crawler has been shut down (or closed), at most ``timeout``
        seconds (None: no limit); signal handlers run meanwhile. True once shut down."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return bool(self._call(self._native.wait, ms))

    def shutdown(self) -> None:
        """Stops crawling and fetching and returns at once (it waits for nothing). Any thread,
        also inside a callback or a signal handler, any number of times; idempotent."""
        self._call(self._native.shutdown)

    def close(self, timeout: Optional[float] = CLOSE_TIMEOUT) -> None:
        """Shuts down and frees the crawler; afterwards no callback runs and nothing of the
        library runs. A callback that is running is waited for, at most ``timeout`` seconds
        (default 10; None: no limit): when it is still running then, :class:`CloseTimeoutError`
        (a :class:`StateError` and a ``TimeoutError``) is raised and the crawler is left shut
        down but not freed; call ``close()`` again later, or drop the object (it is then
        freed once the callback returns). Two closes at once are one. From inside a callback
        it only shuts down (the library cannot free itself from its own thread): the crawler
        is freed when the object is dropped or closed again elsewhere."""
        if self._native.closed:
            _open_crawlers.discard(self)
            return
        if _native.in_callback():
            self.shutdown()
            return
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        if not self._call(self._native.destroy, ms):
            raise CloseTimeoutError(_native.ERR_TIMEOUT, _native.status_name(_native.ERR_TIMEOUT),
                                    f"a callback is still running after {timeout} s: the crawler is "
                                    "shut down but not freed; close it again later")
        _open_crawlers.discard(self)

    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def __enter__(self) -> "Crawler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Dropped without close(): the extension frees the crawler as the object goes, or, when
    # a callback is running then, on a thread of its own once the callback returned.

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


__all__ = ["Crawler", "default_options", "DhtcError", "OptionsError", "StateError", "CloseTimeoutError",
           "CLOSE_TIMEOUT"]
