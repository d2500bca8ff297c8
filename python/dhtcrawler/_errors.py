"""The exceptions of the package: one base class, typed by the C ABI's status."""

from __future__ import annotations

from typing import Optional

from . import _native


class DhtcError(Exception):
    """A call into the library failed.

    ``status`` is the C ABI status code (negative), ``status_name`` its stable name
    (``"DHTC_ERR_INVALID_OPTION"``) and ``message`` the library's message
    (``dhtc_last_error()``).
    """

    def __init__(self, status: int, status_name: str, message: str) -> None:
        super().__init__(f"{message} ({status_name})" if message else status_name)
        self.status = status
        self.status_name = status_name
        self.message = message


class OptionsError(DhtcError, ValueError):
    """The options document was rejected. ``key_path`` names the offending key
    (``"metadata.timout_secs"``, ``"crawl.bootstrap.sources[2]"``), or is None when the
    document as a whole is at fault (not JSON, too large)."""

    def __init__(self, status: int, status_name: str, message: str) -> None:
        super().__init__(status, status_name, message)
        self.key_path: Optional[str] = _key_path_of(message)


class BindError(DhtcError, OSError):
    """A socket could not be bound (the port is taken, the address is not local)."""


class StateError(DhtcError, RuntimeError):
    """The call is not allowed now (started twice, closed, destroy from a callback)."""


class StoreError(DhtcError):
    """The retry store could not be opened: an unusable SQLite file, or a PostgreSQL server
    that cannot be reached or refuses the connection."""


class CloseTimeoutError(StateError, TimeoutError):
    """:meth:`Crawler.close` waited its ``timeout`` for a callback that is still running. The
    crawler is shut down but not freed; call ``close()`` again later (or drop it: it is then
    freed once the callback returns)."""


def _key_path_of(message: str) -> Optional[str]:
    # The library's option messages are "<key path>: <problem>"; "(document)" is the
    # whole document.
    path, sep, _ = message.partition(": ")
    if not sep or path == "(document)":
        return None
    return path


# Every status of the C ABI's dhtc_status enum (capi/include/dhtcrawler.h) by its name, with
# the exception it raises (None: not an error). tests/python/test_status.py fails when the
# header has a name this table lacks.
STATUS_ERRORS = {
    "DHTC_OK": None,
    "DHTC_ERR_INVALID_ARGUMENT": DhtcError,
    "DHTC_ERR_INVALID_JSON": OptionsError,
    "DHTC_ERR_INVALID_OPTION": OptionsError,
    "DHTC_ERR_BIND": BindError,
    "DHTC_ERR_STATE": StateError,
    "DHTC_ERR_TIMEOUT": DhtcError,
    "DHTC_ERR_NO_MEMORY": DhtcError,
    "DHTC_ERR_INTERNAL": DhtcError,
    "DHTC_ERR_NOT_FOUND": DhtcError,
    "DHTC_ERR_STORE": StoreError,
}

_BY_STATUS = {getattr(_native, name[len("DHTC_"):]): error for name, error in STATUS_ERRORS.items()
              if error is not None}


def from_native(error: "_native.NativeError") -> DhtcError:
    """Turns the extension's NativeError(status, status_name, message) into a typed error."""
    status, status_name, message = error.args
    return (_BY_STATUS.get(status) or DhtcError)(status, status_name, message)
