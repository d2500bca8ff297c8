"""Torznab answers (the Newznab-derived API that Sonarr, Radarr and Prowlarr speak): the
capabilities document, RSS 2.0 result feeds with torznab:attr elements, and error documents.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..classify import CATEGORY_NAMES

NS = "http://torznab.com/schemas/2015/feed"
ATOM = "http://www.w3.org/2005/Atom"
ET.register_namespace("torznab", NS)
ET.register_namespace("atom", ATOM)

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
# Each search function and the category it searches when the request names none.
SEARCH_FUNCTIONS = {"search": None, "tvsearch": 5000, "movie": 2000, "music": 3000, "book": 7000}

# Newznab error codes.
INCORRECT_CREDENTIALS = 100
MISSING_PARAMETER = 200
INCORRECT_PARAMETER = 201
NO_SUCH_FUNCTION = 202


def _xml(root: ET.Element) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8", xml_declaration=False)


def error(code: int, description: str) -> bytes:
    return _xml(ET.Element("error", code=str(code), description=description))


def caps(title: str, version: str) -> bytes:
    root = ET.Element("caps")
    ET.SubElement(root, "server", version=version, title=title)
    ET.SubElement(root, "limits", max=str(MAX_LIMIT), default=str(DEFAULT_LIMIT))
    searching = ET.SubElement(root, "searching")
    # What the database query honours (season, ep and year are parsed at ingest; no ids).
    for name, params in (("search", "q"), ("tv-search", "q,season,ep"), ("movie-search", "q,year"),
                         ("music-search", "q"), ("audio-search", "q"), ("book-search", "q")):
        ET.SubElement(searching, name, available="yes", supportedParams=params)
    cats = ET.SubElement(root, "categories")
    parent = None
    for cid, name in sorted(CATEGORY_NAMES.items()):
        if cid % 1000 == 0:
            parent = ET.SubElement(cats, "category", id=str(cid), name=name)
        else:
            assert parent is not None
            ET.SubElement(parent, "subcat", id=str(cid), name=name)
    return _xml(root)


def _rfc822(rfc3339: str) -> str:
    try:
        when = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        when = datetime.now(timezone.utc)
    return format_datetime(when, usegmt=True)


def feed(title: str, link: str, offset: int, total: int,
         items: Iterable[Tuple[Dict[str, Any], int]]) -> bytes:
    """An RSS 2.0 feed of (row, category) pairs, rows in the JSON API's torrent form."""
    rss = ET.Element("rss", {"version": "2.0"})
    channel = ET.SubElement(rss, "channel")
    ET.SubElement(channel, f"{{{ATOM}}}link", href=link, rel="self", type="application/rss+xml")
    ET.SubElement(channel, "title").text = title
    ET.SubElement(channel, "description").text = "Torrents found in the BitTorrent DHT by dhtcrawler"
    ET.SubElement(channel, "link").text = link
    ET.SubElement(channel, f"{{{NS}}}response", offset=str(offset), total=str(total))
    for row, cat in items:
        item = ET.SubElement(channel, "item")
        ET.SubElement(item, "title").text = row["name"]
        ET.SubElement(item, "guid", isPermaLink="false").text = row["info_hash"]
        ET.SubElement(item, "link").text = row["magnet"]
        ET.SubElement(item, "comments").text = f"{link.rstrip('/')}/torrent/{row['info_hash']}"
        ET.SubElement(item, "pubDate").text = _rfc822(row["first_seen"])
        ET.SubElement(item, "size").text = str(row["total_size"])
        ET.SubElement(item, "description").text = f"{row['num_files']} files, {row['version']}"
        ET.SubElement(item, "category").text = str(cat)
        ET.SubElement(item, "enclosure", url=row["magnet"], length=str(row["total_size"]),
                      type="application/x-bittorrent;x-scheme-handler/magnet")
        attrs: List[Tuple[str, Optional[Any]]] = [("category", cat)]
        if cat % 1000:
            attrs.append(("category", cat // 1000 * 1000))  # the parent too, as the apps filter on either
        attrs += [
            ("size", row["total_size"]), ("files", row["num_files"]),
            ("infohash", row["info_hash_v1"] or row["info_hash"]), ("magneturl", row["magnet"]),
            ("seeders", row.get("seeders")), ("leechers", row.get("leechers")),
        ]
        if row.get("seeders") is not None and row.get("leechers") is not None:
            attrs.append(("peers", row["seeders"] + row["leechers"]))
        # What the name says (parsed at ingest), left out when unknown.
        attrs += [("season", row.get("season")), ("episode", row.get("episode")), ("year", row.get("year")),
                  ("resolution", row.get("resolution")), ("tag", row.get("tags"))]
        for name, value in attrs:
            if value is not None:  # unknown swarm counts are left out, not given as 0
                ET.SubElement(item, f"{{{NS}}}attr", name=name, value=str(value))
    return _xml(rss)
