"""dhtcrawler.migrate_store: the retry store's tables without a crawler (dhtc_store_migrate)."""

from __future__ import annotations

import sqlite3

import pytest

import dhtcrawler


def test_migrate_store_creates_the_retry_tables_and_reports_failures(tmp_path):
    path = str(tmp_path / "store.sqlite")
    for _ in range(2):  # the second time: nothing to do
        dhtcrawler.migrate_store({"kind": "sqlite", "path": path})
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("SELECT version FROM schema_migrations WHERE component = 'retry'").fetchone()
        assert version >= 3
        assert conn.execute("SELECT count(*) FROM retry_hashes").fetchone() == (0,)
    with pytest.raises(dhtcrawler.OptionsError) as bad:
        dhtcrawler.migrate_store({"kind": "none"})
    assert bad.value.key_path == "retry.store.kind"
    with pytest.raises(dhtcrawler.OptionsError):
        dhtcrawler.migrate_store({"kind": "sqlite", "pth": path})
    with pytest.raises(dhtcrawler.StoreError) as unusable:
        dhtcrawler.migrate_store({"kind": "sqlite", "path": str(tmp_path / "no" / "such" / "dir.sqlite")})
    assert "no/such" in unusable.value.message
    with pytest.raises(dhtcrawler.StoreError) as unreachable:
        dhtcrawler.migrate_store({"kind": "postgresql", "conninfo": "postgresql://u:hunter2@127.0.0.1:1/f"})
    assert "hunter2" not in str(unreachable.value)
