#!/usr/bin/env bash
# Self-check of tests/lt/lt_swarm.py with real libtorrent and no crawler (about 15 s, bounded at 90 s).
#
# Starts tests/lt/krpc_sink.py as the only DHT bootstrap node, then a swarm of 3 introduced
# sessions with 2 torrents each (every kind: v1, v2, hybrid, multi, unicode; info dicts from 1
# to 31 metadata pieces) and --fetch-check, and asserts that
#   - the swarm reports its sessions, torrents and "ready"; the .info files hash to the keys;
#   - every torrent's metadata is fetched by hash alone over loopback, byte-identical;
#   - the bootstrap receives get_peers and an announce_peer for every announced hash
#     (v1 and truncated v2 of hybrids) from the seeding session's DHT port, with implied_port=1;
#   - every socket of the swarm is bound to its own 127.x.y.1 addresses and talks only to
#     127.0.0.0/8;
#   - closing the swarm's stdin stops it promptly with {"event":"exit","reason":"stdin"}.
# Prints the measured timings. Exit status 0 on success. Needs /usr/bin/python3 with
# python3-libtorrent; skips (exit 77) without it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
if ! "$py" -c 'import libtorrent' 2>/dev/null; then
  echo "SKIP: $py cannot import libtorrent (apt-get install python3-libtorrent)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/lt_swarm_selfcheck.XXXXXX")
trap 'rm -rf "$work"' EXIT

timeout -k 5 90 "$py" - "$here" "$work" <<'PYEOF'
import hashlib, json, os, queue, socket, struct, subprocess, sys, threading, time

here, work = sys.argv[1], sys.argv[2]
T0 = time.monotonic()
DEADLINE = T0 + 80
events = queue.Queue()
failures = []


def now():
    return time.monotonic() - T0


def reader(name, stream):
    for line in stream:
        try:
            events.put((name, now(), json.loads(line)))
        except ValueError:
            events.put((name, now(), {"event": "garbage", "line": line}))
    events.put((name, now(), {"event": "eof"}))


def start(name, argv):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(os.path.join(work, name + ".log"), "wb"), text=True, encoding="utf-8")
    threading.Thread(target=reader, args=(name, p.stdout), daemon=True).start()
    return p


def next_event(timeout):
    try:
        return events.get(timeout=max(0.01, timeout))
    except queue.Empty:
        return None


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


sink = start("sink", [sys.executable, os.path.join(here, "krpc_sink.py"), "--duration", "85"])
ev = next_event(10)
if not ev or ev[2].get("event") != "listening":
    print("FAIL: krpc_sink did not start:", ev)
    sys.exit(1)
boot = ev[2]["endpoint"]
swarm_start = now()
swarm = start("swarm", ["/usr/bin/python3", os.path.join(here, "lt_swarm.py"), "--bootstrap", boot,
                        "--sessions", "3", "--torrents-per-session", "2", "--introduce", "--fetch-check",
                        "--kinds", "v1,v2,hybrid,multi,unicode", "--piece-count-range", "1:31",
                        "--announce-interval", "10", "--duration", "75", "--seed", "7",
                        "--workdir", os.path.join(work, "swarm")])

sessions, torrents, fetched = {}, {}, {}
announced_at_sink = {}  # wire hash -> (time, query)
get_peers_from = set()
timings = {}
exit_event = None
ready = False
leecher_ip = None


def wire_hashes():
    return {h: t for t in torrents.values() for h in t["announce_hashes"]}


def satisfied():
    if not ready or len(fetched) < len(torrents):
        return False
    return all(h in announced_at_sink for h in wire_hashes())


def sockets_of(pid):
    """(proto, local ip, remote ip) of every inet socket the process holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for proto in ("tcp", "udp", "tcp6", "udp6"):
        with open("/proc/%d/net/%s" % (pid, proto)) as f:
            next(f)
            for row in f:
                cols = row.split()
                if cols[9] not in inodes:
                    continue
                def ip(hexaddr):
                    addr = hexaddr.split(":")[0]
                    if len(addr) == 8:
                        return socket.inet_ntoa(struct.pack("<I", int(addr, 16)))
                    return "ipv6:" + addr
                out.append((proto, ip(cols[1]), ip(cols[2])))
    return out


while not satisfied() and now() < DEADLINE - 15:
    ev = next_event(DEADLINE - 15 - now())
    if ev is None:
        break
    src, t, e = ev
    kind = e.get("event")
    if src == "sink":
        if kind == "query" and e["q"] == "announce_peer" and e["info_hash"] not in announced_at_sink:
            announced_at_sink[e["info_hash"]] = (t, e)
            timings.setdefault("first_announce_at_bootstrap", t - swarm_start)
        elif kind == "query" and e["q"] == "get_peers":
            get_peers_from.add(e["from"])
            timings.setdefault("first_get_peers_at_bootstrap", t - swarm_start)
        continue
    if kind == "session":
        sessions[e["index"]] = e
    elif kind == "leecher":
        leecher_ip = e["dht_endpoint"].rsplit(":", 1)[0]
    elif kind == "torrent":
        torrents[e["info_hash"]] = e
    elif kind == "ready":
        ready = True
        timings["ready"] = t - swarm_start
        timings["ready_reported"] = e["seconds"]
    elif kind == "fetched":
        fetched[e["info_hash"]] = e
        if not e["matches"]:
            fail("fetched metadata of %s differs from the seeded info dict" % e["info_hash"])
        if len(fetched) == len(torrents):
            timings["all_fetched_after_ready"] = e["seconds"]
    elif kind in ("error", "eof", "exit"):
        fail("swarm stopped early: %s" % e)
        break

timings["all_conditions"] = now() - swarm_start

# --- what the swarm reported
if len(sessions) != 3:
    fail("expected 3 session events, got %d" % len(sessions))
ips = {s["dht_endpoint"].rsplit(":", 1)[0] for s in sessions.values()}
if len({ip.rsplit(".", 1)[0] for ip in ips}) != 3:
    fail("sessions do not sit in distinct /24s: %s" % sorted(ips))
if not ready:
    fail("no ready event")
if len(torrents) != 6:
    fail("expected 6 torrent events, got %d" % len(torrents))
kinds = {t["kind"] for t in torrents.values()}
if kinds != {"v1", "v2", "hybrid", "multi", "unicode"}:
    fail("kinds seen: %s" % sorted(kinds))
meta = sorted(t["num_pieces_metadata"] for t in torrents.values())
if not meta or meta[0] != 1 or meta[-1] < 30:
    fail("metadata piece counts should span 1..31, got %s" % meta)
for t in torrents.values():
    with open(t["info_file"], "rb") as f:
        info = f.read()
    if len(info) != t["metadata_size"]:
        fail("%s: info_file size differs" % t["info_hash"])
    if t["info_hash_v1"] and hashlib.sha1(info).hexdigest() != t["info_hash_v1"]:
        fail("%s: SHA-1 of info_file differs" % t["info_hash"])
    if t["info_hash_v2"] and hashlib.sha256(info).hexdigest() != t["info_hash_v2"]:
        fail("%s: SHA-256 of info_file differs" % t["info_hash"])
    if t["format"] == "hybrid" and not any(f["pad"] for f in t["files"]):
        fail("%s: hybrid without pad files" % t["info_hash"])
    if t["kind"] == "unicode" and t["name"].isascii():
        fail("%s: unicode torrent with an ASCII name" % t["info_hash"])

# --- fetch check
missing = sorted(set(torrents) - set(fetched))
if missing:
    fail("metadata never fetched for %s" % missing)

# --- announces at the bootstrap
dht_port_of = {s["dht_endpoint"]: s for s in sessions.values()}
for h, t in wire_hashes().items():
    if h not in announced_at_sink:
        fail("no announce_peer for %s (torrent %s) reached the bootstrap" % (h, t["info_hash"]))
        continue
    q = announced_at_sink[h][1]
    if q["from"] != t["seeder"]:
        fail("announce_peer for %s came from %s, expected the seeder %s" % (h, q["from"], t["seeder"]))
    if q["implied_port"] != 1 or q["seed"] != 1:
        fail("announce_peer for %s: implied_port=%s seed=%s" % (h, q["implied_port"], q["seed"]))
if not {s["dht_endpoint"] for s in sessions.values()} <= get_peers_from:
    fail("not every session sent get_peers to the bootstrap: %s" % sorted(get_peers_from))

# --- loopback only, each session on its own address
try:
    socks = sockets_of(swarm.pid)
    own = ips | {leecher_ip}
    for proto, local, remote in socks:
        if local not in own:
            fail("%s socket bound to %s, not a session address" % (proto, local))
        if not (remote.startswith("127.") or remote == "0.0.0.0"):
            fail("%s socket talks to %s" % (proto, remote))
    timings["sockets_checked"] = len(socks)
except OSError as e:
    print("note: socket check skipped:", e)

# --- stop by closing stdin
closed_at = now()
swarm.stdin.close()
while now() < DEADLINE:
    ev = next_event(DEADLINE - now())
    if ev is None:
        break
    if ev[0] == "swarm" and ev[2].get("event") == "exit":
        exit_event = ev[2]
        timings["stop_after_stdin_close"] = ev[1] - closed_at
        break
try:
    rc = swarm.wait(timeout=max(1, DEADLINE - now()))
except subprocess.TimeoutExpired:
    swarm.kill()
    rc = None
if not exit_event or exit_event.get("reason") != "stdin":
    fail("closing stdin did not stop the swarm cleanly: %s" % exit_event)
if rc != 0:
    fail("swarm exit status %s" % rc)
sink.stdin.close()
try:
    sink.wait(timeout=5)
except subprocess.TimeoutExpired:
    sink.kill()

print("timings (seconds from swarm start):", json.dumps({k: round(v, 3) for k, v in timings.items()}))
print("torrents:", ", ".join("%s/%s %d pieces" % (t["kind"], t["format"], t["num_pieces_metadata"])
                             for t in sorted(torrents.values(), key=lambda t: t["index"])))
if failures:
    print("lt_swarm self-check FAILED (%d); logs were in %s" % (len(failures), work))
    for name in ("swarm", "sink"):
        path = os.path.join(work, name + ".log")
        if os.path.exists(path):
            print("--- tail of %s.log" % name)
            print("".join(open(path, encoding="utf-8", errors="replace").readlines()[-25:]))
    sys.exit(1)
print("lt_swarm self-check passed")
PYEOF
