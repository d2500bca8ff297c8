#!/usr/bin/env bash
# Discovery benchmark: starts dhtcrawler-testnet, waits for its BOOTSTRAP line, runs
# dhtc-discovery against it and prints the JSON lines of both, plus the testnet's own CPU
# time and peak RSS (from /usr/bin/time -v). Never run by the tests.
#
#   bench/discovery.sh BUILD_DIR [NODES] [TORRENTS] [SEEDERS] [MINUTES] [MISBEHAVE] [dhtc-discovery options...]
set -euo pipefail
build=${1:?usage: discovery.sh BUILD_DIR [NODES] [TORRENTS] [SEEDERS] [MINUTES] [MISBEHAVE]}
nodes=${2:-10000} torrents=${3:-10000} seeders=${4:-1000} minutes=${5:-10} misbehave=${6:-0.1}
shift $(( $# < 6 ? $# : 6 ))
work=$(mktemp -d "${TMPDIR:-/tmp}/dhtc-discovery.XXXXXX")
trap 'kill "$tn" 2>/dev/null || true; rm -rf "$work"' EXIT
duration=$(( minutes * 60 + 300 ))
/usr/bin/time -v -o "$work/time.txt" "$build/tests/testnet/dhtcrawler-testnet" --nodes "$nodes" \
  --torrents "$torrents" --seeders "$seeders" --misbehave "$misbehave" --seed 5 --quiet \
  --duration "$duration" --truth "$work/truth.json" > "$work/out.txt" 2> "$work/err.txt" &
tn=$!
for _ in $(seq 1 300); do grep -q BOOTSTRAP "$work/out.txt" && break; sleep 1; done
bootstrap=$(awk '/BOOTSTRAP/ {print $2}' "$work/out.txt")
[ -n "$bootstrap" ] || { echo "testnet did not start" >&2; cat "$work/err.txt" >&2; exit 1; }
"$build/bench/dhtc-discovery" --bootstrap "$bootstrap" --truth "$work/truth.json" --minutes "$minutes" "$@"
kill -TERM "$tn"
wait "$tn" || true
cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$work/time.txt")
rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time.txt")
echo "{\"bench\":\"discovery\",\"testnet\":true,\"nodes\":$nodes,\"torrents\":$torrents,\"seeders\":$seeders,\"testnet_cpu_secs\":$cpu,\"testnet_max_rss_kib\":$rss}"
