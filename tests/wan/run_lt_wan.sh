#!/usr/bin/env bash
# The real-libtorrent interop cases (tests/integration/test_lt_*) through the delay-and-loss
# link (tools/wanlink, via tests/wan/wan_netns.sh): 50-350 ms RTT per pair of addresses,
# up to 20 ms jitter, 2% loss each way, on the crawler's and libtorrent's KRPC, uTP and TCP
# alike. Runs them RUNS times (the link's seed is the run number, so each run draws other
# RTTs and losses) and prints, per run, how many torrents arrived exactly once, per case and
# in all, then one JSON line per run. Not run by CI (minutes per run); needs root.
#
#   tests/wan/run_lt_wan.sh BUILD_DIR [RUNS] [TEST...]
#
# TEST defaults to test_lt_metadata test_lt_encryption test_lt_utp test_lt_shared_ip (the cases
# that deliver torrents; the shared-IP test's ::1 case is left out: IPv6 loopback does not
# cross the link). DHTC_WAN_LINK_ARGS adds dhtc-wanlink options (e.g. "--rtt 300-300
# --jitter 0", "--burst 4"). DHTC_WAN_KEEP=1 keeps the logs and names their folder.
# Exit status: 0 when every torrent arrived once in every run, 1 otherwise, 77 when the
# machine cannot run it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run_lt_wan.sh BUILD_DIR [RUNS] [TEST...]}
runs=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(test_lt_metadata test_lt_encryption test_lt_utp test_lt_shared_ip)
link="$build/tools/wanlink/dhtc-wanlink"
for t in "${tests[@]}"; do
  [ -x "$build/tests/$t" ] || { echo "no $build/tests/$t: build it first" >&2; exit 2; }
done
[ -x "$link" ] || { echo "no $link: build dhtc-wanlink first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dhtc-lt-wan.XXXXXX")
cleanup() { if [ -n "${DHTC_WAN_KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT

# Doctest filters per test binary.
filter() {
  case "$1" in
    test_lt_shared_ip) echo "--test-case-exclude=*::1*" ;;
    *) echo "" ;;
  esac
}

all_once=true
for run in $(seq 1 "$runs"); do
  started=$(date +%s)
  : > "$work/link$run.jsonl"
  cases_json=()
  summary=()
  total_once=0 total=0
  for t in "${tests[@]}"; do
    log="$work/run$run-$t.log"
    t0=$(date +%s)
    # shellcheck disable=SC2046
    DHTC_WAN_STATS="$work/link$run.jsonl" bash "$here/wan_netns.sh" "$link" --seed "$run" ${DHTC_WAN_LINK_ARGS:-} \
      -- "$build/tests/$t" $(filter "$t") > "$log" 2>&1
    rc=$?
    summary+=("$t: exit $rc, $(( $(date +%s) - t0 )) s")
    if [ $rc -eq 77 ]; then grep -m1 "skipped" "$log" >&2; exit 77; fi
    # "MESSAGE: arrived once: 3 of 4 (enc-forced_rc4)"
    while read -r once of name; do
      total_once=$((total_once + once)) total=$((total + of))
      summary+=("  $name $once/$of")
      cases_json+=("{\"case\":\"$name\",\"once\":$once,\"of\":$of}")
      [ "$once" = "$of" ] || all_once=false
    done < <(sed -n 's/.*arrived once: \([0-9]*\) of \([0-9]*\) (\(.*\)).*/\1 \2 \3/p' "$log")
    grep -q "arrived once" "$log" || { summary+=("  no result"); all_once=false; }
  done
  secs=$(( $(date +%s) - started ))
  # The link's counts over the run's cases.
  read -r packets lost model < <(python3 -c '
import json, sys
p = l = 0
model = None
for line in open(sys.argv[1]):
    j = json.loads(line); p += j["packets"]; l += j["lost"]; model = j["network_model"]
print(p, l, json.dumps(model, separators=(",", ":")))' "$work/link$run.jsonl")
  echo "run $run: $total_once/$total arrived once in ${secs} s; link: $lost of $packets packets lost"
  printf '  %s\n' "${summary[@]}"
  (IFS=,; echo "{\"bench\":\"lt_wan\",\"run\":$run,\"arrived_once\":$total_once,\"torrents\":$total,\"secs\":$secs,\"link_packets\":$packets,\"link_lost\":$lost,\"cases\":[${cases_json[*]}],\"network_model\":${model:-null}}")
done
$all_once
