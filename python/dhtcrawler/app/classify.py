"""What a torrent is, decided once at ingest from its name, its files and its size.

:func:`classify` parses the release name with parse-torrent-title (PTN: pure Python, MIT,
no dependencies; why this parser: docs/indexer.md) and decides a content type the way
bitmagnet names them: ``movie``, ``tv_show``, ``music``, ``ebook``, ``comic``,
``audiobook``, ``software``, ``game``, ``xxx`` (None: nothing says). ``anime`` is a tag.
Its result is the parsed columns of the ``torrents`` table (schema.py, version 7), with
the Torznab category the *arr apps filter on.

The decision, in order: adult keywords or studios; then the kind of file holding the most
bytes (video, audio, audiobook, e-book, comic, software, disk image, archive) refined by
keywords in the name (a disk image with a repacker's name is a game, an mp3 set marked
"Audiobook" an audiobook) and by sizes (a disk image of 20 GiB or more is a game); a video
with a season or episode mark is a TV show, else a movie. Without files of a known kind,
keywords alone decide.

The parser runs on at most MAX_NAME characters: its cost on a hostile name stays bounded.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import PTN  # parse-torrent-title

__all__ = ["classify", "valid_parsed", "category", "CONTENT_TYPES", "COLUMNS", "PARSER_VERSION", "MAX_NAME", "CATEGORY_NAMES",
           "TYPE_CATEGORIES"]

#: Bumped when the rules change: rows parsed by an older version are parsed again by the
#: backfill (``dhtcrawler reparse``).
PARSER_VERSION = 2  # 2: fansub absolute episodes drop a title's number as season; "N Episodes" is a count
MAX_NAME = 300

CONTENT_TYPES = ("movie", "tv_show", "music", "ebook", "comic", "audiobook", "software", "game", "xxx")

#: The parsed columns of ``torrents``, in the order classify() fills them.
COLUMNS = ("content_type", "category", "title", "year", "season", "season_end", "episode", "episode_end",
           "resolution", "source", "video_codec", "release_group", "languages", "tags", "parsed")

# ---- Torznab categories -----------------------------------------------------------------

CATEGORY_NAMES: Dict[int, str] = {
    1000: "Console", 2000: "Movies", 2030: "Movies/SD", 2040: "Movies/HD", 2045: "Movies/UHD",
    3000: "Audio", 3010: "Audio/MP3", 3030: "Audio/Audiobook", 3040: "Audio/Lossless",
    4000: "PC", 4030: "PC/Mac", 4050: "PC/Games", 5000: "TV", 5030: "TV/SD", 5040: "TV/HD", 5045: "TV/UHD",
    5070: "TV/Anime", 6000: "XXX", 7000: "Books", 7020: "Books/EBook", 7030: "Books/Comics", 8000: "Other",
}
#: The content types under each parent category (the Torznab filter on a parent).
TYPE_CATEGORIES: Dict[int, Tuple[str, ...]] = {
    1000: (), 2000: ("movie",), 3000: ("music", "audiobook"), 4000: ("software", "game"), 5000: ("tv_show",),
    6000: ("xxx",), 7000: ("ebook", "comic"), 8000: (),
}
_SD, _HD, _UHD = ("480p", "576p", "360p", "240p"), ("720p", "1080p", "1080i"), ("2160p", "4320p")


def category(content_type: Optional[str], resolution: Optional[str] = None, tags: str = "",
             lossless: bool = False, mac: bool = False) -> int:
    """The Torznab category (a subcategory when one applies) of a classified torrent."""
    def by_res(sd: int, hd: int, uhd: int, parent: int) -> int:
        return sd if resolution in _SD else hd if resolution in _HD else uhd if resolution in _UHD else parent

    if content_type == "tv_show":
        return 5070 if "anime" in tags.split(",") else by_res(5030, 5040, 5045, 5000)
    if content_type == "movie":
        return by_res(2030, 2040, 2045, 2000)
    if content_type == "music":
        return 3040 if lossless else 3010
    return {"audiobook": 3030, "ebook": 7020, "comic": 7030, "software": 4030 if mac else 4000,
            "game": 4050, "xxx": 6000}.get(content_type or "", 8000)


# ---- file kinds ---------------------------------------------------------------------------

_KINDS: Dict[str, Tuple[str, ...]] = {
    "video": ("mkv", "mp4", "avi", "m4v", "mov", "wmv", "mpg", "mpeg", "ts", "m2ts", "webm", "flv", "vob", "ogv",
              "3gp", "rmvb", "divx"),
    "audio": ("mp3", "flac", "m4a", "aac", "ogg", "opus", "wav", "wma", "ape", "alac", "aiff", "dsf", "dff",
              "wv", "mka"),
    "audiobook": ("m4b", "aax"),
    "ebook": ("epub", "mobi", "azw", "azw3", "pdf", "djvu", "fb2", "chm", "lit", "kfx"),
    "comic": ("cbr", "cbz", "cb7", "cbt"),
    "software": ("exe", "msi", "dmg", "pkg", "deb", "rpm", "apk", "appimage", "xapk"),
    "disk": ("iso", "img", "bin", "nsp", "xci", "nsz", "cue", "mdf", "doi"),
    "archive": ("zip", "rar", "7z", "gz", "xz", "bz2", "tar", "zst"),
}
_BY_EXT = {ext: kind for kind, exts in _KINDS.items() for ext in exts}
_LOSSLESS = ("flac", "ape", "alac", "wav", "aiff", "dsf", "dff", "wv")


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


# ---- keywords -----------------------------------------------------------------------------

def _words(*alternatives: str) -> "re.Pattern[str]":
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(alternatives) + r")(?![a-z0-9])")


_XXX = _words(r"xxx", r"porn\w*", r"brazzers", r"realitykings", r"reality kings", r"blacked(?:raw)?", r"tushy",
              r"vixen", r"naughtyamerica", r"naughty america", r"bangbros", r"digitalplayground", r"evilangel",
              r"pornhub", r"onlyfans", r"hentai", r"jav")
_GAME = _words(r"fitgirl", r"dodi", r"elamigos", r"gog", r"rune", r"tenoke", r"codex", r"plaza", r"skidrow",
               r"empress", r"razor1911", r"flt", r"cpy", r"reloaded", r"prophet", r"darksiders", r"kaos", r"venom",
               r"nsp", r"xci", r"switch", r"ps[345]", r"xbox(?: ?360| one| series)?", r"wii ?u?", r"3ds",
               r"repack", r"launcher", r"game")
_AUDIOBOOK = _words(r"audio ?books?", r"unabridged", r"abridged", r"narrated by", r"read by", r"m4b", r"aax")
_COMIC = _words(r"comics?", r"graphic novel", r"manga", r"cb[rz7]", r"[\w-]*-empire", r"digital-empire")
_EBOOK = _words(r"e-?books?", r"epub", r"mobi", r"azw3?", r"fb2", r"pdf", r"retail", r"books?", r"magazines?",
                r"novels?", r"(?:january|february|march|april|may|june|july|august|september|october|november|"
                r"december) \d{4}")
_MUSIC = _words(r"flac", r"mp3", r"aac", r"alac", r"\d{2,3} ?kbps", r"\d+ ?cd", r"discography", r"album",
                r"lossless", r"24 ?bit", r"hi-?res", r"vinyl", r"va", r"ost", r"soundtrack", r"web-\d{4}")
_SOFTWARE = _words(r"x64", r"x86", r"win(?:dows)?(?: ?\d+)?", r"win64", r"macos", r"mac ?os ?x?", r"linux",
                   r"multilingual", r"portable", r"crack(?:ed)?", r"keygen", r"setup", r"installer", r"amd64",
                   r"x86_64", r"arm64", r"iso", r"pre-activated", r"activated", r"aio", r"plugins?", r"vst3?")
_MAC = _words(r"macos", r"mac ?os ?x?", r"dmg")
_VIDEO = _words(r"\d{3,4}[pi]", r"4k", r"uhd", r"blu-?ray", r"bdrip", r"brrip", r"web-?dl", r"web-?rip", r"hdtv",
                r"dvd(?:rip)?", r"x26[45]", r"h\.?26[45]", r"hevc", r"avc", r"xvid", r"remux", r"hdr(?:10)?")
_TV = _words(r"s\d{1,2}(?:e\d{1,4})?", r"\d{1,2}x\d{2,3}", r"season \d+", r"seasons", r"episodes? ?\d*",
             r"complete series", r"series \d+", r"e\d{2,4}", r"(?:19|20)\d{2} \d{2} \d{2}")
# Fansub releases: "[Group] Title - 12 (1080p)", the absolute episode number after a dash.
_FANSUB = re.compile(r"^\[[^\]]{2,40}\]\s*.+?(?:\s-\s(\d{1,4})(?:v\d)?(?=[\s\[(.]|$)|\bbatch\b|\bseason\b)",
                     re.IGNORECASE)
_ANIME_GROUPS = _words(r"subsplease", r"erai-raws", r"horriblesubs", r"judas", r"ember", r"asw", r"anime time",
                       r"commie", r"golumpa", r"yameii", r"nyaa", r"dual-audio", r"multiple subtitle")
# An explicit season mark; without one, a fansub's "Title No 8 - 19" is episode 19 of no
# season, not season 8.
_SEASON_MARK = _words(r"s\d{1,2}(?:e\d{1,4})?", r"\d{1,2}x\d{2,3}", r"season \d+", r"\d+(?:st|nd|rd|th) season")
# A count of episodes ("6 Episodes"), not an episode number; an explicit E06 still is one.
_EPISODE_COUNT = re.compile(r"\b(\d{1,4})\s*(?:episodes|eps)\b", re.IGNORECASE)
_EPISODE_MARK = _words(r"s\d{1,2}e\d{1,4}", r"e\d{2,4}", r"\d{1,2}x\d{2,3}", r"episode \d+", r"ep ?\d+")
# Hashes in brackets ([ABCD1234]) read as episode numbers otherwise.
_CRC = re.compile(r"\[[0-9A-Fa-f]{8}\]")
_DISK_GAME_BYTES = 20 << 30


def _norm(text: str) -> str:
    """Lower case, separators as spaces: the text the keyword patterns match."""
    return re.sub(r"[._\s]+", " ", text.lower())


def _kind_bytes(name: str, files: Sequence[Tuple[str, int]], total_size: int) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for path, size in files or [(name, total_size)]:
        kind = _BY_EXT.get(_ext(path))
        if kind is not None:
            out[kind] = out.get(kind, 0) + max(int(size), 0)
    return out


def _as_list(value: Any) -> List[int]:
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10000]


def _resolution(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    text = value.lower()
    return {"4k": "2160p", "uhd": "2160p", "8k": "4320p"}.get(text, text)


def _parse_name(name: str) -> Dict[str, Any]:
    try:
        return PTN.parse(_CRC.sub(" ", name[:MAX_NAME]), standardise=True)
    except Exception:  # noqa: BLE001 - a name the parser trips over is a name it says nothing of
        return {}


def classify(name: str, files: Iterable[Tuple[str, int]] = (), total_size: int = 0) -> Dict[str, Any]:
    """The parsed columns (COLUMNS) of a torrent named ``name`` with these (path, size)
    files (its largest ones are enough) and ``total_size`` bytes."""
    files = list(files)
    p = _parse_name(name)
    text = _norm(name[:MAX_NAME])
    kinds = _kind_bytes(name, files, total_size)
    seasons, episodes = _as_list(p.get("season")), _as_list(p.get("episode"))
    fansub = _FANSUB.match(name[:MAX_NAME])
    tags: List[str] = []
    if fansub or _ANIME_GROUPS.search(text):
        tags.append("anime")
        if fansub and fansub.group(1):  # the number after the dash is the episode
            episodes = [int(fansub.group(1))]
            if not _SEASON_MARK.search(text):
                seasons = []
    count = _EPISODE_COUNT.search(text)
    if count and not _EPISODE_MARK.search(text):
        episodes = [e for e in episodes if e != int(count.group(1))]
    tv_mark = bool(seasons or episodes or _TV.search(text))
    ctype = _content_type(text, kinds, tv_mark, bool(tags), p)
    if ctype != "tv_show" and "anime" in tags and ctype is not None and ctype != "movie":
        tags.remove("anime")
    if ctype != "tv_show":  # "Vol. 2", "Part 3", a track number: not a season or episode
        seasons, episodes = [], []
    year = p.get("year")
    year = year if isinstance(year, int) and 1800 <= year <= 2100 else None
    resolution = _resolution(p.get("resolution"))
    if ctype not in ("movie", "tv_show", "xxx"):
        resolution = None
    langs = p.get("language")
    languages = ",".join(langs) if isinstance(langs, list) else (langs if isinstance(langs, str) else None)
    exts = {_ext(path) for path, _ in files} or {_ext(name)}
    lossless = bool(exts & set(_LOSSLESS)) or "flac" in text or "lossless" in text
    mac = bool(_MAC.search(text)) or "dmg" in exts
    tags_text = ",".join(tags)
    title = p.get("title") if isinstance(p.get("title"), str) else None
    group = p.get("encoder") or p.get("group")
    return {
        "content_type": ctype,
        "category": category(ctype, resolution, tags_text, lossless, mac),
        "title": (title or None) and title.strip()[:MAX_NAME],
        "year": year,
        "season": min(seasons) if seasons else None,
        "season_end": max(seasons) if len(seasons) > 1 else None,
        "episode": min(episodes) if episodes else None,
        "episode_end": max(episodes) if len(episodes) > 1 else None,
        "resolution": resolution,
        "source": p.get("quality") if isinstance(p.get("quality"), str) else None,
        "video_codec": p.get("codec") if isinstance(p.get("codec"), str) else None,
        "release_group": group[:64] if isinstance(group, str) else None,
        "languages": languages,
        "tags": tags_text or None,
        "parsed": PARSER_VERSION,
    }


def _content_type(text: str, kinds: Dict[str, int], tv_mark: bool, anime: bool, p: Dict[str, Any]) -> Optional[str]:
    if _XXX.search(text):
        return "xxx"
    top = max(kinds, key=lambda k: kinds[k]) if kinds else None
    if top == "video":
        return "tv_show" if tv_mark or anime else "movie"
    if top == "audiobook" or (top == "audio" and _AUDIOBOOK.search(text)):
        return "audiobook"
    if top == "audio":
        return "music"
    if top == "comic":
        return "comic"
    if top == "ebook":
        return "comic" if _COMIC.search(text) else "ebook"
    if top in ("software", "disk", "archive"):
        if _GAME.search(text) or (top == "disk" and kinds[top] >= _DISK_GAME_BYTES):
            return "game"
        if top == "archive" and not _SOFTWARE.search(text):
            return _by_keywords(text, tv_mark, p)
        return "software"
    return _by_keywords(text, tv_mark, p)


def _by_keywords(text: str, tv_mark: bool, p: Dict[str, Any]) -> Optional[str]:
    """Without files of a known kind: a video release's marks, the name's keywords, then
    what the parser found."""
    video = bool(_VIDEO.search(text) or p.get("resolution") or p.get("codec"))
    if video and tv_mark:
        return "tv_show"
    for ctype, pattern in (("audiobook", _AUDIOBOOK), ("comic", _COMIC), ("game", _GAME), ("music", _MUSIC),
                           ("ebook", _EBOOK), ("software", _SOFTWARE)):
        if pattern.search(text):
            return ctype
    return "movie" if video else None


# ---- checking parsed fields from outside (a dump) ------------------------------------------

_INT_RANGES = {"year": (1800, 2100), "season": (0, 9999), "season_end": (0, 9999), "episode": (0, 9999),
               "episode_end": (0, 9999), "parsed": (1, PARSER_VERSION)}
_TEXTS = ("title", "resolution", "source", "video_codec", "release_group", "languages", "tags")


def valid_parsed(doc: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The parsed columns a dump line carries, when every one has its type and range (a
    known content type and category, years 1800..2100, seasons and episodes 0..9999, texts
    of at most MAX_NAME characters, a parser version this dhtcrawler knows); None otherwise:
    the torrent is then parsed again (the backfill), nothing of the line's fields kept."""
    out: Dict[str, Any] = {}
    ctype = doc.get("content_type")
    if ctype is not None and ctype not in CONTENT_TYPES:
        return None
    out["content_type"] = ctype
    cat = doc.get("category")
    if cat is not None and (type(cat) is not int or cat not in CATEGORY_NAMES):
        return None
    out["category"] = cat
    for name, (lo, hi) in _INT_RANGES.items():
        value = doc.get(name)
        if value is not None and (type(value) is not int or not lo <= value <= hi):
            return None
        out[name] = value
    for name in _TEXTS:
        value = doc.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_NAME):
            return None
        out[name] = value
    return out if out["parsed"] is not None else None
