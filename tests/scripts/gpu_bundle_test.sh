#!/usr/bin/env bash
# The bundle of scripts/gpu-bundle.sh runs `bench` with the build tree out of reach, as on the GPU
# machine (which has neither the build tree nor the Debian packages): the CUDA build in BUILD_DIR
# is packed as it is (nothing is built), unpacked into a temporary directory, and the bundled
# `bench` (through the bundle's launcher, `bench-bundle/run`) runs tests/cuda/every_component.toml
# on the CPU device from another working directory, in a mount namespace where an empty tmpfs
# covers the build and the source trees. Where no mount namespace can be made (no CAP_SYS_ADMIN),
# the same run under LD_DEBUG=files must load no file of the build tree. Then its stored cases
# and steps are checked. The same build is packed as the baseline too (--baseline-dir), and the
# baseline's cuda_check (`run --baseline cuda_check`) runs alike, from its own libraries.
#   gpu_bundle_test.sh BUILD_DIR SOURCE_DIR      exit 0 pass, 1 fail, 77 skipped (no CUDA build)
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
if [ ! -x "$build/bin/cuda_check" ] || ! grep -Eq '^CMAKE_CUDA_COMPILER:[A-Z]+=.' "$build/CMakeCache.txt"; then
  echo "gpu_bundle_test: this build has no CUDA (no nvcc when it was configured): the bundle is made from a CUDA build only: skipped"
  exit 77
fi
# shellcheck source=tests/scripts/check.sh
source "$(dirname "$0")/check.sh"  # $tmp, check, $fails

# Pack (xz at its fastest: this tests the contents, not the size) and unpack.
if ! XZ_OPT="-0 -T0" "$src/scripts/gpu-bundle.sh" --build-dir "$build" --baseline-dir "$build" --out "$tmp/bundle.tar.xz" \
  > "$tmp/pack.txt" 2>&1; then
  echo "FAIL: scripts/gpu-bundle.sh --build-dir $build"
  cat "$tmp/pack.txt"
  exit 1
fi
tail -n 1 "$tmp/pack.txt"
mkdir -p "$tmp/unpacked" "$tmp/cwd"
tar -C "$tmp/unpacked" -xJf "$tmp/bundle.tar.xz"
b="$tmp/unpacked/bench-bundle"
check "the bundle has its launcher" [ -x "$b/run" ]
cuda_plugins=$(find "$b/lib/bench/plugins/cuda" -name '*.so' 2> /dev/null | wc -l)
check "the bundle has the plugins' CUDA builds ($cuda_plugins)" [ "$cuda_plugins" -gt 0 ]
check "the bundle has the baseline's cuda_check and its libbench" \
  bash -c "[ -x '$b/baseline/bin/cuda_check' ] && ls '$b/baseline/lib/' | grep -q '^libbench_cuda\.so'"
cp "$src/tests/cuda/every_component.toml" "$tmp/cwd/every_component.toml"
db="$tmp/cwd/every.db"

# A run in the bundle alone: the build tree (and the source tree with it) covered where a mount
# namespace can be made; else the libraries the run loads are listed and checked.
#   alone OUTPUT CMD...   CMD's exit status; its output in OUTPUT
alone() {
  local output=$1 s
  shift
  if unshare -m true 2> /dev/null; then
    how="mount namespace: tmpfs over $build and $src"
    # shellcheck disable=SC2016  # the inner shell's own $1..$4
    (cd "$tmp/cwd" && unshare -m bash -c 'mount -t tmpfs tmpfs "$1" && mount -t tmpfs tmpfs "$2" &&
       [ -z "$(ls -A "$1" 2> /dev/null)" ] && shift 2 && exec "$@"' _ "$build" "$src" "$@") > "$output" 2>&1
    return
  fi
  how="no mount namespace here: LD_DEBUG=files, no file of $build may be loaded"
  rm -f "$tmp"/ld.*
  (cd "$tmp/cwd" && LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$@") > "$output" 2>&1
  s=$?
  # ld.so's "calling init: PATH" names each library it loaded, by the path it found.
  loaded=$(cat "$tmp"/ld.* 2> /dev/null | grep -F "calling init: $build/" | sed 's/.*calling init: //' | head -n 3)
  check "no library loaded from the build tree by ${*:2:2}${loaded:+ (loaded: $loaded)}" [ -z "$loaded" ]
  return $s
}
alone "$tmp/run.txt" "$b/run" bench --db "$db" -q run --device cpu every_component.toml
status=$?
echo "gpu_bundle_test: $how"
why=""
[ "$status" -ne 0 ] && why=": $(tail -n 1 "$tmp/run.txt")"
check "the bundled bench run exits 0 (exit $status$why)" [ "$status" -eq 0 ]
if [ "$status" -ne 0 ]; then
  echo "--- what it printed:"
  tail -n 20 "$tmp/run.txt"
fi

# What it stored, read by the bundled bench too (the trees are visible again: any bench reads it).
# (CSV lines end in CRLF, RFC 4180.)
completed=$("$b/run" bench --db "$db" query "SELECT count(*) FROM cases WHERE status = 'completed'" --format csv \
  2> /dev/null | tr -d '\r' | tail -n 1)
steps=$("$b/run" bench --db "$db" query "SELECT count(*) FROM steps WHERE loss > 0" --format csv 2> /dev/null |
  tr -d '\r' | tail -n 1)
check "every case completed (14, got ${completed:-none})" [ "${completed:-0}" = 14 ]
check "logged steps with a loss (28, got ${steps:-none})" [ "${steps:-0}" = 28 ]

# The baseline's cuda_check, alone as well: it times the add on the CPU, and loads its own build's
# libraries (baseline/lib, first on the path: both builds' libraries share their names).
alone "$tmp/baseline.txt" "$b/run" --baseline cuda_check --backend cpu --small --only bandwidth/add/float
status=$?
check "the baseline's cuda_check runs from the bundle (exit $status: $(tail -n 1 "$tmp/baseline.txt"))" \
  grep -q "bandwidth/add/float" "$tmp/baseline.txt"
check "the baseline's cuda_check exits 0" [ "$status" -eq 0 ]
rm -f "$tmp"/ld.*
(cd "$tmp/cwd" && LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$b/run" --baseline cuda_check --list) > /dev/null 2>&1
check "the baseline's cuda_check loads baseline/lib's libbench_cuda" \
  grep -qF "calling init: $b/baseline/lib/libbench_cuda.so" "$tmp"/ld.*

if [ $fails -ne 0 ]; then
  echo "gpu_bundle_test: $fails failed"
  exit 1
fi
echo "gpu_bundle_test: passed"
