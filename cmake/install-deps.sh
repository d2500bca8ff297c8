#!/usr/bin/env bash
# Installs, idempotently, every system package the build and the test suite need.
# Debian packages only; later capabilities add theirs to PACKAGES below.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libasio-dev libssl-dev nlohmann-json3-dev doctest-dev libsqlite3-dev
  clang-14 libclang-rt-14-dev llvm-14
  swig python3-libtorrent
  libpq-dev postgresql
  python3-dev python3-venv
  default-jdk-headless maven
  binutils
  chromium chromium-driver
  iproute2 util-linux
  debootstrap
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
