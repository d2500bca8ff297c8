#!/bin/sh
# The image's entrypoint: checks the data volume, moves an older layout into the current
# one, then runs the dhtcrawler command with the container's arguments.
set -eu
data=/data
if [ ! -w "$data" ]; then
  echo "dhtcrawler: $data is not writable by uid $(id -u); an older volume made as root needs:" >&2
  echo "  podman unshare chown -R 10001:10001 VOLUME_PATH   (or docker run --user 0 ... chown -R 10001:10001 /data)" >&2
  exit 1
fi
# Volumes of the first images kept the database as /data/db/dhtcrawler.sqlite; it is moved
# to /data/dhtcrawler.sqlite once (the store's own schema migrations run when it opens).
if [ -f "$data/db/dhtcrawler.sqlite" ] && [ ! -e "$data/dhtcrawler.sqlite" ]; then
  for f in "$data"/db/dhtcrawler.sqlite*; do mv "$f" "$data/"; done
  rmdir "$data/db" 2>/dev/null || true
  echo "dhtcrawler: moved the database of an older volume to $data/dhtcrawler.sqlite" >&2
fi
exec dhtcrawler "$@"
