#!/usr/bin/env bash
# Checks the artifacts CI cannot (podman, a Go toolchain in a root): run before resolving a
# release, after `bash tools/release.sh` (with the image). As root, with podman.
#   image     the README's [image] line as written in dist/: `podman run IMAGE demo` delivers
#             every torrent
#   compose   the README's [compose] line (podman-compose 1.1+ from PyPI): the fleet profile's
#             services become healthy, and a crawl inside its crawler container of the image's
#             test network stores torrents in its PostgreSQL
#   sdk       in a minimal Debian root with gcc, pkg-config and Go but no -dev package of
#             ours: examples/c (dlopen) and examples/go (cgo, PKG_CONFIG_PATH into the SDK)
#             build and crawl the SDK's test network
#   systemd   packaging/systemd/dhtcrawler.service passes systemd-analyze verify
# Prints each figure; ends with "release-check: N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$root/dist work=$root/build/release-check
here=$root/tools/release
. "$here/podman.sh"
podman image exists debian:bookworm-slim && podman_configure debian:bookworm-slim
tools=$root/build/release-tools/bin
passed=0 failed=0
ok() { echo "release-check: ok: $*"; passed=$((passed + 1)); }
bad() { echo "release-check: FAILED: $*"; failed=$((failed + 1)); }
timed() { local t=$SECONDS; "$@"; local rc=$?; echo "release-check: ($((SECONDS - t)) s) $*" >&2; return $rc; }
version=$(ls "$dist"/dhtcrawler-sdk-*-linux-x86_64.tar.gz | sed -E 's/.*dhtcrawler-sdk-(.*)-linux-x86_64.tar.gz/\1/')
rm -rf "$work" && mkdir -p "$work"
testnet_options() { echo "{\"allow_private_addresses\":true,\"crawl\":{\"bootstrap\":{\"sources\":[\"$1\"]}}}"; }

# --- the image ----------------------------------------------------------------------------------
line=$(bash "$here/readme-lines.sh" image)
out=$(cd "$dist" && timed bash -c "$line" 2>&1)
summary=$(grep -E '^demo: [0-9]+ of [0-9]+ torrents' <<<"$out" | tail -1)
if [ -n "$summary" ] && [ "$(cut -d' ' -f2 <<<"$summary")" = "$(cut -d' ' -f4 <<<"$summary")" ]; then
  ok "image: $summary"
else
  bad "image: $line"; tail -20 <<<"$out"
fi
echo "image size: $(podman image inspect "dhtcrawler:$version" --format '{{.Size}}') bytes unpacked"

# --- compose, fleet profile ------------------------------------------------------------------------
[ -x "$tools/podman-compose" ] || "$tools/pip" install -q --disable-pip-version-check 'podman-compose>=1.1'
export PATH=$tools:$PATH
# The fleet's crawler reaches PostgreSQL by its service name: CNI networks resolve names only
# with the dnsname plugin (README, Releases).
dnsname=no
for plugin in /usr/lib/cni/dnsname /usr/libexec/cni/dnsname /opt/cni/bin/dnsname; do [ -x "$plugin" ] && dnsname=yes; done
if [ "$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)" = cni ] && [ $dnsname = no ]; then
  echo "release-check: podman's CNI backend has no dnsname plugin: the fleet's services cannot find each other" >&2
  echo "release-check: apt-get install golang-github-containernetworking-plugin-dnsname" >&2
fi
line=$(bash "$here/readme-lines.sh" compose)
(cd "$dist" && DHTCRAWLER_API_KEY=unused podman-compose --profile fleet down -v) >/dev/null 2>&1 # what an earlier run left
(cd "$dist" && timed bash -c "$line") >"$work/compose.log" 2>&1 || { bad "compose: $line"; tail -20 "$work/compose.log"; }
healthy=0
for _ in $(seq 60); do
  # Podman runs healthchecks from systemd timers; without systemd (a container or chroot) they
  # are run here.
  for c in $(podman ps --filter label=io.podman.compose.project=dhtcrawler --format '{{.Names}}'); do
    podman healthcheck run "$c" >/dev/null 2>&1 || true
  done
  states=$(podman ps --filter label=io.podman.compose.project=dhtcrawler --format '{{.Names}} {{.Status}}')
  grep -q 'postgres.*(healthy)' <<<"$states" && grep -q 'fleet-crawler.*Up' <<<"$states" && { healthy=1; break; }
  sleep 2
done
echo "$states"
if [ "$healthy" -eq 1 ]; then ok "compose: the fleet profile is up, PostgreSQL healthy"; else bad "compose: the fleet profile did not come up"; fi
# Up is not yet crawling: the fleet's crawler serves HTTP once its store is open (it waits for
# PostgreSQL, --store-wait), so wait for any answer on its published port.
for _ in $(seq 60); do
  curl -s -o /dev/null --max-time 2 http://127.0.0.1:8081/ && break
  sleep 2
done
crawler=$(podman ps --filter label=io.podman.compose.project=dhtcrawler --format '{{.Names}}' | grep fleet-crawler | head -1)
pg=$(podman ps --filter label=io.podman.compose.project=dhtcrawler --format '{{.Names}}' | grep postgres | head -1)
if [ -n "$crawler" ]; then
  podman exec "$crawler" sh -c 'bin=$(python3 -c "import dhtcrawler, os; print(os.path.dirname(dhtcrawler.__file__))")/_bin
    $bin/dhtcrawler-testnet --nodes 30 --seeders 4 --torrents 8 --duration 90 >/tmp/net.out 2>/dev/null &
    for i in $(seq 50); do grep -q BOOTSTRAP /tmp/net.out && break; sleep 0.2; done
    addr=$(cut -d" " -f2 /tmp/net.out)
    timeout 120 dhtcrawler crawl --store "postgresql://dhtcrawler:${DHTCRAWLER_PG_PASSWORD:-dhtcrawler}@postgres/dhtcrawler" \
      --bootstrap "$addr" --no-default-bootstrap --allow-private --no-scrape --port 16881 --duration 40; echo "crawl exit $?"' \
    >"$work/fleet-crawl.log" 2>&1
  # Host connections need the password (scram-sha-256), even inside the container.
  stored=$(podman exec -e PGPASSWORD="${DHTCRAWLER_PG_PASSWORD:-dhtcrawler}" "$pg" \
    psql -U dhtcrawler -h 127.0.0.1 -d dhtcrawler -tAc 'SELECT count(*) FROM torrents' 2>>"$work/fleet-crawl.log" || echo 0)
  if [ "${stored:-0}" -gt 0 ]; then ok "compose: $stored torrents stored in the fleet's PostgreSQL"; else bad "compose: no torrent in PostgreSQL"; tail -20 "$work/fleet-crawl.log"; fi
else
  bad "compose: the fleet's crawler is not running"
  podman logs --tail 10 dhtcrawler_fleet-crawler_1 2>&1
fi
(cd "$dist" && DHTCRAWLER_API_KEY=unused podman-compose --profile fleet down -v) >/dev/null 2>&1

# --- the SDK in a root with gcc and Go ---------------------------------------------------------------
sysroot=$work/root
if timed bash "$here/minimal-root.sh" "$sysroot" gcc,libc6-dev,pkg-config,ca-certificates; then
  # Go 1.21+ is Debian 12's golang from bookworm-backports; the machine's own toolchain stands in.
  cp -a "$(go env GOROOT)" "$sysroot/usr/local/go"
  mkdir -p "$sysroot/opt/sdk" "$sysroot/root/go/pkg"
  tar -C "$sysroot/opt/sdk" -xzf "$dist/dhtcrawler-sdk-$version-linux-x86_64.tar.gz"
  # The Go module's dependencies (go.sum), fetched here: the root has no network.
  (cd "$sysroot/opt/sdk/dhtcrawler-sdk-$version-linux-x86_64/examples/go" &&
    GOMODCACHE=$sysroot/root/go/pkg/mod GOFLAGS=-mod=mod go mod download) >/dev/null 2>&1
  out=$(bash "$here/in-root.sh" "$sysroot" "export PATH=/usr/local/go/bin:\$PATH GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
    sdk=/opt/sdk/dhtcrawler-sdk-$version-linux-x86_64 && cd \$sdk
    coproc NET { bin/dhtcrawler-testnet --nodes 100 --seeders 10 --torrents 10 --duration 200 2>/dev/null; }
    read -r word addr <&\${NET[0]}
    opts='{\"allow_private_addresses\":true,\"crawl\":{\"bootstrap\":{\"sources\":[\"'\$addr'\"]}}}'
    gcc -std=c99 -Iinclude -o /tmp/crawl examples/c/crawl.c -ldl && echo C-BUILT
    /tmp/crawl --lib lib/libdhtcrawler.so.1 --options \"\$opts\" --seconds 30 | sed 's/^/C: /'
    cd examples/go && PKG_CONFIG_PATH=\$sdk/lib/pkgconfig go build -o /tmp/go-crawl . && echo GO-BUILT
    /tmp/go-crawl -options \"\$opts\" -duration 30s | sed 's/^/GO: /'" 2>&1)
  c=$(grep -c '^C: .*"info_hash"' <<<"$out") g=$(grep -c '^GO: .*"info_hash"' <<<"$out")
  if grep -q C-BUILT <<<"$out" && [ "$c" -gt 0 ]; then ok "sdk: examples/c (dlopen) crawled $c torrents"; else bad "sdk: examples/c"; fi
  if grep -q GO-BUILT <<<"$out" && [ "$g" -gt 0 ]; then ok "sdk: examples/go (cgo, pkg-config) crawled $g torrents"; else bad "sdk: examples/go"; fi
  [ "$c" -gt 0 ] && [ "$g" -gt 0 ] || grep -v '"info_hash"' <<<"$out" | tail -20
else
  bad "sdk: no root with gcc"
fi

# --- systemd -----------------------------------------------------------------------------------------
# verify wants ExecStart to exist: the unit as written, with /opt/dhtcrawler pointing at a venv of the wheel.
venv=$work/opt-dhtcrawler
# The wheel for the venv's CPython, by its path (never a same-named package from the index);
# its dependencies (parse-torrent-title, ...) from the index.
tag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check "$dist"/dhtcrawler-"$version"-"$tag"-*.whl
sed "s|/opt/dhtcrawler|$venv|g" "$root/packaging/systemd/dhtcrawler.service" >"$work/dhtcrawler.service"
if systemd-analyze verify "$work/dhtcrawler.service"; then
  ok "systemd: systemd-analyze verify; $(systemd-analyze security --offline=yes "$work/dhtcrawler.service" 2>/dev/null | tail -1)"
else
  bad "systemd: systemd-analyze verify"
fi

ls -l "$dist"
echo "release-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
