"""The torrent tables (component ``torrents``), on SQLite and PostgreSQL, as migrations of
the one format (migrations.py).

Both databases end in one shape: ``torrents`` (an integer ``id``; 20-byte binary hashes;
times as Unix seconds on SQLite, timestamptz on PostgreSQL), ``files`` and ``hashes`` keyed
by that id (``hashes`` holds every 20-byte DHT key of a torrent: its v1 hash, its v2 hash
truncated, the key it came under). SQLite adds its FTS5 search index ``search``;
PostgreSQL a ``search`` table of each torrent's text with a pg_trgm index where the
extension could be installed (version 5 and 6).

Never edit a released entry; append a new one, with its steps on both databases.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from .dialect import (FTS_OPTIONS, FTS_TOKENIZER, PG_WORD_BREAK, PG_WORD_MAX, WORD_TOKENIZER, Dialect, Index,
                      PostgresDialect, pg_row_words)
from .migrations import Migration

COMPONENT = "torrents"

# (description, statements) per version, as each database got them before the two shared
# one shape (version 4).
Steps = Sequence[Tuple[str, Sequence[str]]]

_SQLITE: Steps = (
    ("torrents, their files and every hash that names them", (
        """CREATE TABLE torrents (
            info_hash     TEXT PRIMARY KEY,      -- the DHT key it was first delivered under
            info_hash_v1  TEXT,                  -- 40 hex, or NULL for v2-only
            info_hash_v2  TEXT,                  -- 64 hex, or NULL for v1-only
            version       TEXT NOT NULL,         -- v1, v2 or hybrid
            name          TEXT NOT NULL,
            total_size    INTEGER NOT NULL,
            num_files     INTEGER NOT NULL,
            piece_length  INTEGER NOT NULL,
            private       INTEGER NOT NULL,
            metadata_size INTEGER NOT NULL,      -- bytes of the info dict
            first_seen    TEXT NOT NULL,         -- RFC 3339 UTC
            last_seen     TEXT NOT NULL,
            peer          TEXT,                  -- the peer that served it last
            times_seen    INTEGER NOT NULL DEFAULT 1
        )""",
        """CREATE TABLE files (
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE,
            idx       INTEGER NOT NULL,
            path      TEXT NOT NULL,
            size      INTEGER NOT NULL,
            PRIMARY KEY (info_hash, idx)
        ) WITHOUT ROWID""",
        """CREATE TABLE hashes (
            hash      TEXT PRIMARY KEY,          -- a v1 hash (40 hex) or a full v2 hash (64 hex)
            kind      TEXT NOT NULL CHECK (kind IN ('v1', 'v2')),
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE
        ) WITHOUT ROWID""",
        "CREATE INDEX hashes_by_torrent ON hashes(info_hash)",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
    )),
    ("small on disk: binary hashes, an integer torrent key, times as Unix seconds; "
     "the full-text index", (
        """CREATE TABLE torrents2 (
            id            INTEGER PRIMARY KEY,   -- the key of files, hashes and the search index
            info_hash     BLOB NOT NULL,         -- 20 bytes: the DHT key it was first delivered under
            info_hash_v1  BLOB,                  -- 20 bytes, or NULL (v2-only, or unknown: see version)
            info_hash_v2  BLOB,                  -- 32 bytes, or NULL (v1-only, or unknown)
            version       TEXT,                  -- v1, v2, hybrid; NULL = unknown (imported from magnetico)
            name          TEXT NOT NULL,
            total_size    INTEGER NOT NULL,
            num_files     INTEGER NOT NULL,      -- every file, even when fewer rows are stored
            piece_length  INTEGER,               -- NULL = unknown
            private       INTEGER,               -- 0/1; NULL = unknown
            metadata_size INTEGER,               -- bytes of the info dict; NULL = unknown
            first_seen    INTEGER NOT NULL,      -- Unix seconds, UTC
            last_seen     INTEGER NOT NULL,
            peer          TEXT,                  -- the peer that served it last
            times_seen    INTEGER NOT NULL DEFAULT 1
        )""",
        "INSERT INTO torrents2(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, num_files, "
        "piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen) "
        "SELECT dhtc_unhex(info_hash), dhtc_unhex(info_hash_v1), dhtc_unhex(info_hash_v2), version, name, "
        "total_size, num_files, piece_length, private, metadata_size, CAST(strftime('%s', first_seen) AS INTEGER), "
        "CAST(strftime('%s', last_seen) AS INTEGER), peer, times_seen FROM torrents ORDER BY first_seen, info_hash",
        """CREATE TABLE files2 (
            torrent INTEGER NOT NULL,            -- torrents.id
            idx     INTEGER NOT NULL,
            path    TEXT NOT NULL,
            size    INTEGER NOT NULL,
            PRIMARY KEY (torrent, idx)
        ) WITHOUT ROWID""",
        "INSERT INTO files2(torrent, idx, path, size) SELECT t.id, f.idx, f.path, f.size "
        "FROM files f JOIN torrents2 t ON t.info_hash = dhtc_unhex(f.info_hash) ORDER BY t.id, f.idx",
        # Every 20-byte DHT key of a torrent: its v1 hash, its v2 hash truncated to 20 bytes
        # (a full v2 hash is looked up by its first 20 bytes), and the key it came under.
        """CREATE TABLE hashes2 (
            hash    BLOB PRIMARY KEY,
            torrent INTEGER NOT NULL             -- torrents.id
        ) WITHOUT ROWID""",
        "INSERT OR IGNORE INTO hashes2(hash, torrent) SELECT dhtc_unhex(substr(h.hash, 1, 40)), t.id "
        "FROM hashes h JOIN torrents2 t ON t.info_hash = dhtc_unhex(h.info_hash)",
        "INSERT OR IGNORE INTO hashes2(hash, torrent) SELECT info_hash, id FROM torrents2",
        "DROP TABLE hashes",
        "DROP TABLE files",
        "DROP TABLE torrents",
        "ALTER TABLE torrents2 RENAME TO torrents",
        "ALTER TABLE files2 RENAME TO files",
        "ALTER TABLE hashes2 RENAME TO hashes",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
        # The search index: one document per torrent (its name, then the paths of its stored
        # files, one per line), contentless (the text is in torrents and files), rowid =
        # torrents.id. With trigram it records which trigrams occur, not where (detail=none):
        # search.py looks up candidates by trigram and checks each word on the stored text.
        # Written by the sink with the torrent.
        "CREATE VIRTUAL TABLE search USING fts5(text, content='', {fts_options})",
        "INSERT INTO search(rowid, text) SELECT t.id, t.name || coalesce(char(10) || p.paths, '') FROM torrents t "
        "LEFT JOIN (SELECT torrent, group_concat(path, char(10)) AS paths FROM "
        "(SELECT torrent, path FROM files ORDER BY torrent, idx) GROUP BY torrent) p ON p.torrent = t.id",
    )),
    ("swarm sizes: the latest BEP-33 estimate of seeders and leechers, and when it was made", (
        # NULL until a scrape answered (the columns cost nothing in rows written before).
        "ALTER TABLE torrents ADD COLUMN seeders INTEGER",
        "ALTER TABLE torrents ADD COLUMN leechers INTEGER",
        "ALTER TABLE torrents ADD COLUMN scraped_at INTEGER",  # Unix seconds, UTC
    )),
)

# The pg_trgm index on names, when the extension can be had: without it (or the right to
# create it) search scans, still correct.
_PG_NAME_TRIGRAMS = """DO $$ BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXECUTE 'CREATE INDEX torrents_name_trgm ON torrents USING gin (lower(name) gin_trgm_ops)';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'dhtcrawler: no pg_trgm index (%), search scans', SQLERRM;
END $$"""

_POSTGRESQL: Steps = (
    ("torrents, their files and every hash that names them", (
        """CREATE TABLE torrents (
            info_hash     TEXT PRIMARY KEY,
            info_hash_v1  TEXT,
            info_hash_v2  TEXT,
            version       TEXT NOT NULL,
            name          TEXT NOT NULL,
            total_size    BIGINT NOT NULL,
            num_files     BIGINT NOT NULL,
            piece_length  BIGINT NOT NULL,
            private       BOOLEAN NOT NULL,
            metadata_size BIGINT NOT NULL,
            first_seen    TIMESTAMPTZ NOT NULL,
            last_seen     TIMESTAMPTZ NOT NULL,
            peer          TEXT,
            times_seen    BIGINT NOT NULL DEFAULT 1
        )""",
        """CREATE TABLE files (
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE,
            idx       BIGINT NOT NULL,
            path      TEXT NOT NULL,
            size      BIGINT NOT NULL,
            PRIMARY KEY (info_hash, idx)
        )""",
        """CREATE TABLE hashes (
            hash      TEXT PRIMARY KEY,
            kind      TEXT NOT NULL CHECK (kind IN ('v1', 'v2')),
            info_hash TEXT NOT NULL REFERENCES torrents(info_hash) ON DELETE CASCADE
        )""",
        "CREATE INDEX hashes_by_torrent ON hashes(info_hash)",
        "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
    )),
    ("search: a pg_trgm index on the names, when the extension can be had", (
        _PG_NAME_TRIGRAMS,
        "CREATE INDEX torrents_by_first_seen ON torrents(first_seen)",
    )),
    ("swarm sizes: the latest BEP-33 estimate of seeders and leechers, and when it was made", (
        "ALTER TABLE torrents ADD COLUMN seeders BIGINT",
        "ALTER TABLE torrents ADD COLUMN leechers BIGINT",
        "ALTER TABLE torrents ADD COLUMN scraped_at TIMESTAMPTZ",
    )),
)

# Version 4: PostgreSQL takes SQLite's shape (an integer id; binary hashes, the 20-byte keys
# in hashes; fields a source did not know, as for a magnetico import, may be NULL), so one
# query serves both. The rows are copied in first-seen order; on SQLite nothing changes.
_PG_SQLITE_SHAPE = (
    """CREATE TABLE torrents2 (
        id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        info_hash     BYTEA NOT NULL,        -- 20 bytes: the DHT key it was first delivered under
        info_hash_v1  BYTEA,                 -- 20 bytes, or NULL (v2-only, or unknown: see version)
        info_hash_v2  BYTEA,                 -- 32 bytes, or NULL
        version       TEXT,                  -- v1, v2, hybrid; NULL = unknown
        name          TEXT NOT NULL,
        total_size    BIGINT NOT NULL,
        num_files     BIGINT NOT NULL,       -- every file, even when fewer rows are stored
        piece_length  BIGINT,
        private       BOOLEAN,
        metadata_size BIGINT,
        first_seen    TIMESTAMPTZ NOT NULL,
        last_seen     TIMESTAMPTZ NOT NULL,
        peer          TEXT,
        times_seen    BIGINT NOT NULL DEFAULT 1,
        seeders       BIGINT,
        leechers      BIGINT,
        scraped_at    TIMESTAMPTZ
    )""",
    "INSERT INTO torrents2(info_hash, info_hash_v1, info_hash_v2, version, name, total_size, num_files, piece_length, "
    "private, metadata_size, first_seen, last_seen, peer, times_seen, seeders, leechers, scraped_at) "
    "SELECT decode(left(info_hash, 40), 'hex'), decode(info_hash_v1, 'hex'), decode(info_hash_v2, 'hex'), version, "
    "name, total_size, num_files, piece_length, private, metadata_size, first_seen, last_seen, peer, times_seen, "
    "seeders, leechers, scraped_at FROM torrents ORDER BY first_seen, info_hash",
    """CREATE TABLE files2 (
        torrent BIGINT NOT NULL,             -- torrents.id
        idx     BIGINT NOT NULL,
        path    TEXT NOT NULL,
        size    BIGINT NOT NULL,
        PRIMARY KEY (torrent, idx)
    )""",
    "INSERT INTO files2(torrent, idx, path, size) SELECT t.id, f.idx, f.path, f.size FROM files f "
    "JOIN torrents2 t ON t.info_hash = decode(left(f.info_hash, 40), 'hex')",
    "CREATE TABLE hashes2 (hash BYTEA PRIMARY KEY, torrent BIGINT NOT NULL)",
    "INSERT INTO hashes2(hash, torrent) SELECT decode(left(h.hash, 40), 'hex'), t.id FROM hashes h "
    "JOIN torrents2 t ON t.info_hash = decode(left(h.info_hash, 40), 'hex') ON CONFLICT (hash) DO NOTHING",
    "INSERT INTO hashes2(hash, torrent) SELECT info_hash, id FROM torrents2 ON CONFLICT (hash) DO NOTHING",
    "DROP TABLE hashes",
    "DROP TABLE files",
    "DROP TABLE torrents",
    "ALTER TABLE torrents2 RENAME TO torrents",
    "ALTER TABLE files2 RENAME TO files",
    "ALTER TABLE hashes2 RENAME TO hashes",
    "CREATE INDEX torrents_by_last_seen ON torrents(last_seen)",
    "CREATE INDEX torrents_by_first_seen ON torrents(first_seen)",
    "CREATE INDEX hashes_by_torrent ON hashes(torrent)",
    _PG_NAME_TRIGRAMS,
)


def _joined(sqlite: Steps, postgresql: Steps) -> List[Migration]:
    out = []
    for (d_sqlite, s_sqlite), (d_pg, s_pg) in zip(sqlite, postgresql):
        description = d_sqlite if d_sqlite == d_pg else f"{d_sqlite} (PostgreSQL: {d_pg})"
        out.append(Migration(description, tuple(s_sqlite), tuple(s_pg)))
    return out


# Version 5: PostgreSQL's search text, as SQLite's index holds it (the name, then the stored
# paths, one per line), so that one lookup finds the torrents holding every word of a query
# in their name or paths, newest first (search.py's candidate window). Written by the sink
# with the torrent, lower-cased (by Python's str.lower(), as the query's words are; here, for
# the rows held before, by the database's lower(), alike but for a few letters): the query
# tests it with LIKE on a lower-cased word (ILIKE folds every row's text again).
_PG_SEARCH_TEXT = (
    "CREATE TABLE search (id BIGINT PRIMARY KEY, text TEXT NOT NULL)",  # id = torrents.id
    "INSERT INTO search(id, text) SELECT t.id, lower(t.name || coalesce(chr(10) || p.paths, '')) FROM torrents t "
    "LEFT JOIN (SELECT torrent, string_agg(path, chr(10) ORDER BY idx) AS paths FROM files GROUP BY torrent) p "
    "ON p.torrent = t.id",
)

# Version 6: the indexes search, its filters and its sorts use, built online on PostgreSQL
# (a fleet keeps writing meanwhile). The trigram index is on the very expression the query
# tests (``text ILIKE ...``); the old one on lower(name) never served ``name ILIKE``.
_SORT_INDEXES = (
    Index("torrents_by_size", "torrents", "total_size, id"),
    Index("torrents_by_files", "torrents", "num_files, id"),
)
_PG_SEARCH_INDEXES = (
    # In public when it may (a schema's extension goes when the schema is dropped, and other
    # schemas do not see its operator classes), else where the server puts it.
    "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; EXCEPTION WHEN OTHERS THEN "
    "BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm; EXCEPTION WHEN OTHERS THEN "
    "RAISE NOTICE 'dhtcrawler: no pg_trgm (%), search scans', SQLERRM; END; END $$",
    Index("search_trgm", "search", "text {extension}.gin_trgm_ops", using="gin", extension="pg_trgm"),
    *_SORT_INDEXES,
    "DROP INDEX CONCURRENTLY IF EXISTS torrents_name_trgm",
)
# Version 8: PostgreSQL's search by recency. The trigram index cannot hand its matches over
# newest first, so a common word's query tested every match (search.py keeps the newest
# `window`). This one indexes each row's id bucket beside its trigrams (btree_gin), and a
# query looks its words up bucket by bucket, newest first (PostgresDialect.candidates).
# It replaces search_trgm (a query without buckets uses it as well); without btree_gin it is
# skipped and search_trgm stays.
_PG_RECENT_SEARCH = (
    "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public; EXCEPTION WHEN OTHERS THEN "
    "BEGIN CREATE EXTENSION IF NOT EXISTS btree_gin; EXCEPTION WHEN OTHERS THEN "
    "RAISE NOTICE 'dhtcrawler: no btree_gin (%), search by trigrams alone', SQLERRM; END; END $$",
    Index("search_recent", "search", f"(id / {PostgresDialect.SEARCH_BUCKET}), text {{extension}}.gin_trgm_ops",
          using="gin", extension="pg_trgm", requires=("btree_gin",), replaces="search_trgm"),
)

# ---- the indexer (issue 34): release names parsed at ingest --------------------------------
# One entry, PARSED_NAMES, appended last: after the scale issue's (33) versions when both
# land (its number is its place in MIGRATIONS; nothing else names it).
# What app/classify.py decides from a torrent's name, files and size (NULL everywhere until
# parsed: `parsed` is the classifier's version, NULL = not yet, to the backfill).
_PARSED_COLUMNS = (("content_type", "TEXT", "TEXT"), ("category", "INTEGER", "INTEGER"), ("title", "TEXT", "TEXT"),
                   ("year", "INTEGER", "INTEGER"), ("season", "INTEGER", "INTEGER"),
                   ("season_end", "INTEGER", "INTEGER"), ("episode", "INTEGER", "INTEGER"),
                   ("episode_end", "INTEGER", "INTEGER"), ("resolution", "TEXT", "TEXT"), ("source", "TEXT", "TEXT"),
                   ("video_codec", "TEXT", "TEXT"), ("release_group", "TEXT", "TEXT"),
                   ("languages", "TEXT", "TEXT"), ("tags", "TEXT", "TEXT"), ("parsed", "INTEGER", "INTEGER"),
                   # 1: a content rule hid it (app/rules.py): kept, never served
                   ("hidden", "INTEGER", "INTEGER"))
# The Torznab feeds: the newest of a content type (cat=5000) or a subcategory (cat=5040).
# Built inside the migration's transaction, not online: an online build (Index, outside a
# transaction) waits for every open transaction, and a fleet's second crawler holds one
# while it waits for the schema lock the first holds (the retry store's runner takes it
# inside its transaction): a deadlock (test_cli_store's fleet test found it).
_PARSED_INDEXES = ("CREATE INDEX IF NOT EXISTS torrents_by_type ON torrents (content_type, first_seen)",
                   "CREATE INDEX IF NOT EXISTS torrents_by_category ON torrents (category, first_seen)")
PARSED_NAMES = Migration(
    "release names parsed at ingest: content type, Torznab category, title, year, seasons, episodes, "
    "resolution, source, video codec, release group, languages, tags; hidden by a content rule; "
    "indexes for the feeds by type",
    sqlite=(*(f"ALTER TABLE torrents ADD COLUMN {name} {lite}" for name, lite, _pg in _PARSED_COLUMNS),
            *_PARSED_INDEXES),
    postgresql=("ALTER TABLE torrents " + ", ".join(f"ADD COLUMN {name} {pg}" for name, _lite, pg in _PARSED_COLUMNS),
                *_PARSED_INDEXES))

# SQLite's word index (SqliteDialect.candidates): a word that is rare or absent is found
# without reading every torrent's trigrams. `words` tells which torrents hold each word
# (the search index's text cut into words: dialect.WORD_TOKENIZER; contentless,
# detail=none, rowid = torrents.id). `vocab` holds each distinct word of 3 characters or
# more once, as `words` keeps it, and `vocab_search` finds the words holding a substring
# (trigram, with positions: the vocabulary is small). It is kept only when it can be
# complete: in a database that had no torrent yet when it got these tables, on a SQLite with
# the trigram tokenizer (words_state.complete); an older database searches as before.
_SQLITE_WORDS = (
    "CREATE TABLE vocab (id INTEGER PRIMARY KEY, word TEXT NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE vocab_search USING fts5(word, content='vocab', content_rowid='id', "
    "tokenize='{vocab_tokenizer}')",
    "CREATE TRIGGER vocab_searchable AFTER INSERT ON vocab BEGIN "
    "INSERT INTO vocab_search(rowid, word) VALUES (new.id, new.word); END",
    "CREATE VIRTUAL TABLE words USING fts5(text, content='', detail=none, tokenize='{word_tokenizer}')",
    "CREATE TABLE words_state (complete INTEGER NOT NULL)",
    "INSERT INTO words_state SELECT {has_trigram} AND NOT EXISTS (SELECT 1 FROM torrents)",
)

# PostgreSQL's word index (PostgresDialect._in_words), as SQLite's: a word that is rare or
# absent is found without reading every row's trigrams. `dhtc_words(text)` cuts a search
# text into words at every ASCII character that is neither a letter nor a digit (the text is
# lower-cased already; any other character belongs to a word, so no locale decides) and
# keeps those of 3 characters or more, a long one as pieces of 200 from every 100th
# (dialect.PG_WORD_MAX: an index key has a size limit, and any part of a word up to 100
# characters lies in one piece). A writer of this version sends the words beside the text
# (`words`, space-separated: dialect.pg_words), so that the server does not cut them twice
# per row (the regular expression took 40 µs a row in the trigger); a row without them (an
# older writer, the rows held before) is cut by the server (dialect.pg_row_words).
# `search_words` indexes each row's words (GIN, built online); `vocab` holds each distinct
# word, kept by a statement trigger on `search`, so that every writer fills it, of any
# version; `vocab_trgm` finds the words holding a substring. The vocabulary has no unique
# key: a word two writers add at once may be held twice, which the lookup does not mind,
# where a key would make the second wait for the first's commit, and two batches of new
# words could wait for each other. The rows held before are added in steps of 20,000, each
# its own transaction; the query uses the index once the vocabulary's trigram index, built
# last, is there. ANALYZE samples ten times the default for search_words: its most common
# words tell a rare word from a dense one.
def _add_to_vocab(rows: str, where: str = "") -> str:
    """SQL adding the words of the search rows ``rows`` (a table or an alias) that the
    vocabulary lacks, each once; ``where`` narrows the rows."""
    return (f"INSERT INTO vocab(word) SELECT DISTINCT w FROM {rows}, unnest({pg_row_words(rows)}) AS w "
            f"WHERE {where}NOT EXISTS (SELECT 1 FROM vocab v WHERE v.word = w)")


_PG_WORDS = (
    f"""CREATE OR REPLACE FUNCTION dhtc_words(text) RETURNS text[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT ARRAY(SELECT substr(w, s, {2 * PG_WORD_MAX})
                     FROM regexp_split_to_table($1, '[{PG_WORD_BREAK}]+') AS w,
                          generate_series(1, greatest(1, length(w) - {PG_WORD_MAX}), {PG_WORD_MAX}) AS s
                     WHERE length(w) >= 3) $$""",
    "ALTER TABLE search ADD COLUMN IF NOT EXISTS words TEXT",
    "CREATE TABLE IF NOT EXISTS vocab (word TEXT NOT NULL)",
    Index("vocab_word", "vocab", "word"),
    f"""CREATE OR REPLACE FUNCTION dhtc_vocab_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        {_add_to_vocab("added")};
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS search_vocab ON search",
    "CREATE TRIGGER search_vocab AFTER INSERT ON search REFERENCING NEW TABLE AS added "
    "FOR EACH STATEMENT EXECUTE FUNCTION dhtc_vocab_added()",
    Index("search_words", "search", pg_row_words(), using="gin"),
    "ALTER INDEX search_words ALTER COLUMN 1 SET STATISTICS 1000",
    f"""DO $$ DECLARE
        low BIGINT := 0;
        top BIGINT := (SELECT coalesce(max(id), 0) FROM search);
    BEGIN
        WHILE low < top LOOP
            {_add_to_vocab("search", "id > low AND id <= low + 20000 AND ")};
            COMMIT;
            low := low + 20000;
        END LOOP;
    END $$""",
    Index("vocab_trgm", "vocab", "word {extension}.gin_trgm_ops", using="gin", extension="pg_trgm"),
    "ANALYZE search",
)

# Version 11: PostgreSQL's word index bucketed by id, as the trigram one is (schema 8). A
# word in tens of thousands of rows is too dense for the whole index to hand over (about 3 µs
# a row) and too rare a bucket for the trigram buckets to fill a window soon (each of their
# rows holding one trigram of every word is tested). This index looks the words up within
# one bucket of ids at a time, newest first (PostgresDialect._in_words); a query without a
# bucket uses it as it used search_words, which it replaces. Without btree_gin it is skipped
# and search_words stays.
_PG_RECENT_WORDS = (
    Index("search_words_recent", "search", f"(id / {PostgresDialect.SEARCH_BUCKET}), {pg_row_words()}",
          using="gin", requires=("btree_gin",), replaces="search_words"),
    "ALTER INDEX IF EXISTS search_words_recent ALTER COLUMN 2 SET STATISTICS 1000",
    "ANALYZE search",
)

MIGRATIONS: Sequence[Migration] = (
    *_joined(_SQLITE, _POSTGRESQL),
    Migration("PostgreSQL in SQLite's shape: an integer id, binary hashes, unknown fields NULL",
              sqlite=(), postgresql=_PG_SQLITE_SHAPE),
    Migration("PostgreSQL's search text: each torrent's name and paths, one row", sqlite=(),
              postgresql=_PG_SEARCH_TEXT),
    Migration("indexes for search, its filters and sorts (PostgreSQL: built online)",
              sqlite=(Index("torrents_by_first_seen", "torrents", "first_seen"), *_SORT_INDEXES),
              postgresql=_PG_SEARCH_INDEXES, transactional=False),
    PARSED_NAMES,
    Migration("PostgreSQL: search by recency, the trigram index bucketed by id (built online)", sqlite=(),
              postgresql=_PG_RECENT_SEARCH, transactional=False),
    Migration("SQLite: a word index beside the trigram one (new databases)", sqlite=_SQLITE_WORDS, postgresql=()),
    Migration("PostgreSQL: a word index beside the trigram one (built online)", sqlite=(), postgresql=_PG_WORDS,
              transactional=False),
    Migration("PostgreSQL: the word index bucketed by id (built online)", sqlite=(), postgresql=_PG_RECENT_WORDS,
              transactional=False),
)

SCHEMA_VERSION = len(MIGRATIONS)

# The oldest version the read-only commands (search, export, serve) can read: the shape
# the queries expect came with version 2 on SQLite, with version 4 on PostgreSQL.
_READABLE_FROM = {"sqlite": 2, "postgresql": 4}


def readable_from(dialect: Dialect) -> int:
    return _READABLE_FROM[dialect.name]


def prepare(step: str) -> str:
    """Fills in what depends on the SQLite library (the tokenizers of the search and word indexes)."""
    trigram = FTS_TOKENIZER == "trigram"
    return (step.replace("{fts_options}", FTS_OPTIONS)
            .replace("{vocab_tokenizer}", "trigram" if trigram else "unicode61")
            .replace("{has_trigram}", "1" if trigram else "0").replace("{word_tokenizer}", WORD_TOKENIZER))
