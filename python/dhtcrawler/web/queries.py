"""``dhtcrawler.web.queries``, kept under this name: see :mod:`dhtcrawler.app.web.queries`."""

from ..app.web.queries import (DEFAULT_SORT, MAX_FILES, MAX_LIMIT, MAX_QUERY_CHARS, MAX_QUERY_WORDS,  # noqa: F401
                               SORTS, is_info_hash, largest_files, search, stats, torrent)
