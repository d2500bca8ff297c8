"""The live part of the dashboard (beside a crawl): the figures it draws, read from the
crawler's Prometheus text (docs/metrics.md)."""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

_LINE = re.compile(r'^(dhtc_[a-z0-9_]+)(?:\{([^}]*)\})?\s+(\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# The pipeline, in order: (label, metric, label filter).
FUNNEL: Tuple[Tuple[str, str, str], ...] = (
    ("discovered", "dhtc_metadata_hashes_in_total", ""),
    ("gated", "dhtc_delivery_gates_total", ""),
    ("fetched", "dhtc_metadata_jobs_started_total", ""),
    ("verified", "dhtc_metadata_outcomes_total", "outcome=accepted"),
    ("stored", "dhtc_delivery_torrents_total", ""),
)


def parse(text: str) -> Dict[str, List[Tuple[Dict[str, str], float]]]:
    """Samples by metric name: [(labels, value)]."""
    out: Dict[str, List[Tuple[Dict[str, str], float]]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.setdefault(m.group(1), []).append((dict(_LABEL.findall(m.group(2) or "")), value))
    return out


def _sum(samples: Dict[str, List[Tuple[Dict[str, str], float]]], name: str, where: str = "") -> float:
    key, _, want = where.partition("=")
    return sum(v for labels, v in samples.get(name, []) if not key or labels.get(key) == want)


def _by(samples: Dict[str, List[Tuple[Dict[str, str], float]]], name: str, label: str) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for labels, v in samples.get(name, []):
        if v:
            out[labels.get(label, "")] = out.get(labels.get(label, ""), 0) + v
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def dashboard_series(text: str) -> Dict[str, object]:
    s = parse(text)
    return {
        "funnel": [{"stage": stage, "count": _sum(s, name, where)} for stage, name, where in FUNNEL],
        "failures": _by(s, "dhtc_metadata_attempt_failures_total", "class"),
        "pool": {"pool": _sum(s, "dhtc_crawl_pool_size"), "responsive": _sum(s, "dhtc_crawl_responsive_size"),
                 "capacity": _sum(s, "dhtc_crawl_pool_capacity")},
        "refusals": {**{f"budget {k}": v for k, v in _by(s, "dhtc_dht_budget_refused_total", "budget").items()},
                     "crawl refused": _sum(s, "dhtc_crawl_refused_total"),
                     "pending refused": _sum(s, "dhtc_metadata_pending_refused_total")},
    }
