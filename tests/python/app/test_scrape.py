"""BEP-33 swarm sizes through the Python binding and the CLI, against real libtorrent: a
torrent with 6 seeders and 4 leechers (tests/lt/lt_scrape_swarm.py, each on its own
address) in a DHT of libtorrent sessions. The scrape's estimates must be within one of the
truth; the CLI stores them with their time and shows them in search."""

from __future__ import annotations

import json
import signal
import time

import pytest

import dhtcrawler
from dhtcrawler import Crawler, Scrape, StateError
from dhtcrawler._types import decode_event

from conftest import loopback_options, wait_for
from cliutil import Crawl, run_cli

SEEDERS, LEECHERS = 6, 4


def close_to(estimate, truth) -> bool:
    return estimate is not None and abs(estimate - truth) <= 1


def test_scrape_event_and_request_arguments():
    e = decode_event('{"type":"scrape","schema":1,"info_hash":"' + "ab" * 20 + '","seeders":3,"leechers":1,'
                     '"responders":2,"queried":5,"at":1767312000}')
    assert isinstance(e, Scrape) and (e.seeders, e.leechers, e.responders, e.queried) == (3, 1, 2, 5)
    assert e.at is not None and int(e.at.timestamp()) == 1767312000
    c = Crawler(loopback_options())
    try:
        with pytest.raises(ValueError):
            c.request_scrape("abc")
        with pytest.raises(ValueError):
            c.request_scrape(b"\x00" * 19)
        c.request_scrape("ab" * 20)  # before start: it waits for the crawl to run
        c.request_scrape(b"\x01" * 20)
        c.shutdown()
        with pytest.raises(StateError):
            c.request_scrape("ab" * 20)
    finally:
        c.close()


def test_the_scraper_stores_what_nodes_said_and_nothing_for_a_scrape_that_asked_nobody():
    from datetime import datetime, timezone

    from dhtcrawler.app.swarm import SwarmScraper

    class FakeCrawler:
        def on_scrape(self, fn):
            self.deliver = fn

        def request_scrape(self, _h):
            pass

    class FakeDb:
        def __init__(self):
            self.swarms = []

        def set_swarm(self, *row):
            self.swarms.append(row)

    crawler, db = FakeCrawler(), FakeDb()
    scraper = SwarmScraper(crawler, db, 0)
    at = datetime(2026, 1, 2, tzinfo=timezone.utc)
    for h in ("ab" * 20, "cd" * 20, "ef" * 20):
        assert scraper.request(h)
    crawler.deliver(Scrape("ab" * 20, 0, 0, 0, 0, at, timed_out=True))  # the crawler knew no node
    crawler.deliver(Scrape("cd" * 20, 0, 0, 0, 8, at, timed_out=True))  # asked, nobody answered
    crawler.deliver(Scrape("ef" * 20, 6, 4, 8, 8, at))
    assert db.swarms == [("cd" * 20, None, None, int(at.timestamp())), ("ef" * 20, 6, 4, int(at.timestamp()))]
    assert scraper.answered == 3 and not scraper._pending


def test_polled_scrape_of_a_libtorrent_swarm(lt_scrape_swarm):
    c = Crawler(loopback_options())
    c.enable_polling()
    c.start()
    try:
        swarm = lt_scrape_swarm(c.endpoints[0], base=90, seeders=SEEDERS, leechers=LEECHERS)
        info_hash = swarm.ready["info_hash"]
        answers = []
        deadline = time.monotonic() + 100
        next_request = time.monotonic() + 10  # the announces land first
        while time.monotonic() < deadline:
            if time.monotonic() >= next_request:
                c.request_scrape(info_hash)
                next_request = time.monotonic() + 5
            e = c.poll(0.25)
            if isinstance(e, Scrape):
                assert e.info_hash == info_hash
                answers.append(e)
                if e.responders and close_to(e.seeders, SEEDERS) and close_to(e.leechers, LEECHERS):
                    break
        assert answers, "no scrape answered"
        last = answers[-1]
        assert last.responders >= 1 and last.queried >= last.responders
        assert close_to(last.seeders, SEEDERS) and close_to(last.leechers, LEECHERS), answers
    finally:
        c.close()


def test_crawl_stores_the_swarm_at_delivery_and_search_shows_it(tmp_path, lt_scrape_swarm):
    db = tmp_path / "swarm.sqlite"
    # The swarm first, its announces landed; then the crawl joins it and finds the torrent
    # in a node's BEP-51 samples (a crawl that samples before the announces land would ask
    # those nodes again only much later).
    swarm = lt_scrape_swarm(None, base=110, seeders=SEEDERS, leechers=LEECHERS)
    info_hash = swarm.ready["info_hash"]
    time.sleep(10)
    nodes = [s["dht_endpoint"] for s in swarm.sessions if s["role"] == "node"]
    crawl = Crawl("--db", str(db), "--scrape-rate", "60/min", "--scrape-every", "15s",
                  *[arg for ep in nodes[:3] for arg in ("--bootstrap", ep)])
    try:
        crawl.endpoint()

        def stored():
            if not db.exists():
                return None
            t = dhtcrawler.search.torrent(str(db), info_hash)
            return t if t and close_to(t["seeders"], SEEDERS) and close_to(t["leechers"], LEECHERS) else None

        # delivered, scraped at delivery, then refreshed every minute or so: an early scrape
        # may come before every announce landed, a later one sees the whole swarm
        t = wait_for(stored, 150, 0.5)
    finally:
        assert crawl.stop(signal.SIGTERM) == 0
    assert t, (dhtcrawler.search.torrent(str(db), info_hash), crawl.output())
    assert t["scraped_at"] is not None
    out = run_cli("search", "scrape-me", "--db", str(db), "--json")
    row = json.loads(out.stdout.splitlines()[0])
    assert row["info_hash"] == info_hash and close_to(row["seeders"], SEEDERS) and row["scraped_at"]
    table = run_cli("search", "scrape-me", "--db", str(db)).stdout
    assert f"{row['seeders']}/{row['leechers']}" in table
    assert run_cli("crawl", "--scrape-rate", "fast").returncode == 2
