"""dhtcrawler serve: the JSON API (validated against docs/api.schema.json), Torznab (checked
against the spec's required elements) and the API key policy, on a real SQLite file written
through SqliteSink, with the server as a real subprocess on loopback."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest

pytest.importorskip("starlette", reason="the serve extra (starlette, uvicorn) is not installed")
jsonschema = pytest.importorskip("jsonschema")

from conftest import ROOT  # noqa: E402
from webutil import CATALOGUE, Served, make_db, served_postgresql  # noqa: E402

from dhtcrawler.app.web import auth, categories  # noqa: E402

SCHEMA = json.loads((ROOT / "docs" / "api.schema.json").read_text())
TZ = "{http://torznab.com/schemas/2015/feed}"


def validate(doc: Any, definition: str) -> None:
    jsonschema.validate(doc, {"$ref": f"#/$defs/{definition}", **SCHEMA})


def get(url: str, headers: Optional[Dict[str, str]] = None) -> Tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def get_json(url: str, status: int = 200) -> Any:
    code, kind, body = get(url)
    assert code == status, body
    assert kind.startswith("application/json")
    return json.loads(body)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_db(tmp_path_factory.mktemp("web") / "crawl.sqlite")


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Served]:
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    yield s
    assert s.stop() == 0


# ---- JSON API -------------------------------------------------------------------------------

def test_search_finds_names_and_file_paths(server: Served) -> None:
    doc = get_json(server.url + "api/v1/search?q=album")
    validate(doc, "search")
    assert doc["total"] == 1 and doc["total_is_estimate"] is False and doc["results"][0]["name"] == "Free Music Album"
    # A word found only in a file path.
    doc = get_json(server.url + "api/v1/search?q=wonderland")
    assert [r["name"] for r in doc["results"]] == ["Public Domain Books"]
    # Every word must match; case does not matter.
    assert get_json(server.url + "api/v1/search?q=BUCK+1080p")["total"] == 1
    assert get_json(server.url + "api/v1/search?q=buck+nothing")["total"] == 0
    # LIKE wildcards in the query are literal.
    assert get_json(server.url + "api/v1/search?q=%25")["total"] == 0
    # CJK.
    assert get_json(server.url + "api/v1/search?q=" + urllib.request.quote("日本語"))["total"] == 1


def test_search_pages_and_sorts(server: Served) -> None:
    first = get_json(server.url + "api/v1/search?q=filler&limit=20&sort=name")
    validate(first, "search")
    assert first["total"] == 45 and len(first["results"]) == 20
    names = [r["name"] for r in first["results"]]
    assert names == sorted(names)
    last = get_json(server.url + "api/v1/search?q=filler&limit=20&offset=40&sort=name")
    assert [r["name"] for r in last["results"]] == [f"filler torrent {k:02d}" for k in range(40, 45)]
    everything = get_json(server.url + "api/v1/search?limit=100&sort=size")
    assert everything["total"] == len(CATALOGUE)
    sizes = [r["total_size"] for r in everything["results"]]
    assert sizes == sorted(sizes, reverse=True)
    for r in everything["results"]:
        assert r["seeders"] is None and r["leechers"] is None  # unknown, not zero


def test_torrent_by_any_hash(server: Served) -> None:
    hybrid = next(t for t in CATALOGUE if t.version == "hybrid")
    for h in (hybrid.info_hash_v1, hybrid.info_hash_v2, hybrid.info_hash_v1.upper()):
        doc = get_json(server.url + f"api/v1/torrents/{h}")
        validate(doc, "torrent")
        assert doc["name"] == hybrid.name
        assert doc["magnet"].startswith(f"magnet:?xt=urn:btih:{hybrid.info_hash_v1}&xt=urn:btmh:1220")
    v2 = next(t for t in CATALOGUE if t.version == "v2")
    doc = get_json(server.url + f"api/v1/torrents/{v2.info_hash_v2}")
    validate(doc, "torrent")
    assert [f["path"] for f in doc["files"]] == [f.path for f in v2.files]
    assert doc["files_truncated"] is False and doc["files_stored"] == len(v2.files)
    # A v2-only torrent's stored key is a truncated v2 hash: its magnet link names the v2 hash only.
    assert doc["magnet"].startswith(f"magnet:?xt=urn:btmh:1220{v2.info_hash_v2}&dn=") and "btih" not in doc["magnet"]
    missing = get_json(server.url + "api/v1/torrents/" + "0" * 40, status=404)
    validate(missing, "error")


def test_stats(server: Served) -> None:
    doc = get_json(server.url + "api/v1/stats")
    validate(doc, "stats")
    assert doc["torrents"] == len(CATALOGUE)
    assert doc["files"] == sum(t.num_files for t in CATALOGUE)
    assert doc["versions"] == {"v1": len(CATALOGUE) - 2, "v2": 1, "hybrid": 1, "unknown": 0}
    assert doc["files_stored"] == doc["files"]
    assert doc["oldest_first_seen"] == doc["first_seen"] and doc["newest_last_seen"] == doc["last_seen"]


def test_facets(server: Served, db: Path) -> None:
    from dhtcrawler.app.search import facets

    assert get_json(server.url + "api/v1/facets") == facets(str(db))


def test_facets_are_counted_once_per_ttl_and_again_after_a_failure() -> None:
    """The server counts the facets at most once per FACETS_TTL_SECS: callers at once wait for
    one count; a count that failed is tried again by the next caller."""
    import threading

    from dhtcrawler.app.web.app import Cached

    calls = []
    release = threading.Event()

    def count() -> Dict[str, int]:
        calls.append(1)
        release.wait(10)
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return {"n": len(calls)}

    cached = Cached(3600, count)
    got: list = []
    readers = [threading.Thread(target=lambda: got.append(cached.get())) for _ in range(4)]
    for t in readers:
        t.start()
    release.set()
    for t in readers:
        t.join(10)
    assert got == [{"n": 1}] * 4 and len(calls) == 1
    cached.at = float("-inf")  # as if the time to live had passed
    with pytest.raises(RuntimeError):
        cached.get()
    assert cached.get() == {"n": 3}


@pytest.mark.parametrize("query, parameter", [
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("offset=-1", "offset"),
    ("sort=popularity", "sort"), ("q=" + "x" * 300, "q"),
])
def test_bad_parameters_are_400_with_a_json_error(server: Served, query: str, parameter: str) -> None:
    doc = get_json(server.url + "api/v1/search?" + query, status=400)
    validate(doc, "error")
    assert doc["error"]["parameter"] == parameter


def test_bad_info_hash_is_400(server: Served) -> None:
    doc = get_json(server.url + "api/v1/torrents/not-a-hash", status=400)
    validate(doc, "error")


# ---- Torznab --------------------------------------------------------------------------------

def torznab(server: Served, query: str, status: int = 200) -> ET.Element:
    code, kind, body = get(server.url + "torznab/api?" + query)
    assert code == status, body
    assert "xml" in kind
    assert body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    return ET.fromstring(body)


def test_torznab_caps(server: Served) -> None:
    caps = torznab(server, "t=caps")
    assert caps.tag == "caps"
    assert caps.find("server") is not None
    limits = caps.find("limits")
    assert limits is not None and int(limits.get("max", "0")) >= int(limits.get("default", "0")) > 0
    searching = caps.find("searching")
    assert searching is not None
    for mode in ("search", "tv-search", "movie-search"):
        element = searching.find(mode)
        assert element is not None and element.get("available") == "yes"
        assert "q" in element.get("supportedParams", "").split(",")
    ids = {c.get("id") for c in caps.findall("categories/category")}
    assert {"2000", "3000", "4000", "5000", "7000", "8000"} <= ids
    for c in caps.findall("categories/category"):
        assert c.get("name")


def items_of(rss: ET.Element) -> Any:
    assert rss.tag == "rss" and rss.get("version") == "2.0"
    channel = rss.find("channel")
    assert channel is not None
    for required in ("title", "description", "link"):  # RSS 2.0's required channel elements
        assert channel.find(required) is not None
    return channel, channel.findall("item")


def attrs_of(item: ET.Element) -> Dict[str, list]:
    out: Dict[str, list] = {}
    for a in item.findall(f"{TZ}attr"):
        out.setdefault(a.get("name"), []).append(a.get("value"))
    return out


@pytest.mark.parametrize("function", ["search", "tvsearch"])  # t=movie searches movies: test_torznab_arr.py
def test_torznab_search_items(server: Served, function: str) -> None:
    channel, items = items_of(torznab(server, f"t={function}&q=show"))
    response = channel.find(f"{TZ}response")
    assert response is not None and response.get("offset") == "0" and response.get("total") == "1"
    assert len(items) == 1
    item = items[0]
    show = next(t for t in CATALOGUE if t.name.startswith("Some.Show"))
    assert item.findtext("title") == show.name
    assert item.findtext("guid")
    assert item.findtext("pubDate")
    enclosure = item.find("enclosure")
    assert enclosure is not None
    assert enclosure.get("type") in ("application/x-bittorrent", "application/x-bittorrent;x-scheme-handler/magnet")
    assert enclosure.get("url", "").startswith("magnet:?") and enclosure.get("length") is not None
    attrs = attrs_of(item)
    # The spec's required attributes (size, category) and the torrent ones we know.
    assert attrs["size"] == [str(show.total_size)]
    assert attrs["category"] == ["5040", "5000"]  # its subcategory (720p: HD), then the parent
    assert (attrs["season"], attrs["episode"], attrs["resolution"]) == (["1"], ["2"], ["720p"])
    assert attrs["infohash"] == [show.info_hash_v1]
    assert attrs["magneturl"][0].startswith(f"magnet:?xt=urn:btih:{show.info_hash_v1}")
    assert "seeders" not in attrs and "peers" not in attrs  # unknown: left out, not zero


def test_torznab_categories_and_filter(server: Served) -> None:
    _channel, items = items_of(torznab(server, "t=search&limit=100"))
    by_title = {i.findtext("title"): attrs_of(i)["category"][-1] for i in items}  # the parent
    assert by_title["Big.Buck.Bunny.2008.1080p"] == "2000"
    assert by_title["Some.Show.S01E02.720p"] == "5000"
    assert by_title["Free Music Album"] == "3000"
    assert by_title["debian-12.4.0-amd64-netinst"] == "4000"
    assert by_title["Public Domain Books"] == "7000"
    assert by_title["Random dataset"] == "8000"
    _channel, items = items_of(torznab(server, "t=tvsearch&cat=5030,5040&limit=100"))
    assert [i.findtext("title") for i in items] == ["Some.Show.S01E02.720p"]


def test_torznab_errors(server: Served) -> None:
    for query, code, status in (("", "200", 400), ("t=register", "202", 400), ("t=search&limit=-1", "201", 400),
                                ("t=search&cat=tv", "201", 400)):
        error = torznab(server, query, status=status)
        assert error.tag == "error" and error.get("code") == code and error.get("description")


def test_category_rule() -> None:
    assert categories.category("x", [("a.mkv", 10), ("b.mp3", 5)]) == categories.MOVIES
    assert categories.category("Show 1x03", [("a.mkv", 10)]) == categories.TV
    assert categories.category("x", [("Season 2/ep.mkv", 10)]) == categories.TV
    assert categories.category("x", [("a.mkv", 1), ("b.flac", 5)]) == categories.AUDIO
    assert categories.category("x", [("setup.EXE", 1)]) == categories.PC
    assert categories.category("x", [("a.cbz", 1)]) == categories.BOOKS
    assert categories.category("x", [("README", 1), ("a.txt", 2)]) == categories.OTHER
    assert categories.category("x", []) == categories.OTHER


# ---- auth -----------------------------------------------------------------------------------

def test_auth_policy() -> None:
    assert not auth.auth_required("127.0.0.1") and not auth.auth_required("::1")
    assert not auth.auth_required("127.3.4.5") and not auth.auth_required("localhost")
    for host in ("0.0.0.0", "::", "192.0.2.1", "example.invalid"):
        assert auth.auth_required(host)
    assert auth.auth_required("127.0.0.1", "on") and not auth.auth_required("192.0.2.1", "off")
    assert auth.choose_key(None, {auth.ENV_KEY: "k"}) == ("k", False)
    key, generated = auth.choose_key(None, {})
    assert generated and len(key) >= 24


def test_loopback_with_auth_on_refuses_without_the_key(db: Path) -> None:
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0", "--auth", "on"],
               env={auth.ENV_KEY: "sekrit-key"})
    try:
        assert s.api_key is None  # taken from the environment, not printed
        code, _kind, body = get(s.url + "api/v1/stats")
        assert code == 401
        validate(json.loads(body), "error")
        code, _kind, body = get(s.url + "torznab/api?t=caps")
        assert code == 401 and ET.fromstring(body).get("code") == "100"
        assert get(s.url + "api/v1/stats?apikey=wrong")[0] == 401
        assert get(s.url + "api/v1/stats?apikey=sekrit-key")[0] == 200
        assert get(s.url + "torznab/api?t=caps&apikey=sekrit-key")[0] == 200
        assert get(s.url + "api/v1/stats", {"X-Api-Key": "sekrit-key"})[0] == 200
        basic = base64.b64encode(b"anyone:sekrit-key").decode()
        assert get(s.url, {"Authorization": "Basic " + basic})[0] == 200
        assert get(s.url + "static/style.css")[0] == 401
    finally:
        assert s.stop() == 0


NETNS_PROBE = ROOT / "tests" / "python" / "netns_auth_probe.py"


def test_off_loopback_a_request_without_the_key_is_refused(db: Path) -> None:
    """A real server on a non-loopback address (192.0.2.1, TEST-NET-1, which exists only in
    a network namespace of this test), with no --auth flag: the default asks for the key."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a private network namespace")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a network namespace here (unshare -n needs root or user namespaces): "
                    + probe.stderr.decode(errors="replace").strip())
    out = subprocess.run(["unshare", "-n", sys.executable, str(NETNS_PROBE), str(db)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["url"].startswith("http://192.0.2.1:")
    assert result["key_printed"]  # generated, printed once
    assert result["without_key"] == 401
    assert result["torznab_without_key"] == 401
    assert result["wrong_key"] == 401
    assert result["with_key"] == 200
    assert result["exit"] == 0


# ---- serve --store (PostgreSQL, DHTC_TEST_PG) -----------------------------------------------

def test_serve_store_postgresql() -> None:
    """The same API and Torznab over a fleet's PostgreSQL written through PostgresSink."""
    from urllib.parse import urlsplit

    with served_postgresql("serve", CATALOGUE) as (s, uri):
        password = urlsplit(uri).password
        assert not password or f":{password}@" not in "".join(s.lines)  # the start line hides it
        doc = get_json(s.url + "api/v1/search?q=album")
        validate(doc, "search")
        assert [r["name"] for r in doc["results"]] == ["Free Music Album"]
        assert get_json(s.url + "api/v1/search?q=wonderland")["results"][0]["name"] == "Public Domain Books"
        names = [r["name"] for r in get_json(s.url + "api/v1/search?q=filler&limit=20&sort=name")["results"]]
        assert names == [f"filler torrent {k:02d}" for k in range(20)]
        hybrid = next(t for t in CATALOGUE if t.version == "hybrid")
        doc = get_json(s.url + f"api/v1/torrents/{hybrid.info_hash_v2}")
        validate(doc, "torrent")
        assert doc["name"] == hybrid.name and doc["files_truncated"] is False
        stats = get_json(s.url + "api/v1/stats")
        validate(stats, "stats")
        assert stats["torrents"] == len(CATALOGUE) and stats["versions"]["hybrid"] == 1
        _channel, items = items_of(torznab(s, "t=tvsearch&cat=5040&limit=100"))
        assert [i.findtext("title") for i in items] == ["Some.Show.S01E02.720p"]


def test_serve_store_unreachable_is_a_start_failure(tmp_path: Path) -> None:
    from cliutil import run_cli

    out = run_cli("serve", "--store", "postgresql://nobody:pw@127.0.0.1:1/none", "--listen", "127.0.0.1:0")
    assert out.returncode == 1 and "--store" in out.stderr and "pw" not in out.stderr, out.stderr
    out = run_cli("serve", "--store", "postgresql://nobody@127.0.0.1:1/none", "--db", str(tmp_path / "x.sqlite"))
    assert out.returncode == 2 and "not both" in out.stderr, out.stderr


def test_the_listening_socket_says_it_is_tcp() -> None:
    """asyncio turns Nagle's algorithm off only on connections of a socket created as
    IPPROTO_TCP; with it on, a kept-alive client waited for its own delayed ACK (40 ms)
    before each response's body."""
    import socket

    from dhtcrawler.app.web.server import bind

    sock = bind(("127.0.0.1", 0))
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
