#!/usr/bin/env bash
# KRPC responder benchmark: starts a node (ours by default) on loopback, drives it with
# dhtc-krpc-load from 256 loopback source addresses, and prints the JSON lines of both.
#   bench/krpc_responder.sh [BUILD_DIR] [SECONDS]
# With DHTC_CALLGRIND=1 the node runs under callgrind (slow: a light load) and the script
# also prints user-space instructions per query on the receive-and-reply path.
set -euo pipefail
build=${1:-build/release}
seconds=${2:-10}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ "${DHTC_CALLGRIND:-0}" = 1 ]; then
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
    --toggle-collect='dhtc::net::udp_socket::on_readable()' \
    "$build/bench/dhtc-bench-node" --seconds $((seconds + 12)) >"$out/node" 2>"$out/vg.err" &
  load_args=(--sources 64 --window 2)
  sleep 3
else
  "$build/bench/dhtc-bench-node" --seconds $((seconds + 2)) >"$out/node" &
  load_args=(--sources 256 --window 8)
  sleep 0.5
fi
node_pid=$!
port=$(head -1 "$out/node" | grep -oE ':[0-9]+"' | tr -d ':"')
"$build/bench/dhtc-krpc-load" --target "127.0.0.1:$port" --seconds "$seconds" "${load_args[@]}"
wait "$node_pid"
tail -1 "$out/node"
if [ "${DHTC_CALLGRIND:-0}" = 1 ]; then
  total=$(callgrind_annotate "$out/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  queries=$(tail -1 "$out/node" | grep -oE '"replies":[0-9]+' | cut -d: -f2)
  echo "{\"bench\":\"krpc_responder_callgrind\",\"instructions\":$total,\"queries\":$queries,\"instructions_per_query\":$((total / queries))}"
fi
