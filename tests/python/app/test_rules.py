"""Content rules (app/rules.py): the file format and its errors, every matcher, the default
set, and each action in crawl (the acceptance policy), import, serve and prune. Tests use
placeholder terms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dhtcrawler import Answer
from dhtcrawler.app import rules as R
from dhtcrawler.app.acceptance import Acceptance
from dhtcrawler.app.db import Database, using
from dhtcrawler.app.sinks import DatabaseSink
from dhtcrawler import search as S

from cliutil import run_cli
from webutil import Served, make_torrent


def get(url):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read()

RULES = """# placeholder rules
drop keyword zzplaceholder term
hide regex   (?i)\\bqqhidden\\b
tag:big size> 10G
tag:scr ext  scr, lnk
hide type    xxx   # a comment after a rule
"""


def ruleset(tmp_path: Path, text: str = RULES, defaults: bool = False) -> R.RuleSet:
    path = tmp_path / "my.rules"
    path.write_text(text)
    return R.load([str(path)], defaults=defaults)


def test_every_matcher_and_the_strongest_action(tmp_path):
    rs = ruleset(tmp_path)
    assert len(rs) == 5
    assert rs.judge("Some.ZZPlaceholder.Term.2020", [], 1).dropped  # separators and case alike
    assert not rs.judge("zzplaceholderterm", [], 1).rules  # a whole phrase only
    assert rs.judge("x", [("dir/zzplaceholder-term.txt", 1)], 1).dropped  # in a path
    assert rs.judge("a qqhidden b", [], 1).hidden
    v = rs.judge("a qqhidden zzplaceholder term", [], 20 << 30)
    assert v.dropped and v.tags == ["big"]
    assert rs.judge("x", [("a/b.SCR", 1)], 1).tags == ["scr"]
    assert rs.judge("x", [], 1, {"content_type": "xxx"}).hidden
    assert rs.actions == {"drop": 3, "hide": 3, "tag": 2}
    assert 'dhtc_rules_actions_total{action="drop"} 3' in rs.metrics()
    assert f'dhtc_rules_matches_total{{rule="{tmp_path}/my.rules:2 drop"}} 3' in rs.metrics()
    assert rs.summary() == "rules: 3 dropped, 3 hidden, 2 tagged"


@pytest.mark.parametrize("line, message", [
    ("drop keyword", "expected ACTION MATCHER ARGUMENT"),
    ("erase keyword x", "unknown action"),
    ("drop color red", "unknown matcher"),
    ("hide regex (unclosed", "bad regular expression"),
    ("hide regex " + "a" * (R.MAX_PATTERN + 1), "at most"),
    ("hide type cartoon", "unknown content type"),
    ("tag:Bad! keyword x", "a tag is"),
    ("hide size< lots", "not a size"),
])
def test_errors_name_the_file_and_line(tmp_path, line, message):
    with pytest.raises(R.RulesError) as e:
        ruleset(tmp_path, "# first\n\n" + line + "\n")
    assert str(e.value).startswith(f"{tmp_path}/my.rules:3: ") and message in str(e.value)


def test_a_regex_sees_a_bounded_text(tmp_path):
    rs = ruleset(tmp_path, "hide regex b$\n")
    assert rs.judge("a" * 100 + "b", [], 1).hidden
    assert not rs.judge("a" * R.MAX_TEXT + "b", [], 1).rules  # only the first MAX_TEXT characters


def test_keywords_match_exactly_as_their_patterns_do(tmp_path):
    # judge() rules a keyword out by the letter and digit runs of the texts before running its
    # pattern: that shortcut must never change a verdict. Random texts over an alphabet that
    # holds the keywords' pieces, separators, case and non-ASCII letters.
    import random

    rs = ruleset(tmp_path, "drop keyword zz placeholder\ndrop keyword q@q\ndrop keyword x9\n")
    pieces = ["zz", "ZZ", "placeholder", "Placeholder", "q", "@", "x9", "X9", "a", "9", "é", "\u212a",
              " ", ".", "_", "-", "/", "\n", "..", "ß"]
    rnd = random.Random(33)
    for _ in range(5000):
        texts = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8))) for _ in range(rnd.randint(1, 3))]
        expected = any(rule._test.search(t.lower()) for rule in rs.rules for t in texts)
        verdict = rs.judge(texts[0], [(t, 1) for t in texts[1:]], 1, count=False)
        assert verdict.dropped == expected, texts


def test_the_default_set_is_on_and_drops(tmp_path):
    defaults = R.load()
    assert len(defaults) >= 10 and all(r.action == "drop" and r.matcher == "keyword" for r in defaults.rules)
    term = defaults.rules[0].argument  # the test names no term itself
    assert defaults.judge(f"Some.{term}.Name", [], 1).dropped
    assert not R.load(defaults=False).rules
    assert ruleset(tmp_path, "", defaults=True).rules  # on unless turned off


def _torrent(i, name, files=None):
    return make_torrent(i, name, files or [(f"{name}/{name}.mkv", 1 << 30)])


def test_crawl_drops_hides_and_tags(tmp_path):
    sink = DatabaseSink(Database(str(tmp_path / "c.sqlite")), rules=ruleset(tmp_path))
    store = Acceptance(sink, None)
    assert store(_torrent(1, "Show zzplaceholder term S01E01")) == Answer.REJECT  # never stored
    assert store(_torrent(2, "Some qqhidden thing")) == Answer.ACCEPT
    assert store(_torrent(3, "Huge", [("Huge/a.mkv", 20 << 30)])) == Answer.ACCEPT
    assert store.dropped == 1 and sink.count() == 2
    assert S.search(sink, "")[0] == 1  # the hidden one is never served
    assert S.torrent(sink, make_torrent(2, "x", [("a", 1)]).info_hash) is None
    with using(sink) as conn:
        assert conn.execute("SELECT name, hidden, tags FROM torrents ORDER BY id") == [
            ("Some qqhidden thing", 1, None), ("Huge", None, "big")]
    from dhtcrawler.app.dumps import export_docs

    assert [doc["name"] for doc in export_docs(sink)] == ["Huge"]  # export never writes a hidden one
    sink.close()


def test_a_real_crawl_drops_by_rule_and_never_fetches_those_again(tmp_path, testnet_binary):
    """`dhtcrawler crawl --rules` on the test network: torrents whose name a drop rule
    matches are neither stored nor written out, the stop line counts them, and the retry
    state marks them done (REJECT), so a later run does not fetch them again."""
    import re
    import signal
    import socket
    import subprocess

    from dhtcrawler.testnet import TestNetwork

    from cliutil import Crawl
    from conftest import unused_loopback_port, wait_for
    from dhtcrawler.sinks import read_jsonl

    rules = tmp_path / "my.rules"
    # The test network names torrents "dataset N", "photos N", "lecture notes N" and others.
    words = ("dataset", "photos", "lecture notes")
    rules.write_text("".join(f"drop keyword {w}\n" for w in words))
    db, out = tmp_path / "r.sqlite", tmp_path / "r.jsonl"
    with TestNetwork(nodes=40, seeders=4, torrents=16, cidr="127.0.94.0/24", seed=5, duration=120,
                     binary=testnet_binary, truth=str(tmp_path / "truth.json"), stderr=subprocess.DEVNULL) as net:
        metrics = f"127.0.0.1:{unused_loopback_port(socket.SOCK_STREAM)}"
        crawl = Crawl("--bootstrap", net.bootstrap, "--db", str(db), "--out", str(out), "--rules", str(rules),
                      "--no-scrape", "--metrics", metrics)

        def dropped_and_stored() -> bool:  # a rule dropped one, and a few torrents are in
            try:
                text = get(f"http://{metrics}/metrics")[2].decode()
            except OSError:
                return False
            drops = re.search(r'dhtc_rules_actions_total\{action="drop"\} (\d+)', text)
            return bool(drops and int(drops.group(1)) >= 1 and len(read_jsonl(str(out))) >= 3)

        try:
            assert wait_for(lambda: out.exists() and dropped_and_stored(), 60, 0.5), crawl.output()
        finally:
            assert crawl.stop(signal.SIGTERM) == 0, crawl.output()
        truth = net.truth()
    dropped = [t.get("announce_keys", [t["info_hash"]]) for t in truth if any(w in t["name"] for w in words)]
    with using(str(db)) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM torrents")]
        done = {h.lower() for (h,) in conn.execute("SELECT hex(info_hash) FROM retry_hashes WHERE state = 2")}
    assert names and not any(w in n for n in names for w in words)
    assert not any(w in out.read_text() for w in words)
    reached = [keys for keys in dropped if done & set(keys)]
    assert reached, crawl.output()
    assert f"({len(reached)} dropped by rules)" in crawl.output()  # REJECT: remembered, not fetched again


def _dump(tmp_path, names):
    path = tmp_path / "in.jsonl"
    with open(path, "w") as f:
        for i, name in enumerate(names):
            t = _torrent(10 + i, name)
            doc = json.loads(t.to_json()) if hasattr(t, "to_json") else t.to_dict()
            f.write(json.dumps(doc) + "\n")
    return str(path)


def test_import_and_serve_apply_the_rules(tmp_path):
    rules = tmp_path / "my.rules"
    rules.write_text(RULES)
    db = str(tmp_path / "i.sqlite")
    dump = _dump(tmp_path, ["Show zzplaceholder term S01E01", "Some qqhidden thing", "Plain.Movie.2020.1080p"])
    out = run_cli("import", "--db", db, "--rules", str(rules), dump)
    assert out.returncode == 0, out.stderr
    assert "1 dropped by rules" in out.stderr
    with using(db) as conn:
        assert conn.execute("SELECT name, hidden FROM torrents ORDER BY id") == [
            ("Some qqhidden thing", 1), ("Plain.Movie.2020.1080p", None)]
    # A rule written after the rows were stored still keeps them from being served.
    late = tmp_path / "late.rules"
    late.write_text("drop keyword plain movie\n")
    s = Served(["serve", "--db", db, "--listen", "127.0.0.1:0", "--rules", str(late)])
    try:
        code, _kind, body = get(s.url + "api/v1/search?q=")
        assert code == 200 and json.loads(body)["results"] == []
        code, _kind, body = get(s.url + "torznab/api?t=search")
        assert code == 200 and b"Plain.Movie" not in body
    finally:
        assert s.stop() == 0
    out = run_cli("import", "--db", db, "--rules", str(tmp_path / "missing.rules"), dump)
    assert out.returncode == 2 and "missing.rules" in out.stderr


def test_prune_applies_the_rules_to_a_database(tmp_path):
    db = str(tmp_path / "p.sqlite")
    sink = DatabaseSink(Database(db))  # stored before any rule
    for i, name in enumerate(["Show zzplaceholder term S01E01", "Some qqhidden thing", "Plain"]):
        sink.add(_torrent(20 + i, name))
    sink.close()
    rules = tmp_path / "my.rules"
    rules.write_text(RULES + "tag:plain keyword plain\n")
    out = run_cli("prune", "--db", db, "--apply-rules", "--rules", str(rules), "--dry-run")
    assert out.returncode == 0 and "would remove 1, hide 1 and tag 1 of 3" in out.stderr, out.stderr
    assert "zzplaceholder" in out.stdout
    out = run_cli("prune", "--db", db, "--apply-rules", "--rules", str(rules))
    assert out.returncode == 0 and "removed 1, hid 1 and tagged 1 of 3" in out.stderr, out.stderr
    with using(db) as conn:
        assert conn.execute("SELECT name, hidden, tags FROM torrents ORDER BY id") == [
            ("Some qqhidden thing", 1, None), ("Plain", None, "plain")]
    out = run_cli("prune", "--db", db, "--apply-rules", "--rules", str(rules))
    assert "removed 0, hid 0 and tagged 0" in out.stderr
