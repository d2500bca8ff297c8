"""``dhtcrawler.web.categories``, kept under this name: see :mod:`dhtcrawler.app.web.categories`."""

from ..app.web.categories import *  # noqa: F401,F403
