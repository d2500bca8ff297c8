#!/usr/bin/python3
"""A swarm of known size for BEP-33 scrape tests: real libtorrent 2.0 sessions on loopback,
one torrent, --seeders sessions seeding it, --leechers sessions that have it without its
data, never connect out and download nothing (upload mode: they stay leechers, and serve its metadata), and --nodes plain DHT nodes. Every
session has its own 127.0.N.1 (BEP-33 filters count IP addresses), bootstraps from
--bootstrap (the crawler under test) and is introduced to a few others, so they form one
DHT in which the announces land on the nodes closest to the hash.

    /usr/bin/python3 tests/lt/lt_scrape_swarm.py --bootstrap 127.0.0.1:6881 --seeders 6 \
        --leechers 4 --nodes 8 --workdir /tmp/scrape --duration 150

stdout: JSON lines: {"event":"session",...} per session, then {"event":"ready","info_hash":
"<40 hex>","seeders":S,"leechers":L} once every swarm member is announcing, {"event":"exit"}.
Stops at --duration or when stdin closes.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lt_swarm import base_settings, emit, log, lt, parse_endpoint  # noqa: E402

PIECE = 1 << 18
SIZE = 64 * PIECE  # sparse on disk: a hole of zeros


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", action="append", default=[], type=lambda s: parse_endpoint(s, "--bootstrap"))
    ap.add_argument("--seeders", type=int, default=6)
    ap.add_argument("--leechers", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--base", type=int, default=60, help="session i listens on 127.0.(base+i).1")
    ap.add_argument("--announce-interval", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=150.0)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args(argv)
    total = args.seeders + args.leechers + args.nodes
    if not 0 <= args.base or args.base + total > 255 or total < 2:
        ap.error("bad --seeders/--leechers/--nodes/--base")
    deadline = time.monotonic() + args.duration
    stop = threading.Event()

    def watch_stdin():
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        stop.set()
    threading.Thread(target=watch_stdin, daemon=True).start()

    data = os.path.join(os.path.abspath(args.workdir), "data")
    empty = os.path.join(os.path.abspath(args.workdir), "empty")
    os.makedirs(data, exist_ok=True)
    os.makedirs(empty, exist_ok=True)
    with open(os.path.join(data, "scrape-me.bin"), "wb") as f:
        f.truncate(SIZE)
    fs = lt.file_storage()
    lt.add_files(fs, os.path.join(data, "scrape-me.bin"))
    ct = lt.create_torrent(fs, PIECE, flags=lt.create_torrent.v1_only)
    lt.set_piece_hashes(ct, data)
    ti = lt.torrent_info(ct.generate())
    info_hash = str(ti.info_hashes().v1)

    sessions = []
    for i in range(total):
        role = "seeder" if i < args.seeders else "leecher" if i < args.seeders + args.leechers else "node"
        ip = "127.0.%d.1" % (args.base + i)
        settings = base_settings(ip, 0, args.bootstrap)
        settings["alert_mask"] = lt.alert_category.error | lt.alert_category.status
        if role == "leecher":
            # It announces and serves the metadata (a crawler fetches from it like from a
            # seeder), but never connects out, and its torrent is in upload mode (it downloads
            # nothing; rate limits would not hold: loopback peers are exempt): it stays a leecher.
            settings.update({"enable_outgoing_tcp": False, "enable_outgoing_utp": False})
        ses = lt.session(settings)
        sessions.append({"role": role, "ip": ip, "ses": ses, "handle": None})
    until = time.monotonic() + 10
    while time.monotonic() < until and not all(s["ses"].listen_port() for s in sessions):
        time.sleep(0.05)
    for s in sessions:
        s["port"] = s["ses"].listen_port()
        emit({"event": "session", "role": s["role"], "dht_endpoint": "%s:%d" % (s["ip"], s["port"])})
    for i, s in enumerate(sessions):  # one DHT: each session knows the next few
        for k in range(1, min(5, total)):
            o = sessions[(i + k) % total]
            s["ses"].add_dht_node((o["ip"], o["port"]))
    for s in sessions:
        if s["role"] == "node":
            continue
        atp = lt.add_torrent_params()
        atp.ti = ti
        atp.save_path = data if s["role"] == "seeder" else empty
        atp.flags &= ~lt.torrent_flags.auto_managed & ~lt.torrent_flags.paused
        if s["role"] == "seeder":
            atp.flags |= lt.torrent_flags.seed_mode
        else:
            atp.flags |= lt.torrent_flags.upload_mode
        s["handle"] = s["ses"].add_torrent(atp)

    ready = False
    next_announce = 0.0
    while not stop.is_set() and time.monotonic() < deadline:
        now = time.monotonic()
        for s in sessions:
            s["ses"].pop_alerts()
        members = [s for s in sessions if s["handle"] is not None]
        if not ready:
            states = [s["handle"].status() for s in members]
            seeding = sum(1 for st in states if st.is_seeding)
            if seeding == args.seeders and all(s["ses"].is_dht_running() for s in sessions):
                ready = True
                emit({"event": "ready", "info_hash": info_hash, "seeders": args.seeders, "leechers": args.leechers})
        if ready and now >= next_announce:
            for s in members:
                s["handle"].force_dht_announce()
            next_announce = now + args.announce_interval
        time.sleep(0.1)
    log("lt_scrape_swarm: stopping")
    for s in sessions:
        s["ses"].pause()
    emit({"event": "exit", "reason": "stdin" if stop.is_set() else "duration"})
    return 0


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(rc)
