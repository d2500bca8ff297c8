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
  for round in $(seq "${DHTC_ROUNDS:-2}"); do
    for table in empty filled; do
      e=$(run_one echo)
      o=$(run_one "$table")
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
