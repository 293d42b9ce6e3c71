"""The SQL `SqliteVectorStore` runs, apart from the store: the schema (records, the FTS5 index and the change log,
with the triggers that keep both in step with every writer), transactions, metadata filters as SQL, and FTS5 query
text built from words."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from ext.core import MetadataValue

SCHEMA = """
CREATE TABLE IF NOT EXISTS ext_collections (name TEXT PRIMARY KEY, vector_size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ext_records (
    collection TEXT NOT NULL REFERENCES ext_collections(name) ON DELETE CASCADE,
    id TEXT NOT NULL,
    embedding BLOB NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    PRIMARY KEY (collection, id)
);
"""
# Keyword search: an FTS5 index over ext_records' text (external content: the text is stored once), kept in step by
# triggers, so every writer (another store, another process) updates it in its own transaction. Upserts update rows
# in place (ON CONFLICT DO UPDATE) so the rowid, which the index keys on, stays the row's. `ext_changes` logs each
# written id for the approximate index of other connections (`_ann`).
SEARCH_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS ext_fts USING fts5(
    text, content='ext_records', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS ext_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, collection TEXT NOT NULL, id TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS ext_records_ai AFTER INSERT ON ext_records BEGIN
    INSERT INTO ext_fts(rowid, text) VALUES (new.rowid, new.text);
    INSERT INTO ext_changes(collection, id) VALUES (new.collection, new.id);
END;
CREATE TRIGGER IF NOT EXISTS ext_records_ad AFTER DELETE ON ext_records BEGIN
    INSERT INTO ext_fts(ext_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO ext_changes(collection, id) VALUES (old.collection, old.id);
END;
CREATE TRIGGER IF NOT EXISTS ext_records_au AFTER UPDATE ON ext_records BEGIN
    INSERT INTO ext_fts(ext_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO ext_fts(rowid, text) VALUES (new.rowid, new.text);
    INSERT INTO ext_changes(collection, id) VALUES (new.collection, new.id);
END;
"""
TABLES = ("ext_collections", "ext_records", "ext_fts", "ext_changes")

# SQLite JSON paths have no escape for a double quote: keys are limited to what `$."key"` can name.
_PATH_KEY = re.compile(r'^[^"\\]+$')


def pack(vector: list[float]) -> bytes:
    # sqlite-vec reads a BLOB as little-endian float32, the layout of array('f') on every platform we ship to.
    return array("f", vector).tobytes()


@contextmanager
def reading(conn: apsw.Connection) -> Iterator[None]:
    """One read transaction: the change log, the rows and the results of a search see the same snapshot."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


@contextmanager
def writing(conn: apsw.Connection) -> Iterator[None]:
    """One write transaction that holds the write lock from its start (waiting up to busy_timeout for it)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # A COMMIT that could not get its lock leaves the transaction open: roll it back, nothing half-written.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def unpack(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def _condition(key: str, values: list[MetadataValue], params: list[Any]) -> str:
    if not _PATH_KEY.match(key):
        raise ValueError(f"filter key {key!r}: SqliteVectorStore cannot filter on keys containing '\"' or '\\'")
    path = f'$."{key}"'
    options: list[str] = []
    for value in values:
        # json_type keeps JSON's kinds apart (true is not 1), which json_extract alone would not.
        if value is None:
            options.append("(json_type(metadata, ?) IS NULL OR json_type(metadata, ?) = 'null')")
            params += [path, path]
        elif isinstance(value, bool):
            options.append("json_type(metadata, ?) = ?")
            params += [path, "true" if value else "false"]
        elif isinstance(value, (int, float)):
            options.append("(json_type(metadata, ?) IN ('integer', 'real') AND json_extract(metadata, ?) = ?)")
            params += [path, path, value]
        else:
            options.append("(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)")
            params += [path, path, value]
    return "(" + " OR ".join(options) + ")"


def has_schema(conn: apsw.Connection) -> bool:
    names = ",".join(f"'{name}'" for name in TABLES)
    row = conn.execute(f"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ({names})").fetchone()
    return row is not None and row[0] == len(TABLES)


def fts_match(terms: list[str]) -> str:
    """An FTS5 query matching any of `terms`, each a quoted string (a phrase of its tokens): the text is never
    read as FTS5 syntax (`AND`, `NEAR`, `*`, `^`, column filters), whatever it holds. FTS5 escapes `"` by doubling."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def where_sql(filter: dict[str, list[MetadataValue]], params: list[Any]) -> str:
    return "".join(f" AND {_condition(key, values, params)}" for key, values in filter.items())


LOG_KEEP = 200_000
"""Change-log entries kept: writers delete older ones. An index that fell further behind is rebuilt."""


def log_position(conn: apsw.Connection) -> tuple[int, int]:
    """(first, last) sequence numbers in the change log; (0, 0) when it is empty."""
    # Two subqueries: SQLite reads min() or max() of a rowid from the b-tree's edge only when each stands alone.
    row = conn.execute("SELECT (SELECT min(seq) FROM ext_changes), (SELECT max(seq) FROM ext_changes)").fetchone()
    if row is None or row[0] is None:
        return 0, 0
    return int(row[0]), int(row[1])


def prune_log(conn: apsw.Connection) -> None:
    """Forget change-log entries older than the last `LOG_KEEP` (inside a write transaction)."""
    conn.execute("DELETE FROM ext_changes WHERE seq <= (SELECT max(seq) FROM ext_changes) - ?", (LOG_KEEP,))
