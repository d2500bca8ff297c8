"""Running the application: uvicorn on a socket bound here (so port 0 works and a bad
address is reported before anything starts), in the calling thread or a daemon thread.

Bounded: at most MAX_CONNECTIONS connections and requests at once (uvicorn answers 503 past
that), idle keep-alive connections closed after KEEP_ALIVE_SECS."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Optional, Tuple

MAX_CONNECTIONS = 128
KEEP_ALIVE_SECS = 5


def bind(address: Tuple[str, int]) -> socket.socket:
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off only on the connections
    # of a socket that says it is TCP. With it on, a response's body waited for the client's
    # delayed ACK of its headers: 40 ms on every request of a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(MAX_CONNECTIONS)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class WebServer:
    """uvicorn serving ``app`` on ``address``; ``close()`` stops it."""

    def __init__(self, app: Any, address: Tuple[str, int]) -> None:
        import uvicorn

        self._sock = bind(address)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                     lifespan="off", server_header=False,
                                                     limit_concurrency=MAX_CONNECTIONS,
                                                     timeout_keep_alive=KEEP_ALIVE_SECS))
        self._thread: Optional[threading.Thread] = None

    @property
    def address(self) -> Tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def run(self) -> None:
        """Serves in this thread until SIGINT/SIGTERM (in the main thread) or close()."""
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def start(self) -> None:
        """Serves from a daemon thread (no signal handlers there)."""
        self._thread = threading.Thread(target=self.run, name="dhtcrawler-web", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()
