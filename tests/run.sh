#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, then runs
#   build     release build with -Werror, every ctest test (unit, C ABI)
#   python    pip install .[serve] (the wheel: extension + libdhtcrawler.so) into a venv of the
#             python3 on PATH, then pytest tests/python (API, sinks, CLI, libtorrent, testnet,
#             the web server, its page in Debian's headless chromium)
#   java      the Java binding: its native half from the release tree, then Maven (JUnit)
#   go        the Go binding against the release build: go vet, go test (contract tests and
#             a crawl of the loopback test network), examples/go built
#   sanitize  the test targets under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan      the multi-threaded tests (C ABI, snapshots, pipeline) under ThreadSanitizer
#   fuzz      every libFuzzer target for DHTC_FUZZ_SECONDS (default 30) each
#   release   tools/release.sh --no-image on the build stage's tree (wheels, jar, SDK in dist/),
#             then tools/release/check-minimal-root.sh: in a minimal Debian 12 root with no
#             compiler and no -dev package, the README's install lines, the offline demo from
#             the wheel, the jar crawling the SDK's test network, auditwheel show
#   pg        only start PostgreSQL for the tests (build and sanitize do it themselves):
#             the packaged cluster (pg_ctlcluster, never initdb), a test role and database,
#             exported as DHTC_TEST_PG; tests that need it fail without it
# Usage: tests/run.sh [stage...]   (no stage: all of them, in that order)
# Ends with one line "summary: N passed, M failed"; exits non-zero on any failure.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${DHTC_BUILD_ROOT:-$root/build}
fuzz_seconds=${DHTC_FUZZ_SECONDS:-30}
jobs=${DHTC_JOBS:-$(nproc)}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build python java go release sanitize tsan fuzz)

passed=0
failed=0
failures=()

started_at=$SECONDS
note() { printf '\n=== %s (at %d s)\n' "$*" $((SECONDS - started_at)); }

# Runs ctest in a build tree and adds its counts to the totals.
run_ctest() { # dir, label, extra ctest arguments...
  local dir=$1 label=$2 log
  shift 2
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600 "$@") 2>&1 | tee "$log"
  local total fails
  total=$(grep -oE 'tests failed out of [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  fails=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' | tail -1)
  if [ -z "$total" ]; then
    failed=$((failed + 1)); failures+=("$label: ctest did not run")
  else
    passed=$((passed + total - fails)); failed=$((failed + fails))
    [ "$fails" -gt 0 ] && failures+=("$label: $fails failed")
  fi
  rm -f "$log"
}

# The integration tests run real libtorrent sessions, whose own timing (announce pacing,
# its flood limit) now and then leaves one hash unannounced within a test's bound: a
# failing one gets a second run (ctest prints both). Every other test runs once.
run_ctest_suite() { # dir, label, extra ctest arguments for the integration tests...
  local dir=$1 label=$2
  shift 2
  run_ctest "$dir" "$label" -LE integration
  run_ctest "$dir" "$label integration" -L integration --repeat until-pass:2 "$@"
}

build_tree() { # dir, extra cmake args...
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir" -j "$jobs"
}

# The retry store's PostgreSQL tests talk to a real server: start the packaged cluster
# once (as root on CI) unless DHTC_TEST_PG already names one.
ensure_pg() {
  [ -n "${DHTC_TEST_PG:-}" ] && return 0
  local url
  if url=$(bash "$root/tests/pg/start_pg.sh" | tail -1) && [ -n "$url" ]; then
    export DHTC_TEST_PG=$url
    echo "PostgreSQL for the tests: ${url%%:*}://...@${url##*@}"
  else
    failed=$((failed + 1)); failures+=("PostgreSQL did not start (the retry store's PostgreSQL tests will fail)")
  fi
}

stage_pg() {
  note "PostgreSQL for the tests"
  ensure_pg
}

stage_build() {
  note "release build (-Werror) and tests"
  ensure_pg
  if build_tree "$out/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
    run_ctest_suite "$out/release" release
  else
    failed=$((failed + 1)); failures+=("release build failed")
  fi
}

# Runs pytest and adds its counts ("N passed, M failed, K errors") to the totals.
run_pytest() { # label, python, pytest arguments...
  local label=$1 py=$2 log line p f e
  shift 2
  log=$(mktemp)
  (cd "$root" && "$py" -m pytest -q -p no:cacheprovider -o faulthandler_timeout=300 "$@") 2>&1 | tee "$log"
  line=$(grep -E '(passed|failed|error|no tests ran).* in [0-9.]+s' "$log" | tail -1)
  p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || true)
  f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || true)
  e=$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || true)
  p=${p:-0}; f=${f:-0}; e=${e:-0}
  if [ -z "$line" ] || [ $((p + f + e)) -eq 0 ]; then
    failed=$((failed + 1)); failures+=("$label: pytest ran no test")
  else
    passed=$((passed + p)); failed=$((failed + f + e))
    [ $((f + e)) -gt 0 ] && failures+=("$label: $f failed, $e errors")
  fi
  rm -f "$log"
}

# Go from the machine (/usr/local/go), else Debian's golang-go. go/go.mod needs Go 1.21 or
# later (its JSON-Schema test dependency does); stage_go says so when the toolchain is older.
find_go() {
  if command -v go >/dev/null 2>&1; then command -v go; return; fi
  if [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; return; fi
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends golang-go >/dev/null &&
    command -v go
}

# Runs `go test -v` in a module and adds its test counts (tests and subtests, from the
# "--- PASS"/"--- FAIL" lines) to the totals; a package that does not build or crashes
# without a failing test counts as one failure.
run_go_test() { # module dir, label, go test arguments...
  local dir=$1 label=$2 log pass fail rc
  shift 2
  log=$(mktemp)
  (cd "$dir" && "$go" test -v "$@" ./...) 2>&1 | grep -vE '^(=== (RUN|PAUSE|CONT)|testnet:)' | tee "$log"
  rc=${PIPESTATUS[0]}
  pass=$(grep -cE '^ *--- PASS: ' "$log")
  fail=$(grep -cE '^ *--- FAIL: ' "$log")
  echo "$label: $pass passed, $fail failed (go test exit $rc)"
  passed=$((passed + pass)); failed=$((failed + fail))
  if [ "$fail" -gt 0 ]; then
    failures+=("$label: $fail failed")
  elif [ "$rc" -ne 0 ]; then
    failed=$((failed + 1)); failures+=("$label: go test failed (build error or crash)")
  fi
  rm -f "$log"
}

stage_python() {
  note "Python package: pip install . into a venv, then pytest tests/python"
  ensure_pg
  local venv=$out/python-venv
  if [ ! -x "$venv/bin/python" ] && ! python3 -m venv "$venv"; then
    failed=$((failed + 1)); failures+=("python: cannot create a venv with $(command -v python3)"); return
  fi
  # selenium drives Debian's chromium (the web page tests); the serve extra comes with the wheel.
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check pytest jsonschema selenium; then
    failed=$((failed + 1)); failures+=("python: pip could not install the test packages"); return
  fi
  # The wheel build compiles the core once more; its build directory is kept, so a re-run
  # only rebuilds what changed. The extras: psycopg (--store) and zstandard (.zst dumps).
  if ! CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        --config-settings=build-dir="$out/python-wheel" "$root[postgresql,zstd,serve]"; then
    failed=$((failed + 1)); failures+=("python: pip install .[postgresql,zstd,serve] failed"); return
  fi
  # The test network program from the release build, until the wheel carries its own.
  local testnet=$out/release/tools/testnet/dhtcrawler-testnet
  if [ -x "$testnet" ] && [ -z "${DHTCRAWLER_TESTNET:-}" ]; then export DHTCRAWLER_TESTNET=$testnet; fi
  PATH="$venv/bin:$PATH" run_pytest python "$venv/bin/python" tests/python
}

# "Class.case: message" for every failed or erred JUnit case of surefire's reports.
java_failures() { # report files...
  python3 - "$@" <<'PY'
import sys
import xml.etree.ElementTree as ET
for report in sys.argv[1:]:
    for case in ET.parse(report).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            e = case.find(kind)
            if e is not None:
                what = " ".join((e.get("message") or e.get("type") or "").split())[:400]
                print(f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}: {what}")
PY
}

stage_java() {
  note "Java binding: SWIG/JNI from the release tree, Maven build and JUnit tests"
  local dir=$out/release project=$root/java
  if ! cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHTC_BUILD_JAVA=ON >/dev/null ||
     ! cmake --build "$dir" -j "$jobs" --target dhtcrawler_java; then
    failed=$((failed + 1)); failures+=("java: native build failed"); return
  fi
  # The crawl test needs the loopback test network; it is built with the library when present.
  if [ -z "${DHTCRAWLER_TESTNET:-}" ] && ninja -C "$dir" -t targets all 2>/dev/null | grep -E '^(tools/testnet/)?dhtcrawler-testnet:' >/dev/null; then
    cmake --build "$dir" -j "$jobs" --target dhtcrawler-testnet &&
      export DHTCRAWLER_TESTNET=$dir/tools/testnet/dhtcrawler-testnet
  fi
  if [ ! -f "$dir/java/native/libdhtcrawler_jni.so" ] || [ ! -f "$dir/java/generated/dev/dhtcrawler/internal/DhtcNative.java" ]; then
    failed=$((failed + 1)); failures+=("java: the native build left no JNI library or generated sources in $dir/java"); return
  fi
  rm -rf "$project/target/surefire-reports"
  local rc=0
  (cd "$project" && timeout 1200 mvn -B -q package -Ddhtc.build.dir="$dir") || rc=$?
  local tests=0 fails=0 skipped=0 report
  for report in "$project"/target/surefire-reports/TEST-*.xml; do
    [ -f "$report" ] || continue
    local head
    head=$(grep -m1 -o '<testsuite [^>]*>' "$report")
    attr() { sed -nE "s/.* $1=\"([0-9]+)\".*/\1/p" <<<"$head"; }
    tests=$((tests + $(attr tests))); skipped=$((skipped + $(attr skipped)))
    fails=$((fails + $(attr failures) + $(attr errors)))
  done
  if [ "$tests" -eq 0 ]; then
    failed=$((failed + 1)); failures+=("java: maven ran no tests (exit $rc)"); return
  fi
  passed=$((passed + tests - fails - skipped)); failed=$((failed + fails))
  if [ "$fails" -gt 0 ]; then
    failures+=("java: $fails failed")
    # Each failing case with its message, in the summary at the end (a long log is cut).
    local line
    while IFS= read -r line; do failures+=("  $line"); done < <(java_failures "$project"/target/surefire-reports/TEST-*.xml)
  fi
  [ "$fails" -eq 0 ] && [ "$rc" -ne 0 ] && { failed=$((failed + 1)); failures+=("java: maven failed (exit $rc)"); }
  # -Xcheck:jni reports misuse of JNI on the JVM's stderr, which surefire keeps in dumpstream files.
  if grep -qs 'WARNING in native method' "$project"/target/surefire-reports/*.dumpstream; then
    failed=$((failed + 1)); failures+=("java: -Xcheck:jni warnings (see java/target/surefire-reports)")
  fi
  echo "java: $tests tests, $fails failed, $skipped skipped"
}

stage_go() {
  note "Go binding (cgo, pkg-config) against the release build"
  local build=$out/release go
  if [ ! -f "$build/capi/libdhtcrawler.so" ] &&
     ! { cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
         cmake --build "$build" -j "$jobs" --target dhtcrawler; }; then
    failed=$((failed + 1)); failures+=("go: library build failed"); return
  fi
  if ! go=$(find_go); then
    failed=$((failed + 1)); failures+=("go: no Go toolchain"); return
  fi
  "$go" version
  case "$("$go" env GOVERSION)" in
    go1.1[0-9]|go1.1[0-9].*|go1.20|go1.20.*)
      failed=$((failed + 1)); failures+=("go: $("$go" env GOVERSION) is older than go/go.mod's go 1.21"); return ;;
  esac
  # The crawl test needs the loopback test network; build it when the tree has it.
  local testnet=${DHTCRAWLER_TESTNET:-$build/tools/testnet/dhtcrawler-testnet}
  if [ ! -x "$testnet" ] && cmake --build "$build" --target help 2>/dev/null | grep 'dhtcrawler-testnet' >/dev/null; then
    cmake --build "$build" -j "$jobs" --target dhtcrawler-testnet
  fi
  export PKG_CONFIG_PATH=$build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  # The modules of go/go.sum (the JSON-Schema validator of the tests) come through the
  # module proxy (GOPROXY as configured, by default proxy.golang.org) and are checked
  # against go.sum; no toolchain is downloaded.
  export DHTCRAWLER_TESTNET=$testnet GOTOOLCHAIN=local
  [ -n "${HOME:-}" ] || export GOCACHE=$out/go-cache GOPATH=$out/go-path
  if ! (cd "$root/go" && "$go" mod download); then
    failed=$((failed + 1)); failures+=("go: go mod download failed (is the module proxy reachable?)"); return
  fi
  if (cd "$root/go" && "$go" vet ./...) && (cd "$root/examples/go" && "$go" vet ./...); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("go vet")
  fi
  run_go_test "$root/go" go -count=1 -timeout 300s
  if (cd "$root/examples/go" && "$go" build -o "$build/dhtc-go-crawl" .); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("examples/go build failed")
  fi
}

stage_sanitize() {
  note "AddressSanitizer + UndefinedBehaviorSanitizer build of the tests"
  ensure_pg
  if build_tree "$out/asan" -DCMAKE_BUILD_TYPE=Debug -DDHTC_SANITIZE=address,undefined -DDHTC_BUILD_EXAMPLES=OFF \
       -DDHTC_BUILD_JAVA=OFF -DDHTC_BUILD_BENCH=OFF -DDHTC_TEST_PCH=ON; then
    # The lifecycle matrix: 42 cycles per combination is 1,188 create-to-destroy cycles.
    # The libtorrent interop tests run in the release stage only: under the sanitizers they
    # spend minutes waiting on libtorrent, while the same session, MSE and uTP code runs
    # here against fake peers and the test network.
    DHTC_LIFECYCLE_CYCLES=42 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest_suite "$out/asan" asan -E 'lt_'
  else
    failed=$((failed + 1)); failures+=("sanitizer build failed")
  fi
}

stage_tsan() {
  note "ThreadSanitizer build of the multi-threaded tests"
  local dir=$out/tsan
  local targets=(capi_contract capi_lifecycle test_snapshot test_pipeline test_retry_scheduler)
  if cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHTC_SANITIZE=thread \
        -DDHTC_BUILD_EXAMPLES=OFF -DDHTC_BUILD_BENCH=OFF >/dev/null &&
     cmake --build "$dir" -j "$jobs" --target "${targets[@]}"; then
    # Only what was built: the other tests would be reported as not found.
    DHTC_LIFECYCLE_CYCLES=12 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      run_ctest "$dir" tsan -R '^(capi\.contract|capi\.lifecycle|unit\.test_snapshot|unit\.test_pipeline|unit\.test_retry_scheduler)$'
  else
    failed=$((failed + 1)); failures+=("tsan build failed")
  fi
}

stage_fuzz() {
  note "libFuzzer targets, ${fuzz_seconds}s each"
  local dir=$out/fuzz
  if ! CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DDHTC_FUZZ=ON -DDHTC_BUILD_TESTS=OFF -DDHTC_BUILD_EXAMPLES=OFF >/dev/null ||
     ! cmake --build "$dir" -j "$jobs" --target fuzzers; then
    failed=$((failed + 1)); failures+=("fuzz build failed"); return
  fi
  local corpus_root=$dir/corpus
  for bin in "$dir"/tests/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    local name seeds
    name=$(basename "$bin")
    mkdir -p "$corpus_root/$name"
    seeds=()
    [ -d "$root/tests/fuzz/corpus/$name" ] && seeds=("$root/tests/fuzz/corpus/$name")
    echo "--- $name"
    if "$bin" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        "$corpus_root/$name" "${seeds[@]}" >"$dir/$name.log" 2>&1; then
      passed=$((passed + 1))
      grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' "$dir/$name.log" | tail -1
    else
      failed=$((failed + 1)); failures+=("$name found a crash")
      tail -40 "$dir/$name.log"
    fi
  done
}

stage_release() {
  note "release artifacts (tools/release.sh --no-image) checked in a minimal Debian root"
  local log
  log=$(mktemp)
  if ! DHTC_JOBS=$jobs nice -n 19 bash "$root/tools/release.sh" --no-image --build-dir "$out/release"; then
    failed=$((failed + 1)); failures+=("release: tools/release.sh failed"); return
  fi
  bash "$root/tools/release/check-minimal-root.sh" "$root/dist" "$out/release-root" 2>&1 | tee "$log"
  local line p f
  line=$(grep -E '^release-root: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  if [ -z "$line" ]; then
    failed=$((failed + 1)); failures+=("release: the minimal-root check did not finish")
  else
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failures+=("release: $f checks failed in the minimal root")
  fi
  rm -f "$log"
}

bash "$root/cmake/install-deps.sh" || { echo "summary: 0 passed, 1 failed"; exit 1; }

stage_times=()
for stage in "${stages[@]}"; do
  stage_started=$SECONDS
  case $stage in
    build) stage_build ;;
    python) stage_python ;;
    java) stage_java ;;
    go) stage_go ;;
    sanitize) stage_sanitize ;;
    tsan) stage_tsan ;;
    fuzz) stage_fuzz ;;
    release) stage_release ;;
    pg) stage_pg ;;
    *) echo "unknown stage: $stage (build, python, java, go, release, sanitize, tsan, fuzz, pg)"; exit 2 ;;
  esac
  stage_times+=("$stage $((SECONDS - stage_started)) s")
done

if [ ${#failures[@]} -gt 0 ]; then
  note "failures"
  printf '  %s\n' "${failures[@]}"
fi
echo
echo "took $((SECONDS - started_at)) s ($(IFS=,; echo "${stage_times[*]}" | sed 's/,/, /g'))"
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
