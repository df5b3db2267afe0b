#!/usr/bin/env bash
# BENCH_ABI_TAG hashes the plugin API's header set and nothing else (cmake/BenchApiHeaders.cmake):
# on a copy of the tree's headers, an edit of an internal header (kernels/memory.h, the CUDA
# backend, the harness's build_info.h, a harness source) leaves the digest as it was, and an edit
# of an API header (a launcher, a tile verb, a component interface) changes it; the digest of the
# tree itself is the one in the build's abi_tag.h. Usage: abi_tag_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
digest() { cmake -DSOURCE_DIR="$1" -P "$src/cmake/BenchAbiDigest.cmake" 2>&1; }

tree=$(digest "$src")
grep -q "/$tree\"" "$build/include/bench/abi_tag.h" ||
  { echo "the tree's digest $tree is not the build's tag: $(grep BENCH_ABI_TAG "$build/include/bench/abi_tag.h")"; exit 1; }

mkdir -p "$work/t/harness"
cp -r "$src/harness/include" "$work/t/harness/"
cp -r "$src/harness/src" "$work/t/harness/"
cp -r "$src/kernels" "$work/t/"
base=$(digest "$work/t")
[ "$base" = "$tree" ] || { echo "a copy of the headers hashes to $base, the tree to $tree"; exit 1; }

status=0
check() {  # check FILE same|differs
  local f=$1 want=$2
  cp "$work/t/$f" "$work/saved"
  echo "// an edit" >> "$work/t/$f"
  local now
  now=$(digest "$work/t")
  cp "$work/saved" "$work/t/$f"
  if { [ "$want" = same ] && [ "$now" != "$base" ]; } || { [ "$want" = differs ] && [ "$now" = "$base" ]; }; then
    echo "FAIL: editing $f: digest $now (was $base), expected it to stay the $want" | sed 's/stay the differs/change/'
    status=1
  else
    echo "ok: editing $f leaves the digest $([ "$want" = same ] && echo unchanged || echo changed)"
  fi
}
for internal in kernels/memory.h kernels/cuda_backend.h kernels/caching_allocator.h kernels/device_runtime.h \
                kernels/cuda_launchers.h harness/include/bench/build_info.h kernels/memory.cpp \
                kernels/cuda/flash_attention.cuh harness/src/model/model.h; do
  check "$internal" same
done
for api in kernels/norm.h kernels/tile/program.h kernels/tile/cuda_executor.cuh kernels/catalog.h \
           harness/include/bench/component.h harness/include/bench/plugin.h; do
  check "$api" differs
done
exit $status
