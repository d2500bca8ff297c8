"""The search page in a real headless browser: Debian's chromium driven by Selenium through
Debian's chromedriver (no browser download). Types a query and sees results, pages forward,
opens a torrent page and finds its file tree."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("starlette", reason="the serve extra (starlette, uvicorn) is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")

from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from webutil import Served, make_db  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"needs Debian's chromium and chromedriver ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver")
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = make_db(tmp_path_factory.mktemp("page") / "crawl.sqlite")
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    yield s
    assert s.stop() == 0


def rows(driver: object) -> list:
    return driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")  # type: ignore[attr-defined]


def test_search_as_you_type_pages_and_torrent_page(browser: object, server: Served) -> None:
    d = browser
    wait = WebDriverWait(d, 20)
    d.get(server.url)  # type: ignore[attr-defined]
    wait.until(lambda _: len(rows(d)) == 20)  # everything, first page
    box = d.find_element(By.ID, "q")  # type: ignore[attr-defined]
    box.send_keys("filler")  # no Enter: the page searches as you type
    wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "45 torrents match"))
    wait.until(lambda _: all("filler" in r.text for r in rows(d)) and len(rows(d)) == 20)
    first_page = [r.find_element(By.CSS_SELECTOR, "a.name").text for r in rows(d)]
    cells = rows(d)[0].find_elements(By.TAG_NAME, "td")
    assert cells[2].text == "2"  # file count
    assert cells[5].text == "unknown"  # swarm estimate, not measured yet
    assert cells[6].find_element(By.TAG_NAME, "a").get_attribute("href").startswith("magnet:?xt=urn:btih:")
    assert d.find_element(By.ID, "prev").get_attribute("disabled")  # type: ignore[attr-defined]

    d.find_element(By.ID, "next").click()  # type: ignore[attr-defined]
    wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "showing 21–40"))
    wait.until(EC.text_to_be_present_in_element((By.ID, "page"), "page 2 of 3"))
    second_page = [r.find_element(By.CSS_SELECTOR, "a.name").text for r in rows(d)]
    assert len(second_page) == 20 and not set(first_page) & set(second_page)
    assert "offset=20" in d.current_url  # type: ignore[attr-defined]

    # Narrow the query: back to one result, on the first page.
    box.clear()
    box.send_keys("album")
    wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "1 torrent match"))
    rows(d)[0].find_element(By.CSS_SELECTOR, "a.name").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "name"), "Free Music Album"))
    tree = d.find_element(By.ID, "tree")  # type: ignore[attr-defined]
    wait.until(lambda _: "01 - Song.flac" in tree.text)
    assert "Album/" in tree.text and "cover.jpg" in tree.text
    magnet = d.find_element(By.ID, "magnet").get_attribute("href")  # type: ignore[attr-defined]
    assert magnet.startswith("magnet:?xt=urn:btih:")


def test_hostile_names_are_text_not_markup(browser: object, tmp_path: Path) -> None:
    from webutil import make_torrent

    hostile = make_torrent(7, '<img src=x onerror="document.title=\'owned\'">', [("<img src=y onerror=alert(1)>.mkv", 1)])
    db = make_db(tmp_path / "hostile.sqlite", [hostile])
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    try:
        d = browser
        d.get(s.url)  # type: ignore[attr-defined]
        WebDriverWait(d, 20).until(lambda _: len(rows(d)) == 1)
        assert rows(d)[0].find_element(By.CSS_SELECTOR, "a.name").text == hostile.name
        assert not d.find_elements(By.CSS_SELECTOR, "#results img")  # type: ignore[attr-defined]
        d.get(s.url + "torrent/" + hostile.info_hash)  # type: ignore[attr-defined]
        WebDriverWait(d, 20).until(EC.text_to_be_present_in_element((By.ID, "tree"), "onerror=alert(1)>.mkv"))
        assert not d.find_elements(By.CSS_SELECTOR, "main img")  # type: ignore[attr-defined]
        assert d.title != "owned"  # type: ignore[attr-defined]
    finally:
        assert s.stop() == 0


def test_facets_filter_the_search(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    from test_torznab_arr import FIXTURE

    db = make_db(tmp_path / "facets.sqlite", FIXTURE)
    s = Served(["serve", "--db", str(db), "--listen", "127.0.0.1:0"])
    try:
        d = browser
        wait = WebDriverWait(d, 20)
        d.get(s.url)  # type: ignore[attr-defined]
        wait.until(lambda _: len(rows(d)) == 20)
        wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#type option")) > 3)  # type: ignore[attr-defined]
        Select(d.find_element(By.ID, "type")).select_by_value("movie")  # type: ignore[attr-defined]
        wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "4 torrents"))
        Select(d.find_element(By.ID, "year")).select_by_value("1995")  # type: ignore[attr-defined]
        wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "1 torrent"))
        assert "type=movie" in d.current_url and "year=1995" in d.current_url  # type: ignore[attr-defined]
        assert [r.find_element(By.CSS_SELECTOR, "a.name").text for r in rows(d)] == [
            "Heat.1995.REMASTERED.1080p.BluRay.x264-AMIABLE"]
        Select(d.find_element(By.ID, "year")).select_by_value("")  # type: ignore[attr-defined]
        Select(d.find_element(By.ID, "type")).select_by_value("")  # type: ignore[attr-defined]
        Select(d.find_element(By.ID, "resolution")).select_by_value("2160p")  # type: ignore[attr-defined]
        wait.until(EC.text_to_be_present_in_element((By.ID, "summary"), "3 torrents"))
        if os.environ.get("DHTC_SCREENSHOTS"):
            d.save_screenshot(os.environ["DHTC_SCREENSHOTS"] + "/facets.png")  # type: ignore[attr-defined]

        # The dashboard: `serve` alone draws what the database knows.
        d.get(s.url + "dashboard")  # type: ignore[attr-defined]
        wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#per_hour rect")) == 24)  # type: ignore[attr-defined]
        assert len(d.find_elements(By.CSS_SELECTOR, "#per_minute rect")) == 60  # type: ignore[attr-defined]
        wait.until(EC.text_to_be_present_in_element((By.ID, "size"), f"{len(FIXTURE)} torrents"))
        assert d.find_element(By.ID, "no_live").is_displayed()  # type: ignore[attr-defined]
        assert not d.find_element(By.ID, "live").is_displayed()  # type: ignore[attr-defined]
    finally:
        assert s.stop() == 0


def test_the_dashboard_beside_a_crawl_draws_the_live_series(browser: object, tmp_path: Path) -> None:
    """crawl --serve adds the funnel, failure classes and node pool from the crawler's metrics."""
    from cliutil import Crawl
    from conftest import unused_loopback_port

    port = unused_loopback_port(socket.SOCK_STREAM)
    crawl = Crawl("--db", str(tmp_path / "live.sqlite"), "--serve", f"127.0.0.1:{port}")
    try:
        crawl.endpoint()
        d = browser
        wait = WebDriverWait(d, 20)
        d.get(f"http://127.0.0.1:{port}/dashboard")  # type: ignore[attr-defined]
        wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#funnel rect")) == 5)  # type: ignore[attr-defined]
        assert "discovered" in d.find_element(By.ID, "funnel").text  # type: ignore[attr-defined]
        assert "pool" in d.find_element(By.ID, "pool").text  # type: ignore[attr-defined]
        assert not d.find_element(By.ID, "no_live").is_displayed()  # type: ignore[attr-defined]
        if os.environ.get("DHTC_SCREENSHOTS"):
            d.save_screenshot(os.environ["DHTC_SCREENSHOTS"] + "/dashboard.png")  # type: ignore[attr-defined]
    finally:
        crawl.stop()
