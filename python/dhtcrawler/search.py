"""``dhtcrawler.search``: the queries over the torrent database (``search``, ``torrent``,
``stats``...), kept under this name for code written against it. They live in
:mod:`dhtcrawler.app.search`."""

from .app.search import *  # noqa: F401,F403
from .app.search import __all__  # noqa: F401
