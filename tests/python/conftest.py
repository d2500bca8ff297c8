"""Shared pieces of the Python tests: loopback options, a KRPC announcer, a BEP-9 peer that
serves fixture info dicts, the libtorrent swarm helper and the test network program.

Everything talks to 127.0.0.0/8 only; every crawler here allows private addresses and has
its bootstrap overridden, so the public routers are never contacted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "info"
LT_SWARM = ROOT / "tests" / "lt" / "lt_swarm.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's interpreter, which has python3-libtorrent


def loopback_options(**extra: Any) -> Dict[str, Any]:
    """A crawler on 127.0.0.1, any free port, private addresses allowed, no bootstrap, with
    its default budgets. Peer sessions are plaintext TCP, what the tests' peers speak: the
    default (uTP first, MSE) would wait out a silent SYN."""
    doc: Dict[str, Any] = {
        "port": 0,
        "bind_v4": "127.0.0.1",
        "allow_private_addresses": True,
        "crawl": {"bootstrap": {"sources": []}},
        "metadata": {"timeout_secs": 2, "gate_timeout_millis": 2000,
                     "transports": "tcp", "encryption": "prefer_plaintext"},
    }
    crawl = extra.pop("crawl", None)
    if crawl is not None:
        doc["crawl"].update(crawl)
    doc.update(extra)
    return doc


def unused_loopback_port(kind: int = socket.SOCK_DGRAM) -> int:
    """A port on 127.0.0.1 bound and released at once: nothing listens or answers on it."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def wait_for(condition: Callable[[], Any], timeout: float, step: float = 0.05) -> Any:
    """Polls ``condition`` until it is truthy or ``timeout`` seconds pass; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


# ---- bencode (test side, for KRPC and BEP-9 messages) -------------------------------------

def bencode(value: Any) -> bytes:
    if isinstance(value, bool):
        raise TypeError("no booleans in bencode")
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, list):
        return b"l" + b"".join(bencode(v) for v in value) + b"e"
    if isinstance(value, dict):
        items = sorted((k.encode() if isinstance(k, str) else k, v) for k, v in value.items())
        return b"d" + b"".join(bencode(k) + bencode(v) for k, v in items) + b"e"
    raise TypeError(type(value))


def bdecode(data: bytes, start: int = 0) -> Tuple[Any, int]:
    """Decodes one value at ``start``; returns it and the offset after it."""
    c = data[start:start + 1]
    if c == b"i":
        end = data.index(b"e", start)
        return int(data[start + 1:end]), end + 1
    if c == b"l":
        out, i = [], start + 1
        while data[i:i + 1] != b"e":
            v, i = bdecode(data, i)
            out.append(v)
        return out, i + 1
    if c == b"d":
        d, i = {}, start + 1
        while data[i:i + 1] != b"e":
            k, i = bdecode(data, i)
            d[k], i = bdecode(data, i)
        return d, i + 1
    colon = data.index(b":", start)
    n = int(data[start:colon])
    return data[colon + 1:colon + 1 + n], colon + 1 + n


# ---- a DHT client that announces peers to the crawler ------------------------------------

class Announcer:
    """Gets a token from the crawler (get_peers) and announces a peer on 127.0.0.1 with it, as
    DHT nodes would: every announce comes from a node of its own (its own port on 127.0.0.1,
    the address the announced peer is taken from), so tests that announce several hashes at
    once stay within the crawler's default per-node budget, as the many nodes announcing on
    the real DHT do. The crawler may query us too; such datagrams are skipped."""

    def __init__(self, node_id: bytes = b"\x42" * 20) -> None:
        self.sock: Optional[socket.socket] = None
        self.node_id = node_id
        self._tid = 0

    def _new_node(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(1.0)

    def _ask(self, port: int, query: str, args: Dict[str, Any]) -> Dict[bytes, Any]:
        self._tid += 1
        tid = struct.pack(">H", self._tid & 0xFFFF)
        packet = bencode({"t": tid, "y": "q", "q": query, "a": {"id": self.node_id, **args}})
        self.sock.sendto(packet, ("127.0.0.1", port))
        sends = 1
        for _ in range(16):
            try:
                data, _ = self.sock.recvfrom(65536)
            except socket.timeout:
                # Sent again, as a real node would: a crawler still starting on a loaded machine may answer late.
                if sends == 5:
                    break
                sends += 1
                self.sock.sendto(packet, ("127.0.0.1", port))
                continue
            try:
                msg, _ = bdecode(data)
            except (ValueError, IndexError):
                continue
            if isinstance(msg, dict) and msg.get(b"t") == tid and msg.get(b"y") in (b"r", b"e"):
                return msg
        raise TimeoutError(f"no reply to {query}")

    def announce(self, crawler_port: int, info_hash: bytes, peer_port: int) -> None:
        self._new_node()
        reply = self._ask(crawler_port, "get_peers", {"info_hash": info_hash})
        token = reply[b"r"][b"token"]
        answer = self._ask(crawler_port, "announce_peer",
                           {"info_hash": info_hash, "port": peer_port, "token": token, "implied_port": 0})
        assert answer.get(b"y") == b"r", answer

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


# ---- a BEP-9 peer serving info dicts -----------------------------------------------------

class MetadataPeer:
    """A BitTorrent peer on 127.0.0.1 that serves info dicts over ut_metadata (BEP-9/10),
    answering after the crawler's handshake, the way libtorrent does."""

    OUR_UT_METADATA = 3

    def __init__(self, infos: Dict[bytes, bytes]) -> None:
        self.infos = dict(infos)  # 20-byte key -> info dict bytes
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.served: List[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def _send_extended(self, conn: socket.socket, ext_id: int, payload: bytes) -> None:
        conn.sendall(struct.pack(">IBB", len(payload) + 2, 20, ext_id) + payload)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            hs = self._read(conn, 68)
            info_hash = hs[28:48]
            info = self.infos.get(info_hash)
            if hs[0] != 19 or info is None:
                return
            reserved = bytearray(8)
            reserved[5] |= 0x10
            conn.sendall(b"\x13BitTorrent protocol" + bytes(reserved) + info_hash + b"-PY0001-" + b"x" * 12)
            self._send_extended(conn, 0, bencode({"m": {"ut_metadata": self.OUR_UT_METADATA},
                                                  "metadata_size": len(info)}))
            their_ut_metadata = None
            while True:
                (length,) = struct.unpack(">I", self._read(conn, 4))
                if length == 0:
                    continue
                body = self._read(conn, length)
                if body[0] != 20:
                    continue
                if body[1] == 0:
                    handshake, _ = bdecode(body[2:])
                    their_ut_metadata = handshake.get(b"m", {}).get(b"ut_metadata")
                elif body[1] == self.OUR_UT_METADATA and their_ut_metadata:
                    request, _ = bdecode(body[2:])
                    piece = request[b"piece"]
                    data = info[piece * 16384:(piece + 1) * 16384]
                    header = bencode({"msg_type": 1, "piece": piece, "total_size": len(info)})
                    self._send_extended(conn, their_ut_metadata, header + data)
                    if (piece + 1) * 16384 >= len(info):
                        self.served.append(info_hash)
        except (OSError, ConnectionError, ValueError, KeyError, IndexError, struct.error):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self._thread.join(timeout=5)


ALL_FIXTURES = ("v1_single", "v1_multi", "v2_single", "v2_multi", "hybrid_multi", "private_hybrid_single",
                "unicode_multi")


def fixture_infos(*names: str) -> Dict[bytes, bytes]:
    """Fixture info dicts by their DHT key: the SHA-1, or for v2-only the truncated SHA-256."""
    out = {}
    for name in names:
        data = (FIXTURES / f"{name}.info").read_bytes()
        v1 = json.loads((FIXTURES / f"{name}.json").read_text()).get("info_hash_v1")
        out[hashlib.sha1(data).digest() if v1 else hashlib.sha256(data).digest()[:20]] = data
    return out


@pytest.fixture(scope="session")
def delivered_torrents() -> Dict[str, Any]:
    """Every fixture as the library delivers it (parsed by the real parser): name -> Torrent."""
    import dhtcrawler

    by_key = {}
    for name in ALL_FIXTURES:
        (key,) = fixture_infos(name)
        by_key[key.hex()] = name
    peer = MetadataPeer(fixture_infos(*ALL_FIXTURES))
    announcer = Announcer()
    got: Dict[str, Any] = {}
    try:
        with dhtcrawler.Crawler(loopback_options()) as crawler:
            crawler.on_torrent(lambda t: got.__setitem__(by_key[t.info_hash], t))
            crawler.start()
            port = port_of(crawler.endpoints[0])
            for key in peer.infos:
                announcer.announce(port, key, peer.port)
            wait_for(lambda: len(got) == len(ALL_FIXTURES), 20)
    finally:
        announcer.close()
        peer.close()
    assert sorted(got) == sorted(ALL_FIXTURES)
    return got


@pytest.fixture
def metadata_peer():
    peer = MetadataPeer(fixture_infos("v1_single", "v1_multi", "hybrid_multi", "unicode_multi"))
    yield peer
    peer.close()


@pytest.fixture
def announcer():
    a = Announcer()
    yield a
    a.close()


# ---- the libtorrent swarm (tests/lt/lt_swarm.py under /usr/bin/python3) -----------------

def libtorrent_available() -> bool:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import libtorrent"], capture_output=True, timeout=30)
    return r.returncode == 0


class LtSwarm:
    """A running lt_swarm.py: reads its JSON lines on a thread; stops when closed (its stdin
    pipe closes, so it also ends if the test process dies)."""

    def __init__(self, workdir: Path, bootstrap: str, base_ip: str, sessions: int = 3,
                 torrents_per_session: int = 2, kinds: str = "v1,v2,hybrid,multi,unicode",
                 duration: int = 120, argv: Optional[List[str]] = None) -> None:
        """``argv``: another swarm program's command line instead (it prints the same
        ready/error lines; e.g. tests/lt/lt_scrape_swarm.py)."""
        self.proc = subprocess.Popen(
            argv or [SYSTEM_PYTHON, str(LT_SWARM), "--workdir", str(workdir), "--bootstrap", bootstrap,
                     "--sessions", str(sessions), "--torrents-per-session", str(torrents_per_session),
                     "--kinds", kinds, "--base-ip", base_ip, "--duration", str(duration),
                     "--announce-interval", "10"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.ready: Optional[dict] = None
        self.sessions: List[dict] = []
        self.events: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.torrents: List[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                pass
        self.events.put(None)

    def wait_ready(self, timeout: float = 90) -> List[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ev = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            if ev is None:
                raise RuntimeError("lt_swarm exited before ready")
            kind = ev.get("event")
            if kind == "torrent":
                self.torrents.append(ev)
            elif kind == "session":
                self.sessions.append(ev)
            elif kind == "ready":
                self.ready = ev
                return self.torrents
            elif kind == "error":
                raise RuntimeError(f"lt_swarm: {ev}")
        raise TimeoutError("lt_swarm not ready")

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def lt_swarm_factory(tmp_path_factory):
    if not libtorrent_available():
        pytest.skip("/usr/bin/python3 with python3-libtorrent is not installed")
    swarms: List[LtSwarm] = []

    def start(bootstrap: str, base_ip: str, **kw: Any) -> LtSwarm:
        workdir = tmp_path_factory.mktemp("swarm")
        swarm = LtSwarm(workdir, bootstrap, base_ip, **kw)
        swarms.append(swarm)
        return swarm

    yield start
    for swarm in swarms:
        swarm.close()


LT_SCRAPE_SWARM = LT_SWARM.parent / "lt_scrape_swarm.py"


@pytest.fixture
def lt_scrape_swarm(tmp_path_factory):
    """Starts tests/lt/lt_scrape_swarm.py (a torrent with known seeders and leechers in a DHT
    of libtorrent sessions): ``start(bootstrap, base, seeders, leechers)`` returns the
    LtSwarm once ready (its ``ready`` event names the hash and the truth)."""
    if not libtorrent_available():
        pytest.skip("/usr/bin/python3 with python3-libtorrent is not installed")
    swarms: List[LtSwarm] = []

    def start(bootstrap: Optional[str], base: int, seeders: int = 6, leechers: int = 4, nodes: int = 8) -> LtSwarm:
        """``bootstrap`` None: the sessions only know each other (a crawler joins later)."""
        bootstrap = bootstrap or f"127.0.0.1:{unused_loopback_port()}"
        workdir = tmp_path_factory.mktemp("scrape")
        swarm = LtSwarm(workdir, bootstrap, "", argv=[
            SYSTEM_PYTHON, str(LT_SCRAPE_SWARM), "--workdir", str(workdir), "--bootstrap", bootstrap,
            "--seeders", str(seeders), "--leechers", str(leechers), "--nodes", str(nodes), "--base", str(base),
            "--duration", "170"])
        swarms.append(swarm)
        swarm.wait_ready(60)
        return swarm

    yield start
    for swarm in swarms:
        swarm.close()


def expected_files(ev: dict) -> List[Tuple[str, int]]:
    """The swarm's torrent event as the parser reports files: padding left out, and the
    torrent name not a prefix of multi-file paths."""
    files = [(f["path"], f["size"]) for f in ev["files"] if not f.get("pad")]
    if ev["num_files"] > 1 or ev["kind"] in ("multi", "unicode") or len(files) > 1:
        prefix = ev["name"] + "/"
        files = [(p[len(prefix):] if p.startswith(prefix) else p, s) for p, s in files]
    return files


# ---- the test network program ------------------------------------------------------------

def testnet_program() -> Optional[str]:
    from dhtcrawler import testnet

    try:
        return testnet.locate()
    except FileNotFoundError:
        return None


@pytest.fixture
def testnet_binary():
    program = testnet_program()
    if program is None:
        pytest.skip("dhtcrawler-testnet is not built (set DHTCRAWLER_TESTNET)")
    return program


# ---- PostgreSQL (DHTC_TEST_PG) ------------------------------------------------------------

@contextlib.contextmanager
def pg_schema_uri(prefix: str, missing: str = "skip") -> Iterator[Optional[str]]:
    """A connection string to the test server (DHTC_TEST_PG) whose search_path is a fresh
    schema ``PREFIX_<random>``, dropped afterwards. Without DHTC_TEST_PG: ``missing`` is
    "skip" (the test is skipped), "fail" (it fails) or "none" (None is yielded)."""
    base = os.environ.get("DHTC_TEST_PG")
    if not base:
        if missing == "none":
            yield None
            return
        message = "DHTC_TEST_PG is not set (tests/run.sh starts the test server: tests/pg/start_pg.sh prints a URI)"
        if missing == "fail":
            pytest.fail(message)
        pytest.skip(message)
    from dhtcrawler.app.db import Database

    schema = f"{prefix}_{secrets.token_hex(4)}"
    admin = Database(base).connect()
    admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()


# ---- the CLI as a subprocess --------------------------------------------------------------

def cli(*args: str, **kw: Any) -> List[str]:
    """The argv of the installed command, run with this interpreter."""
    return [sys.executable, "-m", "dhtcrawler", *args]


def torrent_schema() -> Dict[str, Any]:
    return json.loads((ROOT / "docs" / "torrent.schema.json").read_text())
