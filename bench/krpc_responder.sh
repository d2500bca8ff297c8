#!/usr/bin/env bash
# KRPC responder benchmark: starts a node (ours by default) on loopback, drives it with
# dhtc-krpc-load from 256 loopback source addresses, and prints the JSON lines of both.
#   bench/krpc_responder.sh [BUILD_DIR] [SECONDS]
# With DHTC_CALLGRIND=1 the node runs under callgrind (slow: a light load) and the script
# also prints user-space instructions per query on the receive-and-reply path.
# With DHTC_COMPARE=1 it first runs the same load against a bare batched UDP echo
# (dhtc-bench-node --echo 1), then against our node, and prints our replies per CPU-second
# as a share of the echo's (with DHTC_ROUTING=1 too: our answers then carry nodes).
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
  run_one() { # echo-target (0|1), extra node args...
    local echo_target=$1 load_extra=()
    shift
    [ "$echo_target" = 0 ] && load_extra=("${routing_args[@]}")
    "$build/bench/dhtc-bench-node" --seconds $((seconds + 2)) "$@" >"$out/node" &
    local pid=$!
    sleep 0.5
    local port
    port=$(head -1 "$out/node" | grep -oE ':[0-9]+"' | tr -d ':"')
    "$build/bench/dhtc-krpc-load" --target "127.0.0.1:$port" --seconds "$seconds" --sources 64 --window 8 --echo-target "$echo_target" \
      "${load_extra[@]}" >/dev/null
    wait "$pid"
    tail -1 "$out/node"
  }
  echo_line=$(run_one 1 --echo 1)
  ours_line=$(run_one 0 "${node_args[@]}")
  echo "$echo_line"
  echo "$ours_line"
  e=$(echo "$echo_line" | grep -oE '"replies_per_cpu_second":[0-9]+' | cut -d: -f2)
  o=$(echo "$ours_line" | grep -oE '"replies_per_cpu_second":[0-9]+' | cut -d: -f2)
  echo "{\"bench\":\"krpc_responder_vs_echo\",\"echo\":$e,\"ours\":$o,\"ratio\":$(awk -v a="$o" -v b="$e" 'BEGIN { printf "%.3f", a / b }')}"
  exit 0
fi

if [ "${DHTC_CALLGRIND:-0}" = 1 ]; then
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
    --toggle-collect='dhtc::net::udp_socket::on_readable()' \
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
