#!/usr/bin/env bash
# Discovery benchmark: starts dhtcrawler-testnet, waits for its BOOTSTRAP line, runs
# dhtc-discovery against it and prints the JSON lines of both, plus the testnet's own CPU
# time and peak RSS (which it reports on stderr when it stops). Never run by the tests.
#
#   bench/discovery.sh BUILD_DIR [NODES] [TORRENTS] [SEEDERS] [MINUTES] [MISBEHAVE] [dhtc-discovery options...]
# DHTC_TESTNET_ARGS adds testnet options, e.g. "--libtorrent-like" (libtorrent's per-IP
# blocker, its 6-hour BEP-51 interval, a fifth of the nodes behind NAT, a tenth sharing an
# IP with other nodes); the last line then says how many of our packets a node's blocker
# ignored (target 0), and how many of those at nodes that share an IP. With shared IPs
# dhtc-discovery splits the torrents by who held their announces ("by_holders").
# --libtorrent-like includes the WAN model (50-350 ms RTT per pair, 20 ms jitter, 2% loss each
# way); "--libtorrent-like --wan 0" runs it on loopback timing. Every line printed names the
# model it ran under ("network_model", the testnet's own JSON).
# DHTC_DISCOVERY_KEEP=1 keeps the work directory (truth file, testnet output) and names it.
set -euo pipefail
build=${1:?usage: discovery.sh BUILD_DIR [NODES] [TORRENTS] [SEEDERS] [MINUTES] [MISBEHAVE] [dhtc-discovery options...]}
nodes=${2:-10000} torrents=${3:-10000} seeders=${4:-1000} minutes=${5:-10} misbehave=${6:-0.1}
shift $(( $# < 6 ? $# : 6 ))
work=$(mktemp -d "${TMPDIR:-/tmp}/dhtc-discovery.XXXXXX")
tn=
cleanup() {
  [ -n "$tn" ] && kill -TERM "$tn" 2>/dev/null && wait "$tn" 2>/dev/null
  if [ -n "${DHTC_DISCOVERY_KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
duration=$(( minutes * 60 + 300 ))
"$build/tools/testnet/dhtcrawler-testnet" --nodes "$nodes" --torrents "$torrents" --seeders "$seeders" \
  --misbehave "$misbehave" --seed 5 --quiet --duration "$duration" --truth "$work/truth.json" \
  ${DHTC_TESTNET_ARGS:-} \
  > "$work/out.txt" 2> "$work/err.txt" &
tn=$!
# Start-up (every node's self-lookup, every seeder's announces) grows with N, and with
# --nat every lookup waits out timeouts: a second per 20 nodes, at least 5 minutes.
start_wait=$(( nodes / 20 > 300 ? nodes / 20 : 300 ))
for _ in $(seq 1 "$start_wait"); do grep -q BOOTSTRAP "$work/out.txt" && break; sleep 1; done
bootstrap=$(awk '/BOOTSTRAP/ {print $2}' "$work/out.txt")
[ -n "$bootstrap" ] || { echo "testnet did not start" >&2; cat "$work/err.txt" >&2; exit 1; }
model=$(sed -n 's/^testnet: network model: //p' "$work/err.txt")
DHTC_NETWORK_MODEL=$model "$build/bench/dhtc-discovery" --bootstrap "$bootstrap" --truth "$work/truth.json" \
  --minutes "$minutes" "$@"
kill -TERM "$tn"
wait "$tn" || true
tn=
# "testnet: done: cpu=12.3s max_rss=113156KiB, ..."
cpu=$(sed -n 's/.*done: cpu=\([0-9.]*\)s.*/\1/p' "$work/err.txt")
rss=$(sed -n 's/.*max_rss=\([0-9]*\)KiB.*/\1/p' "$work/err.txt")
# "... blocked=0 blocks=0 blocked_shared_ip=0 blocks_shared_ip=0 shared_ip_nodes=10000 ..."
field() { sed -n "s/.* $1=\([0-9]*\) .*/\1/p" "$work/err.txt"; }
blocked=$(field blocked) blocks=$(field blocks)
blocked_shared=$(field blocked_shared_ip) blocks_shared=$(field blocks_shared_ip) shared_nodes=$(field shared_ip_nodes)
wan_lost=$(field udp_lost)
echo "{\"bench\":\"discovery\",\"testnet\":true,\"nodes\":$nodes,\"torrents\":$torrents,\"seeders\":$seeders,\"testnet_cpu_secs\":${cpu:-null},\"testnet_max_rss_kib\":${rss:-null},\"packets_blocked\":${blocked:-null},\"blocks\":${blocks:-null},\"shared_ip_nodes\":${shared_nodes:-null},\"packets_blocked_shared_ip\":${blocked_shared:-null},\"blocks_shared_ip\":${blocks_shared:-null},\"wan_udp_lost\":${wan_lost:-null},\"network_model\":${model:-null}}"
