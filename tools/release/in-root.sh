#!/usr/bin/env bash
# Runs a shell command inside a root made by minimal-root.sh, as root, in network, mount
# and PID namespaces of its own: loopback is the only network (nothing leaves the machine),
# /proc, /dev and a fresh /tmp are mounted, the environment is a clean one.
# Usage: tools/release/in-root.sh ROOT 'COMMAND'   (needs root)
set -euo pipefail
exec unshare --net --mount --pid --fork bash -c '
  set -e
  ip link set lo up
  mount -t proc proc "$1/proc"
  mount --rbind /dev "$1/dev"
  mount -t tmpfs tmpfs "$1/tmp"
  exec chroot "$1" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 /bin/bash -c "$2"
' in-root "$1" "$2"
