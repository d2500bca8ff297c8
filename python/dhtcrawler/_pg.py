"""PostgreSQL for the fleet sink (``--store``), through psycopg 3 (the optional extra:
``pip install 'dhtcrawler[postgresql]'``).

A thin layer so the sink and the migrations keep PostgreSQL's own ``$1, $2`` placeholders
and one error type: :class:`PgError`, with the server's or libpq's message on one line.
Parameters are always sent apart from the SQL, never spliced into it.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

_PLACEHOLDER = re.compile(r"\$(\d+)")


class PgError(RuntimeError):
    """A connection or a statement failed; the message is the server's (or libpq's), on
    one line."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise PgError("PostgreSQL (--store) needs psycopg: pip install 'dhtcrawler[postgresql]'") from None
    return psycopg


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def describe(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    if "://" in conninfo:
        scheme, _, rest = conninfo.partition("://")
        if "@" in rest:
            user, _, host = rest.rpartition("@")
            return f"{scheme}://{user.split(':', 1)[0]}@{host}"
        return conninfo
    return " ".join(part for part in conninfo.split() if not part.startswith("password="))


Row = Tuple[Any, ...]


class Connection:
    """One connection in autocommit mode (transactions are explicit ``BEGIN``/``COMMIT``
    statements), used from one thread at a time (the caller locks)."""

    def __init__(self, conninfo: str) -> None:
        self._psycopg = _psycopg()
        self._conninfo = conninfo
        self._conn: Any = None
        self._connect()

    def _connect(self) -> None:
        psycopg = self._psycopg
        # A default connect_timeout, so an unreachable server fails in seconds; one in the
        # connection string wins.
        try:
            given = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        except psycopg.Error as e:
            raise PgError(f"cannot connect to {describe(self._conninfo)}: {_one_line(e)}") from None
        extra: Dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": 5}
        try:
            self._conn = psycopg.connect(self._conninfo, autocommit=True, **extra)
        except psycopg.Error as e:
            raise PgError(f"cannot connect to {describe(self._conninfo)}: {_one_line(e)}") from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> List[Row]:
        """Runs one statement (placeholders ``$1``...); returns its rows."""
        if self._conn is None or self._conn.closed:
            raise PgError("the connection is closed")
        query: str = sql
        args: Optional[Dict[str, Any]] = None
        if params:
            query = _PLACEHOLDER.sub(lambda m: f"%(p{m.group(1)})s", sql.replace("%", "%%"))
            args = {f"p{i}": v for i, v in enumerate(params, 1)}
        try:
            cur = self._conn.execute(query, args, prepare=False)
            return list(cur.fetchall()) if cur.description is not None else []
        except self._psycopg.Error as e:
            raise PgError(_one_line(e) or type(e).__name__) from None

    def healthy(self) -> bool:
        if self._conn is None or self._conn.closed or self._conn.broken:
            return False
        return self._conn.info.status == self._psycopg.pq.ConnStatus.OK

    def reset(self) -> None:
        """Reconnects with the same parameters (after the server went away)."""
        self.close()
        self._connect()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
