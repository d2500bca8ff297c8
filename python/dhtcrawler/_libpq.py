"""The few libpq calls the PostgreSQL sink needs, through ctypes.

libdhtcrawler already links libpq (the retry store's fleet backend), so the library is on
any machine where the package works; no Python driver is needed. Parameters travel as text
(``PQexecParams``), never spliced into SQL.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any, List, Optional, Sequence, Tuple

CONNECTION_OK = 0
PGRES_COMMAND_OK = 1
PGRES_TUPLES_OK = 2


class PgError(RuntimeError):
    """A connection or a statement failed; the message is libpq's, on one line."""


_lib: Optional[ctypes.CDLL] = None


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    candidates = ["libpq.so.5", ctypes.util.find_library("pq")]
    for name in candidates:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        raise PgError("libpq (libpq.so.5) is not installed")
    p, s, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    signatures = {
        "PQconnectdbParams": (p, [ctypes.POINTER(s), ctypes.POINTER(s), i]), "PQstatus": (i, [p]), "PQerrorMessage": (s, [p]),
        "PQfinish": (None, [p]), "PQreset": (None, [p]),
        "PQexecParams": (p, [p, s, i, p, ctypes.POINTER(s), p, p, i]),
        "PQresultStatus": (i, [p]), "PQresultErrorMessage": (s, [p]), "PQclear": (None, [p]),
        "PQntuples": (i, [p]), "PQnfields": (i, [p]), "PQgetvalue": (s, [p, i, i]),
        "PQgetisnull": (i, [p, i, i]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    _lib = lib
    return lib


def _one_line(raw: Optional[bytes]) -> str:
    text = (raw or b"").decode("utf-8", "replace")
    return " ".join(text.split())


def describe(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    if "://" in conninfo:
        scheme, _, rest = conninfo.partition("://")
        if "@" in rest:
            user, _, host = rest.rpartition("@")
            return f"{scheme}://{user.split(':', 1)[0]}@{host}"
        return conninfo
    return " ".join(part for part in conninfo.split() if not part.startswith("password="))


Row = Tuple[Optional[str], ...]


class Connection:
    """One libpq connection, used from one thread at a time (the caller locks)."""

    def __init__(self, conninfo: str) -> None:
        self._lib = _load()
        # A default connect_timeout first, so an unreachable server fails in seconds; one in
        # the connection string overrides it (expand_dbname: later values win).
        keys = (ctypes.c_char_p * 3)(b"connect_timeout", b"dbname", None)
        values = (ctypes.c_char_p * 3)(b"5", conninfo.encode(), None)
        self._conn = self._lib.PQconnectdbParams(keys, values, 1)
        if not self._conn:
            raise PgError("libpq could not allocate a connection")
        if self._lib.PQstatus(self._conn) != CONNECTION_OK:
            why = _one_line(self._lib.PQerrorMessage(self._conn))
            self.close()
            raise PgError(f"cannot connect to {describe(conninfo)}: {why}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> List[Row]:
        """Runs one statement; returns its rows (text values, None for NULL)."""
        if not self._conn:
            raise PgError("the connection is closed")
        values = [None if v is None else str(v).encode() for v in params]
        array = (ctypes.c_char_p * len(values))(*values) if values else None
        res = self._lib.PQexecParams(self._conn, sql.encode(), len(values), None, array, None, None, 0)
        if not res:
            raise PgError(_one_line(self._lib.PQerrorMessage(self._conn)) or "out of memory")
        try:
            status = self._lib.PQresultStatus(res)
            if status not in (PGRES_COMMAND_OK, PGRES_TUPLES_OK):
                raise PgError(_one_line(self._lib.PQresultErrorMessage(res)))
            rows: List[Row] = []
            for r in range(self._lib.PQntuples(res)):
                rows.append(tuple(
                    None if self._lib.PQgetisnull(res, r, c) else self._lib.PQgetvalue(res, r, c).decode()
                    for c in range(self._lib.PQnfields(res))))
            return rows
        finally:
            self._lib.PQclear(res)

    def healthy(self) -> bool:
        return bool(self._conn) and self._lib.PQstatus(self._conn) == CONNECTION_OK

    def reset(self) -> None:
        """Reconnects with the same parameters (after the server went away)."""
        if self._conn:
            self._lib.PQreset(self._conn)

    def close(self) -> None:
        if self._conn:
            self._lib.PQfinish(self._conn)
            self._conn = None
