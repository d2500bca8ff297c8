"""``dhtcrawler.sinks``: where the application stores torrents (``SqliteSink``,
``PostgresSink``, ``JsonlSink``...), kept under this name for code written against it. They
live in :mod:`dhtcrawler.app.sinks`."""

from .app.sinks import *  # noqa: F401,F403
from .app.sinks import __all__  # noqa: F401
