"""A small HTTP server for Prometheus: GET /metrics returns the crawler's text exposition."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Tuple


def parse_host_port(text: str) -> Tuple[str, int]:
    """``"127.0.0.1:9100"``, ``"[::1]:9100"`` or ``":9100"`` (all interfaces)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


class MetricsServer:
    """Serves ``render()`` at /metrics from a daemon thread until ``close()``."""

    def __init__(self, address: Tuple[str, int], render: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                try:
                    body = render().encode("utf-8")
                except Exception as e:  # noqa: BLE001 - the crawler is closing
                    self.send_error(503, str(e))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # keep the status line clean
                pass

        family_server = ThreadingHTTPServer
        if ":" in address[0]:
            import socket

            class V6Server(ThreadingHTTPServer):
                address_family = socket.AF_INET6

            family_server = V6Server
        self._server = family_server(address, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="dhtcrawler-metrics",
                                        daemon=True)

    @property
    def address(self) -> Tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
