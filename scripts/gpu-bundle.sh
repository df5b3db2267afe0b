#!/usr/bin/env bash
# Packs `bench` for the lent GPU machine, which has CUDA but not the project's Debian packages:
# builds the "cuda" preset here (sm_90) and puts into .gpu-bundle.tar.xz (git-ignored) the program,
# libbench, libbench_cuda, the plugins, every other shared library they load (oneDNN, SQLite,
# TOML++, fmt, Google Benchmark, OpenMP, the C++ runtime) and this machine's C library with its
# loader, so that the GPU machine's own glibc does not matter. CUDA's libraries (cudart,
# cuBLASLt) and the driver are the GPU machine's: the same CUDA major version (13) as here.
#
#   scripts/gpu-bundle.sh            then: run(carry=[".gpu-bundle.tar.xz"], "scripts/gpu-check.sh")
#
# scripts/gpu-check.sh runs `bench run` from the bundle through its loader:
#   lib/ld-linux-x86-64.so.2 --library-path lib:<CUDA's> bin/bench ...
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake --preset cuda --log-level=WARNING > /dev/null
cmake --build --preset cuda
stage=$(mktemp -d)
b="$stage/bench-bundle"
mkdir -p "$b/bin" "$b/lib"
cp build/cuda/bin/bench "$b/bin/"
cp -a build/cuda/lib/libbench.so* build/cuda/lib/libbench_cuda.so "$b/lib/"
cp -a build/cuda/lib/bench "$b/lib/"  # lib/bench/plugins, found next to libbench
# Every library the program and the plugins load, except CUDA's, the driver's and our own.
for f in "$b/bin/bench" "$b"/lib/*.so* "$b"/lib/bench/plugins/*.so; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -e 'libcuda\.' -e 'libcudart' -e 'libcublas' -e "$PWD/build" |
  while read -r lib; do cp -L "$lib" "$b/lib/"; done
# The rest of glibc, which CUDA's libraries may load, and its loader.
for lib in libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libresolv.so.2; do
  [ -e "/lib/x86_64-linux-gnu/$lib" ] && cp -L "/lib/x86_64-linux-gnu/$lib" "$b/lib/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$b/lib/"
tar -C "$stage" -cJf .gpu-bundle.tar.xz bench-bundle
rm -rf "$stage"
echo "gpu-bundle: .gpu-bundle.tar.xz, $(du -h .gpu-bundle.tar.xz | cut -f1)"
