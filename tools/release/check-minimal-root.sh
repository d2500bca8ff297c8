#!/usr/bin/env bash
# Checks the artifacts of tools/release.sh --no-image on a machine that has no compiler and
# no -dev package: a fresh minimal Debian 12 root with python3, python3-venv and a JRE only.
#   auditwheel   every wheel needs no library beyond its manylinux policy's
#   wheel        the README's [wheel] line, offline (dist/ plus a wheelhouse of the wheel's
#                dependencies made beforehand with pip download): `dhtcrawler demo` delivers
#                every torrent, the PE/RC4 seeder's among them (the bundled legacy provider)
#   sdk          the README's [sdk] line: the SDK unpacks and its test network runs
#   jar          the README's [jar] line, then the Java example (compiled here, outside the
#                root) on the JRE alone crawls the SDK's test network
# Ends with "release-root: N passed, M failed". Usage: check-minimal-root.sh DIST WORKDIR (as root)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dist=$(realpath "$1") work=$(realpath -m "$2")
here=$root/tools/release
passed=0 failed=0
ok() { echo "release-root: ok: $*"; passed=$((passed + 1)); }
bad() { echo "release-root: FAILED: $*"; failed=$((failed + 1)); }
version=$(ls "$dist"/dhtcrawler-sdk-*-linux-x86_64.tar.gz | sed -E 's/.*dhtcrawler-sdk-(.*)-linux-x86_64.tar.gz/\1/')
tools=$root/build/release-tools/bin

rm -rf "$work" && mkdir -p "$work"
sysroot=$work/root
bash "$here/minimal-root.sh" "$sysroot" python3,python3-venv,openjdk-17-jre-headless || { bad "no minimal root"; exit 1; }
if chroot "$sysroot" sh -c 'command -v cc gcc g++ c++ clang' >/dev/null || chroot "$sysroot" dpkg -l | grep -E '^ii +[^ ]+-dev[: ]'; then
  bad "the minimal root has a compiler or a -dev package"
fi

for whl in "$dist"/*.whl; do
  report=$("$tools/auditwheel" show "$whl" 2>&1 | tr '\n' ' ')
  if grep -q 'consistent with the following platform tag: "manylinux_' <<<"$report" &&
     ! grep -qi 'external shared libraries are required' <<<"$report"; then
    ok "auditwheel show $(basename "$whl"): $(grep -o 'manylinux_[0-9_]*x86_64' <<<"$report" | head -1), nothing external"
  else
    bad "auditwheel show $(basename "$whl")"; "$tools/auditwheel" show "$whl"
  fi
done

# What the root gets: dist/, the wheel's dependencies for its CPython, the jar's dependencies
# and the Java example compiled here.
py=$(chroot "$sysroot" python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
mkdir -p "$sysroot/opt/dist" "$sysroot/opt/wheelhouse" "$sysroot/opt/jar"
cp "$dist"/* "$sysroot/opt/dist/"
"$tools/pip" download -q --disable-pip-version-check -d "$sysroot/opt/wheelhouse" --only-binary=:all: \
  --implementation cp --python-version "$py" --platform manylinux_2_35_x86_64 --platform manylinux2014_x86_64 \
  --platform linux_x86_64 --find-links "$dist" "dhtcrawler==$version" ||
  bad "pip download of the wheel's dependencies"
rm -f "$sysroot"/opt/wheelhouse/dhtcrawler-*.whl
(cd "$root/java" && mvn -B -q dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$sysroot/opt/jar") ||
  bad "mvn dependency:copy-dependencies"
cp "$dist/dhtcrawler-$version.jar" "$sysroot/opt/jar/"
javac -cp "$sysroot/opt/jar/*" -d "$sysroot/opt/jar" "$root/examples/java/Crawl.java" || bad "javac Crawl.java"

run() { bash "$here/in-root.sh" "$sysroot" "$1"; }

line=$(bash "$here/readme-lines.sh" wheel)
out=$(run "cd /opt/dist && export PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/wheelhouse PIP_DISABLE_PIP_VERSION_CHECK=1 && timeout 300 bash -c '$line'" 2>&1)
echo "$out" | grep -E '^demo:'
summary=$(grep -E '^demo: [0-9]+ of [0-9]+ torrents' <<<"$out" | tail -1)
got=$(sed -E 's/^demo: ([0-9]+) of.*/\1/' <<<"$summary") want=$(sed -E 's/^demo: [0-9]+ of ([0-9]+).*/\1/' <<<"$summary")
if [ -n "$summary" ] && [ "$got" = "$want" ]; then ok "wheel: $summary"; else bad "wheel: dhtcrawler demo"; echo "$out" | tail -30; fi
# Which seeder wins a torrent in the demo is a race; a swarm of PE/RC4 seeders alone proves
# the bundled legacy provider on both ends (the wheel's test network and the crawler); the
# root's own (python3 brings libssl3) is removed first.
out=$(run "rm -f /usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so && cd /opt/dist && bin=\$(venv/bin/python -c 'import dhtcrawler, os; print(os.path.dirname(dhtcrawler.__file__))')/_bin
  coproc NET { \$bin/dhtcrawler-testnet --nodes 30 --seeders 3 --torrents 4 --policy-mix pe_rc4=1 --duration 90 2>/dev/null; }
  read -r word addr <&\${NET[0]}
  [ \"\$word\" = BOOTSTRAP ] || exit 1
  timeout 120 venv/bin/dhtcrawler crawl --bootstrap \"\$addr\" --no-default-bootstrap --allow-private --no-scrape \
    --duration 40 --out - --quiet" 2>&1)
torrents=$(grep -c '"info_hash"' <<<"$out")
if [ "$torrents" -gt 0 ]; then ok "wheel: $torrents torrents from PE/RC4 seeders alone"; else bad "wheel: no torrent from PE/RC4 seeders (the legacy provider?)"; echo "$out" | tail -20; fi

line=$(bash "$here/readme-lines.sh" sdk)
if out=$(run "cd /opt/dist && timeout 60 bash -c '$line'" 2>&1) && grep -q '^BOOTSTRAP ' <<<"$out"; then
  ok "sdk: $line"
else
  bad "sdk: $line"; echo "$out" | tail -20
fi

line=$(bash "$here/readme-lines.sh" jar)
if out=$(run "cd /opt/jar && timeout 120 bash -c '$line'" 2>&1); then ok "jar: $line"; else bad "jar: $line"; echo "$out" | tail -20; fi
out=$(run "cd /opt/jar && sdk=/opt/dist/dhtcrawler-sdk-$version-linux-x86_64
  coproc NET { \$sdk/bin/dhtcrawler-testnet --nodes 200 --seeders 20 --torrents 20 --duration 120 2>/dev/null; }
  read -r word addr <&\${NET[0]}
  [ \"\$word\" = BOOTSTRAP ] || exit 1
  timeout 120 java -cp '/opt/jar/*:.' Crawl --seconds 45 --bootstrap \"\$addr\" --allow-private" 2>/dev/null)
torrents=$(grep -c '"info_hash"' <<<"$out")
if [ "$torrents" -gt 0 ]; then ok "jar: the Java example crawled $torrents torrents from the SDK's test network"; else bad "jar: no torrent from the test network"; fi

echo "release-root: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
