"""The web server's application (Starlette): the search page, the JSON API, Torznab and,
beside a crawl, /metrics. See docs/api.md."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..classify import CONTENT_TYPES
from .. import search as _search
from ..search import QueryError
from .dashboard import dashboard_series
from . import auth, categories, queries as default_queries, torznab

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
DEFAULT_LIMIT = 20
MAX_OFFSET = 1_000_000
IDLE_CONNECTIONS = 4  # PostgreSQL connections kept between requests
# How long the facets' counts are served before they are counted again: they pass over every
# torrent (0.24 s at 1 M on PostgreSQL), for each search page loaded, and a few minutes' lag in the options
# of a select is not worth that.
FACETS_TTL_SECS = 300.0


class BadParameter(ValueError):
    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadParameter(name, f"{name} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise BadParameter(name, f"{name} must be in {lo}..{hi}, got {value}")
    return value


def _query(request: Request) -> str:
    q = request.query_params.get("q", "")
    if len(q) > default_queries.MAX_QUERY_CHARS:
        raise BadParameter("q", f"q is longer than {default_queries.MAX_QUERY_CHARS} characters")
    return q.strip()


def _bad(e: BadParameter) -> JSONResponse:
    return JSONResponse({"error": {"status": 400, "parameter": e.parameter, "message": str(e)}}, status_code=400)


class Cached:
    """A value computed at most once per ``ttl`` seconds; callers arriving while it is
    computed wait for that computation instead of starting their own."""

    def __init__(self, ttl: float, compute: Callable[[], Any]) -> None:
        self.ttl, self.compute = ttl, compute
        self.lock = threading.Lock()
        self.value: Any = None
        self.at = -math.inf

    def get(self) -> Any:
        with self.lock:
            if time.monotonic() - self.at >= self.ttl:
                self.value = self.compute()  # a failure keeps nothing: the next caller tries again
                self.at = time.monotonic()
            return self.value


def _not_found(message: str) -> JSONResponse:
    return JSONResponse({"error": {"status": 404, "message": message}}, status_code=404)


class AuthMiddleware:
    """Refuses every request without the key (401), when a key is required."""

    def __init__(self, app: Any, key: Optional[str]) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.key is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        headers = {k: v for k, v in request.headers.items()}
        if auth.key_matches(self.key, auth.presented_key(request.query_params, headers)):
            await self.app(scope, receive, send)
            return
        response: Response
        if scope["path"].startswith("/torznab"):
            response = Response(torznab.error(torznab.INCORRECT_CREDENTIALS, "Incorrect user credentials"),
                                status_code=401, media_type="application/xml")
        else:
            response = JSONResponse({"error": {"status": 401, "message": "an API key is required (?apikey=, "
                                               "the X-Api-Key header, or basic auth with the key as password)"}},
                                    status_code=401, headers={"WWW-Authenticate": 'Basic realm="dhtcrawler"'})
        await response(scope, receive, send)


def create_app(db: Any, *, api_key: Optional[str] = None, metrics: Optional[Callable[[], str]] = None,
               queries: ModuleType = default_queries, title: str = "dhtcrawler", version: str = "",
               rules: Any = None) -> Any:
    """The ASGI application over ``db`` (a dhtcrawler.app.db.Database: a crawl's SQLite file
    or a fleet's PostgreSQL, read-only; SQLite one connection per request: cheap, and safe beside a
    crawl writing the same database; PostgreSQL's kept between requests); ``api_key``, when
    given, is required on every request; ``metrics`` renders /metrics (beside a crawl);
    ``queries`` provides search(), torrent() and stats() (dhtcrawler.web.queries' signatures)."""

    idle: List[Any] = []  # PostgreSQL connections kept for the next requests
    idle_lock = threading.Lock()

    def served(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The content rules at serve time too (for rules newer than the rows: prune
        --apply-rules then makes it stick): what they drop or hide is never served."""
        if not rules:
            return rows
        return [r for r in rows if rules.judge(r["name"], [(r["name"], r["total_size"])], r["total_size"], r,
                                               count=False).action is None]

    def with_conn(fn: Callable[[Any], Any]) -> Any:
        # A SQLite file is opened per request (cheap). A PostgreSQL connection costs a TCP
        # and authentication round trip that dominated a search (measured: ~20 ms of a 23 ms
        # phrase query), so up to IDLE_CONNECTIONS are kept and reused while healthy.
        conn = None
        if not db.is_file:
            with idle_lock:
                conn = idle.pop() if idle else None
        reused, conn = conn is not None, conn or db.connect(read_only=True)
        try:
            try:
                return fn(conn)
            except Exception:
                if not reused or conn.healthy():
                    raise
                conn.close()  # a kept connection the server dropped meanwhile: once more, anew
                conn = db.connect(read_only=True)
                return fn(conn)
        finally:
            if db.is_file or not conn.healthy() or conn.in_transaction:
                conn.close()
            else:
                with idle_lock:
                    keep = len(idle) < IDLE_CONNECTIONS
                    if keep:
                        idle.append(conn)
                if not keep:
                    conn.close()

    facets = Cached(FACETS_TTL_SECS, lambda: with_conn(_search.facets))

    def api_search(request: Request) -> Response:
        try:
            q = _query(request)
            limit = _int(request, "limit", DEFAULT_LIMIT, 1, default_queries.MAX_LIMIT)
            offset = _int(request, "offset", 0, 0, MAX_OFFSET)
            sort = request.query_params.get("sort") or default_queries.DEFAULT_SORT
            if sort not in queries.SORTS:
                raise BadParameter("sort", f"sort must be one of {', '.join(queries.SORTS)}, got {sort!r}")
            filters = _api_filters(request)
        except BadParameter as e:
            return _bad(e)
        try:
            page = with_conn(lambda c: queries.search_page(c, q, limit, offset, sort, **filters))
        except QueryError as e:
            return _bad(BadParameter("q", str(e)))
        return JSONResponse({"query": q, "sort": sort, "limit": limit, "offset": offset, "total": page.total,
                             "total_is_estimate": page.total_is_estimate, "results": served(page.rows)})

    def api_torrent(request: Request) -> Response:
        info_hash = request.path_params["info_hash"].lower()
        if not queries.is_info_hash(info_hash):
            return _bad(BadParameter("info_hash", "info_hash must be 40 or 64 hex digits"))
        doc = with_conn(lambda c: queries.torrent(c, info_hash))
        if doc is not None and not served([doc]):
            doc = None
        if doc is None:
            return _not_found(f"no torrent {info_hash}")
        return JSONResponse(doc)

    def api_stats(_request: Request) -> Response:
        return JSONResponse(with_conn(queries.stats))

    def api_facets(_request: Request) -> Response:
        return JSONResponse(facets.get())

    def api_dashboard(_request: Request) -> Response:
        """What the dashboard draws: arrivals and size from the database; beside a crawl
        (metrics given), the pipeline funnel, failure classes, node pool and refusals."""
        doc = with_conn(lambda c: _search.arrivals(c, int(time.time())))
        doc["live"] = None
        if metrics is not None:
            try:
                doc["live"] = dashboard_series(metrics())
            except Exception:  # noqa: BLE001 - the crawler is closing: the database's part only
                pass
        return JSONResponse(doc)

    def xml(body: bytes, status: int = 200, rss: bool = False) -> Response:
        return Response(body, status_code=status,
                        media_type="application/rss+xml; charset=utf-8" if rss else "application/xml; charset=utf-8")

    def torznab_api(request: Request) -> Response:
        t = request.query_params.get("t")
        if not t:
            return xml(torznab.error(torznab.MISSING_PARAMETER, "Missing parameter (t)"), 400)
        if t == "caps":
            return xml(torznab.caps(title, version))
        if t not in torznab.SEARCH_FUNCTIONS:
            return xml(torznab.error(torznab.NO_SUCH_FUNCTION, f"No such function ({t})"), 400)
        try:
            q = _query(request)
            limit = _int(request, "limit", torznab.DEFAULT_LIMIT, 0, torznab.MAX_LIMIT) or torznab.DEFAULT_LIMIT
            offset = _int(request, "offset", 0, 0, MAX_OFFSET)
            wanted = _categories(request.query_params.get("cat", ""))
            filters = _torznab_filters(request)
        except BadParameter as e:
            return xml(torznab.error(torznab.INCORRECT_PARAMETER, f"Incorrect parameter ({e})"), 400)
        default_cat = torznab.SEARCH_FUNCTIONS[t]
        if not wanted and default_cat is not None:
            wanted = [default_cat]  # tvsearch without cat: TV
        # Categories, season, episode and year filter inside the query: a page of N is N
        # matches, and total counts them. Without words: the newest first (the RSS feed).
        sort = default_queries.DEFAULT_SORT if q else "first_seen"

        def run(conn: Any) -> Tuple[int, List[Tuple[Dict[str, Any], int]]]:
            # total: an estimate above the search's candidate window, as in the JSON API
            total, rows = queries.search(conn, q, limit, offset, sort, categories=wanted or None, **filters)
            items = []
            for row in served(rows):
                cat = row.get("category")
                if cat is None:  # not parsed yet (the backfill has not reached it): from its files
                    cat = categories.category(row["name"], queries.largest_files(conn, row["info_hash"], 500))
                items.append((row, cat))
            return total, items

        try:
            total, items = with_conn(run)
        except QueryError as e:  # a database from before the parsed names: run reparse
            return xml(torznab.error(torznab.INCORRECT_PARAMETER, f"Incorrect parameter ({e})"), 400)
        base = str(request.base_url).rstrip("/")
        return xml(torznab.feed(title, base + "/", offset, total, items), rss=True)

    def metrics_text(_request: Request) -> Response:
        assert metrics is not None
        try:
            body = metrics()
        except Exception as e:  # noqa: BLE001 - the crawler is closing
            return PlainTextResponse(str(e), status_code=503)
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    def page(name: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(_request: Request) -> Response:
            return FileResponse(STATIC / name, media_type="text/html; charset=utf-8")
        return serve

    routes = [
        Route("/", page("index.html")),
        Route("/torrent/{info_hash}", page("torrent.html")),
        Route("/api/v1/search", api_search),
        Route("/api/v1/torrents/{info_hash}", api_torrent),
        Route("/api/v1/stats", api_stats),
        Route("/api/v1/facets", api_facets),
        Route("/api/v1/dashboard", api_dashboard),
        Route("/dashboard", page("dashboard.html")),
        Route("/torznab/api", torznab_api),
        Route("/torznab/api/", torznab_api),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    if metrics is not None:
        routes.append(Route("/metrics", metrics_text))
    app = Starlette(routes=routes)
    return AuthMiddleware(app, api_key)


def _torznab_filters(request: Request) -> Dict[str, Any]:
    """season, ep and year as the *arr apps send them. A daily show's episode ("06/12") is
    not a number the database holds: season and ep are then not applied."""
    out: Dict[str, Any] = {}
    ep = request.query_params.get("ep", "")
    season = request.query_params.get("season", "")
    if ep and not ep.isdigit():
        return out
    if season:
        out["season"] = _int(request, "season", 0, 0, 9999)
    if ep:
        out["episode"] = _int(request, "ep", 0, 0, 9999)
    if request.query_params.get("year"):
        out["year"] = _int(request, "year", 0, 1800, 2100)
    return out


def _api_filters(request: Request) -> Dict[str, Any]:
    """The JSON API's filters on the parsed name: type (comma-separated content types), cat,
    season, episode, year, resolution."""
    out: Dict[str, Any] = {}
    types = [t for t in request.query_params.get("type", "").split(",") if t]
    for t in types:
        if t not in CONTENT_TYPES:
            raise BadParameter("type", f"type must be among {', '.join(CONTENT_TYPES)}, got {t!r}")
    if types:
        out["content_type"] = types
    cats = _categories(request.query_params.get("cat", ""))
    if cats:
        out["categories"] = cats
    for name, key, lo, hi in (("season", "season", 0, 9999), ("episode", "episode", 0, 9999),
                              ("year", "year", 1800, 2100)):
        if request.query_params.get(name):
            out[key] = _int(request, name, 0, lo, hi)
    resolution = request.query_params.get("resolution", "")
    if resolution:
        if len(resolution) > 16:
            raise BadParameter("resolution", "resolution is at most 16 characters (e.g. 1080p)")
        out["resolution"] = resolution
    return out


def _categories(text: str) -> List[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or len(part) > 6:
            raise BadParameter("cat", f"cat must be comma-separated category numbers, got {text!r}")
        out.append(int(part))
    return out

