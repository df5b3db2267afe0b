#!/usr/bin/env bash
# Configures and builds bench in build/ (preset "default": Release, CUDA kernels when nvcc is
# found). Extra arguments go to the configure step, e.g. scripts/build.sh -DBENCH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake --preset default --log-level=WARNING "$@" > /dev/null
cmake --build --preset default
