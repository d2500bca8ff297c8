#!/usr/bin/env python3
"""Records every KRPC datagram to or from one loopback address, for explaining a crawl.

A diagnosis tool for the benchmarks (never run by the tests): it reads the loopback
interface with an AF_PACKET socket (root only, Linux only), keeps the UDP datagrams whose
source or destination address is --address, decodes their bencoded KRPC envelope with
limits, and writes one JSON line per datagram to stdout:

    {"t": 1.234, "src": "127.0.0.1:40000", "dst": "127.0.60.1:20000", "y": "q", "q": "get_peers",
     "tid": "0a1b", "key": "<info_hash or target hex>", "values": 0, "nodes": 8, "error": null}

Answers carry no method; pair them with their query by (peer, tid). It stops after
--seconds, on SIGINT/SIGTERM, or when stdin closes with --stop-on-stdin-eof.

    sudo bench/krpc_capture.py --address 127.0.0.1 --seconds 240 > capture.jsonl
"""

import argparse
import json
import os
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003

# The one small bencode decoder of the test tools (strict, depth-limited).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lt"))
from krpc_sink import bdecode  # noqa: E402


def describe(payload):
    try:
        msg = bdecode(payload)
    except (ValueError, IndexError):
        return {"y": "undecodable", "bytes": len(payload)}
    if not isinstance(msg, dict):
        return {"y": "not_a_dict"}
    out = {"y": msg.get(b"y", b"?").decode("latin-1"), "tid": msg.get(b"t", b"").hex()}
    if out["y"] == "q":
        out["q"] = msg.get(b"q", b"?").decode("latin-1")
        a = msg.get(b"a", {}) if isinstance(msg.get(b"a"), dict) else {}
        key = a.get(b"info_hash", a.get(b"target"))
        if isinstance(key, bytes):
            out["key"] = key.hex()
    elif out["y"] == "r":
        r = msg.get(b"r", {}) if isinstance(msg.get(b"r"), dict) else {}
        values = r.get(b"values")
        out["values"] = len(values) if isinstance(values, list) else 0
        nodes = r.get(b"nodes")
        out["nodes"] = len(nodes) // 26 if isinstance(nodes, bytes) else None
        samples = r.get(b"samples")
        if isinstance(samples, bytes):
            out["samples"] = [samples[k:k + 20].hex() for k in range(0, len(samples) - 19, 20)]
    elif out["y"] == "e":
        e = msg.get(b"e")
        out["error"] = e[0] if isinstance(e, list) and e and isinstance(e[0], int) else "?"
    return out


def parse_udp(frame):
    """(src, dst, payload) of an IPv4/UDP frame on lo (14-byte Ethernet header), else None."""
    if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 17 or len(ip) < ihl + 8:
        return None
    src_ip, dst_ip = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    sport, dport, length = struct.unpack("!HHH", ip[ihl:ihl + 6])
    payload = ip[ihl + 8:ihl + length]
    return (src_ip, sport), (dst_ip, dport), payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", required=True, help="the IPv4 address whose KRPC traffic is kept")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--stop-on-stdin-eof", action="store_true")
    args = ap.parse_args()

    stop = []
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.append(1))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    watched = [sock] + ([sys.stdin] if args.stop_on_stdin_eof else [])
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    while not stop and time.monotonic() < deadline:
        ready, _, _ = select.select(watched, [], [], 0.5)
        if sys.stdin in ready and not sys.stdin.buffer.read1(4096):
            break
        if sock not in ready:
            continue
        frame, meta = sock.recvfrom(65536)
        if meta[2] == socket.PACKET_OUTGOING:
            continue  # lo shows each frame twice: once outgoing, once incoming
        parsed = parse_udp(frame)
        if not parsed:
            continue
        src, dst, payload = parsed
        if args.address not in (src[0], dst[0]) or not payload.startswith(b"d"):
            continue
        line = {"t": round(time.monotonic() - t0, 3), "src": "%s:%d" % src, "dst": "%s:%d" % dst}
        line.update(describe(payload))
        sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
