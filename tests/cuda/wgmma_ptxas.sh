#!/usr/bin/env bash
# ptxas's verdict on the wgmma flash forward (kernels/cuda/flash_attention_wgmma.cu), which the
# CPU emulator cannot give: no "(C75xx) ... wgmma.mma_async instructions are serialized" message
# (a wgmma under a branch ptxas cannot prove warpgroup-uniform, registers of a wgmma in flight
# redefined: every wgmma of the kernel then waits for the one before) and no spills. Prints the
# registers of each instantiation. About 7 CPU seconds (one sm_90a compile of the file).
# Usage: wgmma_ptxas.sh NVCC SOURCE_DIR
set -euo pipefail
nvcc=$1
src=$2
log=$(mktemp)
trap 'rm -f "$log" "$log.cubin"' EXIT
"$nvcc" -std=c++20 -O3 -DNDEBUG -I"$src/kernels" -I"$src" -I"$src/harness/include" \
  -gencode arch=compute_90a,code=sm_90a -Xptxas -v -cubin -o "$log.cubin" \
  "$src/kernels/cuda/flash_attention_wgmma.cu" > "$log" 2>&1
grep -E "Used [0-9]+ registers" "$log"
status=0
if grep -E "C75[0-9][0-9]" "$log"; then
  echo "wgmma_ptxas: ptxas serializes the wgmma (above)" >&2
  status=1
fi
if grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$log"; then
  echo "wgmma_ptxas: the wgmma forward spills (above)" >&2
  status=1
fi
exit $status
