"""Torznab as Sonarr, Radarr and Prowlarr use it, on a fixture of real-world release names,
over `dhtcrawler serve` on SQLite and on PostgreSQL.

The request shapes are the apps' (their Newznab request generators): Prowlarr's indexer test
(t=caps, then t=search over its categories with extended=1, offset, limit), Sonarr's RSS
poll (t=tvsearch with its TV categories and no q), Sonarr's episode and season searches
(q, season, ep), Radarr's movie search (t=movie, q, year)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List
from urllib.parse import quote

import pytest

from webutil import Served, make_db, make_torrent, served_postgresql
from test_web_api import TZ, attrs_of, get, items_of

GB, MB = 1 << 30, 1 << 20


def _video(i: int, name: str, size: int = GB):
    return make_torrent(1000 + i, name, [(f"{name}/{name}.mkv", size), (f"{name}/{name}.nfo", 2000)])


FIXTURE = [
    # TV: episodes of two seasons, a multi-episode file, season packs
    *[_video(i, f"The.Expanse.S02E{e:02d}.1080p.WEB-DL.DDP5.1.H.264-NTb") for i, e in enumerate(range(1, 7))],
    *[_video(10 + i, f"The.Expanse.S03E{e:02d}.720p.HDTV.x264-AVS") for i, e in enumerate(range(1, 4))],
    _video(20, "The.Expanse.S01.COMPLETE.1080p.BluRay.x264-ROVERS", 30 * GB),
    _video(21, "The Expanse Season 2 S02 2160p AMZN WEB-DL x265 10bit HDR10 DDP5.1-Silence", 60 * GB),
    _video(22, "The.Expanse.S02E07E08.720p.WEB.h264-TBS"),
    _video(23, "Severance.S02E05.Trojans.Horse.2160p.ATVP.WEB-DL.DDP5.1.DV.H.265-FLUX"),
    # Movies
    _video(30, "Heat.1995.REMASTERED.1080p.BluRay.x264-AMIABLE", 12 * GB),
    _video(31, "Heat (2013) 720p WEBRip x264 - YIFY"),
    _video(32, "Dune.Part.Two.2024.2160p.WEB-DL.DDP5.1.Atmos.DV.HDR.H.265-FLUX", 20 * GB),
    _video(33, "Oppenheimer.2023.1080p.BluRay.DDP5.1.x265.10bit-GalaxyRG265", 5 * GB),
    # Music, software, e-books
    make_torrent(1040, "Pink Floyd - The Dark Side of the Moon (1973) [FLAC]",
                 [(f"DSOTM/0{k} - Track.flac", 40 * MB) for k in range(1, 9)]),
    make_torrent(1041, "Radiohead-OK_Computer-WEB-1997-ENRAGED", [(f"OKC/0{k}-track.mp3", 9 * MB) for k in range(1, 9)]),
    make_torrent(1042, "ubuntu-24.04-desktop-amd64.iso", [("ubuntu-24.04-desktop-amd64.iso", 6 * GB)]),
    make_torrent(1043, "Andy Weir - Project Hail Mary (2021) (retail) (epub)",
                 [("PHM/Project Hail Mary.epub", 3 * MB)]),
    # The newest: filler that is not TV (the feed without q must still find 5 TV items)
    *[make_torrent(1100 + k, f"dataset part {k:02d}", [(f"data/{k:02d}.csv", 1000 + k)]) for k in range(30)],
]


def xml(server: Served, query: str) -> ET.Element:
    code, _kind, body = get(server.url + "torznab/api?" + query)
    assert code == 200, body
    return ET.fromstring(body)


def titles(server: Served, query: str) -> List[str]:
    _channel, items = items_of(xml(server, query))
    return [i.findtext("title") for i in items]


def check_arr_requests(server: Served) -> None:
    # Prowlarr's indexer test: caps first.
    caps = xml(server, "t=caps&apikey=x")
    searching = caps.find("searching")
    assert searching is not None
    params = {e.tag: set(e.get("supportedParams", "").split(",")) for e in searching}
    assert {"q", "season", "ep"} <= params["tv-search"] and {"q", "year"} <= params["movie-search"]
    assert all(searching.find(m).get("available") == "yes" for m in ("music-search", "book-search"))
    subcats = {s.get("id") for s in caps.iter("subcat")}
    assert {"5030", "5040", "5045", "2030", "2040", "2045", "3040", "7020"} <= subcats
    # ... then a search over its categories, without q.
    rss = xml(server, "t=search&cat=2000,5000,3000,7000&extended=1&apikey=x&offset=0&limit=100")
    assert rss.find("channel") is not None and len(items_of(rss)[1]) > 0

    # Sonarr's RSS poll: the newest TV, 5 of them although the newest torrents are not TV.
    channel, items = items_of(xml(server, "t=search&cat=5000&limit=5"))
    assert len(items) == 5
    total = int(channel.find(f"{TZ}response").get("total"))
    assert total == sum(1 for t in FIXTURE if t.name.startswith(("The.Expanse", "The Expanse", "Severance")))
    _channel, items = items_of(xml(server, "t=tvsearch&cat=5030,5040,5045&extended=1&apikey=x&offset=0&limit=100"))
    assert items and all(attrs_of(i)["category"][-1] == "5000" for i in items)
    for item in items:  # what the apps read, on every item; season and episode on TV items
        a = attrs_of(item)
        assert {"infohash", "magneturl", "size", "category"} <= set(a)
        assert a["magneturl"][0].startswith("magnet:?xt=urn:btih:") and int(a["size"][0]) > 0
        assert "season" in a
        assert "seeders" not in a  # unknown: left out

    # Sonarr's episode search: that episode only (a two-episode file holding it counts).
    q = quote("The Expanse")
    base = f"t=tvsearch&cat=5030,5040,5045&extended=1&apikey=x&offset=0&limit=100&q={q}"
    assert titles(server, base + "&season=2&ep=5") == ["The.Expanse.S02E05.1080p.WEB-DL.DDP5.1.H.264-NTb"]
    assert titles(server, base + "&season=2&ep=8") == ["The.Expanse.S02E07E08.720p.WEB.h264-TBS"]
    _channel, items = items_of(xml(server, base + "&season=2&ep=5"))
    a = attrs_of(items[0])
    assert (a["season"], a["episode"], a["resolution"], a["category"]) == (["2"], ["5"], ["1080p"], ["5040", "5000"])
    # Its season search: the season's episodes and packs, no other season.
    got = titles(server, base + "&season=2")
    assert len(got) == 6 + 1 + 1 and "The Expanse Season 2 S02 2160p AMZN WEB-DL x265 10bit HDR10 DDP5.1-Silence" in got
    assert not any("S03" in t or "S01" in t for t in got)
    # A daily show's episode ("MM/DD") is not applied rather than refused.
    assert len(titles(server, base + "&season=2024&ep=06/12")) > 0

    # Radarr's movie search, with the year.
    assert titles(server, "t=movie&cat=2000&extended=1&apikey=x&offset=0&limit=100&q=Heat&year=1995") == [
        "Heat.1995.REMASTERED.1080p.BluRay.x264-AMIABLE"]
    # One type per category.
    for cat, expected in (("2000", {"Heat.1995.REMASTERED.1080p.BluRay.x264-AMIABLE", "Heat (2013) 720p WEBRip x264 - YIFY",
                                    "Dune.Part.Two.2024.2160p.WEB-DL.DDP5.1.Atmos.DV.HDR.H.265-FLUX",
                                    "Oppenheimer.2023.1080p.BluRay.DDP5.1.x265.10bit-GalaxyRG265"}),
                          ("3000", {"Pink Floyd - The Dark Side of the Moon (1973) [FLAC]",
                                    "Radiohead-OK_Computer-WEB-1997-ENRAGED"}),
                          ("7000", {"Andy Weir - Project Hail Mary (2021) (retail) (epub)"}),
                          ("3040", {"Pink Floyd - The Dark Side of the Moon (1973) [FLAC]"}),
                          ("2045", {"Dune.Part.Two.2024.2160p.WEB-DL.DDP5.1.Atmos.DV.HDR.H.265-FLUX"})):
        assert set(titles(server, f"t=search&cat={cat}&limit=100")) == expected, cat


def test_arr_requests_on_sqlite(tmp_path: Path) -> None:
    db = make_db(tmp_path / "arr.sqlite", FIXTURE)
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    try:
        check_arr_requests(s)
    finally:
        assert s.stop() == 0


def test_arr_requests_on_postgresql() -> None:
    with served_postgresql("arr", FIXTURE) as (s, _uri):
        check_arr_requests(s)


def test_the_json_api_takes_the_same_filters(tmp_path: Path) -> None:
    import json

    db = make_db(tmp_path / "api.sqlite", FIXTURE)
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    try:
        def search(query: str) -> Dict:
            code, _kind, body = get(s.url + "api/v1/search?" + query)
            assert code == 200, body
            return json.loads(body)

        doc = search("q=expanse&season=2&episode=5")
        assert [r["name"] for r in doc["results"]] == ["The.Expanse.S02E05.1080p.WEB-DL.DDP5.1.H.264-NTb"]
        r = doc["results"][0]
        assert (r["content_type"], r["season"], r["episode"], r["resolution"], r["category"]) == (
            "tv_show", 2, 5, "1080p", 5040)
        assert search("type=movie&year=1995")["total"] == 1
        assert search("cat=3040")["total"] == 1 and search("type=music,ebook")["total"] == 3
        assert search("resolution=2160p&type=tv_show")["total"] == 2
        code, _kind, body = get(s.url + "api/v1/search?type=cartoon")
        assert code == 400 and b"type" in body
    finally:
        assert s.stop() == 0


def test_the_search_command_takes_the_same_filters(tmp_path: Path) -> None:
    import json

    from cliutil import run_cli

    db = str(make_db(tmp_path / "cli.sqlite", FIXTURE))
    out = run_cli("search", "--db", db, "expanse", "--season", "2", "--episode", "5", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["season"], r["episode"]) for r in rows] == [(2, 5)]
    out = run_cli("search", "--db", db, "--type", "movie", "--year", "1995")
    assert out.returncode == 0 and "1 found" in out.stdout and "movie" in out.stdout, out.stdout
    out = run_cli("search", "--db", db, "--cat", "7000")
    assert "1 found" in out.stdout and "Project Hail Mary" in out.stdout
