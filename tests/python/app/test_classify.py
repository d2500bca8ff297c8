"""Release names parsed at ingest (app/classify.py): the labelled sample, the checks on a
dump's parsed fields, and the columns the sink stores on both databases."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dhtcrawler.app.classify import CONTENT_TYPES, MAX_NAME, PARSER_VERSION, classify, valid_parsed
from dhtcrawler.app.db import Database, using

from conftest import pg_schema_uri

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "release_names" / "release_names.tsv"


def _sample():
    with open(SAMPLE, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _files(row):
    if not row["files"]:
        return [(row["name"], int(row["total_size"]))]
    return [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in row["files"].split("|")]


def test_the_sample_covers_every_type_and_records_each_source():
    rows = _sample()
    assert len(rows) >= 300
    assert {r["type"] for r in rows} == set(CONTENT_TYPES)
    assert all(r["source"].startswith("written: ") for r in rows)
    assert {r["part"] for r in rows} == {"tune", "held"}


def test_content_type_and_tv_numbers_on_the_whole_sample():
    rows = _sample()
    types = sum(classify(r["name"], _files(r), int(r["total_size"]))["content_type"] == r["type"] for r in rows)
    tv = [r for r in rows if r["type"] == "tv_show"]
    numbers = 0
    for r in tv:
        got = classify(r["name"], _files(r), int(r["total_size"]))
        numbers += all(got[k] == (int(r[k]) if r[k] else None)
                       for k in ("season", "season_end", "episode", "episode_end"))
    assert types / len(rows) >= 0.95
    assert numbers / len(tv) >= 0.95


def test_a_number_in_a_title_or_an_episode_count_is_not_a_season_or_episode():
    kaiju = classify("[SubsPlease] Kaiju No 8 - 19 (1080p) [ABCD1234].mkv")
    assert (kaiju["season"], kaiju["episode"]) == (None, 19)
    marked = classify("[Erai-raws] Oshi no Ko S2 - 05 [1080p][Multiple Subtitle]")
    assert (marked["season"], marked["episode"]) == (2, 5)  # an explicit season mark stays
    count = classify("Planet Earth II (2016) 2160p UHD BluRay x265 HDR - 6 Episodes")
    assert (count["content_type"], count["season"], count["episode"]) == ("tv_show", None, None)
    explicit = classify("Show.S01E06.6.Episodes.1080p.WEB.x264-GRP")
    assert (explicit["season"], explicit["episode"]) == (1, 6)


def test_tv_movie_and_categories():
    ep = classify("The.Expanse.S02E05.Home.1080p.BluRay.x264-DEMAND")
    assert (ep["content_type"], ep["season"], ep["episode"], ep["resolution"], ep["category"]) == (
        "tv_show", 2, 5, "1080p", 5040)
    assert ep["release_group"] == "DEMAND" and ep["parsed"] == PARSER_VERSION
    pack = classify("Show.Name.S01-S03.2160p.WEB-DL.x265")
    assert (pack["season"], pack["season_end"], pack["episode"], pack["category"]) == (1, 3, None, 5045)
    movie = classify("Heat.1995.720p.BluRay.x264-GRP", [("Heat.1995/heat.mkv", 5 << 30)], 5 << 30)
    assert (movie["content_type"], movie["year"], movie["category"]) == ("movie", 1995, 2040)
    anime = classify("[SubsPlease] Frieren - 12 (1080p) [ABCD1234].mkv")
    assert (anime["content_type"], anime["episode"], anime["tags"], anime["category"]) == (
        "tv_show", 12, "anime", 5070)
    flac = classify("Artist - Album (2001) [FLAC]", [("a/01.flac", 30 << 20)], 30 << 20)
    assert (flac["content_type"], flac["category"]) == ("music", 3040)
    assert classify("notes")["content_type"] is None and classify("notes")["category"] == 8000


def test_a_hostile_name_costs_a_bounded_parse():
    got = classify("S01E01." * 100_000 + "x" * 1_000_000)
    assert got["parsed"] == PARSER_VERSION
    assert got["title"] is None or len(got["title"]) <= MAX_NAME


def test_a_dumps_parsed_fields_are_kept_only_when_well_formed():
    good = classify("The.Expanse.S02E05.1080p.WEB.x264-GRP")
    assert valid_parsed(good) == good
    for bad in ({"content_type": "cartoon"}, {"year": 3000}, {"season": -1}, {"episode": "5"},
                {"category": 1234}, {"title": "x" * (MAX_NAME + 1)}, {"parsed": PARSER_VERSION + 1},
                {"parsed": None}, {"season": True}):
        assert valid_parsed({**good, **bad}) is None, bad


def _stored(db):
    with using(db) as conn:
        return conn.one("SELECT content_type, category, title, season, episode, resolution, parsed FROM torrents "
                        "ORDER BY id LIMIT 1")


def _record(name, key="11" * 20):
    return {"info_hash": key, "info_hash_v1": key, "info_hash_v2": None, "version": "v1", "name": name,
            "total_size": 1 << 30, "num_files": 1, "piece_length": 16384, "private": False, "metadata_size": 100,
            "files": [(name + ".mkv", 1 << 30)], "first_seen": 1_700_000_000, "last_seen": 1_700_000_000,
            "peer": None, "times_seen": 1}


def _check_sink_and_backfill(target):
    from dhtcrawler.app.backfill import backfill, pending
    from dhtcrawler.app.sinks import DatabaseSink

    sink = DatabaseSink(Database(target))
    try:
        sink.merge(_record("The.Expanse.S02E05.1080p.WEB.x264-GRP"))
        assert _stored(sink) == ("tv_show", 5040, "The Expanse", 2, 5, "1080p", PARSER_VERSION)
        # Stored unparsed (an import of a dump without the fields): the backfill parses it,
        # in batches, and a second run finds nothing to do.
        for i in range(5):
            sink.merge({**_record(f"Heat.{1990 + i}.720p.BluRay.x264-GRP", key=f"{i + 20:02d}" * 20),
                        "defer_parse": True})
        assert pending(sink) == 5
        seen = []
        assert backfill(sink, batch=2, progress=lambda done, left: seen.append((done, left))) == 5
        assert seen == [(2, 3), (4, 1), (5, 0)] and pending(sink) == 0 and backfill(sink) == 0
        with using(sink) as conn:
            assert conn.execute("SELECT year, category FROM torrents WHERE content_type = 'movie' ORDER BY year") == [
                (1990 + i, 2040) for i in range(5)]
    finally:
        sink.close()


def test_the_sink_and_the_backfill_store_the_parsed_columns_on_sqlite(tmp_path):
    _check_sink_and_backfill(str(tmp_path / "p.sqlite"))


def test_the_sink_and_the_backfill_store_the_parsed_columns_on_postgresql():
    with pg_schema_uri("classify") as uri:
        _check_sink_and_backfill(uri)


def test_export_writes_the_parsed_fields_and_import_keeps_them_after_checks(tmp_path):
    import json

    from dhtcrawler.app.dumps import export, import_files
    from dhtcrawler.app.sinks import DatabaseSink

    source = str(tmp_path / "a.sqlite")
    sink = DatabaseSink(Database(source))
    sink.merge(_record("The.Expanse.S02E05.1080p.WEB.x264-GRP"))
    sink.merge(_record("Heat.1995.720p.BluRay.x264-GRP", key="22" * 20))
    sink.close()
    dump = str(tmp_path / "d.jsonl")
    assert export(source, dump) == 2
    docs = [json.loads(line) for line in open(dump, encoding="utf-8")]
    assert (docs[0]["content_type"], docs[0]["season"], docs[0]["episode"]) == ("tv_show", 2, 5)
    # A line whose fields are kept as they are (a title we set), one out of range (parsed
    # again), one without them (parsed at the end of the import).
    docs[0]["title"] = "Kept As Exported"
    docs[1]["year"] = 3000
    plain = dict(docs[1], info_hash="33" * 20, info_hash_v1="33" * 20)
    for c in ("content_type", "category", "title", "year", "parsed"):
        plain.pop(c)
    with open(dump, "w", encoding="utf-8") as f:
        for doc in (*docs, plain):
            f.write(json.dumps(doc) + "\n")
    target = str(tmp_path / "b.sqlite")
    counts = import_files(target, [dump], refetch=True)
    assert counts == {"read": 3, "new": 3, "merged": 0, "dropped": 0, "parsed": 2}
    with using(target) as conn:
        assert conn.execute("SELECT title, year, parsed FROM torrents ORDER BY id") == [
            ("Kept As Exported", None, PARSER_VERSION), ("Heat", 1995, PARSER_VERSION),
            ("Heat", 1995, PARSER_VERSION)]


def test_the_reparse_command_parses_an_old_database(tmp_path):
    from cliutil import run_cli
    from dhtcrawler.app.sinks import DatabaseSink

    path = str(tmp_path / "old.sqlite")
    sink = DatabaseSink(Database(path))
    for i in range(3):
        sink.merge({**_record(f"Show.S01E0{i + 1}.720p.HDTV.x264-GRP", key=f"{i + 40}" * 20), "defer_parse": True})
    sink.close()
    out = run_cli("reparse", "--db", path, "--batch", "2")
    assert out.returncode == 0, out.stderr
    assert "parsed 2 torrents, 1 left" in out.stderr and "3 torrents parsed" in out.stderr
    with using(path) as conn:
        assert conn.execute("SELECT episode FROM torrents ORDER BY id") == [(1,), (2,), (3,)]
