#!/usr/bin/env bash
# ptxas's verdict on the wgmma flash kernels (kernels/cuda/flash_attention_wgmma.cu: the forward
# and the backward's main kernel), which the CPU emulator cannot give: no "(C75xx) ...
# wgmma.mma_async instructions are serialized" message (a wgmma under a branch ptxas cannot prove
# warpgroup-uniform, registers of a wgmma in flight redefined: every wgmma of the kernel then waits
# for the one before), no spills in the forward, and in the backward at most the spills recorded
# in docs/flash-backward.md ("Flash attention backward on wgmma": a few loop-invariant or epilogue
# values at 255 registers, none in a run of wgmma), so that a change that spills more fails here.
# Prints the registers and spills of each instantiation, the warp-specialized forward's (cp.async
# and TMA) included. The build's compile of the file writes ptxas's output to a log
# (kernels/CMakeLists.txt), which the test reads; by hand, the script compiles the file itself
# (about 50 CPU seconds, one sm_90a compile).
# Usage: wgmma_ptxas.sh --log PTXAS_LOG  |  wgmma_ptxas.sh NVCC SOURCE_DIR
set -euo pipefail
if [ "$1" = "--log" ]; then
  log=$2
  if [ ! -s "$log" ]; then
    echo "wgmma_ptxas: no ptxas log at $log (built without kernels/CMakeLists.txt's -Xptxas=-v?)" >&2
    exit 1
  fi
else
  nvcc=$1
  src=$2
  log=$(mktemp)
  trap 'rm -f "$log" "$log.cubin"' EXIT
  "$nvcc" -std=c++20 -O3 -DNDEBUG -I"$src/kernels" -I"$src" -I"$src/harness/include" \
    -gencode arch=compute_90a,code=sm_90a -Xptxas -v -cubin -o "$log.cubin" \
    "$src/kernels/cuda/flash_attention_wgmma.cu" > "$log" 2>&1
fi
status=0
if grep -E "C75[0-9][0-9]" "$log"; then
  echo "wgmma_ptxas: ptxas serializes the wgmma (above)" >&2
  status=1
fi
# The warp-specialized forward (kWs, the third template argument 1; the fourth the key tile kN):
# every instantiation the launcher can take (flash::wgmma_forward_key_tile: d 64 and 128, dropout
# (Lb1) or not (Lb0), key tiles of 64 and 128; docs/flash-forward.md, "Key tiles of 128" and
# "Dropout at 128 keys"), each at the 168 registers a thread of __launch_bounds__(384, 1); setmaxnreg
# then gives the producer warpgroup 24 and the consumers 240 (the per-warpgroup figures are in the
# SASS: USETMAXREG, docs/flash-forward.md), and a spill in either region shows in the spill count
# below. The same eight for the TMA variant (flash_forward_wgmma_tma, <D, kDropout, kN>).
expected_ws() {  # PREFIX INFIX: the eight names' regex, PREFIX ILi<D>ELb<dropout> INFIX ELi<kN> EEEv
  local d dropout kn out=""
  for d in 64 128; do
    for dropout in 0 1; do
      for kn in 64 128; do out="$out|$1ILi${d}ELb${dropout}$2ELi${kn}EEEv"; done
    done
  done
  echo "${out#|}"
}
for variant in "flash_forward_wgmma ELb1" "flash_forward_wgmma_tma "; do
  read -r prefix infix <<< "$variant"
  want=$(expected_ws "$prefix" "$infix")
  names=$(grep -oE "Compiling entry function '[^']*'" "$log" | grep -oE "${prefix}ILi[0-9]+ELb[01](ELb1)?ELi[0-9]+EEEv" |
    sort -u || true)
  got=$(echo "$names" | grep -cxE "$want" || true)
  all=$(echo "$names" | grep -c . || true)
  regs=$(grep -A3 -E "Compiling entry function '.*(${want})" "$log" | grep -c "Used 168 registers" || true)
  if [ "$got" != 8 ] || [ "$all" != 8 ] || [ "$regs" != 8 ]; then
    echo "wgmma_ptxas: expected the 8 $prefix instantiations (d 64/128, dropout or not, key tiles 64 and 128)" \
      "at 168 registers, got $all ($got of them expected, $regs at 168): $(echo "$names" | tr '\n' ' ')" >&2
    status=1
  fi
done
# The backward's main kernel: 8 instantiations with cp.async copies of Q and dO
# (flash_backward_wgmma) and the same 8 with TMA loads (flash_backward_wgmma_tma), <D, kDropout,
# kBulkDq> each: d 64 and 128, dropout or not, dQ by atomics or bulk reductions.
for prefix in flash_backward_wgmma flash_backward_wgmma_tma; do
  names=$(grep -oE "Compiling entry function '[^']*'" "$log" | grep -oE "[0-9]${prefix}ILi[0-9]+ELb[01]ELb[01]EEEv" |
    sort -u || true)
  got=$(echo "$names" | grep -cE "^[0-9]${prefix}ILi(64|128)ELb[01]ELb[01]EEEv$" || true)
  if [ "$got" != 8 ]; then
    echo "wgmma_ptxas: expected the 8 $prefix instantiations (d 64/128, dropout or not, bulk dQ or not), got $got" >&2
    status=1
  fi
done
# The warp-specialized backward (flash_backward_wgmma_ws, <D, kDropout, kBulkDq>): the 8
# instantiations the launcher takes (d 64 and 128, dropout or not, atomics or bulk dQ), each at
# the 168 registers a thread of __launch_bounds__(384, 1) with no spill (below): setmaxnreg then
# gives the producer 24 and the consumers 240, and a spill in the consumers' region (past 240)
# shows in the spill count ("Warp-specialized backward" and "Dropout at d 128 in 240 registers" in
# docs/flash-backward.md).
names=$(grep -oE "Compiling entry function '[^']*'" "$log" |
  grep -oE "[0-9]flash_backward_wgmma_wsILi[0-9]+ELb[01]ELb[01]EEEv" | sort -u || true)
got=$(echo "$names" | grep -cE "^[0-9]flash_backward_wgmma_wsILi(64|128)ELb[01]ELb[01]EEEv$" || true)
regs=$(grep -A3 -E "Compiling entry function '.*flash_backward_wgmma_wsILi" "$log" | grep -c "Used 168 registers" || true)
all=$(echo "$names" | grep -c . || true)
if [ "$got" != 8 ] || [ "$all" != 8 ] || [ "$regs" != 8 ]; then
  echo "wgmma_ptxas: expected the 8 flash_backward_wgmma_ws instantiations (d 64 and 128, dropout or not," \
    "bulk dQ or not) at 168 registers, got $all ($got of them expected, $regs at 168)" >&2
  status=1
fi
# Per entry function: its name (forward or backward, d_head, dropout), spill stores and registers.
# The backward's budgets, per instantiation (d_head, dropout, dQ by bulk reductions): what each
# spills today (docs/flash-backward.md: none at d 128 without dropout and at d 64; at d 128 with dropout
# the copies' row offsets, reloaded once a tile, 32 bytes, and with bulk dQ 36 bytes, one more
# reload a tile; with TMA loads of Q and dO 36 and 48 bytes, "TMA loads of Q and dO"), so that
# any more fails. The TMA kernels at d 128 without dropout also at most 240 registers (their
# __maxnreg__, flash::wgmma_backward_tma_max_regs: the consumers' budget of warp specialization,
# "240 registers for the TMA backward"), so that losing the cap fails here.
awk '
  /Compiling entry function/ { name = $0; sub(/.*_cu_[0-9a-f]+[0-9][0-9]/, "", name); sub(/EEEv.*/, "", name) }
  /bytes spill stores/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores,?$/) stores = $i }
  /Used [0-9]+ registers/ {
    for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
    limit = 0
    cap = 255
    if (name ~ /backward_wgmma_tmaILi128ELb0ELb[01]$/) cap = 240
    if (name ~ /backward_wgmmaILi128ELb1ELb0$/) limit = 32
    if (name ~ /backward_wgmmaILi128ELb1ELb1$/) limit = 36
    if (name ~ /backward_wgmma_tmaILi128ELb1ELb0$/) limit = 36
    if (name ~ /backward_wgmma_tmaILi128ELb1ELb1$/) limit = 48
    verdict = stores > limit ? "  <- more than " limit " bytes of spills" : ""
    if (regs > cap) verdict = verdict "  <- more than " cap " registers"
    printf "%-36s %3d registers, %3d bytes of spill stores%s\n", name, regs, stores, verdict
    if (stores > limit || regs > cap) bad = 1
  }
  END { exit bad }
' "$log" || {
  echo "wgmma_ptxas: a wgmma flash kernel spills past its budget or uses more registers than its cap (above)" >&2
  status=1
}
exit $status
