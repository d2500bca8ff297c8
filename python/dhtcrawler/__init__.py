"""dhtcrawler: a BitTorrent DHT crawler (C++20 core, reached through its C ABI).

    import dhtcrawler

    with dhtcrawler.Crawler(port=6881) as crawler:
        @crawler.on_torrent
        def show(t: dhtcrawler.Torrent) -> None:
            print(t.info_hash, t.name, t.total_size)

        crawler.run()          # until crawler.shutdown() or Ctrl-C

A torrent callback with ``ack=True`` answers with a bool or an ``Answer`` (ACCEPT, REJECT,
or RETRY when it could not store the torrent now: it is fetched again).

See also ``dhtcrawler.aio`` (an async iterator of torrents) and ``migrate_store`` (the retry
store's tables without a crawler). This package is the binding; the ``dhtcrawler`` command,
its database layer and web server are an application built on it: ``dhtcrawler.app``.
"""

from . import _native
from ._crawler import CLOSE_TIMEOUT, Crawler, default_options, migrate_store
from ._errors import BindError, CloseTimeoutError, DhtcError, OptionsError, StateError, StoreError
from ._types import (FAILURE_CLASSES, Answer, Completion, Error, Event, GateRequest, Observation, Retry, Scrape, Torrent,
                     TorrentFile, TorrentRequest)

__version__: str = _native.version()
ABI_VERSION: int = _native.abi_version()

if ABI_VERSION != _native.ABI_VERSION:  # a library from another build next to the extension
    raise ImportError(f"libdhtcrawler ABI {ABI_VERSION} != the extension's {_native.ABI_VERSION}")

__all__ = [
    "Crawler", "default_options", "migrate_store", "CLOSE_TIMEOUT", "Answer", "Torrent", "TorrentFile", "Completion", "Retry",
    "Observation", "Scrape", "Error", "Event", "GateRequest", "TorrentRequest", "FAILURE_CLASSES",
    "DhtcError", "OptionsError", "BindError", "StateError", "StoreError", "CloseTimeoutError", "__version__",
    "ABI_VERSION",
]
