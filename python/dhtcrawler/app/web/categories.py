"""A Torznab (Newznab) category for a torrent, from its file names and sizes.

The rule (docs/api.md): each file's extension names a kind (video, audio, software, book);
the kind holding the most bytes wins; a torrent without a known kind is 8000 (Other). Video
is 5000 (TV) when the torrent's name or its largest video file has an episode mark (S01E02,
1x02, "Season 3", "Episode 4"), else 2000 (Movies).
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

MOVIES, AUDIO, PC, TV, BOOKS, OTHER = 2000, 3000, 4000, 5000, 7000, 8000

NAMES: Dict[int, str] = {MOVIES: "Movies", AUDIO: "Audio", PC: "PC", TV: "TV", BOOKS: "Books", OTHER: "Other"}

_KINDS: Dict[str, Tuple[str, ...]] = {
    "video": ("mkv", "mp4", "avi", "m4v", "mov", "wmv", "mpg", "mpeg", "ts", "m2ts", "webm", "flv", "vob",
              "ogv", "3gp", "rmvb"),
    "audio": ("mp3", "flac", "m4a", "aac", "ogg", "opus", "wav", "wma", "ape", "alac", "aiff", "dsf", "mka"),
    "software": ("exe", "msi", "dmg", "pkg", "deb", "rpm", "apk", "appimage", "iso", "img", "bin", "jar"),
    "book": ("epub", "mobi", "azw", "azw3", "pdf", "djvu", "fb2", "cbr", "cbz", "chm"),
}
_BY_EXT = {ext: kind for kind, exts in _KINDS.items() for ext in exts}
_KIND_CATEGORY = {"audio": AUDIO, "software": PC, "book": BOOKS}

EPISODE = re.compile(r"(?i)(?:\bS\d{1,2}\s?E\d{1,3}\b|\b\d{1,2}x\d{2,3}\b|\bseason[\s._-]*\d+|\bepisode[\s._-]*\d+)")


def kind_of(path: str) -> Optional[str]:
    name = path.rsplit("/", 1)[-1]
    if "." not in name:
        return None
    return _BY_EXT.get(name.rsplit(".", 1)[-1].lower())


def category(name: str, files: Iterable[Tuple[str, int]]) -> int:
    """The category of a torrent named ``name`` with these (path, size) files."""
    bytes_by_kind: Dict[str, int] = {}
    largest_video: Tuple[int, str] = (-1, "")
    for path, size in files:
        kind = kind_of(path)
        if kind is None:
            continue
        bytes_by_kind[kind] = bytes_by_kind.get(kind, 0) + max(int(size), 0)
        if kind == "video" and size > largest_video[0]:
            largest_video = (size, path)
    if not bytes_by_kind:
        return OTHER
    # Most bytes wins; ties go to the first kind in _KINDS' order.
    order: List[str] = list(_KINDS)
    kind = max(bytes_by_kind, key=lambda k: (bytes_by_kind[k], -order.index(k)))
    if kind == "video":
        return TV if EPISODE.search(name) or EPISODE.search(largest_video[1]) else MOVIES
    return _KIND_CATEGORY[kind]
