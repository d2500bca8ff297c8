"""What differs between SQLite and PostgreSQL, in one object per database.

Both hold the same tables in the same shape (``torrents`` with an integer ``id``, 20-byte
binary hashes, ``files`` and ``hashes`` keyed by that id): feature code writes one query,
with ``?`` placeholders, and asks the dialect only for what really differs:

- opening a connection (the driver, its settings) and starting a transaction;
- times: SQLite keeps Unix seconds, PostgreSQL ``timestamptz`` (:meth:`Dialect.time` to
  bind, :meth:`Dialect.seconds` to read back);
- a few expressions (``least``/``greatest``, a case-insensitive substring test, the name
  order, a text's size in bytes);
- the search index (SQLite's FTS5 table written beside each torrent; PostgreSQL's ``search``
  table of each torrent's text, with a pg_trgm index where the extension could be
  installed), the database's size,
  compacting, and locks (a torrent's identity; the schema).
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple

if TYPE_CHECKING:
    from . import Connection

# The advisory lock every component's schema changes take on PostgreSQL (the retry store's
# too: postgres_schema_lock in core/retry/postgres_store.hpp).
PG_SCHEMA_LOCK = 7305042
# Held shared by each import writing its search rows beside (sinks.IndexAside), taken
# exclusively to delete the rows a killed one left: the lock's two keys, SQL, the second
# the schema's (an import into another schema of the database has no rows here).
PG_INDEX_ASIDE_LOCK = "7305043, hashtext(current_schema())"


def like_pattern(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


#: PostgreSQL's word index (schema.py's dhtc_words) cuts the search text at every ASCII
#: character that is neither a letter nor a digit (this regular-expression class, for
#: Python's cut and the server's alike; a text holds no NUL), and keeps a word's first 200
#: characters, then 200 from every 100th on: any part of a word up to 100 characters lies in
#: one of them.
PG_WORD_BREAK = r"\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f"
PG_WORD_MAX = 100


def pg_word(word: str) -> bool:
    """Whether PostgreSQL's word index finds every row holding ``word`` (lower-cased): it
    holds no ASCII character that ends a word there, and it fits in one of its pieces."""
    return 3 <= len(word) <= PG_WORD_MAX and not any(c.isascii() and not c.isalnum() for c in word)


_PG_WORD_RUN = re.compile(f"[^{PG_WORD_BREAK}]{{3,}}")


def pg_words(text: str) -> str:
    """A search text's words as dhtc_words() cuts them (schema.py), space-separated: the
    search table's ``words``, written beside the text so that the server does not cut them
    twice (for the word index and for the vocabulary's trigger: half an import's time)."""
    out: List[str] = []
    for run in _PG_WORD_RUN.findall(text):
        if len(run) <= 2 * PG_WORD_MAX:
            out.append(run)
        else:
            out.extend(run[i:i + 2 * PG_WORD_MAX] for i in range(0, len(run) - PG_WORD_MAX, PG_WORD_MAX))
    return " ".join(out)


def pg_row_words(row: str = "") -> str:
    """SQL: a search row's words (of the row aliased ``row``, if given), as the word index,
    its vocabulary and the query read them: those its writer gave (pg_words()), else (a
    writer older than schema 10, a row held before) dhtc_words() of its text."""
    of = f"{row}." if row else ""
    return f"coalesce(string_to_array({of}words, ' '), dhtc_words({of}text))"


def _word_tests(words: List[str], per_word: int = 2) -> Tuple[str, List[Any]]:
    """PostgreSQL: SQL testing that the search text holds every word, and its arguments.

    One word (or a phrase) is handed to the trigram index whole. Several words hand it at
    most ``per_word`` trigrams each (a word's first, then its last run of three letters or
    digits), and each word is then tested exactly (strpos, which the index cannot take).
    Over the whole table two a word keep the false candidates few: every trigram of three
    long words (19 keys for "книга полная документальный") cost a bucket 3.5 ms, two a
    word 1.2-1.4 ms for the same matches (3 M torrents). Within one bucket of ids the
    candidates are few anyway, and each key costs the index about 0.1 ms: one a word.
    A single word looked up so lost more to false candidates than it gained (one-word p95
    44 → 58 ms)."""
    if len(words) < 2:
        return " AND ".join("text LIKE ?" for _ in words), [like_pattern(w) for w in words]
    probes: List[str] = []
    for word in words:
        runs = [word[i:i + 3] for i in range(len(word) - 2) if word[i:i + 3].isalnum()]
        picked = list(dict.fromkeys([runs[0], runs[-1]]))[:per_word] if runs else []
        # A word with no such run (punctuation inside) goes to the index whole, as before.
        probes += [like_pattern(r) for r in picked] or [like_pattern(word)]
    tests = ["text LIKE ?"] * len(probes) + ["strpos(text, ?) > 0"] * len(words)
    return " AND ".join(tests), [*probes, *words]


def _in_word_index(indexed: List[str], forms_of: Dict[str, List[str]], words: List[str]) -> Tuple[str, List[Any]]:
    """PostgreSQL: SQL finding the rows that hold one of each ``indexed`` word's forms in the
    word index (schema 10 or 11) and testing the other ``words`` on them, and its arguments."""
    tested = [w for w in words if w not in indexed]
    tests = [f"{pg_row_words()} && ?::text[]"] * len(indexed) + ["strpos(text, ?) > 0"] * len(tested)
    return " AND ".join(tests), [*(forms_of[w] for w in indexed), *tested]


class Index:
    """A migration step that builds an index: on PostgreSQL online (``CREATE INDEX
    CONCURRENTLY``, which must run outside a transaction: see migrations.Migration), on
    SQLite as a plain ``CREATE INDEX``. Safe to run again, also after an interrupted build."""

    def __init__(self, name: str, table: str, columns: str, *, unique: bool = False, using: str = "",
                 extension: str = "", requires: Tuple[str, ...] = (), replaces: str = "") -> None:
        self.name, self.table, self.columns, self.unique, self.using = name, table, columns, unique, using
        #: A PostgreSQL extension the index needs (pg_trgm): without it the index is skipped;
        #: ``{extension}`` in ``columns`` names its schema.
        self.extension = extension
        #: Other extensions it needs (their operator classes are the types' defaults).
        self.requires = requires
        #: An index this one makes redundant: dropped once this one is built (online too),
        #: kept when this one is skipped.
        self.replaces = replaces

    def __repr__(self) -> str:
        return f"Index({self.name!r} ON {self.table} ({self.columns}))"


class Dialect:
    """The base: what both databases spell alike."""

    name = ""
    #: Opens a write transaction.
    begin = "BEGIN"
    #: True when a migration step may run outside a transaction (PostgreSQL's online index
    #: builds); False runs such steps inside one, with their neighbours.
    runs_outside_transactions = False
    #: True when a bulk load gains from writing the search index on a second connection
    #: (sinks.IndexAside: PostgreSQL, a second server process); such a dialect has
    #: unindex_torrents() and begin_index_aside().
    index_aside = False
    #: How long a bulk load (import) may keep one transaction open across its batches.
    #: 0: a transaction per batch.
    bulk_transaction_secs = 0.0

    # ---- values -----------------------------------------------------------------------------

    def time(self, seconds: Optional[int]) -> Any:
        """A time (Unix seconds) as this database's time columns take it."""
        return seconds

    def seconds(self, value: Any) -> Optional[int]:
        """A time column's value as Unix seconds."""
        return None if value is None else int(value)

    # ---- expressions ------------------------------------------------------------------------

    def least(self, *exprs: str) -> str:
        return f"least({', '.join(exprs)})"

    def greatest(self, *exprs: str) -> str:
        return f"greatest({', '.join(exprs)})"

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        """SQL testing that ``column`` holds ``word`` case-insensitively, and its argument."""
        raise NotImplementedError

    def name_order(self, descending: bool) -> str:
        """ORDER BY terms sorting names case-insensitively."""
        raise NotImplementedError

    def name_hits(self, words: List[str]) -> Tuple[str, List[Any], List[Tuple[str, List[Any]]]]:
        """How a page's relevance tests torrent ``t``'s name for each word: a join to add
        after ``t`` and its arguments, then per word an expression that is 1 when the name
        holds the word (contains()), else 0, with its arguments. Here the tests are the
        expressions themselves."""
        tests = [self.contains("t.name", w) for w in words]
        return "", [], [(f"(CASE WHEN {sql} THEN 1 ELSE 0 END)", [arg]) for sql, arg in tests]

    def holds(self, conn: "Connection", word: str) -> Tuple[str, List[Any]]:
        """SQL testing that torrent ``t`` holds ``word`` in its name or in one of its stored
        paths (contains()), and its arguments."""
        in_name, arg = self.contains("t.name", word)
        in_path, _ = self.contains("f.path", word)
        return f"({in_name} OR EXISTS (SELECT 1 FROM files f WHERE f.torrent = t.id AND {in_path}))", [arg, arg]

    def octet_length(self, expr: str) -> str:
        return f"octet_length({expr})"

    # ---- connections, locks, schema -----------------------------------------------------------

    def prepare(self, conn: "Connection") -> None:
        """Readies a new connection (functions the queries call)."""

    def lock_identity(self, conn: "Connection", identity: str) -> None:
        """Inside a transaction: serialises writers storing the same torrent."""

    def lock_identities(self, conn: "Connection", identities: List[str]) -> None:
        """lock_identity() for many torrents at once."""

    def allocate_ids(self, conn: "Connection", n: int) -> List[int]:
        """Inside a write transaction: ``n`` new torrent ids."""
        raise NotImplementedError

    @contextmanager
    def schema_lock(self, conn: "Connection") -> Iterator[None]:
        """Held while a component migrates (beside other processes migrating)."""
        yield

    @contextmanager
    def bulk(self, conn: "Connection") -> Iterator[None]:
        """Settings for a bulk load on this connection (import), put back afterwards."""
        yield

    # ---- many rows at once (import: sinks.DatabaseSink.merge_many) ------------------------------
    # Here one statement run for each row (SQLite runs them in-process); PostgreSQL sends
    # the rows as arrays, one statement for the lot.

    def torrents_of(self, conn: "Connection", keys: List[bytes]) -> Dict[bytes, int]:
        """The torrent id of each of ``keys`` the hashes table holds."""
        return {bytes(k): int(t) for i in range(0, len(keys), 500) for k, t in conn.execute(
            f"SELECT hash, torrent FROM hashes WHERE hash IN ({', '.join('?' * len(keys[i:i + 500]))})",
            keys[i:i + 500])}

    def add_hashes(self, conn: "Connection", rows: List[Tuple[bytes, int]]) -> None:
        """(key, torrent id) rows, a key held already kept as it is."""
        conn.executemany("INSERT INTO hashes(hash, torrent) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING", rows)

    def merge_sightings(self, conn: "Connection", rows: List[Tuple[Any, ...]]) -> None:
        """Merges sightings into held torrents, in order: (id, first_seen, last_seen, peer,
        times_seen, info_hash_v1, info_hash_v2, version, piece_length, private,
        metadata_size) rows, times as time() gives them. first_seen the earlier, last_seen
        the later (with its peer), times_seen the larger, unknown fields filled in."""
        conn.executemany(
            f"UPDATE torrents SET first_seen = {self.least('first_seen', '?2')}, "
            "peer = CASE WHEN ?3 >= last_seen THEN coalesce(?4, peer) ELSE peer END, "
            f"last_seen = {self.greatest('last_seen', '?3')}, times_seen = {self.greatest('times_seen', '?5')}, "
            "info_hash_v1 = coalesce(info_hash_v1, ?6), info_hash_v2 = coalesce(info_hash_v2, ?7), "
            "version = coalesce(version, ?8), piece_length = coalesce(piece_length, ?9), "
            "private = coalesce(private, ?10), metadata_size = coalesce(metadata_size, ?11) WHERE id = ?1 "
            # A sighting that changes nothing writes nothing (a dump imported again).
            "AND (?2 < first_seen OR ?3 > last_seen OR ?5 > times_seen "
            "OR (?3 >= last_seen AND ?4 IS NOT NULL AND ?4 IS NOT peer) "
            "OR (info_hash_v1 IS NULL AND ?6 IS NOT NULL) OR (info_hash_v2 IS NULL AND ?7 IS NOT NULL) "
            "OR (version IS NULL AND ?8 IS NOT NULL) OR (piece_length IS NULL AND ?9 IS NOT NULL) "
            "OR (private IS NULL AND ?10 IS NOT NULL) OR (metadata_size IS NULL AND ?11 IS NOT NULL))", rows)

    def merge_swarms(self, conn: "Connection", rows: List[Tuple[Any, ...]]) -> None:
        """(id, seeders, leechers, scraped_at) rows: each kept where it is newer than the
        torrent's estimate."""
        conn.executemany("UPDATE torrents SET seeders = ?2, leechers = ?3, scraped_at = ?4 "
                         "WHERE id = ?1 AND (scraped_at IS NULL OR scraped_at < ?4)", rows)

    def mark_delivered(self, conn: "Connection", keys: List[bytes], state: int, now: int) -> None:
        """Marks 20-byte keys ``state`` in the retry store's table (a key being fetched,
        leased, is left to its crawler)."""
        conn.executemany(
            "INSERT INTO retry_hashes(info_hash, state, next_retry_at, first_seen, last_seen, observations, "
            "attempts, priority, failure_counts, recent_failures, lease_owner, peers) "
            "VALUES (?, ?, 0, ?, ?, 0, 0, 0, 0, 0, NULL, NULL) "
            "ON CONFLICT (info_hash) DO UPDATE SET state = excluded.state "
            "WHERE retry_hashes.state != 1 AND retry_hashes.state != excluded.state",
            [(k, state, now, now) for k in keys])

    def build_index(self, conn: "Connection", index: Index) -> None:
        unique = "UNIQUE " if index.unique else ""
        conn.execute(f"CREATE {unique}INDEX IF NOT EXISTS {index.name} ON {index.table} ({index.columns})")

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        raise NotImplementedError

    # ---- the search index, size, compaction -----------------------------------------------------

    #: A query word held by more distinct words of a word index's vocabulary than this is
    #: common: it is only checked on the candidates, not looked up in the word index.
    WORD_FORMS = 64

    def candidates(self, conn: "Connection", words: List[str],
                   window: Optional[int]) -> Tuple[str, List[Any], List[str]]:
        """For a query with words: (SQL selecting the ``id`` of the newest ``window``
        torrents the search index finds for them, newest first; its arguments; the words
        left to check on each candidate, holds())."""
        raise NotImplementedError

    def index_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        """Adds a stored torrent's text (its name, then its stored paths, one per line)."""
        self.index_torrents(conn, [(torrent_id, text)])

    def index_torrents(self, conn: "Connection", texts: List[Tuple[int, str]]) -> None:
        """index_torrent() for many torrents at once."""

    def unindex_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        """Removes what index_torrent() added, before the torrent's rows go."""

    def tokenizer(self, conn: "Connection") -> str:
        """How the search index finds words (stats)."""
        raise NotImplementedError

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """(bytes the database uses, bytes of it the torrents take)."""
        raise NotImplementedError

    def compact(self, conn: "Connection") -> Optional[bool]:
        """Gives freed space back after a prune: True when done, False when the database
        was busy, None when this database reuses the space instead."""
        return None

    def analyze(self, conn: "Connection") -> None:
        """Refreshes the planner's statistics of the torrent tables (after a bulk load)."""
        for table in self.analyzed:
            conn.execute(f"ANALYZE {table}")

    #: The tables analyze() refreshes.
    analyzed: Tuple[str, ...] = ("torrents", "files", "hashes")

    def settle_search(self, conn: "Connection", share_written: float) -> None:
        """After a bulk load that wrote ``share_written`` (0..1) of the search index: the
        index left as quick to read as one built at once."""


def _cap(window: Optional[int]) -> str:
    return "" if window is None else f" LIMIT {int(window)}"


# ---- SQLite -------------------------------------------------------------------------------

def _fts_tokenizer() -> str:
    """trigram when this SQLite has it (3.34+: substrings in any script, CJK included),
    else unicode61 (whole words)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        return "trigram"
    except sqlite3.Error:
        return "unicode61"
    finally:
        conn.close()


FTS_TOKENIZER = _fts_tokenizer()
FTS_OPTIONS = ("tokenize='trigram', detail=none" if FTS_TOKENIZER == "trigram"
               else "tokenize='unicode61 remove_diacritics 2'")


def _unhex(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else bytes.fromhex(text)


def _has(text: Optional[str], needle: str) -> int:
    """SQL dhtc_has(text, needle): 1 when the lower-cased text holds ``needle`` (given
    lower-cased). Unicode-aware, unlike LIKE."""
    return 1 if text is not None and needle in text.lower() else 0


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


#: How the word index (schema.py's ``words``) cuts a torrent's text into words: runs of
#: letters, digits and private-use characters, case-folded, accents kept.
WORD_TOKENIZER = "unicode61 remove_diacritics 0"


def in_vocabulary(word: str) -> bool:
    """Whether the word index finds every torrent that holds ``word`` (as holds() tests it),
    so that the word can be looked up there.

    An occurrence of the word must lie inside one word of the index, folded as the index
    folds it. A word of ASCII letters and digits does (LIKE folds only ASCII, the index
    lower-cases ASCII). Another word of letters and digits does when each of its letters,
    and every character GLOB's case class lets stand for it (its upper cases), is a word
    character the index folds to the same one letter: Cyrillic and Greek do, a letter whose
    capital folds elsewhere does not. A word holds() tests in Python (dhtc_has) does not."""
    w = word.lower()
    if len(w) < 3 or not w.isalnum():
        return False
    if w.isascii():
        return True
    if glob_contains(w) is None:
        return False
    for c in set(w):
        folded = _folded(c)
        if folded is None or len(folded) != 1 or _folded(folded) != folded:
            return False
        if any(_folded(upper) != folded for upper in _upper_of().get(c, ())):
            return False
    return True


_FOLD_PROBE: Optional[sqlite3.Connection] = None
_FOLD_LOCK = threading.Lock()


@lru_cache(maxsize=4096)
def _folded(char: str) -> Optional[str]:
    """What the word index keeps of ``char`` alone (WORD_TOKENIZER, asked of SQLite itself):
    its folded form, or None when it is no word character."""
    global _FOLD_PROBE
    with _FOLD_LOCK:
        if _FOLD_PROBE is None:
            _FOLD_PROBE = sqlite3.connect(":memory:", check_same_thread=False)
            _FOLD_PROBE.execute(f"CREATE VIRTUAL TABLE probe USING fts5(text, tokenize='{WORD_TOKENIZER}')")
            _FOLD_PROBE.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab(probe, row)")
        _FOLD_PROBE.execute("DELETE FROM probe")
        _FOLD_PROBE.execute("INSERT INTO probe(text) VALUES (?)", (char,))
        terms = [t for (t,) in _FOLD_PROBE.execute("SELECT term FROM probe_terms")]
    return terms[0] if len(terms) == 1 else None


def fts_match(words: List[str], trigram: bool, common: Any = None) -> Optional[str]:
    """The FTS5 MATCH expression that finds the candidates, or None (no word the index can
    look up). With trigram (detail=none: no positions) a word is the AND of trigrams that
    cover it, so candidates are a superset, checked afterwards; with unicode61 each word is a
    phrase. ``common(terms)``, when given, returns the trigrams to look up among them (the
    rest are only checked)."""
    terms: List[str] = []
    for w in words:
        if not trigram:
            terms.append(w)
        elif len(w) >= 3:
            terms.extend(covering_trigrams(w))
    terms = list(dict.fromkeys(terms))
    if trigram and common is not None and len(terms) > 1:
        terms = common(terms)
    return " AND ".join(_quote(t) for t in terms) or None


def covering_trigrams(word: str) -> List[str]:
    """Trigrams of ``word`` (3+ characters) that together cover every character: every other
    one and the last. Each trigram is a doclist for the index to intersect; the ones left
    out overlap two kept ones and narrow the candidates little (measured at 1 M torrents:
    half the time of a query of long Cyrillic words; every third trigram let in so many more
    candidates of short made-up words that those queries took twice as long)."""
    starts = list(range(0, len(word) - 2, 2))
    if starts[-1] != len(word) - 3:
        starts.append(len(word) - 3)
    return [word[i:i + 3] for i in starts]


def _case_class(c: str) -> str:
    """A GLOB pattern element matching ``c`` and every character whose lower case is ``c``."""
    members = [c, *_upper_of().get(c, ())]
    if len(members) == 1:
        return "[" + c + "]" if c in "*?[]" else c
    # ']' first (a literal there), '^' never first (negation), '-' last (not a range).
    members.sort(key=lambda m: (m != "]", m == "^", m == "-"))
    return "[" + "".join(members) + "]"


@lru_cache(maxsize=None)
def _upper_of() -> Dict[str, List[str]]:
    """Lower case -> the characters (of the Basic Multilingual Plane) that lower to it, itself
    left out."""
    out: Dict[str, List[str]] = {}
    for code in range(0x10000):
        ch = chr(code)
        low = ch.lower()
        if low != ch and len(low) == 1:
            out.setdefault(low, []).append(ch)
    # Sigma lowers to a final sigma at a word's end (str.lower() looks at the context).
    out["σ"].append("ς")
    out["ς"] = ["σ", "Σ"]
    return out


def glob_contains(word: str) -> Optional[str]:
    """A GLOB pattern testing that a text holds ``word`` case-insensitively (each letter as
    a class of its cases: SQLite's GLOB runs in C, its LIKE folds only ASCII), or None for a
    word outside the Basic Multilingual Plane or holding the dot that "İ" lowers to."""
    needle = word.lower()
    if any(ord(c) > 0xFFFF or c == "\u0307" for c in needle):  # the dot of "İ".lower()
        return None
    return "*" + "".join(_case_class(c) for c in needle) + "*"


# The rows of each index SQLite's ANALYZE reads (PRAGMA analysis_limit).
ANALYSIS_LIMIT = 10_000

# The page cache of a SQLite bulk load (import), in KiB.
BULK_CACHE_KIB = 256 * 1024

# The tables whose pages are the torrents' (prune --max-size).
_TORRENT_TABLES = ("name IN ('torrents', 'files', 'hashes') OR name LIKE 'torrents_by_%' OR name LIKE 'search%' "
                   "OR name LIKE 'words%' OR name LIKE 'vocab%' OR name = 'sqlite_autoindex_vocab_1'")


class SqliteDialect(Dialect):
    """An embedded file (WAL), times as Unix seconds, search through FTS5."""

    name = "sqlite"
    begin = "BEGIN IMMEDIATE"  # the write lock at once: no upgrade that could fail busy
    # Every commit writes each page a batch touched, and the keys of hashes and retry_hashes
    # are random: 10,000 of them touch most of those tables' pages, so per-batch commits
    # made the import's cost grow with the database (23 of 114 s at 1 M were COMMIT). Under
    # the 5 s busy timeout, so that a crawl writing the same file waits, never fails.
    bulk_transaction_secs = 2.0

    def connect(self, path: str, *, read_only: bool = False, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
        if read_only:
            uri = "file:" + Path(path).resolve().as_posix() + "?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000.0, check_same_thread=False,
                                   isolation_level=None)
        # Autocommit mode (transactions are explicit); written from the delivery thread and
        # read from others, hence check_same_thread=False and the connection's lock.
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_ms / 1000.0)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against a process crash in WAL mode (only power loss can undo
        # the last commits).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @contextmanager
    def bulk(self, conn: "Connection") -> Iterator[None]:
        # A page cache that holds the indexes being written (the default 2 MB rereads the
        # hashes' B-tree, keyed at random, for every batch), and a WAL checkpointed every
        # 40 MB rather than every 4: a hot page is copied into the file once per checkpoint.
        saved = {p: conn.value(f"PRAGMA {p}") for p in ("cache_size", "wal_autocheckpoint")}
        conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
        try:
            yield
        finally:
            for pragma, value in saved.items():
                conn.execute(f"PRAGMA {pragma} = {int(value)}")

    def analyze(self, conn: "Connection") -> None:
        # From a sample of each index, as PostgreSQL's ANALYZE samples its tables: a full
        # pass reads every index of the database (seconds at a million torrents).
        saved = conn.value("PRAGMA analysis_limit")  # None before SQLite 3.32: a full pass
        conn.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
        try:
            super().analyze(conn)
        finally:
            if saved is not None:
                conn.execute(f"PRAGMA analysis_limit = {int(saved)}")

    def least(self, *exprs: str) -> str:
        return f"min({', '.join(exprs)})"

    def greatest(self, *exprs: str) -> str:
        return f"max({', '.join(exprs)})"

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        # LIKE for an ASCII word (its case folding is then exact, and it is native), else
        # GLOB with each letter's cases (LIKE folds only ASCII), else dhtc_has, a Python
        # function: 5-10 times the cost of GLOB, called once for the name and once per path.
        if word.isascii():
            return f"{column} LIKE ? ESCAPE '\\'", like_pattern(word)
        pattern = glob_contains(word)
        if pattern is not None:
            return f"{column} GLOB ?", pattern
        return f"dhtc_has({column}, ?)", word.lower()

    def name_order(self, descending: bool) -> str:
        return f"t.name COLLATE NOCASE {'DESC' if descending else 'ASC'}"

    def octet_length(self, expr: str) -> str:
        return f"length(CAST({expr} AS BLOB))"

    def prepare(self, conn: "Connection") -> None:
        # SQLite refuses while another statement of the connection runs: the functions are
        # then taken to be registered by an earlier call.
        raw = conn.raw
        try:
            raw.create_function("dhtc_has", 2, _has, deterministic=True)
            # SQLite's own unhex() is 3.41+; the migration from version 1 uses this one.
            raw.create_function("dhtc_unhex", 1, _unhex, deterministic=True)
        except sqlite3.OperationalError:
            pass

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))

    #: A trigram this common among the newest torrents is not looked up in the index (its
    #: word is still checked on each candidate): intersecting its doclist costs more than it
    #: narrows ("the" is in half the torrents: beside a rare word it took 25 of 33 ms at 3 M).
    COMMON_TRIGRAM_SHARE = 0.25
    #: The matches of a trigram counted, newest first, to tell its share.
    TRIGRAM_PROBE = 200

    def candidates(self, conn: "Connection", words: List[str],
                   window: Optional[int]) -> Tuple[str, List[Any], List[str]]:
        if self._has_words(conn):
            found = self._in_words(conn, words, window)
            if found is not None:
                return found
        match = fts_match(words, self.tokenizer(conn) == "trigram", lambda terms: self._rarer(conn, terms))
        if match is not None:  # trigram: a superset (no positions); unicode61: whole words
            return f"SELECT rowid AS id FROM search WHERE search MATCH ? ORDER BY rowid DESC{_cap(window)}", [match], words
        return f"SELECT id FROM torrents ORDER BY id DESC{_cap(window)}", [], words  # only short words

    def _has_words(self, conn: "Connection") -> bool:
        """Whether the word index is there and holds every torrent (schema.py)."""
        return bool(conn.value("SELECT count(*) FROM sqlite_master WHERE name = 'words_state'")
                    and conn.value("SELECT complete FROM words_state"))

    def _fts_tables(self, conn: "Connection") -> Tuple[str, ...]:
        """The FTS5 tables that index each torrent's text: the search index, and the word
        index when it is kept."""
        return ("search", "words") if self._has_words(conn) else ("search",)

    def _in_words(self, conn: "Connection", words: List[str],
                  window: Optional[int]) -> Optional[Tuple[str, List[Any], List[str]]]:
        """The candidates from the word index, or None when no word can be looked up there.

        The trigram index proves a word absent, or finds its few matches, only by reading
        the doclists of its trigrams from end to end, and those grow with the table (a word
        in no torrent: 30 ms at 10 M). The vocabulary is small: a word it can answer for
        (in_vocabulary(): letters and digits, 3 or more) is looked up there, as a substring
        of the distinct words that hold it. None of them: nothing matches. A few: the
        torrents holding any of them are the word's candidates, a superset of its matches
        (each is still checked, holds()). Many (WORD_FORMS): the word is common, and only
        checked.

        A word left out here (common, or not one in_vocabulary() takes) narrows nothing,
        where the trigram index would intersect its trigrams: when the others' candidates
        fill the window, the trigram index is asked instead (else totals the trigrams found
        exact would become estimates)."""
        groups: List[List[str]] = []
        left_out = False
        for word in words:
            w = word.lower()
            if len(w) < 3:
                continue  # no trigram either: checked on the candidates on both paths
            if not in_vocabulary(w):
                left_out = True
                continue
            forms = [f for (f,) in conn.execute("SELECT word FROM vocab_search WHERE vocab_search MATCH ? LIMIT ?",
                                                (_quote(w), self.WORD_FORMS + 1))]
            if not forms:
                return "SELECT rowid AS id FROM words WHERE 0", [], words
            if len(forms) > self.WORD_FORMS:
                left_out = True
            else:
                groups.append(forms)
        if not groups:
            return None
        match = " AND ".join("(" + " OR ".join(_quote(f) for f in forms) + ")" for forms in groups)
        lookup = f"SELECT rowid AS id FROM words WHERE words MATCH ? ORDER BY rowid DESC{_cap(window)}"
        if left_out and window is not None and int(conn.value(f"SELECT count(*) FROM ({lookup})", (match,))) >= window:
            return None
        return lookup, [match], words

    def _rarer(self, conn: "Connection", terms: List[str]) -> List[str]:
        """``terms`` less the common ones (COMMON_TRIGRAM_SHARE), the rarest kept when every
        one is: each one's share is TRIGRAM_PROBE over the ids its newest TRIGRAM_PROBE
        matches span."""
        top = int(conn.value("SELECT max(id) FROM torrents") or 0)
        share: Dict[str, float] = {}
        for term in terms:
            nth = conn.value("SELECT rowid FROM search WHERE search MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                             (_quote(term), self.TRIGRAM_PROBE - 1))
            share[term] = 0.0 if nth is None else self.TRIGRAM_PROBE / max(1, top - int(nth) + 1)
        kept = [t for t in terms if share[t] < self.COMMON_TRIGRAM_SHARE]
        return kept or [min(terms, key=share.__getitem__)]

    #: An import that wrote at least this share of the search index merges it into one
    #: segment; a smaller one leaves it to FTS5's automerge (a merge rewrites the whole index).
    SETTLE_SHARE = 0.1
    #: Pages of the index a merge step writes, each step a transaction of its own.
    MERGE_STEP_PAGES = 1000
    #: The index's leaf pages a torrent takes (266,382 at 10 M, generator 2), which bounds
    #: the steps: a crawl writing the same file meanwhile adds segments as they merge.
    INDEX_PAGES_PER_TORRENT = 0.03

    def settle_search(self, conn: "Connection", share_written: float) -> None:
        """Merges the search index into one segment, step by step. An import leaves it in
        many (15 at 10 M), and a lookup reads each term in every one: one segment took a
        10 M database's one-word p95 from 51.7 to 45.4 ms. One 'optimize' would hold the
        write lock for the whole merge (39 s at 10 M), longer than a crawl writing the same
        file waits (5 s); a step of MERGE_STEP_PAGES holds it for about a quarter of a
        second, so that crawl writes between steps."""
        if share_written < self.SETTLE_SHARE or self.tokenizer(conn) != "trigram":
            return
        torrents = int(conn.value("SELECT coalesce(max(id), 0) FROM torrents"))
        steps = 10 + int(2 * torrents * self.INDEX_PAGES_PER_TORRENT / self.MERGE_STEP_PAGES)
        for table in self._fts_tables(conn):
            self._merge_segments(conn, table, steps)

    def _merge_segments(self, conn: "Connection", table: str, steps: int) -> None:
        """Merges the FTS5 table's segments into one, at most ``steps`` steps."""
        for _ in range(steps):
            if int(conn.value(f"SELECT count(DISTINCT segid) FROM {table}_idx")) <= 1:
                return
            # The structure record (FTS5's row 10) tells an idle step from one that worked:
            # SQLite 3.40 counts even an idle 'merge' as a change.
            before = conn.value(f"SELECT block FROM {table}_data WHERE id = 10")
            with conn.transaction():
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (-self.MERGE_STEP_PAGES,))
            if conn.value(f"SELECT block FROM {table}_data WHERE id = 10") == before:
                return

    def allocate_ids(self, conn: "Connection", n: int) -> List[int]:
        # The write lock is held (BEGIN IMMEDIATE): nobody else takes ids meanwhile.
        top = int(conn.value("SELECT coalesce(max(id), 0) FROM torrents"))
        return list(range(top + 1, top + 1 + n))

    def index_torrents(self, conn: "Connection", texts: List[Tuple[int, str]]) -> None:
        tables = self._fts_tables(conn)
        for table in tables:
            conn.executemany(f"INSERT INTO {table}(rowid, text) VALUES (?, ?)", texts)
        if "words" in tables:
            # The batch's words, as the word index's tokenizer makes them, come from a scratch
            # index of the batch (tokenizing in Python cost twice as much: 12 µs a torrent).
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.batch_words USING fts5(text, content='', "
                         f"detail=none, tokenize='{WORD_TOKENIZER}')")
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.batch_terms USING fts5vocab(temp, batch_words, row)")
            conn.executemany("INSERT INTO temp.batch_words(text) VALUES (?)", [(text,) for _, text in texts])
            conn.execute("INSERT OR IGNORE INTO vocab(word) SELECT term FROM temp.batch_terms WHERE length(term) >= 3")
            conn.execute("INSERT INTO temp.batch_words(batch_words) VALUES ('delete-all')")

    def unindex_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        # The indexes are contentless: an entry is deleted by giving the text it was written
        # with. The vocabulary keeps the torrent's words: a word no torrent holds any more
        # finds no candidate.
        for table in self._fts_tables(conn):
            conn.execute(f"INSERT INTO {table}({table}, rowid, text) VALUES ('delete', ?, ?)", (torrent_id, text))

    def tokenizer(self, conn: "Connection") -> str:
        row = conn.one("SELECT sql FROM sqlite_master WHERE name = 'search'")
        return "trigram" if row and "trigram" in row[0] else "unicode61"

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """The pages in use (the file less its free pages), and the torrent tables' pages
        less the root page every table and index keeps when empty: from SQLite's dbstat
        table when it has one, else every table's (the retry tables then count as
        torrents' too)."""
        page_size = int(conn.value("PRAGMA page_size"))
        used = (int(conn.value("PRAGMA page_count")) - int(conn.value("PRAGMA freelist_count"))) * page_size
        try:
            pages = int(conn.value(f"SELECT count(*) FROM dbstat WHERE {_TORRENT_TABLES}"))
            roots = int(conn.value(f"SELECT count(*) FROM sqlite_master WHERE rootpage > 0 AND ({_TORRENT_TABLES})"))
        except sqlite3.Error:
            pages = used // page_size
            roots = 1 + int(conn.value("SELECT count(*) FROM sqlite_master WHERE rootpage > 0"))
        return used, max(0, pages - roots) * page_size

    def compact(self, conn: "Connection") -> Optional[bool]:
        """Shrinks the file to its pages in use. The search index first merges its
        segments: FTS5 records a deletion as a marker, and only a merge drops the entries."""
        try:
            for table in self._fts_tables(conn):
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return True
        except sqlite3.OperationalError:
            return False


# ---- PostgreSQL ---------------------------------------------------------------------------

class PostgresDialect(Dialect):
    """A fleet's shared server (psycopg 3), times as timestamptz, search by ILIKE on the
    ``search`` table (helped by its pg_trgm index when the extension could be installed)."""

    name = "postgresql"
    runs_outside_transactions = True
    index_aside = True
    analyzed = ("torrents", "files", "hashes", "search")

    def settle_search(self, conn: "Connection", share_written: float) -> None:
        # The rows an import left in the search index's pending list merged into it now, not
        # read by every search until a vacuum comes (396 pages after 1 M torrents: 3 ms a
        # bucket). Only the index's owner may; another role's import leaves it to autovacuum.
        for (index,) in conn.execute(
                "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = to_regclass('search') AND a.amname = 'gin' "
                "AND pg_has_role(c.relowner, 'USAGE')"):
            conn.execute("SELECT gin_clean_pending_list(?::regclass)", (index,))

    def connect(self, conninfo: str, *, read_only: bool = False, busy_timeout_ms: int = 5000) -> Any:
        from .postgres import connect

        return connect(conninfo)

    def time(self, seconds: Optional[int]) -> Any:
        return None if seconds is None else datetime.fromtimestamp(int(seconds), timezone.utc)

    def seconds(self, value: Any) -> Optional[int]:
        if value is None:
            return None
        if isinstance(value, datetime):
            return int(value.timestamp())
        return int(value)

    def contains(self, column: str, word: str) -> Tuple[str, Any]:
        # Case folding by the database's ctype, as ILIKE's, which is slower (22.6 against
        # 19.7 ms for a 1,000-row page's relevance of three Cyrillic words at 3 M).
        return f"strpos(lower({column}), ?) > 0", word.lower()

    def name_order(self, descending: bool) -> str:
        return f"lower(t.name) {'DESC' if descending else 'ASC'}, t.name"

    def name_hits(self, words: List[str]) -> Tuple[str, List[Any], List[Tuple[str, List[Any]]]]:
        # Each test once a row, on the name lowered once: the relevance names each word's
        # test twice, and PostgreSQL evaluates an expression at every mention (a subquery
        # kept apart by OFFSET 0 is evaluated once). Half of a 1,000-row page's time at
        # 3 M was the score's 6 lower() and 6 strpos() a row.
        tests = ", ".join(f"(strpos(n.l, ?) > 0)::int AS h{i}" for i in range(len(words)))
        join = f" CROSS JOIN LATERAL (SELECT {tests} FROM (SELECT lower(t.name) AS l OFFSET 0) n OFFSET 0) nh"
        return join, [w.lower() for w in words], [(f"nh.h{i}", []) for i in range(len(words))]

    def lock_identity(self, conn: "Connection", identity: str) -> None:
        # Two crawlers of a fleet storing one torrent at once still make one row.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (identity,))

    def lock_identities(self, conn: "Connection", identities: List[str]) -> None:
        # In one order, so two batches sharing torrents cannot deadlock.
        conn.execute("SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext(i) AS h FROM unnest(?::text[]) i "
                     "ORDER BY h) l", (sorted(set(identities)),))

    @contextmanager
    def schema_lock(self, conn: "Connection") -> Iterator[None]:
        # A session lock, held across the transactions and the steps outside them; the
        # retry store takes the same key the same way (core/retry/postgres_store.cpp).
        # Waited for by polling, outside any statement: CREATE INDEX CONCURRENTLY (a step the
        # holder may be running) waits for every open transaction, and a waiter inside
        # pg_advisory_lock() is one, so a blocking wait would deadlock with the holder's
        # online build.
        pause = 0.01
        while not conn.value("SELECT pg_try_advisory_lock(?)", (PG_SCHEMA_LOCK,)):
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        try:
            yield
        finally:
            if conn.healthy():
                conn.execute("SELECT pg_advisory_unlock(?)", (PG_SCHEMA_LOCK,))

    def build_index(self, conn: "Connection", index: Index) -> None:
        """CREATE INDEX CONCURRENTLY, outside a transaction. A build that was interrupted
        leaves an invalid index behind: it is dropped and built again; a valid one is kept."""
        row = conn.one("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                       "WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace", (index.name,))
        if row is None or not row[0]:
            columns = index.columns
            if index.extension:  # its operator classes, named in the extension's schema
                schema = self._extension_schema(conn, index.extension)
                if schema is None:
                    return  # the extension could not be installed: search scans, still correct
                columns = columns.replace("{extension}", '"' + schema.replace('"', '""') + '"')
            if any(self._extension_schema(conn, e) is None for e in index.requires):
                return  # the index it would replace stays
            if row is not None:
                conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}")
            unique = "UNIQUE " if index.unique else ""
            using = f" USING {index.using}" if index.using else ""
            conn.execute(f"CREATE {unique}INDEX CONCURRENTLY {index.name} ON {index.table}{using} ({columns})")
        if index.replaces:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.replaces}")

    @staticmethod
    def _extension_schema(conn: "Connection", extension: str) -> Optional[str]:
        return conn.value("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                          "WHERE e.extname = ?", (extension,))

    def has_column(self, conn: "Connection", table: str, column: str) -> bool:
        # From the catalog: information_schema's view took 3-8 ms a call, several calls a search.
        return bool(conn.value("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                               "to_regclass(quote_ident(current_schema()) || '.' || ?) AND attname = ? "
                               "AND NOT attisdropped", (table, column)))

    #: The ids of a bucket of the search table's recency index (search_recent, schema 8):
    #: its first column is ``id / SEARCH_BUCKET``.
    SEARCH_BUCKET = 16384

    def candidates(self, conn: "Connection", words: List[str],
                   window: Optional[int]) -> Tuple[str, List[Any], List[str]]:
        # The search table (schema 5) holds each torrent's name and paths, one per line:
        # a torrent whose text holds every word (a word has no line break) is a match.
        search, recent, word_index = conn.one(
            "SELECT to_regclass('search') IS NOT NULL, to_regclass('search_recent') IS NOT NULL, "
            f"({self._WORD_INDEX})")
        if not search:  # schema 4, read-only
            return f"SELECT id FROM torrents ORDER BY id DESC{_cap(window)}", [], words
        # A word shorter than 3 characters has no trigram: the index would hand over every
        # row holding the other words to be tested for it (50,000 rows for a common
        # three-character CJK word beside two two-character ones, 210 ms at 1 M). It is
        # checked on the newest `window` candidates of the others instead, as on SQLite, and
        # on the newest `window` torrents when every word is that short.
        looked_up = [w for w in words if len(w) >= 3]
        short = [w for w in words if len(w) < 3]
        if not looked_up:
            return f"SELECT id FROM torrents ORDER BY id DESC{_cap(window)}", [], short
        lowered = [w.lower() for w in looked_up]
        found = self._in_words(conn, lowered, window, word_index) if word_index else None
        if found is not None:
            return (*found, short)
        if window is None or not recent:
            tests, args = _word_tests(lowered)
            return f"SELECT id FROM search WHERE {tests} ORDER BY id DESC{_cap(window)}", args, short
        newest = self._newest_matches(conn, _word_tests(lowered, per_word=1), _word_tests(lowered), int(window))
        return "SELECT unnest(?::bigint[]) AS id", [newest], short

    #: SQL: the word index a query may use (schema 11's bucketed one, else schema 10's), or
    #: NULL while it or the vocabulary's trigram index is missing or being built.
    _WORD_INDEX = ("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indisvalid "
                   "AND i.indexrelid IN (to_regclass('search_words_recent'), to_regclass('search_words')) "
                   "AND EXISTS (SELECT 1 FROM pg_index v WHERE v.indisvalid AND v.indexrelid = to_regclass('vocab_trgm')) "
                   "ORDER BY c.relname DESC LIMIT 1")

    #: The rows a word looked up in the word index may be held by (as the statistics tell):
    #: reading a denser one's costs the index more than it narrows, and the rows handed over
    #: (at most the rarest word's) stay an exact bitmap even in PostgreSQL's default work_mem
    #: (a lossy one tests every row of its pages again: 63 s for two dense words at 10 M).
    WORD_ROWS = 50_000
    #: What looking in one bucket of the recency index costs, in rows the word index hands
    #: over (a bucket about 0.5 ms, a row about 3 µs: 'king', 15,586 rows at 1 M, took 49 ms
    #: through the word index and 13 ms bucket by bucket).
    BUCKET_ROWS = 160

    def _in_words(self, conn: "Connection", words: List[str], window: Optional[int],
                  index: str) -> Optional[Tuple[str, List[Any]]]:
        """The candidates from the word index ``index`` (schema 10 or 11), exact for every
        word, or None when the trigram buckets (_newest_matches) find them for less.

        The trigram index proves a rare word's few matches only by reading the doclists of
        its trigrams, which grow with the table ("jin" alone: 76 ms at 10 M). The
        vocabulary is small: a word it can answer for (pg_word()) is looked up there, as a
        substring of the distinct words that hold it (its forms). None of them: nothing
        matches. A few (WORD_FORMS): the rows holding any form are the word's matches. The
        index intersects the words in few rows (WORD_ROWS) before the table is read, and
        the other words are tested on the rows found.

        The index hands over every one of the R rows of that intersection (about 3 µs each,
        for its id), where the buckets read newest first until the window is full, about
        window / R * (rows / SEARCH_BUCKET) buckets. So the whole index answers when R², R
        estimated as if the words were independent, is below window * rows / SEARCH_BUCKET
        * BUCKET_ROWS (R under 3,100 at 1 M torrents, under 9,900 at 10 M), and always when
        the window is unbounded. Else, when every word has few forms, schema 11's index,
        bucketed by id as the trigram one is, looks them up bucket by bucket, newest first:
        a bucket hands over its rows holding every word, where a trigram bucket hands over
        every row holding one trigram of each word, to be tested ("of sajiha the" at 10 M:
        0.2 ms a bucket against 1.4 ms)."""
        # A word is looked up as its runs of letters and digits: itself, unless it holds ASCII
        # punctuation or a space ("web-dl", a quoted phrase). Each run lies within one of a
        # matching row's words (a substring of it, at the word's ends), and such a word is
        # tested whole on the rows they give.
        pieces = {w: [r for r in _PG_WORD_RUN.findall(w) if pg_word(r)] for w in words}
        askable = list(dict.fromkeys(p for found in pieces.values() for p in found))
        if not askable:
            return None
        forms_of: Dict[str, List[str]] = {}
        for word, (forms,) in zip(askable, conn.execute(
                "SELECT array(SELECT word FROM vocab WHERE word LIKE q.p LIMIT ?) "
                "FROM unnest(?::text[]) WITH ORDINALITY AS q(p, i) ORDER BY q.i",
                (self.WORD_FORMS + 1, [like_pattern(w) for w in askable]))):
            if not forms:
                return "SELECT id FROM search WHERE false", []
            if len(forms) <= self.WORD_FORMS:  # (the vocabulary may hold a word twice: schema.py)
                forms_of[word] = list(dict.fromkeys(forms))
        counted = self._rows_holding(conn, index)
        if counted is None:
            return None
        rows, total = counted
        holding = {w: sum(rows(f) for f in forms) for w, forms in forms_of.items()}
        rare = [w for w in forms_of if holding[w] <= self.WORD_ROWS]
        together = math.prod(holding[w] / total for w in rare) * total if total and rare else 0.0
        bound = math.inf if window is None else math.sqrt(window * total / self.SEARCH_BUCKET * self.BUCKET_ROWS)
        whole = _in_word_index(rare, forms_of, words)
        if rare and together <= bound:
            # `id + 0`: not the primary key read backwards, which tests every row on the way.
            return f"SELECT id FROM search WHERE {whole[0]} ORDER BY id + 0 DESC{_cap(window)}", whole[1]
        # The word buckets take a query only when every word has few forms: a word left out
        # would be tested on every row the others hold in a bucket ("the besa", besa in 65
        # forms: 6,474 rows a bucket, where its trigram narrows them to 243).
        if index != "search_words_recent" or window is None or \
                not all(pieces[w] and all(p in forms_of for p in pieces[w]) for w in words):
            return None
        # Within a bucket every word goes to the index, dense or not: a bucket's rows are
        # few, and a bitmap of them stays exact.
        # Over the whole table: the rare words' rows, `together` of them whatever the matches,
        # else the trigram index.
        newest = self._newest_matches(conn, _in_word_index(askable, forms_of, words),
                                      whole if rare else _word_tests(words), int(window),
                                      whole_rows=together if rare else None)
        return "SELECT unnest(?::bigint[]) AS id", [newest]

    #: How long a connection keeps the word index's statistics (ANALYZE refreshes them).
    WORD_STATS_SECS = 60.0

    def _rows_holding(self, conn: "Connection", index: str) -> Optional[Tuple[Any, float]]:
        """A function giving the search rows that hold a word of the vocabulary, as ANALYZE
        counted them in its sample (the word index's most common words; a word not among them,
        half the rarest one's, the planner's own guess), and the rows of the table. Without
        statistics (an index just built, not yet analyzed), 0 in a table too small for any
        word to be dense, else None: a dense word's rows handed over whole could take
        minutes. Read once a WORD_STATS_SECS per connection: reading them from pg_stats took
        7.5 ms a query at 10 M torrents (10,000 words)."""
        kept = conn.memo.get(f"word_stats {index}")
        if kept is None or time.monotonic() - kept[0] > self.WORD_STATS_SECS:
            row = conn.one(  # (the words are the index's only array column)
                "SELECT c.reltuples, s.most_common_elems::text::text[], s.most_common_elem_freqs FROM pg_class c "
                "LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = ? "
                "AND s.most_common_elems IS NOT NULL WHERE c.oid = to_regclass('search')", (index,))
            total, words, freqs = row if row is not None else (0, None, None)
            common = dict(zip(words or (), freqs or ()))
            rarest = float(freqs[len(words)]) if words and freqs and len(freqs) > len(words) else None
            kept = (time.monotonic(), max(0.0, float(total or 0)), common, rarest)
            conn.memo[f"word_stats {index}"] = kept
        _, total, common, rarest = kept
        if rarest is None:
            return ((lambda form: 0.0), total) if total <= self.WORD_ROWS else None
        return (lambda form: float(common.get(form, rarest / 2)) * total), total

    def holds(self, conn: "Connection", word: str) -> Tuple[str, List[Any]]:
        if not conn.value("SELECT to_regclass('search') IS NOT NULL"):  # schema 4, read-only
            return super().holds(conn, word)
        # On the search text, the name and paths in one row (schema 5), lower-cased.
        return "EXISTS (SELECT 1 FROM search x WHERE x.id = t.id AND x.text LIKE ?)", [like_pattern(word.lower())]

    #: Buckets a statement of _newest_matches() looks in, at most.
    BUCKETS_PER_STATEMENT = 64
    #: What looking in one more bucket costs, in matches tested (at 3 M torrents: a bucket
    #: about 0.5 ms, a match the trigrams alone find and test about 15 µs; three-word p95
    #: 69 ms at 200, 42-45 at 40, 55-71 at 60).
    BUCKET_COST = 40

    def _newest_matches(self, conn: "Connection", in_bucket: Tuple[str, List[Any]], whole: Tuple[str, List[Any]],
                        window: int, whole_rows: Optional[float] = None) -> List[int]:
        """The ids of the newest ``window`` search rows passing the tests ``in_bucket`` (in
        one bucket of ids, through a bucketed index: the trigram one, or schema 11's word
        one) or, the same rows, ``whole`` (over the whole table), newest first.
        ``whole_rows``: the rows ``whole`` reads whatever the matches (the word index's),
        else it costs as many as it finds (the trigram index's, each tested).

        A trigram index alone finds every match, each tested on its row, before the newest
        are kept: cheap for a rare word, not for a common one (a word in 1.5% of 1 M
        torrents: 15,000 rows, 55 ms). Reading the table newest first tests every row on the
        way (200,000 rows for a word in 0.5%, 250 ms). The recency index looks the words up
        within one bucket of ids at a time, newest first. How many matches the buckets seen
        so far hold tells how many the whole table does, and so which way finds the rest for
        less: the trigrams alone, every match tested once (few matches in all), or the next
        buckets, as many as that density needs."""
        top = conn.value("SELECT max(id) FROM search")
        if top is None:
            return []
        top = int(top)
        # The first look spans a whole bucket's ids at least: the newest bucket alone may
        # hold a few ids, too few to tell how dense the matches are.
        newest = top // self.SEARCH_BUCKET
        bucket = newest - 1 if top % self.SEARCH_BUCKET < self.SEARCH_BUCKET // 2 else newest
        hits = self._in_buckets(conn, in_bucket, range(newest, max(-1, bucket - 1), -1), window)
        bucket -= 1
        while bucket >= 0 and len(hits) < window:
            seen = top - (bucket + 1) * self.SEARCH_BUCKET + 1  # the ids of the buckets looked in
            # The density seen so far; before a hit, the word index's (whole_rows over the
            # table), since the newest buckets may hold none of a word that others do.
            per_bucket = (len(hits) / seen if hits or not whole_rows else whole_rows / top) * self.SEARCH_BUCKET
            buckets_left = (window - len(hits)) / per_bucket if per_bucket else math.inf
            if whole_rows is None:  # few in all
                cheaper = len(hits) / seen * top < self.BUCKET_COST * buckets_left + window
            else:  # fewer rows than the buckets still to read cost
                cheaper = whole_rows < self.BUCKET_ROWS * min(buckets_left, bucket + 1)
            if cheaper:
                tests, args = whole
                return [int(r[0]) for r in conn.execute(
                    # `id + 0`: not the primary key read backwards, which tests every row on the way
                    f"SELECT id FROM search WHERE {tests} ORDER BY id + 0 DESC LIMIT ?", (*args, window))]
            # Twice the estimate: the buckets past the limit cost nothing (the lookup stops
            # there), a statement more its round trip and plan.
            count = min(self.BUCKETS_PER_STATEMENT, math.ceil(2 * buckets_left))
            hits += self._in_buckets(conn, in_bucket, range(bucket, max(-1, bucket - count), -1), window - len(hits))
            bucket -= count
        return hits

    def _in_buckets(self, conn: "Connection", word_tests: Tuple[str, List[Any]], buckets: Iterable[int],
                    limit: int) -> List[int]:
        """The newest ``limit`` rows passing ``word_tests`` in ``buckets`` (newest first):
        one bucket after another, in the array's order, until the limit is reached. The
        lookup in one bucket is planned once for them all (a branch per bucket was planned
        per branch: 33 of 78 ms for 64 buckets at 3 M torrents), and an equality on the
        bucket, unlike a list or a range of buckets, is always looked up in the index."""
        tests, args = word_tests
        # The buckets' order is the answer's: no parallel plan, which could interleave them.
        conn.execute("SET max_parallel_workers_per_gather = 0")
        try:
            rows = conn.execute(
                "SELECT s.id FROM unnest(?::bigint[]) AS b(bucket) CROSS JOIN LATERAL "
                f"(SELECT id FROM search WHERE (id / {self.SEARCH_BUCKET}) = b.bucket AND {tests} "
                "ORDER BY id DESC) s LIMIT ?", (list(buckets), *args, limit))
        finally:
            if conn.healthy():
                conn.execute("RESET max_parallel_workers_per_gather")
        return [int(r[0]) for r in rows]

    @staticmethod
    def _has_index(conn: "Connection", name: str) -> bool:
        return bool(conn.value("SELECT count(*) FROM pg_indexes WHERE indexname = ? AND schemaname = current_schema()",
                               (name,)))

    @contextmanager
    def bulk(self, conn: "Connection") -> Iterator[None]:
        # A commit need not wait for its WAL flush: a crash loses at most the last batches,
        # which a run again imports (an import is idempotent); nothing half-written stays.
        conn.execute("SET synchronous_commit = off")
        # The search index's new rows merged in bulk, 4 MB at a time (the server's default;
        # a connection's is 256 kB: postgres.connect), and the list flushed at the end
        # (settle_search()).
        conn.execute("SET gin_pending_list_limit = '4MB'")
        try:
            yield
        finally:
            if conn.healthy():
                conn.execute("RESET synchronous_commit")
                conn.execute("RESET gin_pending_list_limit")

    # Many rows as one statement: the rows as arrays (one per column), unnested.

    def torrents_of(self, conn: "Connection", keys: List[bytes]) -> Dict[bytes, int]:
        return {bytes(k): int(t) for k, t in conn.execute(
            "SELECT hash, torrent FROM hashes WHERE hash = ANY(?::bytea[])", (keys,))} if keys else {}

    def add_hashes(self, conn: "Connection", rows: List[Tuple[bytes, int]]) -> None:
        if rows:
            conn.execute("INSERT INTO hashes(hash, torrent) SELECT * FROM unnest(?::bytea[], ?::bigint[]) "
                         "ON CONFLICT (hash) DO NOTHING", _columns(rows, 2))

    def merge_sightings(self, conn: "Connection", rows: List[Tuple[Any, ...]]) -> None:
        # One UPDATE sets a row once: a torrent merged twice takes its second row in a
        # second round.
        for batch in _rounds(rows):
            conn.execute(
                "UPDATE torrents t SET first_seen = least(t.first_seen, u.f), "
                "peer = CASE WHEN u.l >= t.last_seen THEN coalesce(u.p, t.peer) ELSE t.peer END, "
                "last_seen = greatest(t.last_seen, u.l), times_seen = greatest(t.times_seen, u.n), "
                "info_hash_v1 = coalesce(t.info_hash_v1, u.v1), info_hash_v2 = coalesce(t.info_hash_v2, u.v2), "
                "version = coalesce(t.version, u.v), piece_length = coalesce(t.piece_length, u.pl), "
                "private = coalesce(t.private, u.pr), metadata_size = coalesce(t.metadata_size, u.m) "
                "FROM unnest(?::bigint[], ?::timestamptz[], ?::timestamptz[], ?::text[], ?::bigint[], ?::bytea[], "
                "?::bytea[], ?::text[], ?::bigint[], ?::boolean[], ?::bigint[]) "
                "AS u(id, f, l, p, n, v1, v2, v, pl, pr, m) WHERE t.id = u.id "
                # A sighting that changes nothing writes no new row version (a dump imported again).
                "AND (u.f < t.first_seen OR u.l > t.last_seen OR u.n > t.times_seen "
                "OR (u.l >= t.last_seen AND u.p IS NOT NULL AND u.p IS DISTINCT FROM t.peer) "
                "OR (t.info_hash_v1 IS NULL AND u.v1 IS NOT NULL) OR (t.info_hash_v2 IS NULL AND u.v2 IS NOT NULL) "
                "OR (t.version IS NULL AND u.v IS NOT NULL) OR (t.piece_length IS NULL AND u.pl IS NOT NULL) "
                "OR (t.private IS NULL AND u.pr IS NOT NULL) OR (t.metadata_size IS NULL AND u.m IS NOT NULL))",
                _columns(batch, 11))

    def merge_swarms(self, conn: "Connection", rows: List[Tuple[Any, ...]]) -> None:
        for batch in _rounds(rows):
            conn.execute("UPDATE torrents t SET seeders = u.s, leechers = u.l, scraped_at = u.at "
                         "FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::timestamptz[]) AS u(id, s, l, at) "
                         "WHERE t.id = u.id AND (t.scraped_at IS NULL OR t.scraped_at < u.at)", _columns(batch, 4))

    def mark_delivered(self, conn: "Connection", keys: List[bytes], state: int, now: int) -> None:
        # One statement updates a row once: each key once (they all get the same values).
        keys = list(dict.fromkeys(keys))
        if keys:
            conn.execute(
                "INSERT INTO retry_hashes(info_hash, state, next_retry_at, first_seen, last_seen, observations, "
                "attempts, priority, failure_counts, recent_failures, lease_owner, peers) "
                "SELECT k, ?, 0, ?, ?, 0, 0, 0, 0, 0, NULL, NULL FROM unnest(?::bytea[]) AS k "
                "ON CONFLICT (info_hash) DO UPDATE SET state = excluded.state "
                "WHERE retry_hashes.state != 1 AND retry_hashes.state != excluded.state",
                (state, now, now, keys))

    def index_torrents(self, conn: "Connection", texts: List[Tuple[int, str]]) -> None:
        # Lower-cased here, as the query's words are (candidates()).
        lowered = ((tid, text.lower()) for tid, text in texts)
        conn.copy("search", ("id", "text", "words"), [(tid, text, pg_words(text)) for tid, text in lowered])

    def allocate_ids(self, conn: "Connection", n: int) -> List[int]:
        return [int(r[0]) for r in conn.execute(
            "SELECT nextval(pg_get_serial_sequence('torrents', 'id')) FROM generate_series(1, ?)", (n,))]

    def unindex_torrent(self, conn: "Connection", torrent_id: int, text: str) -> None:
        conn.execute("DELETE FROM search WHERE id = ?", (torrent_id,))

    def unindex_torrents(self, conn: "Connection", ids: List[int]) -> None:
        conn.execute("DELETE FROM search WHERE id = ANY(?::bigint[])", (ids,))

    def begin_index_aside(self, conn: "Connection") -> int:
        """Starts a bulk load's search writer on ``conn`` (sinks.IndexAside): deletes the
        search rows of torrents never committed (an import killed between its search rows'
        commit and its batch's), unless another import writes beside now (its batch may be
        about to commit), then holds the lock that says this one does, until ``conn``
        closes. Returns the rows deleted."""
        dropped = 0
        if conn.value(f"SELECT pg_try_advisory_lock({PG_INDEX_ASIDE_LOCK})"):
            try:
                dropped = len(conn.execute("DELETE FROM search s WHERE NOT EXISTS "
                                           "(SELECT 1 FROM torrents t WHERE t.id = s.id) RETURNING s.id"))
            finally:
                conn.execute(f"SELECT pg_advisory_unlock({PG_INDEX_ASIDE_LOCK})")
        conn.execute(f"SELECT pg_advisory_lock_shared({PG_INDEX_ASIDE_LOCK})")
        return dropped

    def tokenizer(self, conn: "Connection") -> str:
        trigrams = self._has_index(conn, "search_recent") or self._has_index(conn, "search_trgm")
        return "pg_trgm" if trigrams else "scan"

    def measure(self, conn: "Connection") -> Tuple[int, int]:
        """The torrent tables with their indexes and TOAST: the space is reused by later
        writes (a VACUUM FULL the operator runs returns it)."""
        used = int(conn.value("SELECT pg_total_relation_size('torrents') + pg_total_relation_size('files') "
                              "+ pg_total_relation_size('hashes') "
                              "+ coalesce(pg_total_relation_size(to_regclass('search')), 0) "
                              "+ coalesce(pg_total_relation_size(to_regclass('vocab')), 0)"))
        return used, used


def _columns(rows: List[Tuple[Any, ...]], n: int) -> List[List[Any]]:
    """Rows of ``n`` values as ``n`` lists, one per column (for unnest)."""
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _rounds(rows: List[Tuple[Any, ...]]) -> List[List[Tuple[Any, ...]]]:
    """Rows keyed by their first value, in rounds where each key comes once, in order: a
    key's second row is in the second round."""
    rounds: List[List[Tuple[Any, ...]]] = []
    seen: Dict[Any, int] = {}
    for row in rows:
        n = seen.get(row[0], 0)
        seen[row[0]] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(row)
    return rounds


SQLITE = SqliteDialect()
POSTGRESQL = PostgresDialect()
DIALECTS: Dict[str, Dialect] = {d.name: d for d in (SQLITE, POSTGRESQL)}

