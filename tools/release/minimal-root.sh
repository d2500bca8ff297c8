#!/usr/bin/env bash
# A fresh minimal Debian 12 root (debootstrap --variant=minbase bookworm) with the given
# packages and nothing else: no compiler, no -dev package unless asked for. The first call for
# a package set debootstraps it (about 3 minutes) and keeps a tarball in DHTC_ROOT_CACHE
# (default /var/cache/dhtcrawler); later calls unpack that tarball (seconds).
# Usage: tools/release/minimal-root.sh DEST [PACKAGE,PACKAGE...]   (needs root)
set -euo pipefail
dest=$1 packages=${2:-}
cache=${DHTC_ROOT_CACHE:-/var/cache/dhtcrawler}
mirror=${DHTC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball=$cache/bookworm-minbase-$(echo "$packages" | sha256sum | cut -c1-12).tar
if [ ! -f "$tarball" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/root.XXXXXX")
  debootstrap --variant=minbase ${packages:+--include="$packages"} bookworm "$tmp" "$mirror" >"$tmp.log" 2>&1 ||
    { tail -20 "$tmp.log" >&2; rm -rf "$tmp"; exit 1; }
  tar -C "$tmp" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
  rm -rf "$tmp" "$tmp.log"
fi
rm -rf "$dest" && mkdir -p "$dest"
tar -C "$dest" -xf "$tarball"
