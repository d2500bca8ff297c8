"""The Python API's contract: options errors, lifecycle, callbacks (also raising ones),
shutdown from anywhere, nothing after close, snapshots, Ctrl-C, the asyncio helper.

Torrents come from a BEP-9 peer in this process that serves fixture info dicts, announced
to the crawler over KRPC from a socket on 127.0.0.1 (see conftest.py)."""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import dhtcrawler
from dhtcrawler import _native
from dhtcrawler.aio import AsyncCrawler

from conftest import ROOT, Announcer, MetadataPeer, fixture_infos, loopback_options, port_of, wait_for


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def announce_all(crawler: dhtcrawler.Crawler, peer: MetadataPeer, announcer: Announcer, keys=None) -> None:
    port = port_of(crawler.endpoints[0])
    for key in keys or peer.infos:
        announcer.announce(port, key, peer.port)


# ---- package -------------------------------------------------------------------------------

def test_version_is_the_native_librarys():
    package_dir = os.path.dirname(dhtcrawler.__file__)
    lib = ctypes.CDLL(os.path.join(package_dir, f"libdhtcrawler.so.{dhtcrawler.ABI_VERSION}"))
    lib.dhtc_version.restype = ctypes.c_char_p
    assert dhtcrawler.__version__ == lib.dhtc_version().decode()
    assert re.fullmatch(r"\d+\.\d+\.\d+", dhtcrawler.__version__)
    assert dhtcrawler.ABI_VERSION == lib.dhtc_abi_version() == _native.ABI_VERSION


def test_package_ships_typing_and_imports_from_anywhere(tmp_path):
    package_dir = os.path.dirname(dhtcrawler.__file__)
    assert os.path.exists(os.path.join(package_dir, "py.typed"))
    assert os.path.exists(os.path.join(package_dir, "_native.pyi"))
    out = subprocess.run([sys.executable, "-c", "import dhtcrawler; print(dhtcrawler.__version__)"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == dhtcrawler.__version__


def test_default_options_is_the_full_document():
    doc = dhtcrawler.default_options()
    assert doc["port"] == 6881
    assert doc["crawl"]["bootstrap"]["sources"]  # the public routers, which no test uses
    assert "timeout_secs" in doc["metadata"]


# ---- options -------------------------------------------------------------------------------

@pytest.mark.parametrize("options, key_path, status", [
    ({"metadata": {"timout_secs": 4}}, "metadata.timout_secs", "DHTC_ERR_INVALID_OPTION"),
    ({"crawl": {"rate_limit": {"burst": "many"}}}, "crawl.rate_limit.burst", "DHTC_ERR_INVALID_OPTION"),
    ({"netmode": "ipv5"}, "netmode", "DHTC_ERR_INVALID_OPTION"),
    ({"port": 70000}, "port", "DHTC_ERR_INVALID_OPTION"),
    ({"crawl": {"bootstrap": {"sources": ["ok.example:1", "no port"]}}}, "crawl.bootstrap.sources[1]",
     "DHTC_ERR_INVALID_OPTION"),
    ({"crawl.pool": {}}, "crawl.pool", "DHTC_ERR_INVALID_OPTION"),
])
def test_bad_options_raise_typed_error_with_key_path(options, key_path, status):
    with pytest.raises(dhtcrawler.OptionsError) as info:
        dhtcrawler.Crawler(options)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, dhtcrawler.DhtcError)
    assert e.key_path == key_path
    assert e.status_name == status
    assert e.status == _native.ERR_INVALID_OPTION
    assert key_path in str(e)


def test_keyword_options_and_unrepresentable_values():
    with pytest.raises(dhtcrawler.OptionsError) as info:
        dhtcrawler.Crawler(loopback_options(), metadata={"max_attempts": -1})
    assert info.value.key_path == "metadata.max_attempts"
    with pytest.raises(dhtcrawler.OptionsError) as info:
        dhtcrawler.Crawler(port=float("nan"))
    assert info.value.key_path is None and info.value.status_name == "DHTC_ERR_INVALID_JSON"


def test_port_in_use_is_a_bind_error():
    with dhtcrawler.Crawler(loopback_options()) as first:
        taken = port_of(first.endpoints[0])
        with pytest.raises(dhtcrawler.BindError) as info:
            dhtcrawler.Crawler(loopback_options(port=taken))
        assert isinstance(info.value, OSError)


# ---- lifecycle -----------------------------------------------------------------------------

def test_create_run_shutdown_100_times_leaves_no_thread():
    before = thread_count()
    for i in range(100):
        crawler = dhtcrawler.Crawler(loopback_options())
        stopper = threading.Timer(0.002 * (i % 5), crawler.shutdown)
        stopper.start()
        crawler.run()  # returns once shut down, from the timer's thread
        stopper.join()
        crawler.close()
        assert crawler.closed
    assert wait_for(lambda: thread_count() <= before, 5), (thread_count(), before)


def test_after_close_calls_raise_state_error_and_close_is_idempotent():
    crawler = dhtcrawler.Crawler(loopback_options())
    crawler.start()
    with pytest.raises(dhtcrawler.StateError):
        crawler.start()  # once per crawler
    crawler.close()
    crawler.close()
    crawler.shutdown()  # idempotent, also when closed
    with pytest.raises(dhtcrawler.StateError):
        crawler.stats()


def test_snapshots_are_dicts_and_metrics_are_prometheus_text():
    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.start()
        stats = crawler.stats()
        obs = crawler.observability()
        assert stats["schema"] == 1 and stats["endpoints"][0].startswith("127.0.0.1:")
        assert obs["schema"] == 1 and "outcomes" in obs["metadata"]
        assert "# TYPE dhtc_udp_rx_packets_total counter" in crawler.metrics()


# ---- callbacks -----------------------------------------------------------------------------

def test_torrent_completion_and_gate_callbacks_deliver_typed_values(metadata_peer, announcer):
    torrents, completions, gates = [], [], []
    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.on_gate(lambda h: gates.append(h) or True)
        crawler.on_torrent(torrents.append)
        crawler.on_completion(completions.append)
        crawler.start()
        announce_all(crawler, metadata_peer, announcer)
        assert wait_for(lambda: len(completions) >= len(metadata_peer.infos), 20)
    assert sorted(gates) == sorted(k.hex() for k in metadata_peer.infos)
    assert {t.info_hash for t in torrents} == {k.hex() for k in metadata_peer.infos}
    for t in torrents:
        assert isinstance(t, dhtcrawler.Torrent)
        assert hashlib.sha1(t.info).hexdigest() == t.info_hash_v1 == t.info_hash
        assert t.peer == f"127.0.0.1:{metadata_peer.port}"
        assert t.discovered_at is not None and t.discovered_at.tzinfo is not None
        assert t.num_files == len(t.files) and t.total_size == sum(f.size for f in t.files)
        assert t.to_dict()["info_hash"] == t.info_hash
    assert {c.outcome for c in completions} == {"accepted"}


def test_raising_callbacks_are_reported_and_count_as_rejections(metadata_peer, announcer):
    keys = list(metadata_peer.infos)
    rejected_by_gate, failing_torrent = keys[0].hex(), keys[1].hex()
    errors, completions, torrents = [], [], []

    def gate(info_hash: str) -> bool:
        if info_hash == rejected_by_gate:
            raise RuntimeError("gate says boom")
        return True

    def on_torrent(t: dhtcrawler.Torrent) -> bool:
        if t.info_hash == failing_torrent:
            raise ValueError("torrent says boom")
        torrents.append(t)
        return True

    def observe(_obs):
        raise KeyError("observation says boom")

    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.on_gate(gate)
        crawler.on_torrent(on_torrent, ack=True)
        crawler.on_completion(completions.append)
        crawler.on_observation(observe)
        crawler.on_error(errors.append)
        crawler.start()
        announce_all(crawler, metadata_peer, announcer)
        # the gate-rejected hash never completes: the three others do
        assert wait_for(lambda: len(completions) >= len(keys) - 1, 20)
        time.sleep(0.3)
        assert crawler.callback_errors >= 2
    outcomes = {c.info_hash: c.outcome for c in completions}
    assert rejected_by_gate not in outcomes
    assert outcomes[failing_torrent] == "delivery_rejected"
    assert sorted(t.info_hash for t in torrents) == sorted(k.hex() for k in keys[2:])
    assert any("gate says boom" in m and "RuntimeError" in m for m in errors)
    assert any("torrent says boom" in m and "ValueError" in m for m in errors)


def test_without_error_callback_exceptions_go_to_the_logger(metadata_peer, announcer, caplog):
    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.on_gate(lambda h: 1 / 0)
        crawler.start()
        announce_all(crawler, metadata_peer, announcer, keys=list(metadata_peer.infos)[:1])
        assert wait_for(lambda: crawler.callback_errors >= 1, 10)
    assert any("ZeroDivisionError" in r.getMessage() for r in caplog.records if r.name == "dhtcrawler")


def test_shutdown_from_a_callback_ends_run(metadata_peer, announcer):
    crawler = dhtcrawler.Crawler(loopback_options())
    seen = []

    def gate(info_hash: str) -> bool:
        seen.append(info_hash)
        crawler.shutdown()
        crawler.close()  # inside a callback: only shuts down
        return True

    crawler.on_gate(gate)
    crawler.start()
    runner = threading.Thread(target=crawler.run)
    runner.start()
    announce_all(crawler, metadata_peer, announcer, keys=list(metadata_peer.infos)[:1])
    runner.join(20)
    assert not runner.is_alive()
    assert seen and not crawler.closed
    crawler.close()
    assert crawler.closed


def test_shutdown_from_another_thread_while_callbacks_run(metadata_peer, announcer):
    entered = threading.Event()
    crawler = dhtcrawler.Crawler(loopback_options())

    def slow_gate(_h: str) -> bool:
        entered.set()
        time.sleep(0.2)
        return True

    crawler.on_gate(slow_gate)
    crawler.start()
    announce_all(crawler, metadata_peer, announcer, keys=list(metadata_peer.infos)[:1])
    assert entered.wait(10)
    threading.Thread(target=crawler.shutdown).start()
    assert crawler.wait(20)
    crawler.close()


def test_no_callback_after_close(metadata_peer, announcer):
    closed = threading.Event()
    late = []
    calls = []

    def record(kind):
        def fn(*_args):
            calls.append(kind)
            if closed.is_set():
                late.append(kind)
            return True
        return fn

    crawler = dhtcrawler.Crawler(loopback_options())
    crawler.on_gate(record("gate"))
    crawler.on_torrent(record("torrent"), ack=True)
    crawler.on_completion(record("completion"))
    crawler.on_observation(record("observation"))
    crawler.on_error(record("error"))
    crawler.start()
    port = port_of(crawler.endpoints[0])
    stop = threading.Event()

    def keep_announcing():
        a = Announcer(node_id=b"\x17" * 20)
        keys = list(metadata_peer.infos)
        i = 0
        try:
            while not stop.is_set():
                try:
                    a.announce(port, keys[i % len(keys)], metadata_peer.port)
                except (OSError, TimeoutError, KeyError):
                    pass
                i += 1
        finally:
            a.close()

    announcing = threading.Thread(target=keep_announcing)
    announcing.start()
    assert wait_for(lambda: "completion" in calls, 20)
    crawler.close()
    closed.set()
    time.sleep(0.5)
    stop.set()
    announcing.join(10)
    assert late == []


def test_ctrl_c_interrupts_run():
    script = (
        "import dhtcrawler, faulthandler, signal, sys\n"
        "faulthandler.register(signal.SIGUSR1)\n"
        # As in a terminal: a job started in the background (CI scripts) inherits SIGINT
        # ignored, and Python then installs no KeyboardInterrupt handler.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from conftest import loopback_options\n"
        "c = dhtcrawler.Crawler(loopback_options())\n"
        "print('running', flush=True)\n"
        "try:\n"
        "    c.run()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', c.wait(5), flush=True)\n"
        "c.close()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests" / "python")],  # conftest.py
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "running"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # where it hangs, on its stderr
            time.sleep(1)
            proc.kill()
            out, err = proc.communicate(timeout=5)
            raise AssertionError("run() did not end after SIGINT:\n" + err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert out.strip() == "interrupted True"


# ---- asyncio -------------------------------------------------------------------------------

def test_async_iterator_yields_torrents(metadata_peer, announcer):
    async def main():
        got = []
        async with AsyncCrawler(loopback_options(), buffer=8) as crawler:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, announce_all, crawler.crawler, metadata_peer, announcer)
            async for torrent in crawler:
                got.append(torrent)
                if len(got) == len(metadata_peer.infos):
                    break
        return got

    got = asyncio.run(asyncio.wait_for(main(), 30))
    assert {t.info_hash for t in got} == {k.hex() for k in metadata_peer.infos}


def test_async_buffer_full_answers_retry_and_counts(metadata_peer, announcer):
    async def main():
        async with AsyncCrawler(loopback_options(), buffer=1) as crawler:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, announce_all, crawler.crawler, metadata_peer, announcer)
            # Nobody reads: one torrent fits, the others are not taken (fetched again later)
            # and counted.
            await loop.run_in_executor(None, wait_for, lambda: crawler.crawler.observability()["metadata"]
                                       ["outcomes"]["sink_failed"] >= len(metadata_peer.infos) - 1, 20)
            first = await asyncio.wait_for(crawler.__aiter__().__anext__(), 5)
            return crawler.dropped, first

    dropped, first = asyncio.run(main())
    assert dropped == len(metadata_peer.infos) - 1
    assert first.info_hash in {k.hex() for k in metadata_peer.infos}
