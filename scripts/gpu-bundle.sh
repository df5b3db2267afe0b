#!/usr/bin/env bash
# Packs the prebuilt programs for the lent GPU machine, which has CUDA but not the project's
# Debian packages and must compile nothing (its minutes are for measuring): builds the CUDA build
# here (the "default" preset's build/ when it has CUDA, else the "cuda" preset's build/cuda, both
# sm_90) and puts into .gpu-bundle.tar.xz (git-ignored) `bench`, `cuda_check`, `kernels_test`,
# libbench and its CUDA library, the plugins, every other shared library they load (oneDNN,
# SQLite, TOML++, fmt, Google Benchmark, GoogleTest, OpenMP, the C++ runtime) and this machine's C
# library with its loader, so that the GPU machine's own glibc does not matter. CUDA's libraries
# (cudart, cuBLASLt, NVRTC) and the driver are the GPU machine's: the same CUDA major version (13).
#
#   scripts/gpu-bundle.sh [--baseline REV | --no-baseline]
#                                    then: run(carry=[".gpu-bundle.tar.xz"], "scripts/gpu-check.sh")
#   scripts/gpu-bundle.sh --build-dir DIR [--baseline-dir DIR] [--out FILE]
#                                    pack the CUDA build in DIR as it is (nothing is built) into
#                                    FILE (tests/scripts/gpu_bundle_test.sh)
#
# The baseline: `cuda_check` of an earlier commit REV (default ba95147, where issue 31's H200 table
# was measured) with its own libbench libraries, in bench-bundle/baseline/, so that gpu-check's
# `baseline` section times the kernels of then and of now on the same card, in the same run (a
# lent machine may be another card, and every speed change since REV is a prediction until then).
# REV's tree is exported (git archive) into build/baseline/<its 7 hex digits> and its cuda_check
# built there with its own "default" preset (kept: a second bundle rebuilds nothing);
# --baseline-dir packs a built tree's cuda_check as it is.
#
# Programs run through the bundle's launcher, `bench-bundle/run PROGRAM ARGS...`
# (scripts/gpu-bundle-run.sh): the bundle's loader with the bundle's libraries, the plugins' CUDA
# builds (lib/bench/plugins/cuda, which the build tree's RUNPATHs would look for in the build
# tree), then CUDA's. The device tool carries at most 64 MiB: the bundle's size is printed, and
# over 60 MiB is an error for the carried .gpu-bundle.tar.xz. xz runs on every core unless XZ_OPT
# says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="" out=.gpu-bundle.tar.xz baseline=ba95147 baseline_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) dir=$(cd "$2" && pwd) && shift ;;
    --baseline) baseline=$2 && shift ;;
    --no-baseline) baseline="" ;;
    --baseline-dir) baseline_dir=$(cd "$2" && pwd) && shift ;;
    --out) out=$2 && shift ;;
    -h | --help) sed -n '2,30p' "$0" && exit 0 ;;
    *) echo "gpu-bundle: unknown argument '$1' (see --help)" >&2 && exit 2 ;;
  esac
  shift
done
if [ -n "$baseline_dir" ] && [ ! -x "$baseline_dir/bin/cuda_check" ]; then
  echo "gpu-bundle: $baseline_dir is not a CUDA build (no bin/cuda_check)" >&2
  exit 1
fi
as_is=${dir:+1}  # --build-dir: nothing is built, the baseline only from --baseline-dir
if [ -n "$dir" ]; then
  if [ ! -x "$dir/bin/cuda_check" ]; then
    echo "gpu-bundle: $dir is not a CUDA build (no bin/cuda_check)" >&2
    exit 1
  fi
else
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if [ -f build/CMakeCache.txt ] && grep -Eq '^CMAKE_CUDA_COMPILER:[A-Z]+=.' build/CMakeCache.txt; then
    dir=$PWD/build
    cmake --build build
  else
    dir=$PWD/build/cuda
    cmake --preset cuda --log-level=WARNING > /dev/null
    cmake --build --preset cuda
  fi
fi
# The baseline's build: REV's tree exported once into build/baseline/, its cuda_check built
# there (an up-to-date build is a no-op).
baseline_note=""
if [ -n "$baseline_dir" ]; then
  baseline_note="the build in $baseline_dir, packed as it is"
elif [ -z "$as_is" ] && [ -n "$baseline" ]; then
  full=$(git rev-parse --verify --quiet "$baseline^{commit}") || {
    echo "gpu-bundle: the baseline $baseline is not a commit of this repository (a shallow clone? fetch it, or --no-baseline)" >&2
    exit 1
  }
  tree=$PWD/build/baseline/${full:0:7}
  if [ "$(cat "$tree/.exported" 2> /dev/null)" != "$full" ]; then
    rm -rf "$tree" && mkdir -p "$tree"
    git archive "$full" | tar -x -C "$tree"
    echo "$full" > "$tree/.exported"
  fi
  echo "gpu-bundle: building the baseline's cuda_check ($baseline) in $tree/build" >&2
  (cd "$tree" && cmake --preset default --log-level=WARNING > /dev/null && cmake --build --preset default --target cuda_check) >&2
  baseline_dir=$tree/build
  if [ ! -x "$baseline_dir/bin/cuda_check" ]; then
    echo "gpu-bundle: the baseline $baseline built no CUDA cuda_check in $baseline_dir" >&2
    exit 1
  fi
  baseline_note=$(git log -1 --format='%h (%cs) %s' "$full")
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b="$stage/bench-bundle"
mkdir -p "$b/bin" "$b/lib"
cp "$dir/bin/bench" "$dir/bin/cuda_check" "$dir/bin/kernels_test" "$b/bin/"
cp -a "$dir"/lib/libbench*.so* "$b/lib/"
cp -a "$dir/lib/bench" "$b/lib/"  # lib/bench/plugins (and their CUDA builds in cuda/), found next to libbench
cp scripts/gpu-bundle-run.sh "$b/run"
chmod +x "$b/run"
# The baseline's cuda_check and the libraries of its own build (libbench, its CUDA library, the
# plugin API), in baseline/; `run --baseline cuda_check` puts its lib/ first.
if [ -n "$baseline_dir" ]; then
  mkdir -p "$b/baseline/bin" "$b/baseline/lib"
  cp "$baseline_dir/bin/cuda_check" "$b/baseline/bin/"
  ldd "$baseline_dir/bin/cuda_check" | awk -v d="$baseline_dir/" '$2 == "=>" && index($3, d) == 1 {print $3}' |
    while read -r lib; do cp -L "$lib" "$b/baseline/lib/"; done
  echo "$baseline_note" > "$b/baseline/commit"
fi
# Every library the programs and the plugins load, except CUDA's, the driver's and our own.
shopt -s nullglob
for f in "$b"/bin/* "$b"/lib/*.so* "$b"/lib/bench/plugins/*.so "$b"/lib/bench/plugins/cuda/*.so "$b"/baseline/bin/* \
  "$b"/baseline/lib/*.so*; do
  ldd "$f"
done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -e 'libcuda\.' -e 'libcudart' -e 'libcublas' -e 'libnvrtc' -e "^$dir/" ${baseline_dir:+-e "^$baseline_dir/"} |
  while read -r lib; do cp -L "$lib" "$b/lib/"; done
# The rest of glibc, which CUDA's libraries may load, and its loader.
for lib in libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libresolv.so.2; do
  [ -e "/lib/x86_64-linux-gnu/$lib" ] && cp -L "/lib/x86_64-linux-gnu/$lib" "$b/lib/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$b/lib/"
strip --strip-unneeded "$b"/bin/* "$b"/lib/*.so* "$b"/lib/bench/plugins/*.so "$b"/lib/bench/plugins/cuda/*.so \
  "$b"/baseline/bin/* "$b"/baseline/lib/*.so* 2> /dev/null || true
export XZ_OPT=${XZ_OPT:--6 -T0}
tar -C "$stage" -cJf "$out" bench-bundle
bytes=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((bytes / 1048576)) MiB ($bytes bytes; the carry limit is 64 MiB); baseline: ${baseline_note:-none}"
if [ "$out" = .gpu-bundle.tar.xz ] && [ "$bytes" -gt $((60 * 1048576)) ]; then
  echo "gpu-bundle: over 60 MiB: too close to the 64 MiB carry limit" >&2
  exit 1
fi
