#!/usr/bin/env bash
# Metadata throughput benchmark: starts the loopback test network (well-behaved seeders only),
# then runs dhtc-metadata-throughput against its truth file at each offered rate.
#   bench/metadata_throughput.sh [BUILD_DIR] [TORRENTS] [RATE...]
# Prints one JSON line per rate (see docs/performance.md), each with the test network's
# "network_model". DHTC_TESTNET_ARGS adds testnet options, e.g. "--wan 1" (the WAN model:
# 50-350 ms RTT, 20 ms jitter, 2% loss each way) or "--wan-rtt 300-300 --wan-jitter 0".
# DHTC_BENCH_ARGS adds benchmark options, e.g. "--dht-rtt-ms 300": every hash event carries
# that round trip, as if the DHT had measured it to the seeder.
set -euo pipefail
build=${1:-build/release}
torrents=${2:-10000}
shift $(( $# >= 2 ? 2 : $# ))
rates=("$@")
[ ${#rates[@]} -eq 0 ] && rates=(500 1000 2000)
out=$(mktemp -d)
testnet_pid=
cleanup() { [ -n "$testnet_pid" ] && kill "$testnet_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

# Each run needs torrents its pipeline has not delivered yet, so the network holds them all
# and each rate takes its own slice.
per_rate=$((torrents / ${#rates[@]}))
"$build/tools/testnet/dhtcrawler-testnet" --nodes 200 --seeders 500 --torrents "$torrents" \
  --misbehave 0 --churn 0 --duration 900 --seed 7 --truth "$out/truth.json" --quiet \
  ${DHTC_TESTNET_ARGS:-} \
  >"$out/testnet.out" 2>"$out/testnet.err" &
testnet_pid=$!
for _ in $(seq 600); do grep -q '^BOOTSTRAP ' "$out/testnet.out" && break; sleep 0.5; done
grep -q '^BOOTSTRAP ' "$out/testnet.out" || { echo "the test network did not come up" >&2; cat "$out/testnet.err" >&2; exit 1; }

python3 - "$out/truth.json" "$per_rate" "${#rates[@]}" "$out" <<'PY'
import json, sys
truth, per, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
items = json.load(open(truth))
for i in range(n):
    json.dump(items[i * per:(i + 1) * per], open(f"{out}/slice{i}.json", "w"))
PY
model=$(sed -n 's/^testnet: network model: //p' "$out/testnet.err")
i=0
for rate in "${rates[@]}"; do
  DHTC_NETWORK_MODEL=$model "$build/bench/dhtc-metadata-throughput" --truth "$out/slice$i.json" --rate "$rate" ${DHTC_BENCH_ARGS:-}
  i=$((i + 1))
done
