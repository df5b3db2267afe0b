#!/usr/bin/env bash
# The launcher of the bundle that scripts/gpu-bundle.sh makes, copied into it as
# `bench-bundle/run`: runs one of the bundle's programs through the bundle's own loader, so that
# nothing of the build tree and nothing of the machine's glibc is needed.
#
#   bench-bundle/run PROGRAM ARGS...       PROGRAM: bench, cuda_check or kernels_test
#   bench-bundle/run --baseline cuda_check ARGS...
#                                          the baseline's cuda_check (an earlier commit's, packed
#                                          by gpu-bundle.sh into baseline/), its own libbench first
#
# The library path, in order: the bundle's lib/ (libbench, the Debian libraries, glibc); its
# lib/bench/plugins/cuda (the plugins' CUDA builds: a plugin's build-tree RUNPATH points into the
# build tree, which the GPU machine does not have); CUDA's libraries and the driver where this
# machine has them; cuDNN from PyTorch's wheels where python3 has them (the SDPA baseline
# dlopens it). The program replaces this shell (exec), so that a signal reaches it.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin libs=""
if [ "${1:-}" = --baseline ]; then
  shift
  if [ ! -d "$here/baseline" ]; then
    echo "bench-bundle/run: this bundle has no baseline (gpu-bundle.sh --no-baseline)" >&2
    exit 2
  fi
  bin=$here/baseline/bin libs="$here/baseline/lib:"
fi
if [ $# -lt 1 ] || [ ! -x "$bin/$1" ]; then
  echo "bench-bundle/run: usage: run [--baseline] PROGRAM ARGS... with PROGRAM one of the programs in $bin" >&2
  exit 2
fi
program=$1
shift
libs="$libs$here/lib:$here/lib/bench/plugins/cuda"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
  [ -d "$d" ] && libs="$libs:$d"
done
for l in libcublasLt.so.13 libcudart.so.13 libcuda.so.1 libnvrtc.so.13; do
  p=$(ldconfig -p 2> /dev/null | awk -v l="$l" '$1 == l {print $NF; exit}')
  [ -n "$p" ] && libs="$libs:$(dirname "$p")"
done
if [ -z "${BENCH_BUNDLE_NO_WHEELS:-}" ] && command -v python3 > /dev/null; then
  wheel_libs=$(python3 -c 'import glob, os, site
seen = []
for d in site.getsitepackages():
    for f in glob.glob(os.path.join(d, "nvidia", "**", "libcudnn.so.9"), recursive=True):
        if os.path.dirname(f) not in seen:
            seen.append(os.path.dirname(f))
print(":".join(seen))' 2> /dev/null)
  [ -n "$wheel_libs" ] && libs="$libs:$wheel_libs"
fi
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$libs" "$bin/$program" "$@"
