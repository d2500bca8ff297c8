"""``dhtcrawler demo``: a loopback test network and a crawler, torrents arriving."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Dict

from ..._crawler import Crawler
from ..._types import Torrent
from ..acceptance import Acceptance
from ..signals import Stopper
from ..sinks import JsonlSink
from .common import EXIT_OK, UsageError, error_printer, human_size, positive_seconds


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="a loopback test network and a crawler, torrents arriving")
    p.add_argument("--duration", type=positive_seconds, default=60.0, metavar="SECONDS")
    p.add_argument("--out", metavar="FILE.jsonl|-")
    p.add_argument("--torrents", type=int, default=6, help=argparse.SUPPRESS)
    p.add_argument("--nodes", type=int, default=30, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.set_defaults(run=run)


#: The demo's swarm: one seeder of each connection policy the test network has (see
#: tools/testnet/README.md): plaintext allowed, PE forced with RC4, PE forced with a plaintext
#: payload allowed (these three over TCP and uTP, as libtorrent by default), uTP only, uTP
#: only with PE forced, TCP only.
DEMO_POLICIES = ("plaintext", "pe_rc4", "pe_plain", "utp", "utp_pe", "tcp_only")


def run(args: argparse.Namespace) -> int:
    from ...testnet import TestNetwork

    readable = sys.stderr if args.out == "-" else sys.stdout
    try:
        net = TestNetwork(nodes=args.nodes, seeders=len(DEMO_POLICIES), torrents=args.torrents,
                          cidr="127.0.90.0/24", seed=args.seed, duration=args.duration + 30,
                          stderr=subprocess_devnull(), policy_mix=",".join(f"{p}=1" for p in DEMO_POLICIES))
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    print(f"demo: starting a test network of {args.nodes} nodes seeding {args.torrents} torrents "
          f"on 127.0.90.0/24 (loopback only), one seeder of each policy: {', '.join(DEMO_POLICIES)}",
          file=readable, flush=True)
    served_by: Dict[str, Dict[str, int]] = {p: {} for p in DEMO_POLICIES}
    with net:
        policy_of = {seeder: policy for t in net.truth()
                     for seeder, policy in zip(t.get("seeders", []), t.get("seeder_policies", []))}
        # The default connection policy (uTP first, MSE preferred) reaches every seeder policy.
        crawler = Crawler({"port": 0, "bind_v4": "127.0.0.1", "allow_private_addresses": True,
                           "crawl": {"bootstrap": {"sources": [net.bootstrap]}}})
        jsonl = JsonlSink(args.out) if args.out else None

        def show(t: Torrent) -> None:
            stream = f"{t.transport or '?'}/{t.encryption or '?'}"
            policy = policy_of.get(t.peer or "", "?")
            counts = served_by.setdefault(policy, {})
            counts[stream] = counts.get(stream, 0) + 1
            print(f"  + {t.name!r}  {t.version}, {t.num_files} file{'s' if t.num_files != 1 else ''}, "
                  f"{human_size(t.total_size)}  {t.info_hash}  from {t.peer} ({policy} seeder) over {stream}",
                  file=readable, flush=True)

        store = Acceptance(None, jsonl, show)
        crawler.on_torrent(store, ack=True)
        crawler.on_error(error_printer(None))
        stopper = Stopper(crawler, args.duration)
        stopper.install()
        started = time.monotonic()
        try:
            crawler.start()
            print(f"demo: crawler on {', '.join(crawler.endpoints)}, bootstrapping from {net.bootstrap}",
                  file=readable, flush=True)
            stopper.wait(until_done=lambda: store.accepted >= args.torrents)
        finally:
            crawler.close(timeout=None)
            stopper.restore()
            store.close()
    print(f"demo: {store.accepted} of {args.torrents} torrents fetched and verified in "
          f"{time.monotonic() - started:.0f} s ({stopper.reason})", file=readable, flush=True)
    for policy, counts in served_by.items():
        streams = ", ".join(f"{n} over {stream}" for stream, n in sorted(counts.items())) or "none"
        print(f"demo: served by the {policy} seeder: {sum(counts.values())} ({streams})", file=readable, flush=True)
    return EXIT_OK


def subprocess_devnull() -> Any:
    import subprocess

    return subprocess.DEVNULL
