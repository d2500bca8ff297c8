#!/usr/bin/env bash
# KRPC responder benchmark: starts a node (ours by default) on loopback, drives it with
# dhtc-krpc-load from 256 loopback source addresses, and prints the JSON lines of both.
#   bench/krpc_responder.sh [BUILD_DIR] [SECONDS]
# With DHTC_CALLGRIND=1 the node runs under callgrind (slow: a light load) and the script
# also prints user-space instructions per query on the receive-and-reply path.
# With DHTC_COMPARE=1 it alternates, in one sitting, the strongest bare echo (dhtc-bench-node
# --echo 1: recvmmsg(MSG_WAITFORONE) and sendmmsg, 32 per call) with our node, once with an
# empty routing table and once with a filled one (answers carrying nodes): echo, ours empty,
# echo, ours filled, DHTC_ROUNDS times (default 2), each run under the same 64-source load.
# It prints every run's JSON line, then one line per pair: our replies per CPU-second as a
# share of the echo run just before, and both sides' system calls and wake-ups per reply.
# With DHTC_RESPONDER=crawl as well, "ours" is `dhtcrawler crawl` run the way a user runs it
# (DHTC_CLI, default build/python-venv/bin/dhtcrawler; every answer budget raised by an
# options file, as dhtc-bench-node raises them): its replies are the load generator's count,
# its CPU the whole process's (/proc, every thread) over the load; the filled table comes
# from --allow-private (it admits the answering sources). Its system calls are the network
# thread's, from the crawl's own counters (udp rx_calls, tx_calls, rx_waits, rx_yields on
# --metrics), as dhtc-bench-node counts them; its wake-ups are every thread's context
# switches (/proc), with the busiest thread's beside them.
# With DHTC_ROUTING=1 (our node only) the node crawls the load generator's sources and they
# answer, so its routing table fills and find_node / get_peers answers carry 8 nodes.
set -euo pipefail
build=${1:-build/release}
seconds=${2:-10}
out=$(mktemp -d)
node_args=()
routing_args=()
if [ "${DHTC_ROUTING:-0}" = 1 ]; then
  node_args=(--query-loopback 1)
  routing_args=(--answer-queries 1)
fi
trap 'rm -rf "$out"' EXIT

if [ "${DHTC_COMPARE:-0}" = 1 ]; then
  run_one() { # load-mode (echo|empty|filled): one node run under the load, its last line
    local load_extra=(--echo-target 0) node_extra=()
    case $1 in
      echo) load_extra=(--echo-target 1); node_extra=(--echo 1) ;;
      filled) load_extra+=(--answer-queries 1); node_extra=(--query-loopback 1) ;;
    esac
    "$build/bench/dhtc-bench-node" --seconds $((seconds + 2)) "${node_extra[@]}" >"$out/node" &
    local pid=$!
    sleep 0.5
    local port
    port=$(head -1 "$out/node" | grep -oE ':[0-9]+"' | tr -d ':"')
    "$build/bench/dhtc-krpc-load" --target "127.0.0.1:$port" --seconds "$seconds" --sources 64 --window "${DHTC_WINDOW:-8}" \
      "${load_extra[@]}" >/dev/null
    wait "$pid"
    tail -1 "$out/node"
  }
  cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  thread_ticks() { # "name#tid ticks voluntary involuntary" per thread (the name may hold spaces: it sits in parentheses)
    local f
    for f in /proc/"$1"/task/*/stat; do
      sed -E 's/^([0-9]+) \((.*)\) (.*)$/\2#\1|\3/' "$f" | awk -F'|' '{split($2, a, " "); printf "%s %d ", $1, a[12] + a[13]}'
      awk '/^voluntary_ctxt_switches/ {v = $2} /^nonvoluntary_ctxt_switches/ {n = $2} END {print v, n}' "${f%stat}status"
    done 2>/dev/null
  }
  scrape() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$1"; }
  run_crawl() { # table (empty|filled): `dhtcrawler crawl` under the load, a JSON line like the node's
    local cli=${DHTC_CLI:-build/python-venv/bin/dhtcrawler} port private=() load_extra=(--echo-target 0)
    [ "$1" = filled ] && { private=(--allow-private); load_extra+=(--answer-queries 1); }
    port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local metrics
    metrics=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$out/options.json" <<'JSON'
{"crawl": {"rate_limit": {"max_response_rate_per_sec": 1e9, "max_response_bytes_per_sec": 1e12,
  "max_response_rate_per_source": 1e9, "max_packets_per_destination_per_sec": 1e9, "destination_burst": 1e9,
  "max_packets_per_ip_per_sec": 1e9, "ip_burst": 1e9}}}
JSON
    "$cli" crawl --port "$port" --bind 127.0.0.1 --no-default-bootstrap "${private[@]}" --options "$out/options.json" \
      --db "$out/crawl.sqlite" --no-scrape --quiet --metrics "127.0.0.1:$metrics" --duration $((seconds + 20)) \
      2>"$out/crawl.err" &
    local pid=$! t0 t1 hz
    for _ in $(seq 100); do ss -Hlun "sport = :$port" | grep -q . && break; sleep 0.1; done
    sleep 1
    hz=$(getconf CLK_TCK)
    scrape "http://127.0.0.1:$metrics/metrics" >"$out/metrics0"
    t0=$(cpu_ticks "$pid")
    thread_ticks "$pid" >"$out/threads0"
    "$build/bench/dhtc-krpc-load" --target "127.0.0.1:$port" --seconds "$seconds" --sources 64 --window "${DHTC_WINDOW:-8}" \
      "${load_extra[@]}" >"$out/load"
    t1=$(cpu_ticks "$pid")
    thread_ticks "$pid" >"$out/threads1"
    scrape "http://127.0.0.1:$metrics/metrics" >"$out/metrics1"
    kill -INT "$pid"; wait "$pid" || true
    python3 - "$out" "$t0" "$t1" "$hz" <<'PY'
import json, sys
out, hz = sys.argv[1], int(sys.argv[4])
load = json.load(open(f"{out}/load"))
replies = load["replies"]
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / hz
def threads(path):  # "name#tid" -> (ticks, voluntary, involuntary)
    return {name: tuple(map(int, rest)) for name, *rest in (line.rsplit(" ", 3) for line in open(path) if line.strip())}
def total(path, *names):  # the sum of these counters over their labels
    return sum(float(line.rsplit(" ", 1)[1]) for line in open(path) if line.startswith(names))
def delta(*names):
    return round(total(f"{out}/metrics1", *names) - total(f"{out}/metrics0", *names))
# the network thread's system calls, as dhtc-bench-node counts them
syscalls = delta("dhtc_udp_rx_calls_total", "dhtc_udp_tx_calls_total", "dhtc_udp_rx_waits_total",
                 "dhtc_udp_rx_yields_total")
# what the other threads did: announces that reached the metadata side, their rounds and attempts
work = {"hashes_in": delta("dhtc_metadata_hashes_in_total"), "rounds": delta("dhtc_metadata_jobs_started_total"),
        "attempts": delta("dhtc_metadata_attempts_total")}
t0, t1 = threads(f"{out}/threads0"), threads(f"{out}/threads1")
busy = sorted((tuple(a - b for a, b in zip(t1[n], t0.get(n, (0, 0, 0)))) for n in t1), reverse=True)  # busiest first
voluntary, involuntary = sum(d[1] for d in busy), sum(d[2] for d in busy)
def per(n):
    return round(n / replies, 4) if replies else None
print(json.dumps({"bench": "krpc_responder_crawl", "replies": replies, "cpu_seconds": round(cpu, 3),
                  "cpu_seconds_per_thread": [round(d[0] / hz, 2) for d in busy if d[0] > 0],
                  "replies_per_cpu_second": round(replies / cpu) if cpu else None,
                  "syscalls_per_reply": per(syscalls), "metadata_work": work,
                  "voluntary_switches_per_reply": per(voluntary), "involuntary_switches_per_reply": per(involuntary),
                  "replies_per_wakeup": round(replies / voluntary, 2) if voluntary else None,
                  "busiest_thread": {"cpu_seconds": round(busy[0][0] / hz, 2), "voluntary_switches_per_reply":
                                     per(busy[0][1]), "involuntary_switches_per_reply": per(busy[0][2])}}))
PY
  }
  for round in $(seq "${DHTC_ROUNDS:-2}"); do
    for table in empty filled; do
      e=$(run_one echo)
      if [ "${DHTC_RESPONDER:-node}" = crawl ]; then o=$(run_crawl "$table"); else o=$(run_one "$table"); fi
      echo "$e"
      echo "$o"
      python3 - "$table" "$round" "$e" "$o" <<'PY'
import json, sys
table, rnd, e, o = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
def side(x):
    return {k: x[k] for k in ("replies_per_cpu_second", "syscalls_per_reply", "voluntary_switches_per_reply",
                              "involuntary_switches_per_reply", "replies_per_wakeup")}
print(json.dumps({"bench": "krpc_responder_vs_echo", "table": table, "round": rnd,
                  "ratio": round(o["replies_per_cpu_second"] / e["replies_per_cpu_second"], 3),
                  "routing_table_nodes": o.get("routing_table_nodes"), "echo": side(e), "ours": side(o)}))
PY
    done
  done
  exit 0
fi

if [ "${DHTC_CALLGRIND:-0}" = 1 ]; then
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
    --toggle-collect='dhtc::net::udp_socket::receive()' \
    "$build/bench/dhtc-bench-node" --seconds $((seconds + 12)) "${node_args[@]}" >"$out/node" 2>"$out/vg.err" &
  load_args=(--sources 64 --window 2)
  sleep 3
else
  "$build/bench/dhtc-bench-node" --seconds $((seconds + 2)) "${node_args[@]}" >"$out/node" &
  load_args=(--sources 256 --window 8)
  sleep 0.5
fi
node_pid=$!
port=$(head -1 "$out/node" | grep -oE ':[0-9]+"' | tr -d ':"')
"$build/bench/dhtc-krpc-load" --target "127.0.0.1:$port" --seconds "$seconds" "${load_args[@]}" "${routing_args[@]}"
wait "$node_pid"
tail -1 "$out/node"
if [ "${DHTC_CALLGRIND:-0}" = 1 ]; then
  total=$(callgrind_annotate "$out/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  queries=$(tail -1 "$out/node" | grep -oE '"replies":[0-9]+' | cut -d: -f2)
  echo "{\"bench\":\"krpc_responder_callgrind\",\"instructions\":$total,\"queries\":$queries,\"instructions_per_query\":$((total / queries))}"
fi
