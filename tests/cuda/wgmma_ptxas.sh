#!/usr/bin/env bash
# ptxas's verdict on the wgmma flash kernels (kernels/cuda/flash_attention_wgmma.cu: the forward
# and the backward's main kernel), which the CPU emulator cannot give: no "(C75xx) ...
# wgmma.mma_async instructions are serialized" message (a wgmma under a branch ptxas cannot prove
# warpgroup-uniform, registers of a wgmma in flight redefined: every wgmma of the kernel then waits
# for the one before), no spills in the forward, and in the backward at most the spills recorded
# in docs/kernels.md ("Flash attention backward on wgmma": a few loop-invariant or epilogue values
# at 255 registers, none in a run of wgmma), so that a change that spills more fails here. Prints
# the registers and spills of each instantiation, the warp-specialized forward's (cp.async and
# TMA) included. About 15 CPU seconds (one sm_90a compile of the file).
# Usage: wgmma_ptxas.sh NVCC SOURCE_DIR
set -euo pipefail
nvcc=$1
src=$2
log=$(mktemp)
trap 'rm -f "$log" "$log.cubin"' EXIT
"$nvcc" -std=c++20 -O3 -DNDEBUG -I"$src/kernels" -I"$src" -I"$src/harness/include" \
  -gencode arch=compute_90a,code=sm_90a -Xptxas -v -cubin -o "$log.cubin" \
  "$src/kernels/cuda/flash_attention_wgmma.cu" > "$log" 2>&1
status=0
if grep -E "C75[0-9][0-9]" "$log"; then
  echo "wgmma_ptxas: ptxas serializes the wgmma (above)" >&2
  status=1
fi
# The warp-specialized forward (kWs, the last template argument 1): all four instantiations
# compiled, each at the 168 registers a thread of __launch_bounds__(384, 1); setmaxnreg then gives
# the producer warpgroup 24 and the consumers 240 (the per-warpgroup figures are in the SASS:
# USETMAXREG, docs/kernels.md), and a spill in either region shows in the spill count below. The
# instantiations without dropout (Lb0) take key tiles of 128 (flash::kWsBlockN: S is m64n128k16),
# those with dropout 64 (at 128 they spilled 24-132 bytes; docs/kernels.md, "Key tiles of 128").
ws=$(grep -cE "Compiling entry function '.*flash_forward_wgmmaILi(64|128)ELb[01]ELb1EEEv" "$log" || true)
ws_regs=$(grep -A3 -E "Compiling entry function '.*flash_forward_wgmmaILi(64|128)ELb[01]ELb1EEEv" "$log" |
  grep -c "Used 168 registers" || true)
if [ "$ws" != 4 ] || [ "$ws_regs" != 4 ]; then
  echo "wgmma_ptxas: expected 4 warp-specialized forward instantiations at 168 registers, got $ws ($ws_regs)" >&2
  status=1
fi
# The warp-specialized forward with TMA loads (flash_forward_wgmma_tma): its four instantiations at
# the same 168 registers, no spill (below); key tiles as above.
tma=$(grep -cE "Compiling entry function '.*flash_forward_wgmma_tmaILi(64|128)ELb[01]EEEv" "$log" || true)
tma_regs=$(grep -A3 -E "Compiling entry function '.*flash_forward_wgmma_tmaILi(64|128)ELb[01]EEEv" "$log" |
  grep -c "Used 168 registers" || true)
if [ "$tma" != 4 ] || [ "$tma_regs" != 4 ]; then
  echo "wgmma_ptxas: expected 4 TMA forward instantiations at 168 registers, got $tma ($tma_regs)" >&2
  status=1
fi
# Per entry function: its name (forward or backward, d_head, dropout), spill stores and registers.
# The backward's budgets, per instantiation (d_head, dropout, dQ by bulk reductions): what each
# spills today (docs/kernels.md: none at d 128 without dropout and at d 64; at d 128 with dropout
# the copies' row offsets, reloaded once a tile, 32 bytes, and with bulk dQ 36 bytes, one more
# reload a tile), so that any more fails.
awk '
  /Compiling entry function/ { name = $0; sub(/.*_cu_[0-9a-f]+[0-9][0-9]/, "", name); sub(/EEEv.*/, "", name) }
  /bytes spill stores/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores,?$/) stores = $i }
  /Used [0-9]+ registers/ {
    for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
    limit = 0
    if (name ~ /backward_wgmmaILi128ELb1ELb0$/) limit = 32
    if (name ~ /backward_wgmmaILi128ELb1ELb1$/) limit = 36
    verdict = stores > limit ? "  <- more than " limit " bytes of spills" : ""
    printf "%-36s %3d registers, %3d bytes of spill stores%s\n", name, regs, stores, verdict
    if (stores > limit) bad = 1
  }
  END { exit bad }
' "$log" || {
  echo "wgmma_ptxas: a wgmma flash kernel spills past its budget (above)" >&2
  status=1
}
exit $status
