#!/usr/bin/env python3
"""A minimal KRPC responder that prints every DHT query it receives, as JSON lines.

Debugging tool for tests/lt/lt_swarm.py (and used by test_lt_swarm_selfcheck.sh): point the
swarm's --bootstrap at it to see which lookups and announces libtorrent sends to its
bootstrap node, with no crawler involved. Needs no libtorrent; any python3 works.

    tests/lt/krpc_sink.py [--bind 127.0.0.1:0] [--duration 60] [--no-token]

It answers ping, find_node, get_peers (with a token and an empty "nodes", so libtorrent
goes on to announce to it), announce_peer and sample_infohashes (no samples); anything else
gets error 204. It never sends a query and never answers an unparseable datagram.

stdout, one JSON object per line, flushed:
  {"event":"listening","endpoint":"127.0.0.1:P","node_id":"hex"}
  {"event":"query","t":<seconds since start>,"from":"ip:port","q":"get_peers","tid":"hex",
   "id":"hex","info_hash":"hex"|null,"target":"hex"|null,"port":n|null,"implied_port":n|null,
   "seed":n|null,"noseed":n|null,"bs":n|null,"token":"hex"|null}
  {"event":"exit","queries":n}
Stops after --duration seconds, on SIGTERM/SIGINT, or when stdin (if it is a pipe) closes.
Loopback only: --bind must be a 127.0.0.0/8 address.
"""

import argparse
import hashlib
import json
import os
import select
import signal
import socket
import stat
import sys
import threading
import time


def bdecode(data):
    """Strict-enough bencode decoder; raises ValueError on malformed input."""

    def parse(i, depth):
        if depth > 32:
            raise ValueError("too deep")
        c = data[i:i + 1]
        if c == b"i":
            end = data.index(b"e", i)
            return int(data[i + 1:end]), end + 1
        if c == b"l":
            out, i = [], i + 1
            while data[i:i + 1] != b"e":
                v, i = parse(i, depth + 1)
                out.append(v)
            return out, i + 1
        if c == b"d":
            out, i = {}, i + 1
            while data[i:i + 1] != b"e":
                k, i = parse(i, depth + 1)
                if not isinstance(k, bytes):
                    raise ValueError("non-string key")
                v, i = parse(i, depth + 1)
                out[k] = v
            return out, i + 1
        if c.isdigit():
            colon = data.index(b":", i)
            n = int(data[i:colon])
            if colon + 1 + n > len(data):
                raise ValueError("truncated string")
            return data[colon + 1:colon + 1 + n], colon + 1 + n
        raise ValueError("bad token")

    value, end = parse(0, 0)
    if end != len(data):
        raise ValueError("trailing bytes")
    return value


def bencode(v):
    if isinstance(v, int):
        return b"i%de" % v
    if isinstance(v, bytes):
        return b"%d:%s" % (len(v), v)
    if isinstance(v, str):
        return bencode(v.encode())
    if isinstance(v, list):
        return b"l" + b"".join(bencode(x) for x in v) + b"e"
    if isinstance(v, dict):
        items = sorted((k.encode() if isinstance(k, str) else k, x) for k, x in v.items())
        return b"d" + b"".join(bencode(k) + bencode(x) for k, x in items) + b"e"
    raise TypeError(type(v))


def hexor(v):
    return v.hex() if isinstance(v, bytes) else None


def intor(v):
    return v if isinstance(v, int) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bind", default="127.0.0.1:0")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--no-token", action="store_true", help="omit the token from get_peers replies "
                    "(libtorrent then never announces to this node)")
    args = ap.parse_args()

    host, _, port = args.bind.rpartition(":")
    if not host.startswith("127."):
        ap.error("--bind must be a 127.0.0.0/8 address")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, int(port)))
    node_id = hashlib.sha1(b"krpc_sink %d %d" % (os.getpid(), time.time_ns())).digest()

    stop = threading.Event()

    def emit(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    mode = os.fstat(0).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        def watch():
            while os.read(0, 4096):
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    bound = sock.getsockname()
    emit({"event": "listening", "endpoint": "%s:%d" % bound, "node_id": node_id.hex()})
    start = time.monotonic()
    queries = 0
    while not stop.is_set() and time.monotonic() - start < args.duration:
        ready, _, _ = select.select([sock], [], [], 0.1)
        if not ready:
            continue
        data, addr = sock.recvfrom(65536)
        try:
            msg = bdecode(data)
        except (ValueError, IndexError):
            continue
        if not isinstance(msg, dict) or msg.get(b"y") != b"q" or not isinstance(msg.get(b"t"), bytes):
            continue
        a = msg.get(b"a") if isinstance(msg.get(b"a"), dict) else {}
        q = msg.get(b"q", b"")
        qname = q.decode("utf-8", "replace") if isinstance(q, bytes) else str(q)
        queries += 1
        emit({"event": "query", "t": round(time.monotonic() - start, 3), "from": "%s:%d" % addr,
              "q": qname, "tid": msg[b"t"].hex(), "id": hexor(a.get(b"id")),
              "info_hash": hexor(a.get(b"info_hash")), "target": hexor(a.get(b"target")),
              "port": intor(a.get(b"port")), "implied_port": intor(a.get(b"implied_port")),
              "seed": intor(a.get(b"seed")), "noseed": intor(a.get(b"noseed")),
              "bs": intor(a.get(b"bs")), "token": hexor(a.get(b"token"))})
        compact_ip = socket.inet_aton(addr[0]) + addr[1].to_bytes(2, "big")
        r = {b"id": node_id}
        if q in (b"ping", b"announce_peer"):
            pass
        elif q == b"find_node":
            r[b"nodes"] = b""
        elif q == b"get_peers":
            r[b"nodes"] = b""
            if not args.no_token:
                r[b"token"] = hashlib.sha1(b"sink" + addr[0].encode()).digest()[:8]
        elif q == b"sample_infohashes":
            r.update({b"nodes": b"", b"interval": 21600, b"num": 0, b"samples": b""})
        else:
            sock.sendto(bencode({b"t": msg[b"t"], b"y": b"e", b"e": [204, b"Method Unknown"],
                                 b"ip": compact_ip}), addr)
            continue
        sock.sendto(bencode({b"t": msg[b"t"], b"y": b"r", b"r": r, b"ip": compact_ip}), addr)
    emit({"event": "exit", "queries": queries})
    return 0


if __name__ == "__main__":
    sys.exit(main())
