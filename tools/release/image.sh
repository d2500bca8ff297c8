#!/usr/bin/env bash
# Builds dist/dhtcrawler-image-VERSION.oci.tar (and the fleet profile's PostgreSQL image,
# dhtcrawler-postgres:VERSION, kept in podman's store) with podman from the ordinary
# Dockerfiles in packaging/container. No registry is reachable here, so the base,
# debian:bookworm-slim, is made locally the first time (debootstrap --variant=minbase bookworm,
# podman import); pip installs the wheel and a wheelhouse made beforehand with pip download.
# Usage: tools/release/image.sh DIST VERSION   (as root, with podman and buildah)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dist=$(realpath "$1") version=$2
. "$root/tools/release/podman.sh"

if ! podman image exists debian:bookworm-slim; then
  base=$(mktemp -d)
  bash "$root/tools/release/minimal-root.sh" "$base/root"
  tar -C "$base/root" -c . | podman import - debian:bookworm-slim
  rm -rf "$base"
fi
podman_configure debian:bookworm-slim

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$root"/packaging/container/* "$context/"
mkdir "$context/wheels"
cp "$dist"/dhtcrawler-"$version"-cp311-cp311-manylinux_*.whl "$context/wheels/"
"$root/build/release-tools/bin/pip" download -q --disable-pip-version-check -d "$context/wheels" --only-binary=:all: \
  --implementation cp --python-version 311 --platform manylinux_2_35_x86_64 --platform manylinux2014_x86_64 \
  --platform linux_x86_64 --find-links "$context/wheels" "dhtcrawler[serve,postgresql,zstd]==$version" 'psycopg[binary]'

podman build --network host -t "dhtcrawler:$version" -f "$context/Dockerfile" "$context"
podman build --network host -t "dhtcrawler-postgres:$version" -f "$context/postgres.Dockerfile" "$context"
rm -f "$dist/dhtcrawler-image-$version.oci.tar"
podman save --format oci-archive -o "$dist/dhtcrawler-image-$version.oci.tar" "dhtcrawler:$version"
cp "$root/compose.yaml" "$dist/"
