#!/usr/bin/python3
"""A swarm of real libtorrent 2.0 sessions seeding generated torrents on loopback, for tests.

Run it with Debian's interpreter, which has python3-libtorrent (2.0.8):

    /usr/bin/python3 tests/lt/lt_swarm.py --bootstrap 127.0.0.1:6881 --sessions 3 \
        --torrents-per-session 2 --workdir /tmp/swarm --duration 60

Session i listens (TCP, uTP and DHT on one port) on 127.<p>.<q>.1 where the /24s count up
from --base-ip (default 127.0.10 -> 127.0.10.1, 127.0.11.1, ...), so per-IP and per-/24
logic sees a distinct host per session; with --ipv6 every session listens on ::1 instead,
each on its own port, and its DHT runs over IPv6. Torrents are generated deterministically
from --seed into --workdir and added in seed mode. Everything stays on loopback: bootstrap
addresses must be 127.A.B.C:PORT or [::1]:PORT literals, and LSD, UPnP, NAT-PMP and the
default DHT routers are never enabled.

stdout carries JSON lines (ASCII, flushed per line), stderr carries logs; see
tests/lt/README.md for the event list and the settings used, and why.
"""

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import stat
import sys
import threading
import time

try:
    import libtorrent as lt
except ImportError:  # the python3 on PATH may lack the binding
    sys.stderr.write("lt_swarm: cannot import libtorrent; run with /usr/bin/python3 "
                     "(Debian package python3-libtorrent)\n")
    sys.stdout.write(json.dumps({"event": "error", "message": "libtorrent not importable"}) + "\n")
    sys.exit(2)

META_PIECE = 16384  # ut_metadata piece size (BEP-9)
DENSE_LIMIT = 65536  # bytes of pseudo-random content per file; the rest is a sparse hole
KINDS = ("v1", "v2", "hybrid", "multi", "unicode")

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo")
UWORDS = ("Ünïcødé", "日本語", "música", "canción", "文档", "说明", "Ελληνικά", "русский",
          "עברית", "한국어", "emoji 🎵", "naïve café", "Zürich", "e\u0301clair", "العربية",
          "हिन्दी", "ไทย", "Ω≈ç√∫", "𝄞 music", "Ɐ ñ ß")

T0 = time.monotonic()
_out_lock = threading.Lock()


def log(*parts):
    sys.stderr.write("lt_swarm %7.3f: %s\n" % (time.monotonic() - T0, " ".join(str(p) for p in parts)))
    sys.stderr.flush()


def emit(obj):
    """One JSON object per line on stdout, ASCII only (non-ASCII as \\u escapes), flushed."""
    line = json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


# ---------------------------------------------------------------- arguments

def parse_endpoint(text, what):
    m = re.fullmatch(r"(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]):(\d{1,5})", text.strip())
    if (not m or (m.group(1) != "[::1]" and any(int(o) > 255 for o in m.group(1).split(".")))
            or not 0 < int(m.group(2)) < 65536):
        raise argparse.ArgumentTypeError("%s must be 127.a.b.c:port or [::1]:port (loopback only), got %r"
                                         % (what, text))
    return m.group(1).strip("[]"), int(m.group(2))


def host_port(ip, port):
    """ip:port, with an IPv6 address in brackets (libtorrent's and our endpoints' form)."""
    return ("[%s]:%d" if ":" in ip else "%s:%d") % (ip, port)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", action="append", default=[], metavar="127.A.B.C:PORT|[::1]:PORT",
                    type=lambda s: parse_endpoint(s, "--bootstrap"),
                    help="DHT bootstrap node (repeatable); the only routers the sessions know")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--torrents-per-session", type=int, default=2)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma list cycled over the torrents: " + ",".join(KINDS))
    ap.add_argument("--base-ip", default="127.0.10",
                    help="first session's /24 (127.A.B or 127.A.B.1); session i uses the i-th next /24")
    ap.add_argument("--ipv6", action="store_true",
                    help="every session on ::1 (its own port each), DHT over IPv6; --base-ip is unused")
    ap.add_argument("--one-ip", action="store_true",
                    help="every session on --base-ip's first address (its own port each), as several "
                         "clients behind one NAT or on one seedbox")
    ap.add_argument("--port", type=int, default=0,
                    help="listen port of every session (0: an ephemeral port each, read back)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds to run after start (hard bound)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--introduce", action="store_true",
                    help="add_dht_node every session to a few others so they form a DHT")
    ap.add_argument("--announce-interval", type=float, default=30.0,
                    help="force_dht_announce() every torrent this often (0: only libtorrent's own)")
    ap.add_argument("--announce-pace", type=float, default=0.6,
                    help="seconds per announced hash between forced announces of one session")
    ap.add_argument("--pad-files", action="store_true",
                    help="BEP-47 pad files in v1 torrents too (hybrids always have them)")
    ap.add_argument("--piece-count-range", default="1:2", metavar="LO:HI",
                    help="info-dict sizes, in 16 KiB metadata pieces, spread evenly over the torrents")
    ap.add_argument("--replicas", type=int, default=1,
                    help="sessions seeding each torrent (the owner plus the next ones)")
    ap.add_argument("--stats-interval", type=float, default=5.0)
    ap.add_argument("--list-files", type=int, default=64,
                    help="at most this many files in a torrent event (the .json in workdir has all)")
    ap.add_argument("--fetch-check", action="store_true",
                    help="one more session adds every torrent by hash only and reports 'fetched'")
    ap.add_argument("--stdin-watch", choices=("auto", "yes", "no"), default="auto",
                    help="stop when stdin closes (auto: only if stdin is a pipe or socket)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a libtorrent setting of the seeding sessions (repeatable)")
    ap.add_argument("--pkt-log", action="store_true", help="log every DHT packet to stderr")
    ap.add_argument("--policies", default="",
                    help="comma list of connection policies cycled over the sessions: "
                         + ",".join(SESSION_POLICIES) + " (default: every session as --encryption says)")
    ap.add_argument("--encryption", choices=sorted(ENCRYPTION_POLICIES), default="enabled",
                    help="MSE/PE policy of the seeding sessions: enabled (libtorrent's default: plaintext "
                         "or PE), forced_rc4 (PE forced, RC4 only), forced_both (PE forced, plaintext "
                         "payload allowed); --set overrides it")
    args = ap.parse_args(argv)

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        ap.error("--kinds: unknown %s (choose from %s)" % (bad, ",".join(KINDS)))
    args.kinds = kinds
    m = re.fullmatch(r"127\.(\d{1,3})\.(\d{1,3})(?:\.1)?", args.base_ip)
    if not m or int(m.group(1)) > 255 or int(m.group(2)) > 255:
        ap.error("--base-ip must be 127.A.B or 127.A.B.1")
    args.base24 = (127 << 16) | (int(m.group(1)) << 8) | int(m.group(2))
    extra = 1 if args.fetch_check else 0
    if args.sessions < 1 or ((args.base24 + args.sessions - 1 + extra) >> 16) != 127:
        ap.error("--sessions: the /24s run out of 127.0.0.0/8")
    if args.torrents_per_session < 0 or not 0 <= args.port < 65536 or args.duration <= 0:
        ap.error("bad --torrents-per-session, --port or --duration")
    if (args.ipv6 or args.one_ip) and args.port and args.sessions + extra > 1:
        ap.error("--ipv6 and --one-ip put every session on one address: they need --port 0 (an ephemeral port each)")
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bad = [p for p in args.policies if p not in SESSION_POLICIES]
    if bad:
        ap.error("--policies: unknown %s (choose from %s)" % (bad, ",".join(SESSION_POLICIES)))
    m = re.fullmatch(r"(\d+):(\d+)", args.piece_count_range)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)) <= 2000:
        ap.error("--piece-count-range must be LO:HI with 1 <= LO <= HI")
    args.meta_lo, args.meta_hi = int(m.group(1)), int(m.group(2))
    args.replicas = max(1, min(args.replicas, args.sessions))
    overrides = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error("--set wants NAME=VALUE")
        overrides[name] = value
    args.overrides = overrides
    return args


def session_ip(args, index):
    if args.ipv6:
        return "::1"
    p = args.base24 + (0 if args.one_ip else index)
    return "127.%d.%d.1" % ((p >> 8) & 255, p & 255)


# ---------------------------------------------------------------- torrents

def file_bytes(key, size):
    """Deterministic content: pseudo-random up to DENSE_LIMIT bytes, then zeros."""
    return random.Random(repr(key)).randbytes(min(size, DENSE_LIMIT))


def write_file(path, key, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(file_bytes(key, size))
        if size > DENSE_LIMIT:
            f.truncate(size)  # sparse tail: reads as zeros, costs no disk


class Spec:
    """What torrent number j (over the whole swarm) looks like; depends only on seed, j, kind, m."""

    def __init__(self, args, j, kind, meta_pieces):
        self.j, self.kind, self.m = j, kind, meta_pieces
        occurrence = j // len(args.kinds)
        self.rng = random.Random("lt_swarm/%d/%d/%s" % (args.seed, j, kind))
        self.fmt = {"v1": "v1", "multi": "v1", "v2": "v2", "hybrid": "hybrid",
                    "unicode": "v1" if occurrence % 2 == 0 else "hybrid"}[kind]
        if kind == "v1":
            self.single = True
        elif kind == "v2":
            self.single = meta_pieces == 1 and occurrence % 2 == 0
        elif kind == "hybrid":
            self.single = meta_pieces == 1 and occurrence % 2 == 1
        else:
            self.single = False
        rng = self.rng
        if kind == "unicode":
            self.name = "%s %d-%d %s" % (rng.choice(UWORDS), args.seed, j, rng.choice(UWORDS))
        else:
            self.name = "%s-%d-%04d-%s" % (kind, args.seed, j, rng.choice(WORDS))
        if self.single:
            self.name += ".bin"
        self.flags = {"v1": lt.create_torrent.v1_only, "v2": lt.create_torrent.v2_only, "hybrid": 0}[self.fmt]
        if self.fmt == "v1" and args.pad_files:
            self.flags |= lt.create_torrent.canonical_files
        self.seed = args.seed

    def file_entry(self, i, big):
        """(relative path without the torrent name, size) of file i of a multi-file torrent."""
        r = random.Random("lt_swarm/%d/%d/file/%d" % (self.seed, self.j, i))
        if self.kind == "unicode":
            parts = ["%s %d" % (r.choice(UWORDS), i // 48)] if i % 5 else []
            leaf = "%s %s %05d.txt" % (r.choice(UWORDS), r.choice(UWORDS), i)
            if big:  # long names: a big info dict from fewer files on disk
                leaf = " ".join(r.choice(UWORDS) for _ in range(6)) + " " + leaf
        else:
            parts = ["dir%03d" % (i // 48), "sub%d" % (i % 3)] if i % 5 else []
            leaf = "file-%05d-%s-%s.dat" % (i, r.choice(WORDS), r.choice(WORDS))
            if big:
                leaf = "-".join(r.choice(WORDS) for _ in range(12)) + "-" + leaf
        if big:
            size = 0 if r.random() < 0.05 else r.randint(1, 3000)
        else:
            size = 0 if r.random() < 0.1 else r.randint(1, 60000)
        if i == 0:  # an all-empty torrent is invalid
            size = max(size, 1)
        return parts + [leaf], size


def meta_targets(args, total):
    """Metadata piece counts spread evenly from LO to HI over the torrents."""
    if total <= 1:
        return [args.meta_hi] * total
    return [args.meta_lo + round((args.meta_hi - args.meta_lo) * j / (total - 1)) for j in range(total)]


def build_torrent(spec, save_path):
    """Writes the content under save_path and returns (torrent dict entry, info bytes)."""
    rng = spec.rng
    lo_b, hi_b = (spec.m - 1) * META_PIECE, spec.m * META_PIECE
    goal = (spec.m - 0.5) * META_PIECE if spec.m > 1 else 0

    def make(files, piece_len):
        fs = lt.file_storage()
        for rel, size in files:
            fs.add_file(rel, size)
        ct = lt.create_torrent(fs, piece_len, spec.flags)
        ct.set_creator("dhtcrawler tests/lt/lt_swarm.py")
        lt.set_piece_hashes(ct, save_path)
        entry = ct.generate()
        entry[b"creation date"] = 0
        return entry, lt.bencode(entry[b"info"])

    if spec.single:
        if spec.m == 1:
            piece_len = rng.choice((16384, 32768, 65536))
            size = rng.randint(1, 400000)
        else:  # the v1 "pieces" string carries the size: 20 bytes per 16 KiB piece
            piece_len = 16384
            size = int((goal - 200 - len(spec.name.encode())) / 20) * piece_len - rng.randint(0, piece_len - 1)
        for _ in range(4):
            write_file(os.path.join(save_path, spec.name), ("content", spec.seed, spec.j), size)
            entry, info = make([(spec.name, size)], piece_len)
            if lo_b < len(info) <= hi_b or spec.m == 1 or spec.fmt != "v1":
                return entry, info
            size = max(1, size + int((goal - len(info)) / 20) * piece_len)
        return entry, info

    written = {}

    def files_for(n, big):
        out = []
        for i in range(n):
            parts, size = spec.file_entry(i, big)
            rel = "/".join([spec.name] + parts)
            if rel not in written:
                write_file(os.path.join(save_path, *rel.split("/")), ("content", spec.seed, spec.j, i), size)
                written[rel] = size
            out.append((rel, size))
        return out

    if spec.m == 1:
        n = rng.randint(2, 6)
        return make(files_for(n, False), rng.choice((16384, 32768)))

    # Many small files make a big info dict; find the count by the secant method.
    cache = {}

    def size_of(n):
        if n not in cache:
            cache[n] = make(files_for(n, True), 16384)
        return len(cache[n][1])

    na, nb = 4, 32
    sa, sb = size_of(na), size_of(nb)
    best = nb
    for _ in range(10):
        if lo_b < sb <= hi_b:
            best = nb
            break
        slope = max((sb - sa) / (nb - na), 1.0) if nb != na else 100.0
        nn = max(1, round(nb + (goal - sb) / slope))
        if nn == nb:
            nn = nb + (1 if sb <= lo_b else -1)
        na, sa, nb, sb = nb, sb, nn, size_of(nn)
        best = nb
    entry, info = cache[best]
    # remove content of files beyond the chosen count
    keep = {rel for rel, _ in files_for(best, True)}
    for rel in list(written):
        if rel not in keep:
            try:
                os.remove(os.path.join(save_path, *rel.split("/")))
            except OSError:
                pass
    return entry, info


class Torrent:
    pass


def info_files(info):
    """The files as the info dict lists them (what a crawler parses): the v1 "files" list with its
    BEP-47 pad files for v1 and hybrid torrents, the "file tree" for v2-only ones. libtorrent's own
    file_storage view differs: it also shows the pad files it implies for v2 alignment."""
    d = lt.bdecode(info)

    def text(b):
        return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)

    name = text(d[b"name"])
    if b"files" in d:
        return [{"path": "/".join([name] + [text(p) for p in f[b"path"]]), "size": f[b"length"],
                 "pad": b"p" in f.get(b"attr", b"")} for f in d[b"files"]]
    if b"length" in d:
        return [{"path": name, "size": d[b"length"], "pad": False}]
    out = []

    def walk(node, parts):
        for k in sorted(node):
            v = node[k]
            if k == b"":
                out.append({"path": "/".join(parts), "size": v.get(b"length", 0), "pad": False})
            else:
                walk(v, parts + [text(k)])

    tree = d[b"file tree"]
    if len(tree) == 1 and b"" in next(iter(tree.values())):  # single-file: one entry, the file
        walk(tree, [])
    else:  # multi-file: paths inside the tree are relative to the torrent's directory
        walk(tree, [name])
    return out


GENERATOR_VERSION = 2  # bump when the generated torrents change, to invalidate workdir caches


def generate_all(args, data_dir, tor_dir, stop, deadline):
    total = args.sessions * args.torrents_per_session
    targets = meta_targets(args, total)
    torrents = []
    for j in range(total):
        if stop.is_set() or time.monotonic() >= deadline:
            return None
        kind = args.kinds[j % len(args.kinds)]
        spec = Spec(args, j, kind, targets[j])
        save_path = os.path.join(data_dir, "t%04d" % j)
        base = os.path.join(tor_dir, "t%04d" % j)
        started = time.monotonic()
        # A workdir reused with the same parameters keeps its torrents (content is not re-checked).
        cache_key = json.dumps([GENERATOR_VERSION, args.seed, j, kind, spec.m, args.pad_files])
        cached = False
        try:
            with open(base + ".key", encoding="utf-8") as f:
                cached = f.read() == cache_key and os.path.isdir(save_path)
            if cached:
                with open(base + ".torrent", "rb") as f:
                    blob = f.read()
                ti = lt.torrent_info(blob)
                info = bytes(ti.info_section())
        except (OSError, RuntimeError):
            cached = False
        if not cached:
            if os.path.exists(base + ".key"):
                os.remove(base + ".key")
            if os.path.exists(save_path):
                shutil.rmtree(save_path)
            os.makedirs(save_path)
            entry, info = build_torrent(spec, save_path)
            blob = lt.bencode(entry)
            ti = lt.torrent_info(blob)
        hashes = ti.info_hashes()
        if bytes(ti.info_section()) != info:
            raise RuntimeError("info section differs from the generated info dict")
        t = Torrent()
        t.j, t.spec, t.ti, t.info = j, spec, ti, info
        t.v1 = str(hashes.v1) if hashes.has_v1() else None
        t.v2 = str(hashes.v2) if hashes.has_v2() else None
        if t.v1:
            assert hashlib.sha1(info).hexdigest() == t.v1
        if t.v2:
            assert hashlib.sha256(info).hexdigest() == t.v2
        t.key = t.v1 or t.v2[:40]
        t.wire = [h for h in (t.v1, t.v2[:40] if t.v2 else None) if h]
        t.save_path = save_path
        t.owner = j // args.torrents_per_session if args.torrents_per_session else 0
        t.seeders = [(t.owner + r) % args.sessions for r in range(args.replicas)]
        t.torrent_file, t.info_file, t.json_file = base + ".torrent", base + ".info", base + ".json"
        if not cached:
            with open(t.torrent_file, "wb") as f:
                f.write(blob)
            with open(t.info_file, "wb") as f:
                f.write(info)
        t.files = info_files(info)
        t.description = {
            "info_hash": t.key, "info_hash_v1": t.v1, "info_hash_v2": t.v2, "announce_hashes": t.wire,
            "kind": kind, "format": spec.fmt, "name": ti.name(), "num_files": len(t.files),
            "files": t.files, "total_size": ti.total_size(),
            "content_size": sum(f["size"] for f in t.files if not f["pad"]),
            "piece_length": ti.piece_length(), "num_pieces": ti.num_pieces(),
            "metadata_size": len(info), "num_pieces_metadata": math.ceil(len(info) / META_PIECE),
            "torrent_file": t.torrent_file, "info_file": t.info_file,
        }
        if not cached:
            with open(t.json_file, "w", encoding="utf-8") as f:
                json.dump(t.description, f, indent=1, ensure_ascii=False)
            with open(base + ".key", "w", encoding="utf-8") as f:
                f.write(cache_key)
        log("%s t%04d %s/%s files=%d metadata=%d bytes (%d pieces, wanted %d) in %.2fs" % (
            "reused" if cached else "generated", j, kind, spec.fmt, len(t.files), len(info),
            t.description["num_pieces_metadata"], spec.m, time.monotonic() - started))
        torrents.append(t)
    return torrents


# ---------------------------------------------------------------- sessions

SEED_ALERTS = (lt.alert_category.error | lt.alert_category.status | lt.alert_category.dht
               | lt.alert_category.dht_log | lt.alert_category.dht_operation | lt.alert_category.tracker
               | lt.alert_category.storage)


def base_settings(ip, port, bootstrap, shared_address=False):
    """``shared_address``: every session on one address (--one-ip, --ipv6), as behind a real
    shared IP. libtorrent then keeps its defaults of one node per IP in a routing table and a
    lookup. Turned off there, the other sessions on the address, which each session's blocker
    bans within a second, fill its routing table; libtorrent asks its router (the crawler) only
    when a lookup has fewer than three nodes to start from, so a torrent's lookups could time
    out at banned nodes for minutes without ever reaching the crawler (issue 32)."""
    return {
        # one explicit loopback address: a wildcard's loopback socket gets no DHT node
        "listen_interfaces": host_port(ip, port),
        "outgoing_interfaces": ip,
        "enable_dht": True,
        "dht_bootstrap_nodes": ",".join(host_port(*b) for b in bootstrap),
        # nothing that reaches beyond loopback
        "enable_lsd": False, "enable_upnp": False, "enable_natpmp": False, "enable_ip_notifier": False,
        # loopback peers share 127/8 and sessions share a /24 with nothing, but be explicit
        "dht_restrict_routing_ips": shared_address, "dht_restrict_search_ips": shared_address,
        # a crawler may open several connections from one IP
        "allow_multiple_connections_per_ip": True,
        # uTP on (libtorrent's default): announces then carry implied_port=1, as in the wild
        "enable_incoming_utp": True, "enable_outgoing_utp": True,
        "enable_incoming_tcp": True, "enable_outgoing_tcp": True,
        # every torrent active and announcing
        "active_downloads": -1, "active_seeds": -1, "active_limit": 100000,
        "active_dht_limit": 100000, "active_tracker_limit": 100000, "active_lsd_limit": 0,
        # the default 8000 B/s DHT budget delays announces of many torrents by minutes
        "dht_upload_rate_limit": 1000000,
        "connections_limit": 1000,
        "alert_queue_size": 200000,
        "alert_mask": SEED_ALERTS,
    }


# libtorrent's settings: enc policy 0 pe_forced, 1 pe_enabled, 2 pe_disabled; allowed_enc_level
# 1 pe_plaintext, 2 pe_rc4, 3 pe_both. With in_enc_policy forced a plaintext handshake is dropped.
ENCRYPTION_POLICIES = {
    "enabled": {},
    "forced_rc4": {"out_enc_policy": 0, "in_enc_policy": 0, "allowed_enc_level": 2},
    "forced_both": {"out_enc_policy": 0, "in_enc_policy": 0, "allowed_enc_level": 3, "prefer_rc4": False},
}


# Connection policies a session may take (--policies), as the test network names them: how it
# accepts peers (transport, encryption). --set still overrides any of these settings.
UTP_ONLY = {"enable_incoming_tcp": False, "enable_outgoing_tcp": False}
SESSION_POLICIES = {
    "plaintext": {},                                                     # libtorrent's default
    "pe_rc4": ENCRYPTION_POLICIES["forced_rc4"],                         # PE forced, RC4 only
    "pe_plain": ENCRYPTION_POLICIES["forced_both"],                      # PE forced, plaintext payload allowed
    "utp": UTP_ONLY,                                                     # uTP only
    "utp_pe": dict(UTP_ONLY, **ENCRYPTION_POLICIES["forced_rc4"]),      # uTP only, PE forced
    "tcp_only": {"enable_incoming_utp": False, "enable_outgoing_utp": False},
}


def session_policy(args, index):
    return args.policies[index % len(args.policies)] if args.policies else None


def coerce_setting(defaults, name, value):
    if name not in defaults:
        raise SystemExit("lt_swarm: unknown libtorrent setting %r" % name)
    cur = defaults[name]
    if isinstance(cur, bool):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(cur, int):
        return int(value, 0)
    return value


class Seeder:
    def __init__(self, index, ip, settings):
        self.index, self.ip = index, ip
        self.ses = lt.session(settings)
        self.port = None
        self.node_id = None
        self.listening_tcp = self.listening_udp = False
        self.handles = {}  # key -> handle
        self.pending = {}  # (endpoint, tid) -> wire hash of an announce_peer in flight
        self.announces_sent = 0
        self.announce_acks = 0
        self.error = None

    @property
    def endpoint(self):
        return host_port(self.ip, self.port)


def parse_pkt(a):
    """(outgoing?, 'ip:port', decoded dict or None) of a dht_pkt_alert."""
    text = a.message()
    m = re.match(r"(==>|<==) \[(\[[^\]]+\]:\d+|[^\]]+)\]", text)  # an IPv6 endpoint has its own brackets
    if not m:
        return None
    try:
        msg = lt.bdecode(bytes(a.pkt_buf))
    except Exception:
        msg = None
    return m.group(1) == "==>", m.group(2), msg if isinstance(msg, dict) else None


def handle_seed_alert(s, a, wire_to_key, args):
    kind = type(a).__name__
    if kind == "dht_pkt_alert":
        parsed = parse_pkt(a)
        if not parsed:
            return
        outgoing, ep, msg = parsed
        if args.pkt_log:
            log("s%d" % s.index, a.message()[:300])
        if msg is None:
            return
        y, tid = msg.get(b"y"), msg.get(b"t")
        if outgoing and y == b"q" and msg.get(b"q") == b"announce_peer":
            body = msg.get(b"a", {})
            ih = bytes(body.get(b"info_hash", b"")).hex()
            s.announces_sent += 1
            s.pending[(ep, tid)] = ih
            if len(s.pending) > 10000:
                s.pending.clear()
            emit({"event": "announced", "session": s.index, "info_hash": ih,
                  "torrent": wire_to_key.get(ih), "to": ep, "port": body.get(b"port"),
                  "implied_port": body.get(b"implied_port"), "seed": body.get(b"seed"),
                  "t": round(time.monotonic() - T0, 3)})
        elif not outgoing and y in (b"r", b"e") and (ep, tid) in s.pending:
            ih = s.pending.pop((ep, tid))
            s.announce_acks += 1
            err = msg.get(b"e") if y == b"e" else None
            if isinstance(err, list):
                err = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in err]
            emit({"event": "announce_ack", "session": s.index, "info_hash": ih,
                  "torrent": wire_to_key.get(ih), "from": ep, "error": err,
                  "t": round(time.monotonic() - T0, 3)})
    elif kind == "dht_log_alert":
        text = a.log_message()
        if s.node_id is None:
            m = re.search(r"node id: ([0-9a-f]{40})", text)
            if m:
                s.node_id = m.group(1)
        m = re.search(r"BANNING PEER \[ ip: (\S+) time: (\d+) ms count: (\d+)", text)
        if m:  # dht_block_ratelimit tripped: this IP is ignored for dht_block_timeout seconds
            log("s%d" % s.index, "dht:", text)
            emit({"event": "dht_banned", "session": s.index, "ip": m.group(1), "count": int(m.group(3)),
                  "ms": int(m.group(2)), "t": round(time.monotonic() - T0, 3)})
    elif kind == "listen_succeeded_alert":
        port = a.port if isinstance(a.port, int) else None
        if port:
            s.port = port
        if a.socket_type == lt.socket_type_t.tcp:
            s.listening_tcp = True
        elif a.socket_type in (lt.socket_type_t.utp, lt.socket_type_t.udp):
            s.listening_udp = True
    elif kind == "listen_failed_alert":
        s.error = a.message()
        log("s%d" % s.index, "listen failed:", a.message())
    elif kind == "dht_stats_alert":
        nodes = sum(b.get("num_nodes", 0) for b in a.routing_table)
        repl = sum(b.get("num_replacements", 0) for b in a.routing_table)
        peers = 0
        for h in s.handles.values():
            try:
                peers += h.status().num_peers
            except Exception:
                pass
        emit({"event": "stats", "session": s.index, "dht_nodes": nodes, "dht_replacements": repl,
              "dht_buckets": len(a.routing_table), "dht_active_requests": len(a.active_requests),
              "torrents": len(s.handles), "peers": peers, "announces_sent": s.announces_sent,
              "announce_acks": s.announce_acks, "t": round(time.monotonic() - T0, 3)})
    elif kind in ("torrent_error_alert", "file_error_alert", "dht_error_alert"):
        log("s%d" % s.index, kind, a.message())
    elif kind == "dht_reply_alert":
        log("s%d" % s.index, "dht reply:", a.message())


# ---------------------------------------------------------------- leecher (--fetch-check)

class Leecher:
    def __init__(self, ip, port, seeders, torrents, workdir):
        settings = base_settings(ip, port, [(s.ip, s.port) for s in seeders])
        settings["alert_mask"] = lt.alert_category.error | lt.alert_category.status
        # fetch over TCP, as a crawler does (libtorrent would otherwise prefer uTP)
        settings["enable_outgoing_utp"] = False
        self.ses = lt.session(settings)
        self.ip = ip
        self.save_path = os.path.join(workdir, "leecher")
        os.makedirs(self.save_path, exist_ok=True)
        for s in seeders:
            self.ses.add_dht_node((s.ip, s.port))
        self.pending = {}
        self.started = time.monotonic()
        self.next_force = time.monotonic() + 2.0  # libtorrent looks each one up by itself first
        self.rotor = 0
        for t in torrents:
            atp = lt.add_torrent_params()
            # ask by v1 for v1 torrents, by v2 for v2-only ones; hybrids alternate
            if t.v1 and (not t.v2 or t.j % 2 == 0):
                atp.info_hashes = lt.info_hash_t(lt.sha1_hash(bytes.fromhex(t.v1)))
                asked = "v1"
            else:
                atp.info_hashes = lt.info_hash_t(lt.sha256_hash(bytes.fromhex(t.v2)))
                asked = "v2"
            atp.save_path = self.save_path
            atp.flags = ((atp.flags | lt.torrent_flags.default_dont_download | lt.torrent_flags.upload_mode)
                         & ~lt.torrent_flags.auto_managed & ~lt.torrent_flags.paused)
            h = self.ses.add_torrent(atp)
            self.pending[t.key] = (h, t, asked)
        self.port = None

    def poll(self):
        done = []
        for a in self.ses.pop_alerts():
            kind = type(a).__name__
            if kind == "metadata_received_alert":
                done.append(a.handle)
            elif kind == "listen_succeeded_alert" and self.port is None:
                self.port = a.port
                emit({"event": "leecher", "dht_endpoint": host_port(self.ip, a.port),
                      "tcp_endpoint": host_port(self.ip, a.port)})
            elif kind in ("torrent_error_alert", "listen_failed_alert"):
                log("leecher", kind, a.message())
        for h in done:
            for key, (ph, t, asked) in list(self.pending.items()):
                if ph == h:
                    ti = h.torrent_file()
                    got = bytes(ti.info_section()) if ti is not None else b""
                    emit({"event": "fetched", "info_hash": key, "index": t.j, "asked_by": asked,
                          "matches": got == t.info, "metadata_size": len(got),
                          "seconds": round(time.monotonic() - self.started, 3)})
                    del self.pending[key]
                    self.ses.remove_torrent(h)
        now = time.monotonic()
        if self.pending and now >= self.next_force:
            # re-run the DHT lookups of what is missing, a few at a time: a seeder ignores an IP
            # that sends it more than 50 packets in 10 s (dht_block_ratelimit)
            self.next_force = now + 1.0
            waiting = list(self.pending.values())
            waiting[self.rotor % len(waiting)][0].force_dht_announce()
            self.rotor += 1


# ---------------------------------------------------------------- main

def main(argv):
    args = parse_args(argv)
    stop = threading.Event()
    reason = ["duration"]

    def request_stop(why):
        if not stop.is_set():
            reason[0] = why
            stop.set()

    signal.signal(signal.SIGTERM, lambda *_: request_stop("signal"))
    signal.signal(signal.SIGINT, lambda *_: request_stop("signal"))
    mode = os.fstat(0).st_mode
    watch = args.stdin_watch == "yes" or (args.stdin_watch == "auto" and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)))
    if watch:
        def watch_stdin():
            try:
                while os.read(0, 4096):
                    pass
            except OSError:
                pass
            request_stop("stdin")
        threading.Thread(target=watch_stdin, daemon=True).start()
    log("stdin watch", "on" if watch else "off")
    deadline = T0 + args.duration

    workdir = os.path.abspath(args.workdir)
    data_dir, tor_dir = os.path.join(workdir, "data"), os.path.join(workdir, "torrents")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(tor_dir, exist_ok=True)

    defaults = lt.default_settings()
    overrides = {k: coerce_setting(defaults, k, v) for k, v in args.overrides.items()}

    # Sessions first, so their DHTs warm up while the torrents are generated.
    seeders = []
    for i in range(args.sessions):
        settings = base_settings(session_ip(args, i), args.port, args.bootstrap, args.one_ip or args.ipv6)
        settings.update(ENCRYPTION_POLICIES[args.encryption])
        if session_policy(args, i):
            settings.update(SESSION_POLICIES[session_policy(args, i)])
        settings.update(overrides)
        seeders.append(Seeder(i, session_ip(args, i), settings))
    wait_until = time.monotonic() + 10
    while time.monotonic() < wait_until and not stop.is_set():
        for s in seeders:
            for a in s.ses.pop_alerts():
                handle_seed_alert(s, a, {}, args)
        if any(s.error for s in seeders):
            break
        if all(s.listening_tcp and s.listening_udp and s.node_id for s in seeders):
            break
        time.sleep(0.02)
    failed = [s for s in seeders if s.error or not (s.listening_tcp and s.listening_udp)]
    if failed:
        emit({"event": "error", "message": "session %d did not listen on %s: %s" % (
            failed[0].index, failed[0].ip, failed[0].error)})
        emit({"event": "exit", "reason": "error"})
        os._exit(1)
    for s in seeders:
        if s.node_id is None:
            s.node_id = ""
        emit({"event": "session", "index": s.index, "dht_endpoint": s.endpoint, "tcp_endpoint": s.endpoint,
              "node_id": s.node_id, "policy": session_policy(args, s.index) or args.encryption})
    if args.introduce and args.sessions > 1:
        fanout = min(args.sessions - 1, 4)
        for s in seeders:
            for k in range(1, fanout + 1):
                o = seeders[(s.index + k) % args.sessions]
                s.ses.add_dht_node((o.ip, o.port))

    torrents = generate_all(args, data_dir, tor_dir, stop, deadline)
    if torrents is None:
        torrents = []
    wire_to_key, wire_of = {}, {}
    for t in torrents:
        wire_of[t.key] = t.wire
        for h in t.wire:
            wire_to_key[h] = t.key
        for si in t.seeders:
            atp = lt.add_torrent_params()
            atp.ti = t.ti
            atp.save_path = t.save_path
            atp.flags = ((atp.flags | lt.torrent_flags.seed_mode)
                         & ~lt.torrent_flags.auto_managed & ~lt.torrent_flags.paused)
            seeders[si].handles[t.key] = seeders[si].ses.add_torrent(atp)
        d = dict(t.description)
        if len(d["files"]) > args.list_files:
            d["files"] = d["files"][:args.list_files]
            d["files_truncated"] = True
        else:
            d["files_truncated"] = False
        d.update({"event": "torrent", "session": t.owner, "index": t.j,
                  "seeder": seeders[t.owner].endpoint, "seeders": [seeders[i].endpoint for i in t.seeders],
                  "json_file": t.json_file})
        emit(d)

    # ready: every session listening with its DHT running, every torrent seeding
    while not stop.is_set() and time.monotonic() < deadline:
        for s in seeders:
            for a in s.ses.pop_alerts():
                handle_seed_alert(s, a, wire_to_key, args)
        ok = all(s.ses.is_dht_running() for s in seeders)
        if ok:
            for s in seeders:
                for h in s.handles.values():
                    st = h.status()
                    if not (st.is_seeding and not st.paused):
                        ok = False
                        break
                if not ok:
                    break
        if ok:
            break
        time.sleep(0.05)
    t_ready = time.monotonic()
    if not stop.is_set() and t_ready < deadline:
        emit({"event": "ready", "sessions": len(seeders), "torrents": len(torrents),
              "seconds": round(t_ready - T0, 3)})
        log("ready after %.2fs" % (t_ready - T0))

    leecher = None
    if args.fetch_check and not stop.is_set():
        leecher = Leecher(session_ip(args, args.sessions), args.port, seeders, torrents, workdir)

    # Forced announces. libtorrent's own first announces come one torrent per session every
    # min(4, dht_announce_interval / torrents) seconds, later ones every 15 minutes. A forced
    # round starts right after ready and repeats every --announce-interval seconds; within a
    # session, announces are --announce-pace seconds per hash apart, because the bootstrap's
    # replies count against dht_block_ratelimit (over 50 packets in 10 s from one IP and the
    # session ignores that IP for 5 minutes).
    schedule = []  # [due, period, handle]
    if args.announce_interval > 0:
        for s in seeders:
            offset, items = 0.0, []
            for key, h in s.handles.items():
                items.append([t_ready + offset, h])
                offset += args.announce_pace * len(wire_of[key])
            period = max(args.announce_interval, offset)
            schedule.extend([due, period, h] for due, h in items)
    next_stats = time.monotonic() + args.stats_interval if args.stats_interval > 0 else float("inf")
    fetch_reported = False

    while not stop.is_set():
        now = time.monotonic()
        if now >= deadline:
            request_stop("duration")
            break
        for s in seeders:
            for a in s.ses.pop_alerts():
                handle_seed_alert(s, a, wire_to_key, args)
        for item in schedule:
            if now >= item[0]:
                item[0] += item[1]
                item[2].force_dht_announce()
        if now >= next_stats:
            next_stats = now + args.stats_interval
            for s in seeders:
                s.ses.post_dht_stats()
        if leecher is not None:
            leecher.poll()
            if not leecher.pending and not fetch_reported:
                fetch_reported = True
                emit({"event": "fetch_done", "fetched": len(torrents), "total": len(torrents),
                      "seconds": round(time.monotonic() - leecher.started, 3)})
        stop.wait(0.05)

    # bounded teardown: a watchdog ends the process if libtorrent takes too long
    def watchdog():
        time.sleep(10)
        log("teardown took over 10s; exiting hard")
        emit({"event": "exit", "reason": reason[0], "forced": True})
        os._exit(0)
    threading.Thread(target=watchdog, daemon=True).start()
    if leecher is not None and leecher.pending:
        log("fetch-check: %d of %d torrents not fetched" % (len(leecher.pending), len(torrents)))
        emit({"event": "fetch_done", "fetched": len(torrents) - len(leecher.pending), "total": len(torrents),
              "missing": sorted(leecher.pending)})
    log("stopping (%s)" % reason[0])
    sessions = [s.ses for s in seeders] + ([leecher.ses] if leecher else [])
    for ses in sessions:
        ses.pause()
    del leecher
    for s in seeders:
        s.handles.clear()
        s.ses = None
    del sessions
    log("sessions closed")
    emit({"event": "exit", "reason": reason[0]})
    return 0


if __name__ == "__main__":
    try:
        rc = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # report, then exit non-zero
        import traceback
        traceback.print_exc()
        emit({"event": "error", "message": "%s: %s" % (type(e).__name__, e)})
        emit({"event": "exit", "reason": "error"})
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(rc)
