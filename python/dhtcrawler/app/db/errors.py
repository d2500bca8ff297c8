"""The database layer's errors."""

from __future__ import annotations


class DatabaseError(RuntimeError):
    """A connection or a statement failed (PostgreSQL's, through the layer; SQLite's own
    sqlite3.Error passes as it is)."""


class SchemaError(DatabaseError):
    """The database was written by a newer version of this package."""
