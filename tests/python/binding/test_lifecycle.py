"""The Python crawler's lifecycle under stress: shutdown from the host thread, another
thread, a callback, a signal handler and two threads at once; racing closes; close right
after run returns; with no retry store, SQLite and PostgreSQL (DHTC_TEST_PG). Each case
ends with no thread left (threading.enumerate, /proc/self/task), the fds back and no
callback after close returned. Also: Ctrl-C raises at once while a callback is blocked,
close(timeout) while a callback runs, a dropped crawler with a callback running, and the
shutdown-on-one-thread / close-on-another race with the SQLite store.

Everything is bounded: threads are joined with timeouts (a hang fails the test and dumps
the stacks), and blocked callbacks release themselves after a few seconds."""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import dhtcrawler

from conftest import bencode, loopback_options, pg_schema_uri, port_of, wait_for

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where conftest.py is


# ---- helpers -------------------------------------------------------------------------------

def tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Baseline:
    """Threads and fds before a test; ``check()`` waits for them to come back."""

    def __init__(self) -> None:
        gc.collect()
        self.threads, self.tasks, self.fds = len(threading.enumerate()), tasks(), fds()

    def check(self, timeout: float = 5) -> None:
        def back() -> bool:
            gc.collect()
            return len(threading.enumerate()) <= self.threads and tasks() <= self.tasks and fds() <= self.fds

        assert wait_for(back, timeout), (
            f"threads {len(threading.enumerate())} (was {self.threads}), tasks {tasks()} (was {self.tasks}), "
            f"fds {fds()} (was {self.fds}): {[t.name for t in threading.enumerate()]}")


class Poker:
    """Sends get_peers queries for random hashes to the crawler, fire and forget: each makes
    an observation (and so callbacks in flight while the lifecycle runs)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.port = port

    def poke(self, n: int = 1) -> None:
        for _ in range(n):
            packet = bencode({"t": secrets.token_bytes(2), "y": "q", "q": "get_peers",
                              "a": {"id": secrets.token_bytes(20), "info_hash": secrets.token_bytes(20)}})
            try:
                self.sock.sendto(packet, ("127.0.0.1", self.port))
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def join(thread: threading.Thread, timeout: float, what: str) -> None:
    thread.join(timeout)
    if thread.is_alive():
        faulthandler.dump_traceback(all_threads=True)
        raise AssertionError(f"{what} did not end within {timeout} s (stacks on stderr)")


def in_thread(fn: Callable[[], Any], name: str) -> threading.Thread:
    t = threading.Thread(target=fn, name=name, daemon=True)
    t.start()
    return t


# ---- stores --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg_conninfo() -> Iterator[Optional[str]]:
    with pg_schema_uri("life", missing="none") as uri:
        yield uri


@pytest.fixture(params=["none", "sqlite", "postgresql"])
def store_options(request, tmp_path, pg_conninfo) -> Callable[[], Dict[str, Any]]:
    kind = request.param
    if kind == "postgresql" and pg_conninfo is None:
        pytest.skip("DHTC_TEST_PG is not set (tests/pg/start_pg.sh prints a URI for it)")
    counter = iter(range(1000))

    def make() -> Dict[str, Any]:
        if kind == "none":
            store: Dict[str, Any] = {"kind": "none"}
        elif kind == "sqlite":
            store = {"kind": "sqlite", "path": str(tmp_path / f"retry{next(counter)}.sqlite")}
        else:
            store = {"kind": "postgresql", "conninfo": pg_conninfo}
        return loopback_options(retry={"store": store})

    return make


# ---- the matrix: who shuts down ------------------------------------------------------------

WATCHDOG = 10.0  # a run() that the tested path does not end is ended by this, and fails


def _run_on_main(crawler: dhtcrawler.Crawler, ended_by: List[str]) -> None:
    watchdog = threading.Timer(WATCHDOG, lambda: (ended_by.append("watchdog"), crawler.shutdown()))
    watchdog.daemon = True
    watchdog.start()
    try:
        crawler.run()
    finally:
        watchdog.cancel()


def _shutdown_host(crawler, poker, ended_by):
    crawler.start()
    poker.poke(5)
    time.sleep(0.02)
    crawler.shutdown()
    assert crawler.wait(5)
    crawler.close()


def _shutdown_thread(crawler, poker, ended_by):
    def later():
        poker.poke(5)
        time.sleep(0.03)
        crawler.shutdown()
    t = in_thread(later, "shutdown-thread")
    _run_on_main(crawler, ended_by)
    join(t, 5, "the shutdown thread")
    crawler.close()


def _shutdown_callback(crawler, poker, ended_by):
    def observe(_o):
        crawler.shutdown()
    crawler.on_observation(observe)

    def keep_poking():
        while not crawler.wait(0.02):
            poker.poke(1)
    t = in_thread(keep_poking, "poker")
    _run_on_main(crawler, ended_by)
    join(t, 5, "the poker")
    crawler.close()


def _shutdown_signal(crawler, poker, ended_by):
    previous = signal.signal(signal.SIGUSR1, lambda *_: crawler.shutdown())
    try:
        def later():
            poker.poke(5)
            time.sleep(0.03)
            os.kill(os.getpid(), signal.SIGUSR1)
        t = in_thread(later, "signaller")
        _run_on_main(crawler, ended_by)
        join(t, 5, "the signaller")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    crawler.close()


def _shutdown_two_threads(crawler, poker, ended_by):
    barrier = threading.Barrier(2)

    def stop():
        poker.poke(2)
        barrier.wait(5)
        crawler.shutdown()
        crawler.shutdown()
    threads = [in_thread(stop, f"shutdown-{i}") for i in range(2)]
    _run_on_main(crawler, ended_by)
    for t in threads:
        join(t, 5, "a shutdown thread")
    crawler.close()


def _racing_close(crawler, poker, ended_by):
    barrier = threading.Barrier(3)
    errors: List[BaseException] = []

    def close():
        try:
            poker.poke(2)
            barrier.wait(5)
            crawler.close()
            assert crawler.closed
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [in_thread(close, f"closer-{i}") for i in range(2)]
    crawler.start()
    barrier.wait(5)
    _run_on_main(crawler, ended_by)  # ended by the closes
    for t in threads:
        join(t, 10, "a closing thread")
    crawler.close()
    assert not errors, errors


def _close_right_after_run(crawler, poker, ended_by):
    t = threading.Timer(0.03, crawler.shutdown)
    t.start()
    poker.poke(5)
    _run_on_main(crawler, ended_by)
    crawler.close()
    join(t, 5, "the timer")


MODES = {
    "host": _shutdown_host,
    "thread": _shutdown_thread,
    "callback": _shutdown_callback,
    "signal": _shutdown_signal,
    "two_threads": _shutdown_two_threads,
    "racing_close": _racing_close,
    "close_after_run": _close_right_after_run,
}


@pytest.mark.parametrize("mode", list(MODES))
def test_lifecycle(store_options, mode):
    baseline = Baseline()
    for _ in range(3):
        crawler = dhtcrawler.Crawler(store_options())
        closed = threading.Event()
        late: List[str] = []
        calls: List[str] = []

        def record(kind: str) -> Callable[..., None]:
            def fn(*_args: Any) -> None:
                calls.append(kind)
                if closed.is_set():
                    late.append(kind)
            return fn

        crawler.on_observation(record("observation"))
        crawler.on_completion(record("completion"))
        crawler.on_retry(record("retry"))
        crawler.on_error(record("error"))
        poker = Poker(port_of(crawler.endpoints[0]))
        ended_by: List[str] = []
        try:
            MODES[mode](crawler, poker, ended_by)
        finally:
            poker.close()
            crawler.close(timeout=None)
        assert crawler.closed
        closed.set()
        assert ended_by == [], f"run() was not ended by the {mode} shutdown"
        time.sleep(0.05)
        assert late == [], late
        del crawler
    baseline.check()


# ---- close right after run, with a shutdown from another thread (the reported hang) -------

def test_shutdown_on_a_thread_while_run_returns_and_closes_does_not_hang(tmp_path):
    baseline = Baseline()
    for i in range(20):
        crawler = dhtcrawler.Crawler(loopback_options(
            retry={"store": {"kind": "sqlite", "path": str(tmp_path / f"r{i}.sqlite")}}))
        crawler.start()
        go = threading.Barrier(2)

        def stopper():
            go.wait(5)
            crawler.shutdown()

        def main_part():
            go.wait(5)
            crawler.run()   # returns as the shutdown lands
            crawler.close()  # at once, while the other thread may still be in shutdown()

        threads = [in_thread(stopper, "stopper"), in_thread(main_part, "runner")]
        for t in threads:
            join(t, 10, f"iteration {i}: {t.name}")
        assert crawler.closed
    baseline.check()


# ---- a callback that is still running ------------------------------------------------------

def _blocked_observer(crawler: dhtcrawler.Crawler, hold: float = 6.0):
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def observe(_o):
        if entered.is_set():
            return
        entered.set()
        release.wait(hold)  # bounded: an old core would otherwise wait for it forever
        done.set()

    crawler.on_observation(observe)
    return entered, release, done


def test_close_with_timeout_while_a_callback_runs_then_close_again(tmp_path):
    baseline = Baseline()
    crawler = dhtcrawler.Crawler(loopback_options())
    entered, release, done = _blocked_observer(crawler)
    crawler.start()
    poker = Poker(port_of(crawler.endpoints[0]))
    try:
        assert wait_for(lambda: poker.poke() or entered.is_set(), 10)
        result: Dict[str, Any] = {}

        def close():
            started = time.monotonic()
            try:
                crawler.close(timeout=0.3)
                result["outcome"] = "closed"
            except dhtcrawler.CloseTimeoutError as e:
                result["outcome"] = "timeout"
                result["error"] = e
            result["seconds"] = time.monotonic() - started

        t = in_thread(close, "closer")
        t.join(3)
        still_blocked = not done.is_set()
        release.set()
        join(t, 10, "close(timeout=0.3)")
        assert still_blocked and result["outcome"] == "timeout", result
        assert result["seconds"] < 2, result
        e = result["error"]
        assert isinstance(e, dhtcrawler.StateError) and isinstance(e, TimeoutError)
        assert e.status_name == "DHTC_ERR_TIMEOUT"
        assert not crawler.closed  # shut down, not freed: it can still be asked
        assert crawler.wait(0) and crawler.stats()["schema"] == 1
        assert done.wait(5)
        crawler.close()  # now it is freed
        assert crawler.closed
    finally:
        release.set()
        poker.close()
        crawler.close(timeout=None)
    baseline.check()


def test_dropping_a_crawler_with_a_callback_running_frees_it_when_the_callback_returns():
    baseline = Baseline()
    crawler = dhtcrawler.Crawler(loopback_options())
    entered, release, done = _blocked_observer(crawler)
    crawler.start()
    poker = Poker(port_of(crawler.endpoints[0]))
    try:
        assert wait_for(lambda: poker.poke() or entered.is_set(), 10)
        dropped = threading.Event()

        def drop():
            nonlocal crawler
            del crawler
            gc.collect()
            dropped.set()

        t = in_thread(drop, "dropper")
        t.join(2)
        returned_while_blocked = dropped.is_set() and not done.is_set()
        release.set()
        join(t, 10, "dropping the crawler")
        assert returned_while_blocked, "dropping the crawler waited for its running callback"
        assert done.wait(5)
    finally:
        release.set()
        poker.close()
    baseline.check(10)  # the reaper thread destroyed it and ended


# ---- Ctrl-C while a callback is blocked ----------------------------------------------------

CTRL_C_CHILD = r"""
import faulthandler, json, os, signal, socket, sys, threading, time
faulthandler.register(signal.SIGUSR1)
# As in a terminal: a job started in the background (CI scripts) inherits SIGINT ignored,
# and Python then installs no KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[1])
import dhtcrawler
from conftest import bencode, loopback_options, port_of

entered, release = threading.Event(), threading.Event()
state = {}

def observe(_o):
    if entered.is_set():
        return
    entered.set()
    release.wait(float(sys.argv[2]))  # bounded: an old core waits for it
    state["released"] = time.monotonic()

c = dhtcrawler.Crawler(loopback_options())
c.on_observation(observe)
c.start()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
while not entered.wait(0.05):
    s.sendto(bencode({"t": b"aa", "y": "q", "q": "get_peers",
                      "a": {"id": os.urandom(20), "info_hash": os.urandom(20)}}), ("127.0.0.1", port_of(c.endpoints[0])))
try:
    # Inside the try: the parent sends SIGINT as soon as it reads this line, so the
    # KeyboardInterrupt may come before c.run() is entered (still while the callback blocks).
    print("blocked", flush=True)
    c.run()
    out = {"interrupted": False}
except KeyboardInterrupt:
    at = time.monotonic()
    out = {"interrupted": True, "at": at, "callback_still_blocked": "released" not in state}
release.set()
c.close()
out["callback_finished"] = "released" in state
print(json.dumps(out), flush=True)
"""


def run_ctrl_c_child(hold: float = 6.0, timeout: float = 30) -> Dict[str, Any]:
    """Starts the child, waits for its callback to block, sends SIGINT; returns its JSON
    line with ``sent`` (CLOCK_MONOTONIC, shared by the processes) added."""
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, HERE, str(hold)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "blocked", line + proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            out, err = proc.communicate(timeout=5)
            raise AssertionError("the child did not end after SIGINT:\n" + err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    result["sent"] = sent
    return result


def test_ctrl_c_raises_at_once_while_a_callback_is_blocked():
    r = run_ctrl_c_child()
    assert r["interrupted"], r
    assert r["callback_still_blocked"], f"KeyboardInterrupt came only after the callback returned: {r}"
    assert r["callback_finished"], r  # close() waited for it
