#!/usr/bin/env bash
# Runs a command in a private network namespace where every packet between two different
# 127.0.0.0/8 addresses crosses dhtc-wanlink (tools/wanlink): a per-pair RTT, jitter and loss
# each way, on UDP and TCP alike. So a test process and the libtorrent swarm it starts
# (tests/lt/lt_swarm.py, each session on its own 127.0.N.1) talk over a wide-area path without
# either knowing: nothing in the test changes.
#
#   tests/wan/wan_netns.sh WANLINK [dhtc-wanlink options...] -- COMMAND [ARGS...]
#
# Exit status: the command's; 77 when this machine cannot do it (not root, no unshare or ip,
# no network namespace, no /dev/net/tun); 1 when the link did not come up. The link's counts
# (one JSON line) go to stderr at the end, and to $DHTC_WAN_STATS when set.
#
# How: `unshare -n` gives an anonymous namespace with only a loopback device. Inside it the
# link creates the TUN device `dhtcwan0`; packets to 127.0.0.0/8 are routed into it by a
# policy rule placed before the local table (route_localnet lets 127/8 use a non-loopback
# device). The link sends each packet on, when its time comes, through a raw socket with the
# firewall mark 0x77, and a rule before that one routes marked packets by the local table, so
# they reach their socket. libtorrent binds each socket to the device that holds its address
# (`127.0.44.1%lo`), and a socket bound to lo sends around any routing rule; so lo keeps only
# 127.0.0.1 (the crawler's), and 127.0.N.1 (N = 1..255, the swarm's sessions) and the rest of
# 127/8 are the TUN device's: libtorrent binds to it, and its packets go through the link. Nothing is created outside the namespace and nothing in it
# outlives it: when the last process in it exits, the kernel removes the namespace, the device
# (it is not persistent: it goes with the link's file descriptor), the routes and the rules,
# whatever way the command ended (killed outright, this script takes the link and the command
# with it: parent-death signals). No packet can leave the machine: the namespace has no other
# device.
set -uo pipefail

dev=dhtcwan0
if [ "${1:-}" != "--inside" ]; then
  link=${1:?usage: wan_netns.sh WANLINK [dhtc-wanlink options...] -- COMMAND [ARGS...]}
  [ -x "$link" ] || { echo "wan_netns: no dhtc-wanlink at $link" >&2; exit 1; }
  skip() { echo "wan_netns: skipped: $*" >&2; exit 77; }
  [ "$(id -u)" = 0 ] || skip "needs root (a network namespace, a TUN device, policy routing)"
  command -v unshare >/dev/null && command -v ip >/dev/null || skip "needs unshare (util-linux) and ip (iproute2)"
  [ -c /dev/net/tun ] || skip "no /dev/net/tun"
  unshare -n true 2>/dev/null || skip "cannot create a network namespace here"
  exec unshare -n bash "$0" --inside "$@"
fi

# Inside the new namespace.
shift
link=$1
shift
link_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do link_args+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "wan_netns: no -- before the command" >&2; exit 2; }
shift

work=$(mktemp -d "${TMPDIR:-/tmp}/dhtc-wan.XXXXXX")
link_pid= cmd_pid=
stop_link() {
  if [ -n "$link_pid" ]; then
    kill -TERM "$link_pid" 2>/dev/null
    wait "$link_pid" 2>/dev/null
    link_pid=
    # The link's last line: its counts.
    local stats
    stats=$(grep '^{' "$work/link.out" | tail -1)
    if [ -n "$stats" ]; then
      echo "wan_netns: link: $stats" >&2
      [ -n "${DHTC_WAN_STATS:-}" ] && echo "$stats" >> "$DHTC_WAN_STATS"
    fi
  fi
}
trap 'stop_link; rm -rf "$work"' EXIT
# A signal (ctest's timeout, Ctrl-C) ends the command too, then the link.
stop_all() { [ -n "$cmd_pid" ] && kill -TERM "$cmd_pid" 2>/dev/null && wait "$cmd_pid" 2>/dev/null; exit "$1"; }
trap 'stop_all 130' INT
trap 'stop_all 143' TERM

ip link set lo up
ip addr del 127.0.0.1/8 dev lo
ip addr add 127.0.0.1/32 dev lo
# The link stops with this script whatever way it ends: the trap stops it, and if this shell
# is killed outright the link's parent-death signal does.
"$link" --dev "$dev" "${link_args[@]}" > "$work/link.out" 2> "$work/link.err" < /dev/null &
link_pid=$!
for _ in $(seq 50); do grep -q "^READY $dev" "$work/link.out" 2>/dev/null && break; sleep 0.1; done
if ! grep -q "^READY $dev" "$work/link.out" 2>/dev/null; then
  echo "wan_netns: the link did not come up:" >&2
  cat "$work/link.err" >&2
  exit 1
fi
cat "$work/link.err" >&2

set -e
ip link set "$dev" up mtu 1500
for n in $(seq 1 255); do ip addr add "127.0.$n.1/32" dev "$dev"; done
ip route add local 127.0.0.0/8 dev "$dev" table local
# No IPv6 on the link (router solicitations would only be noise); ::1 stays on lo, so IPv6
# loopback traffic does not cross the link.
sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
for c in all default lo "$dev"; do
  sysctl -qw "net.ipv4.conf.$c.route_localnet=1" "net.ipv4.conf.$c.rp_filter=0" "net.ipv4.conf.$c.accept_local=1"
done
ip route add default dev "$dev" src 127.0.0.1 table 100
ip rule add pref 90 fwmark 0x77 lookup local
ip rule add pref 100 to 127.0.0.0/8 lookup 100
ip rule add pref 200 lookup local
ip rule del pref 0
set +e

# Benchmarks name the network they ran over (bench/network_model.hpp). In the background, so
# that a signal is handled at once; with a parent-death signal, so that if this shell is
# killed outright the command goes too (and with it the namespace's last process).
model=$(sed -n 's/^dhtc-wanlink: [^:]*: network model: //p' "$work/link.err")
pdeathsig=()
setpriv --help 2>/dev/null | grep -q -- --pdeathsig && pdeathsig=(setpriv --pdeathsig TERM --)
DHTC_NETWORK_MODEL=$model "${pdeathsig[@]}" "$@" <&0 &
cmd_pid=$!
wait "$cmd_pid"
rc=$?
cmd_pid=
exit $rc
