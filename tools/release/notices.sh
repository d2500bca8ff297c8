#!/usr/bin/env bash
# Prints the licence notices of everything a release bundles: the Debian packages whose
# libraries bundle_libs.py copied (its output, "bundled SONAME (PATH) as NAME", is the
# argument), OpenSSL's legacy provider, and the header-only libraries compiled into ours.
# Each package's notice is its /usr/share/doc/PACKAGE/copyright file.
# Usage: tools/release/notices.sh BUNDLED.txt >THIRD-PARTY-NOTICES.txt
set -euo pipefail

bundled=$1
paths=$(sed -nE 's/^bundled [^ ]+ \(([^)]+)\) as .*/\1/p' "$bundled")
legacy=$(pkg-config --variable=modulesdir libcrypto)/legacy.so
packages=$(for p in $paths $legacy; do dpkg -S "$p" 2>/dev/null || dpkg -S "$(realpath "$p")"; done |
  cut -d: -f1 | sort -u)
# Compiled in from headers: Asio and nlohmann/json (all of them), pybind11 (the wheels).
headers_only="libasio-dev nlohmann-json3-dev"

cat <<'HEAD'
dhtcrawler is MIT-licensed (pyproject.toml). Its release artifacts (wheels, jar, SDK, image)
carry the libraries below, unmodified, each under its own licence; the notices follow, one
package at a time, as Debian ships them. The wheels also contain code generated from pybind11
(BSD-3-Clause, https://github.com/pybind/pybind11/blob/master/LICENSE).

HEAD
for pkg in $packages $headers_only; do
  printf '==============================================================================\n'
  printf '%s %s\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg")"
  printf '==============================================================================\n'
  cat "/usr/share/doc/$pkg/copyright"
  echo
done
