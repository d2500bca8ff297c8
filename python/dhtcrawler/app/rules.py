"""Content rules: what the application refuses to store, keeps but never serves, or tags.

One rules file serves ``crawl``, ``import`` and ``serve``; ``prune --rules`` applies it to
a database. The format (docs/rules.md) is one rule a line, ``ACTION MATCHER ARGUMENT``::

    drop  keyword  some words        # a whole word or phrase in the name or any file path
    hide  regex    (?i)\\bsample\\b   # a regular expression on the name and the paths
    tag:4k resolution 2160p
    hide  type     xxx               # a content type (docs/indexer.md)
    drop  ext      scr,lnk           # a file extension
    hide  size<    1M                # total size below / above (size>)

Actions: ``drop`` (never stored; a crawl answers the library REJECT, so the hash is
remembered and not fetched again; import skips it and marks it delivered; prune deletes
it), ``hide`` (stored with ``hidden = 1``: never served by search, the API, Torznab or
export), ``tag:NAME`` (NAME added to the torrent's tags). The strongest matching action
wins (drop, then hide); tags add up.

Why a line format rather than TOML: a rule is one line, so every error names the file and
the line (TOML's parsers locate syntax errors only, not a bad value); no dependency (tomli
before Python 3.11); comments and blank lines as usual.

Regular expressions run with bounded cost: each runs on at most MAX_TEXT characters of a
name and of at most MAX_PATHS paths, with google-re2 (linear time) when it is installed,
and a pattern is at most MAX_PATTERN characters.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .classify import CONTENT_TYPES

__all__ = ["Rule", "RuleSet", "RulesError", "Verdict", "load", "DEFAULT_RULES"]

DEFAULT_RULES = Path(__file__).with_name("default.rules")
MAX_PATTERN = 200
MAX_TEXT = 1024
MAX_PATHS = 1000
ACTIONS = ("drop", "hide", "tag")
MATCHERS = ("keyword", "regex", "type", "ext", "size<", "size>", "resolution")

try:  # a linear-time engine when available
    import re2 as _re2  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None


class RulesError(ValueError):
    """A rule that cannot be read: the message names the file and the line."""


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([kmgt]?)i?b?", text.strip().lower())
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 700M, 4G)")
    return int(m.group(1)) * _UNITS[m.group(2)]


@dataclass
class Rule:
    where: str          # file:line
    action: str         # drop, hide, tag
    tag: Optional[str]  # the tag of tag:NAME
    matcher: str
    argument: str
    _test: Any = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.where} {self.action}{':' + self.tag if self.tag else ''}"


@dataclass
class Verdict:
    action: Optional[str] = None     # drop, hide or None
    tags: List[str] = field(default_factory=list)
    rules: List[Rule] = field(default_factory=list)

    @property
    def dropped(self) -> bool:
        return self.action == "drop"

    @property
    def hidden(self) -> bool:
        return self.action == "hide"


def _compile_regex(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"a pattern is at most {MAX_PATTERN} characters")
    if _re2 is not None:
        return _re2.compile(pattern)
    return re.compile(pattern)


def _keyword(words: str) -> Any:
    # A whole word or phrase, case-insensitive; separators (space . _ -) alike.
    parts = [re.escape(w) for w in re.split(r"[\s._-]+", words.strip().lower()) if w]
    if not parts:
        raise ValueError("a keyword rule needs words")
    return re.compile(r"(?<![a-z0-9])" + r"[\s._-]+".join(parts) + r"(?![a-z0-9])")


# The runs of ASCII letters and digits of a keyword: a text it matches, lowered, holds each
# of them. A text that lacks the longest one (a substring test, far cheaper than a pattern)
# cannot match, and most torrents are judged without running a keyword's pattern at all.
_RUNS = re.compile(r"[a-z0-9]+")


def _parse_line(where: str, line: str) -> Rule:
    fields = line.split(None, 2)
    if len(fields) < 3:
        raise ValueError("expected ACTION MATCHER ARGUMENT")
    action, matcher, argument = fields[0].lower(), fields[1].lower(), fields[2].strip()
    tag = None
    if action.startswith("tag:"):
        action, tag = "tag", action[4:]
        if not re.fullmatch(r"[a-z0-9_-]{1,32}", tag):
            raise ValueError(f"a tag is 1..32 of a-z 0-9 _ -, got {tag!r}")
    if action not in ACTIONS or (action == "tag" and tag is None):
        raise ValueError(f"unknown action {fields[0]!r} (drop, hide, tag:NAME)")
    if matcher not in MATCHERS:
        raise ValueError(f"unknown matcher {fields[1]!r} ({', '.join(MATCHERS)})")
    rule = Rule(where, action, tag, matcher, argument)
    if matcher == "keyword":
        rule._test = _keyword(argument)
    elif matcher == "regex":
        try:
            rule._test = _compile_regex(argument)
        except re.error as e:
            raise ValueError(f"bad regular expression: {e}") from None
    elif matcher == "type":
        if argument not in CONTENT_TYPES:
            raise ValueError(f"unknown content type {argument!r} ({', '.join(CONTENT_TYPES)})")
    elif matcher == "ext":
        rule._test = {e.strip().lstrip(".").lower() for e in argument.split(",") if e.strip()}
    elif matcher in ("size<", "size>"):
        rule._test = _size(argument)
    return rule


def parse(text: str, source: str) -> List[Rule]:
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        try:
            rules.append(_parse_line(f"{source}:{number}", line))
        except ValueError as e:
            raise RulesError(f"{source}:{number}: {e}") from None
    return rules


class RuleSet:
    """Rules in order, with a counter per rule and per action (metrics, status line)."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = list(rules)
        self.counts: Dict[str, int] = {r.label: 0 for r in self.rules}
        self.actions: Dict[str, int] = {"drop": 0, "hide": 0, "tag": 0}
        self._lock = threading.Lock()
        # Keyword rules by the longest of their runs (_RUNS): only those whose run a torrent's
        # texts hold are tried. The other rules are tried on every torrent.
        self._by_run: Dict[str, List[int]] = {}
        self._always: List[int] = []
        for i, r in enumerate(self.rules):
            runs = _RUNS.findall(r.argument.lower()) if r.matcher == "keyword" else []
            if runs:
                self._by_run.setdefault(max(runs, key=len), []).append(i)
            else:
                self._always.append(i)

    def __len__(self) -> int:
        return len(self.rules)

    def judge(self, name: str, files: Iterable[Tuple[str, int]], total_size: int,
              parsed: Optional[Dict[str, Any]] = None, count: bool = True) -> Verdict:
        """What the rules say of a torrent (its name, (path, size) files, total size and
        parsed columns); counted unless ``count`` is False."""
        paths = [p for p, _ in list(files)[:MAX_PATHS]]
        raw = [name[:MAX_TEXT], *(p[:MAX_TEXT] for p in paths)]
        tried = self._always
        if self._by_run:
            lowered = "\n".join(raw).lower()
            held = [i for run, rules in self._by_run.items() if run in lowered for i in rules]
            if held:
                tried = sorted(tried + held)
        exts: Optional[set] = None
        parsed = parsed or {}
        verdict = Verdict()
        for i in tried:
            rule = self.rules[i]
            m = rule.matcher
            if m == "keyword":
                # The texts hold its longest run: a candidate, which its pattern decides.
                hit = any(rule._test.search(t.lower()) for t in raw)
            elif m == "regex":
                hit = any(rule._test.search(t) for t in raw)
            elif m == "type":
                hit = parsed.get("content_type") == rule.argument
            elif m == "resolution":
                hit = parsed.get("resolution") == rule.argument
            elif m == "ext":
                if exts is None:
                    names = (p.rsplit("/", 1)[-1] for p in paths)
                    exts = {n.rsplit(".", 1)[-1].lower() for n in names if "." in n}
                hit = bool(exts & rule._test)
            elif m == "size<":
                hit = total_size < rule._test
            else:
                hit = total_size > rule._test
            if not hit:
                continue
            verdict.rules.append(rule)
            if rule.action == "tag":
                if rule.tag not in verdict.tags:
                    verdict.tags.append(rule.tag)  # type: ignore[arg-type]
            elif verdict.action != "drop":
                verdict.action = rule.action
        if count and verdict.rules:
            with self._lock:
                for rule in verdict.rules:
                    self.counts[rule.label] += 1
                for action in {r.action for r in verdict.rules}:
                    self.actions[action] += 1
        return verdict

    def summary(self) -> str:
        """For the status line: ``rules: 3 dropped, 1 hidden, 2 tagged``."""
        a = self.actions
        return f"rules: {a['drop']} dropped, {a['hide']} hidden, {a['tag']} tagged"

    def metrics(self) -> str:
        """Prometheus text: a counter per action and per rule."""
        lines = ["# HELP dhtc_rules_actions_total Torrents a content rule dropped, hid or tagged.",
                 "# TYPE dhtc_rules_actions_total counter"]
        lines += [f'dhtc_rules_actions_total{{action="{k}"}} {v}' for k, v in self.actions.items()]
        lines += ["# HELP dhtc_rules_matches_total Torrents each content rule matched.",
                  "# TYPE dhtc_rules_matches_total counter"]
        for label, v in self.counts.items():
            escaped = label.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'dhtc_rules_matches_total{{rule="{escaped}"}} {v}')
        return "\n".join(lines) + "\n"


def load(paths: Sequence[str] = (), *, defaults: bool = True) -> RuleSet:
    """The default rules (unless ``defaults`` is False), then each file's, in order."""
    rules: List[Rule] = []
    sources = ([str(DEFAULT_RULES)] if defaults else []) + list(paths)
    for path in sources:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise RulesError(f"{path}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise RulesError(f"{path}: not UTF-8 text ({e})") from None
        rules += parse(text, "default.rules" if path == str(DEFAULT_RULES) else path)
    return RuleSet(rules)
