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


def _key_path_of(message: str) -> Optional[str]:
    # The library's option messages are "<key path>: <problem>"; "(document)" is the
    # whole document.
    path, sep, _ = message.partition(": ")
    if not sep or path == "(document)":
        return None
    return path


_BY_STATUS = {
    _native.ERR_INVALID_JSON: OptionsError,
    _native.ERR_INVALID_OPTION: OptionsError,
    _native.ERR_BIND: BindError,
    _native.ERR_STATE: StateError,
    _native.ERR_STORE: StoreError,
}


def from_native(error: "_native.NativeError") -> DhtcError:
    """Turns the extension's NativeError(status, status_name, message) into a typed error."""
    status, status_name, message = error.args
    return _BY_STATUS.get(status, DhtcError)(status, status_name, message)
