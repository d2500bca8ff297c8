"""The loopback test network (the `dhtcrawler-testnet` program), from Python.

The program starts a small DHT of nodes and seeders on 127.0.0.0/8 and prints
``BOOTSTRAP ip:port`` on stdout when it is ready; at exit it completes its truth file (the
torrents it served, in the parser's JSON form plus ``seeders`` and ``first_served_at``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, List, Optional

ENV_VAR = "DHTCRAWLER_TESTNET"
_PROGRAM = "dhtcrawler-testnet"


def locate() -> str:
    """The test network program: $DHTCRAWLER_TESTNET when set (an explicit choice wins),
    else the one installed in the package."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise FileNotFoundError(f"{ENV_VAR}={explicit} is not an executable file")
        return explicit
    bundled = Path(__file__).resolve().parent / "_bin" / _PROGRAM
    if os.access(bundled, os.X_OK):
        return str(bundled)
    raise FileNotFoundError(
        f"{_PROGRAM} is not part of this installation; build it and set {ENV_VAR} to its path")


class TestNetwork:
    """A running test network; a context manager that stops it on exit."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, nodes: int = 40, seeders: int = 4, torrents: int = 8,
                 cidr: str = "127.0.90.0/24", seed: int = 1, duration: float = 120,
                 misbehave: float = 0.0, truth: Optional[str] = None,
                 binary: Optional[str] = None, stderr: Optional[IO[Any]] = None,
                 policy_mix: Optional[str] = None) -> None:
        self._tmp = None
        if truth is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="dhtcrawler-testnet-")
            truth = os.path.join(self._tmp.name, "truth.json")
        self.truth_path = truth
        self.torrents = torrents
        self.argv = [binary or locate(), "--nodes", str(nodes), "--seeders", str(seeders),
                     "--torrents", str(torrents), "--range", cidr, "--seed", str(seed),
                     "--duration", str(int(duration)), "--truth", truth,
                     "--misbehave", str(misbehave)]
        if policy_mix:  # the seeders' connection policies, e.g. "plaintext=1,utp=1" (--policy-mix)
            self.argv += ["--policy-mix", policy_mix]
        self._stderr = stderr
        self.proc: Optional[subprocess.Popen] = None
        self.bootstrap: Optional[str] = None
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue(maxsize=1024)

    def start(self, timeout: float = 60, attempts: int = 3) -> str:
        """Starts the program and returns its bootstrap endpoint ("127.x.y.z:port"). A start
        that fails at once (an ephemeral port taken between choice and bind) is retried."""
        for attempt in range(attempts):
            self._lines = queue.Queue(maxsize=1024)
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self._stderr, text=True)
            threading.Thread(target=self._read, args=(self.proc, self._lines), name="testnet-stdout",
                             daemon=True).start()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    line = self._lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line is None:
                    break
                if line.startswith("BOOTSTRAP "):
                    self.bootstrap = line.split(None, 1)[1].strip()
                    return self.bootstrap
            self.stop()
            if time.monotonic() < deadline and attempt + 1 < attempts:
                continue  # it exited early: try again
            break
        raise RuntimeError(f"{self.argv[0]} did not print BOOTSTRAP (exit status {self.proc.returncode})")

    @staticmethod
    def _read(proc: subprocess.Popen, lines: "queue.Queue[Optional[str]]") -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                lines.put_nowait(line.rstrip("\n"))
            except queue.Full:  # nobody reads after BOOTSTRAP; the rest is not needed
                pass
        try:
            lines.put_nowait(None)
        except queue.Full:
            pass

    def stop(self, timeout: float = 15) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def truth(self) -> List[dict]:
        """The torrents the network served (read after stop())."""
        with open(self.truth_path, encoding="utf-8") as f:
            return json.load(f)

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "TestNetwork":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
