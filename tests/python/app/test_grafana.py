"""The Grafana dashboard (tools/grafana/dhtcrawler.json) queries only metrics that exist:
the library's, as a crawler on loopback exports them, and the application's content-rule
counters (app/rules.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dhtcrawler import Crawler
from dhtcrawler.app.rules import load

from conftest import loopback_options

ROOT = Path(__file__).resolve().parents[3]


def exported() -> set:
    crawler = Crawler(loopback_options())
    try:
        text = crawler.metrics()
    finally:
        crawler.close()
    return set(re.findall(r"^(dhtc_[a-z0-9_]+)", text + load(defaults=True).metrics(), re.M))


def test_every_query_names_an_exported_metric():
    doc = json.loads((ROOT / "tools" / "grafana" / "dhtcrawler.json").read_text())
    names = exported()
    assert "dhtc_delivery_torrents_total" in names and "dhtc_rules_actions_total" in names
    queries = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    assert len(queries) >= 10
    for expr in queries:
        used = set(re.findall(r"\b(dhtc_[a-z0-9_]+)", expr))
        assert used, expr
        assert used <= names, (expr, used - names)
