#!/usr/bin/env python3
"""Mutants of the GPU code that the CPU runs: proof that its tests can fail.

Each mutant is one small edit of a header (a limit one off, a barrier or fence left out, an index
that drops a term, a row walk's step): the kind of slip that the CPU's emulation must catch before
a GPU ever runs the code. For each one this script puts the edit in, rebuilds the test of its set,
runs it, counts the failures and puts the file back as it was. A mutant marked `killed` must fail
some test; one that passes is a gap in the tests, and the script exits 1. Three sets:

  flash  the flash attention kernels (kernels/cuda/flash_attention_*.cuh) and the warp emulator
         they run on (tests/kernels/warp_emulator.h, tests/support/fibers.h), against the emulation
         tests of kernels_test (FlashEmulation*, Flash32*, the warp / wgmma / TMA / bulk / barrier
         emulators' own); about a minute a mutant on two cores (nvcc rebuilds the kernel's CUDA
         unit beside the test's; an emulator mutant rebuilds the test alone)
  tile   the CUDA executor's per-thread loads and stores (kernels/tile/thread_access.h, which the
         emulated-block executor runs for every lane) and its layout, against tile_test; about 20 s
         a mutant (the header-only test alone is rebuilt; the kernels' emulated-target tests see
         the same code, but rebuilding the kernel library for them, --kernels, takes 5 to 6
         minutes a mutant)
  rows   the row kernels' families (kernels/NAME.h and NAME.cpp: the norms, softmax, cross-entropy,
         RoPE, AdamW, the activations, the element-wise, dropout, soft-cap, clamp, GEMM-epilogue,
         probe and attention row programs: what a device runs and the host does not, the chunked
         rows, the tails' masks and padding), against kernels_test's tests of the family
         (kernels/norm.h: *Norm*) on the host targets: cpu, emulated (the device's programs and
         grids) and guarded. Use a build without CUDA (`cmake --preset cpu`, --build build/cpu):
         the family and kernels_test are rebuilt, 3 s (a .cpp alone) to 4 minutes a mutant on two
         cores; a CUDA build recompiles the CUDA pass's unit too

Some edits change no result by design, and are listed as `equivalent` with the reason (the limits
are multiples of the tiles, a row past the sequence's end is zeros, a skip only saves time): kept
so that the reasoning stays written down and their text checked (`--check`); --all runs them too.

  scripts/mutants.py [--build DIR] [--set flash|tile|rows] [--all] [NAME...]  run the killed mutants
                                                                          (of a set, or these)
  scripts/mutants.py --kernels --set tile [NAME...]    the tile set against kernels_test's
                                                       emulated-target tests (*emulated*)
  scripts/mutants.py --list                            the mutants, their set and expectation
  scripts/mutants.py --check                           every mutant's text occurs once in its file
                                                       (tests/CMakeLists.txt's scripts.mutants)

It refuses to touch a file with uncommitted changes, and restores the file on Ctrl-C.
docs/flash-forward.md, "The mask's limits on the tiles' edges", has the campaign that made the
flash set; docs/kernels.md, "The CUDA executor's own code in CI", the tile set's.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Each set: the target to rebuild, its binary and the tests to run (a gtest filter).
SETS = {
    'flash': ('kernels_test', ('*FlashEmulation*:*Flash32*:*FlashBackwardGrid*:*TmaEmulation*:*WgmmaEmulation*:'
                               '*BulkEmulation*:*SyncEmulation*:*WarpEmulation*:*FiberTeam*')),
    'tile': ('tile_test', '*'),
    # The row kernels: kernels_test's tests of the mutated family on every host target (cpu,
    # emulated, guarded), by the file's name (kernels/norm.h: *Norm*; rows_filter).
    'rows': ('kernels_test', None),
}
# --kernels: the tile set against the kernels' emulated-target tests instead (the whole kernel
# library rebuilt for each mutant: 5 to 6 minutes a mutant on two cores).
KERNELS = ('kernels_test', '*emulated*')

WF = 'kernels/cuda/flash_attention_wgmma_kernels.cuh'
KF = 'kernels/cuda/flash_attention_kernels.cuh'
BK = 'kernels/cuda/flash_attention_backward_kernels.cuh'
WB = 'kernels/cuda/flash_attention_wgmma_backward_kernels.cuh'
PR = 'kernels/cuda/flash_attention_wgmma_backward_producer.cuh'
F32 = 'kernels/cuda/flash_attention_f32_kernels.cuh'
F32B = 'kernels/cuda/flash_attention_f32_backward_kernels.cuh'
TA = 'kernels/tile/thread_access.h'
LAY = 'kernels/tile/layout.h'
NH = 'kernels/norm.h'
NC = 'kernels/norm.cpp'
SM = 'kernels/softmax.h'
CE = 'kernels/cross_entropy.h'
RH = 'kernels/rope.h'
AH = 'kernels/adamw.h'
ACT = 'kernels/activation.h'
EWH = 'kernels/elementwise.h'
EWC = 'kernels/elementwise.cpp'
DRH = 'kernels/dropout.h'
DRC = 'kernels/dropout.cpp'
SCH = 'kernels/softcap.h'
CLH = 'kernels/clamp.h'
CLC = 'kernels/clamp.cpp'
GEH = 'kernels/gemm_epilogue.h'
GEC = 'kernels/gemm_epilogue.cpp'
PBH = 'kernels/probes.h'
PBC = 'kernels/probes.cpp'
AFH = 'kernels/attention_fused.h'
AFC = 'kernels/attention_fused.cpp'
ATH = 'kernels/attention.h'
EMU = 'tests/kernels/warp_emulator.h'
WGE = 'tests/kernels/wgmma_emulator.h'
MBE = 'tests/kernels/mbarrier_emulator.h'
BUE = 'tests/kernels/bulk_emulator.h'
FIB = 'tests/support/fibers.h'

MULTIPLE = 'equivalent: the tiles start at multiples of 64 (warps of 32, slabs of 16), so the limit one off never falls between them'
PAST_END = 'equivalent: a query past the sequence is a zero row (Q, dO, lse and D), so its P V and dS add nothing'

# (name, file, text, replacement, expectation)
MUTANTS = [
    # The wgmma forward (flash_forward_wgmma): the mask, the online softmax, the ring and its barriers.
    ('fwd_mask_end', WF, 'const bool visible = c < end &&', 'const bool visible = c <= end &&', 'killed'),
    ('fwd_mask_causal', WF, '&& dc <= causal_at &&', '&& dc < causal_at &&', 'killed'),
    ('fwd_mask_window', WF, '&& dc > window_at;', '&& dc >= window_at;', 'killed'),
    ('fwd_negative_scale', WF, 'if (softcap > 0.f || scale2 < 0.f) {', 'if (softcap > 0.f) {', 'killed'),
    ('fwd_alpha_all_masked', WF, 'alpha[r] = m_new == -INFINITY ? 1.f : th.exp2(m[r] - m_new);',
     'alpha[r] = th.exp2(m[r] - m_new);', 'killed'),
    ('fwd_base_all_masked', WF, 'const float base = m_new == -INFINITY ? 0.f : m_new;', 'const float base = m_new;',
     'killed'),
    ('fwd_empty_first_tile', WF, 'if (n0 != n_begin) th.mbar_arrive(empty', 'if (true) th.mbar_arrive(empty',
     'killed'),
    ('fwd_rescale_row0_only', WF, 'if (alpha[0] != 1.f || alpha[1] != 1.f) {', 'if (alpha[0] != 1.f) {', 'killed'),
    ('fwd_store_past_end', WF, '    if (query >= n_t) continue;\n    const float inv', '    const float inv', 'killed'),
    ('fwd_last_turn', WF, '    if (wg == 0) th.named_arrive(kWsTurn + 1, kWgThreads);\n', '', 'killed'),
    ('fwd_ws_fence', WF, '      if constexpr (!kTma) th.fence_proxy_async();\n      th.named_sync', '      th.named_sync',
     'killed'),
    ('fwd_producer_wait', WF, '      th.cp_async_wait(0);  // no copy outlives its thread\n', '',
     'equivalent: the consumers wait on the full mbarrier, which completes when the copies land, '
     'and the block lives until they have'),
    ('fwd_step_wait', WF, '        th.cp_async_wait(1);\n      } else {', '        th.cp_async_wait(2);\n      } else {',
     'killed'),
    ('fwd_step_sync', WF, '      th.sync();\n      if (n0 + kN < n_end) {', '      if (n0 + kN < n_end) {', 'killed'),
    ('fwd_tma_bytes', WF, 'kBox * 2 * (kN / kBoxRows) * (D / 64));', 'kBox * (kN / kBoxRows) * (D / 64));', 'killed'),
    ('fwd_gqa_head', WF, 'kv = h / (n_h / n_kv);', 'kv = h % n_kv;', 'killed'),
    ('fwd_row_max_units', WF, 'row_max[at] = m[r] * kLn2;', 'row_max[at] = m[r];', 'killed'),
    ('fwd_hash_row', WF, 'row8 * static_cast<uint64_t>((i % 4) / 2)', 'row8 * static_cast<uint64_t>((i % 4) % 2)',
     'killed'),
    ('fwd_first_turn', WF, 'if (wg == 1) th.named_arrive(kWsTurn, kWgThreads);',
     'if (wg == 0) th.named_arrive(kWsTurn + 1, kWgThreads);', 'killed'),
    ('fwd_s_wait', WF, '    th.template wgmma_wait<1>();\n    th.wgmma_hold(s);\n\n    // The mma.sync',
     '    th.template wgmma_wait<2>();\n    th.wgmma_hold(s);\n\n    // The mma.sync', 'killed'),
    ('fwd_first_key', WF, 'window > 0 && m0 + 1 - window > 0 ? m0 + 1 - window : 0;',
     'window > 0 && m0 + 2 - window > 0 ? m0 + 2 - window : 0;', 'killed'),
    # tile_mask, shared by the mma.sync and wgmma forwards.
    ('tile_interior_causal', KF, '(!causal || kCols - 1 <= k.causal)', '(!causal || kCols - 2 <= k.causal)', MULTIPLE),
    ('tile_interior_window', KF, '(window <= 0 || 0 - (kRows - 1) > k.window);',
     '(window <= 0 || 0 - (kRows - 2) > k.window);', 'killed'),
    ('tile_empty_window', KF, '(window > 0 && kCols - 1 <= k.window);', '(window > 0 && kCols - 2 <= k.window);',
     'killed'),
    ('tile_empty_causal', KF, '(causal && 0 - (kRows - 1) > k.causal)', '(causal && 0 - (kRows - 2) > k.causal)',
     MULTIPLE),
    ('tile_clamp_causal', KF, 'k.causal = c > 4 * kCols ? 4 * kCols :', 'k.causal = c > kCols ? kCols :',
     'equivalent: past kCols every column of the tile is at or before every row, clamped or not'),
    ('tile_clamp_window', KF, 'w > 4 * kCols ? 4 * kCols : static_cast<int>(w);', 'w > kCols ? kCols : static_cast<int>(w);',
     'equivalent: past kCols the window hides the whole tile from every row, clamped or not'),
    ('fwd_skip_empty_tile', KF, '    if (mask.empty) continue;\n', '',
     'equivalent: an empty tile masks every logit, and the all-masked guards keep its P 0 (only time is lost)'),
    # The backward's slabs (both backwards).
    ('slab_active_window', BK, '(window <= 0 || k_last + window > m0);', '(window <= 0 || k0 + window > m0);', 'killed'),
    ('slab_interior_window', BK, '(window <= 0 || k0 + window > m0 + kBwdBlockM - 1);',
     '(window <= 0 || k0 + window > m0 + kBwdBlockM - 2);', 'killed'),
    ('slab_active_causal', BK, '(!causal || k0 <= q_last)', '(!causal || k0 < q_last)', 'killed'),
    ('slab_interior_causal', BK, '(!causal || k_last <= m0)', '(!causal || k_last <= m0 + 1)', MULTIPLE),
    ('element_window', BK, '(a.rel.window == 0 || diff > -a.rel.window);', '(a.rel.window == 0 || diff >= -a.rel.window);',
     'killed'),
    ('element_query_end', BK, 'kl < a.rel.k_end && ql < a.rel.q_end &&', 'kl < a.rel.k_end &&', PAST_END),
    ('slab_window_of_t', BK, 'r.window = window > 0 && window < n_t ?', 'r.window = window > 0 && window < n_t - 1 ?',
     'killed'),
    # The wgmma backward (flash_backward_wgmma) and its producer warpgroup.
    ('bwd_query_walk_end', WB, 'n0 + kBwdBlockN + window - 1 < n_t ? n0 + kBwdBlockN + window - 1 : n_t;',
     'n0 + kBwdBlockN + window - 2 < n_t ? n0 + kBwdBlockN + window - 2 : n_t;', 'killed'),
    ('bwd_dkdv_past_end', WB, '    if (key >= n_t) continue;\n    uint16_t* dst_k', '    uint16_t* dst_k', 'killed'),
    ('bwd_dq_past_end', WB, '        if (query >= n_t) continue;\n        float* dst = dq_accum', '        float* dst = dq_accum',
     'equivalent: a row past the end has dS 0 (masked), so its atomics add +0 to the next head\'s rows, or '
     'past the last into the workspace\'s D (the tests pad dq_accum by a tile)'),
    ('bwd_dq_kept_past_end', WB, '        if (m0 + row + 8u * r >= n_t) continue;\n', '',
     'equivalent: as bwd_dq_past_end, on the dropout-at-d-128 path'),
    ('bwd_bulk_past_end', WB, 'if (t < 2 && m0 + dq_row < n_t)', 'if (t < 2)', 'killed'),
    ('bwd_bulk_final_wait', WB, '  if constexpr (kBulkDq && !kDqWriter) {\n    th.template bulk_wait<0>();\n  }',
     '  if constexpr (kBulkDq && !kDqWriter) {\n  }', 'killed'),
    ('bwd_ds_fence', WB, '    th.fence_proxy_async();  // this thread\'s dS stores, visible to wgmma\n', '', 'killed'),
    ('bwd_keep_scale', WB, '(kept >> (4 * j + e)) & 1u ? 1.f / (1.f - dropout) : 0.f;',
     '(kept >> (4 * j + e)) & 1u ? 1.f : 0.f;', 'killed'),
    ('bwd_d_column', WB, 'lse_t[kBwdBlockM + 8 * j + 2 * t + e % 2]', 'lse_t[kBwdBlockM + 8 * j + 2 * t]', 'killed'),
    ('bwd_tile_barrier', WB, '    consumers_sync();\n    if (h1 < h_first + group) {', '    if (h1 < h_first + group) {',
     'killed'),
    ('bwd_bulk_read_wait', WB, '    if constexpr (kBulkDq && !kDqWriter) th.template bulk_wait_read<0>();\n', '',
     'killed'),
    ('bwd_dq_column', WB, '* D + wg * (D / 2) + 2 * t;', '* D + wg * (D / 2);', 'killed'),
    ('bwd_stats_half', WB, 'if (!kWs && th.tid() < 2 * kBwdBlockM) lse_s[th.tid()] = stat;',
     'if (!kWs && th.tid() < kBwdBlockM) lse_s[th.tid()] = stat;', 'killed'),
    ('bwd_kv_fence', WB,
     '    th.fence_proxy_async();  // this thread\'s landed K and V, visible to wgmma (the loop\'s barrier for every thread\'s)\n',
     '', 'killed'),
    ('bwd_stage_ring', WB, 'stage = kStages == 2 ? stage ^ 1 : (stage + 1 == kStages ? 0 : stage + 1)',
     'stage = kStages == 2 ? stage ^ 1 : (stage + 1 == kStages ? 1 : stage + 1)', 'killed'),
    ('stats_warp_past_end', PR, 'const bool in = mp + l + r < n_t;', 'const bool in = true;', 'killed'),
    ('dq_writer_past_end', PR, 'const int rows = n_t - mw < kBwdBlockM ? static_cast<int>(n_t - mw) : kBwdBlockM;',
     'const int rows = kBwdBlockM;', 'killed'),
    ('dq_writer_final_wait', PR, '  th.template bulk_wait<0>();\n}', '}', 'killed'),
    # The float32 kernels (flash32: what a float32 model's attention runs on CUDA).
    ('f32_first_key_tile', F32, 'begin = window > 0 && hi0 - window > 0 ? (hi0 - window) / kBlock * kBlock : 0;',
     'begin = window > 0 && hi0 - window > 0 ? (hi0 - window + 1) / kBlock * kBlock : 0;', 'killed'),
    ('f32_query_walk_end', F32, 'end = window > 0 && last_key + window < n_t ? last_key + window : n_t;',
     'end = window > 0 && last_key + window < n_t ? last_key + window - 1 : n_t;', 'killed'),
    ('f32_interior_window', F32, 'return causal ? m0 + kBlock - window <= n0 : n_t - window <= n0;',
     'return causal ? m0 + kBlock - window <= n0 + 1 : n_t - window <= n0;', 'killed'),
    ('f32_interior_band', F32, 'return causal ? m0 + kBlock - window <= n0 : n_t - window <= n0;',
     'return causal ? m0 + kBlock - window <= n0 : n_t - window <= n0 + 1;', 'killed'),
    ('f32_band_tiles', F32, 'end = window > 0 && last_key < n_t - window ? 0 : n_t;',
     'end = window > 0 && last_key <= n_t - window ? 0 : n_t;', 'killed'),
    ('f32_band_first_tile', F32, 'const int64_t hi0 = causal ? m0 + 1 : n_t;', 'const int64_t hi0 = causal ? m0 + 1 : n_t - 1;',
     'equivalent: the band\'s first tile one earlier at most, its keys masked (only time is lost)'),
    ('f32_softcap_derivative', F32B, '  if (p.softcap > 0.f) ds *= 1.f - (x / p.softcap) * (x / p.softcap);\n', '', 'killed'),
    ('f32_alpha_all_masked', F32, 'const float alpha = m_new == -INFINITY ? 1.f : th.exp2(m[i] - m_new);',
     'const float alpha = th.exp2(m[i] - m_new);', 'killed'),
    ('f32_base_all_masked', F32, 'const float base = m_new == -INFINITY ? 0.f : m_new;', 'const float base = m_new;',
     'killed'),
    ('f32_tile_sync', F32, '    th.sync();  // every thread is done with the previous tile\'s K, V and P\n', '', 'killed'),
    # The forwards' log-sum-exp, which each backward reads (the wgmma forward's only on the GPU: the
    # emulated backwards read the mma.sync forward's).
    ('fwd_lse', WF, '(m[r] + log2f(l[r])) * kLn2', '(m[r] + logf(l[r])) * kLn2', 'killed'),
    # The mma.sync forward's body (flash_forward): fragment addresses, the stages and their barriers,
    # the online softmax across a quad, the rescale, the dropout hash, the heads.
    ('mma_fwd_a_fragment', KF, 'a_row = warp * kFwdWarpRows + (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);',
     'a_row = warp * kFwdWarpRows + (lane % 8) + 8 * (lane / 16), a_col = 8 * ((lane / 8) % 2);', 'killed'),
    ('mma_fwd_k_fragment', KF, 'const int k_row = (lane % 8) + 8 * (lane / 16), k_col = 8 * ((lane / 8) % 2);',
     'const int k_row = (lane % 8) + 8 * ((lane / 8) % 2), k_col = 8 * (lane / 16);', 'killed'),
    ('mma_fwd_v_fragment', KF, 'const int v_row = (lane % 8) + 8 * ((lane / 8) % 2), v_col = 8 * (lane / 16);',
     'const int v_row = (lane % 8) + 8 * (lane / 16), v_col = 8 * ((lane / 8) % 2);', 'killed'),
    ('mma_fwd_a_from_p', KF, 'a[1] = pack_rn(lo[2], lo[3]);', 'a[1] = pack_rn(hi[0], hi[1]);', 'killed'),
    ('mma_fwd_stage_sync', KF, '    th.sync();  // every warp is done with the other stage (the tile before this one)\n', '',
     'killed'),
    ('mma_fwd_landed_sync', KF, '    th.sync();\n    if constexpr (kQRegs) {', '    if constexpr (kQRegs) {', 'killed'),
    ('mma_fwd_wait', KF, 'th.cp_async_wait(1);', 'th.cp_async_wait(2);', 'killed'),
    ('mma_fwd_next_stage', KF, 'Row* next = k_s + 2 * kBlockN * (stage ^ 1);', 'Row* next = k_s + 2 * kBlockN * stage;',
     'killed'),
    ('mma_fwd_v_rows', KF, 'src + off + 8 * kParts * j', 'src + (off & 0) + 8 * kParts * j', 'killed'),  # V read from K
    ('mma_fwd_v_head', KF, 'const int v_off = n_kv * D;', 'const int v_off = n_h * D;', 'killed'),
    ('mma_fwd_gqa_head', KF, 'kv = h / (n_h / n_kv);', 'kv = h % n_kv;', 'killed'),
    ('mma_fwd_max_unscaled', KF, 'fmaxf(m[mt][r], tile_max * fac);', 'fmaxf(m[mt][r], tile_max);', 'killed'),
    ('mma_fwd_quad_max', KF, 'tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 2));',
     'tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 4));', 'killed'),
    ('mma_fwd_sum_rescale', KF, 'l[mt][r] = l[mt][r] * alpha[r] + sum;', 'l[mt][r] = l[mt][r] + sum;', 'killed'),
    ('mma_fwd_o_rescale_row', KF, 'o[mt][i][2] *= alpha[1];', 'o[mt][i][2] *= alpha[0];', 'killed'),
    ('mma_fwd_rescale_skip', KF, 'if (alpha[0] != 1.f || alpha[1] != 1.f) {', 'if (alpha[0] != 1.f) {', 'killed'),
    ('mma_fwd_quad_sum', KF, '      l[mt][r] += th.shfl_xor(l[mt][r], 2);\n', '', 'killed'),
    ('mma_fwd_softcap_out', KF, 'cap_out = softcap * kLog2e;', 'cap_out = softcap;', 'killed'),
    ('mma_fwd_dropout_rows', KF, 'row8 * static_cast<uint64_t>(2 * mt + e / 2)', 'row8 * static_cast<uint64_t>(mt + e / 2)',
     'killed'),
    ('mma_fwd_dropout_keys', KF, 'kG * static_cast<uint64_t>(j * 8 + e % 2);', 'kG * static_cast<uint64_t>(j * 8 + e);',
     'killed'),
    ('mma_fwd_row_max', KF, 'row_max[at] = m[mt][r] * kLn2;', 'row_max[at] = m[mt][r];', 'killed'),
    ('mma_fwd_lse', KF, '(m[mt][r] + log2f(l[mt][r])) * kLn2', '(m[mt][r] + logf(l[mt][r])) * kLn2', 'killed'),
    ('mma_fwd_out_batch', KF, 'out + (static_cast<int64_t>(b) * n_t + query) * n_h * D', 'out + query * n_h * D', 'killed'),
    ('mma_fwd_heavy_first', KF, '(causal ? n_blocks - 1 - th.block_y() : th.block_x())', '(causal ? th.block_y() + 0 * n_blocks : th.block_x())',
     'equivalent: only the order in which the query blocks start (forward_grid), every block is still run once'),
    ('mma_fwd_causal_end', KF, 'const int64_t n_end = causal ? block_end : n_t;', 'const int64_t n_end = causal ? n_t + 0 * block_end : n_t;',
     'equivalent: the tiles past the block\'s last query are empty for all four warps and skipped (only time is lost)'),
    # The mma.sync backward's body (flash_backward_prep, flash_backward): D's reduction and dQ's zeros,
    # fragment addresses, the stages, the next tile's statistics, the barriers around dS^T, the
    # element step's dropout and soft-cap, the heads of dK, dV.
    ('mma_bwd_prep_reduce', BK, 'for (int o = 16; o > 0; o /= 2) acc += th.shfl_xor(acc, o);',
     'for (int o = 16; o > 1; o /= 2) acc += th.shfl_xor(acc, o);', 'killed'),
    ('mma_bwd_prep_zero', BK, 'dq_accum[row * D + d] = 0.f;', 'dq_accum[row * D + d] += 0.f;', 'killed'),  # not zeroed
    ('mma_bwd_n_fragment', BK, 'const int n_row = (lane % 8) + 8 * (lane / 16), n_col = 8 * ((lane / 8) % 2);',
     'const int n_row = (lane % 8) + 8 * ((lane / 8) % 2), n_col = 8 * (lane / 16);', 'killed'),
    ('mma_bwd_dq_half', BK, 'dq_col = (warp / (kBwdBlockM / 16)) * (D / 2);', 'dq_col = (warp % 2) * (D / 2);', 'killed'),
    ('mma_bwd_next_stage', BK, 'Row* next = qdo_s + 2 * kBwdBlockM * (stage ^ 1);', 'Row* next = qdo_s + 2 * kBwdBlockM * stage;',
     'killed'),
    ('mma_bwd_next_stats', BK, '(static_cast<int64_t>(b) * n_h + h1) * n_t, m1, n_t);',
     '(static_cast<int64_t>(b) * n_h + h) * n_t, m1, n_t);', 'killed'),
    ('mma_bwd_tile_sync', BK, '    th.sync();  // this tile\'s Q, dO, lse and D are in shared memory for every warp\n', '',
     'killed'),
    ('mma_bwd_ds_sync', BK, '    th.sync();  // dS^T is complete\n', '', 'killed'),
    ('mma_bwd_dq_slab_skip', BK, '      if (!slab_mask(n0 + kk * 16, m0, n_t, window, causal).active) continue;\n', '',
     'killed'),
    ('mma_bwd_dropout_dp', BK, 'dp = p * (dp * keep - a.lse_s[kBwdBlockM + ql]) * dscale;',
     'dp = p * (dp - a.lse_s[kBwdBlockM + ql]) * dscale;', 'killed'),
    ('mma_bwd_capped_dscale', BK, 'return (1.f - s * s) * a.scale;', 'return (1.f - 0.f * s) * a.scale;', 'killed'),
    ('mma_bwd_dropout_index', BK, '* n_t + m0) * n_t + k0,', '* n_t + m0) * n_t + n0,', 'killed'),
    ('mma_bwd_causal_begin', BK, 'const int64_t m_begin = causal ? n0 : 0;', 'const int64_t m_begin = causal ? n0 + kBwdBlockM : 0;',
     'killed'),
    ('mma_bwd_dq_pair', BK, 'th.atomic_add2(dst + i * 8 + 2 * t, dq[i][2 * row], dq[i][2 * row + 1]);',
     'th.atomic_add2(dst + i * 8 + 2 * t, dq[i][2 * row + 1], dq[i][2 * row]);', 'killed'),
    ('mma_bwd_dv_head', BK, 'uint16_t* dst_v = dst_k + static_cast<int64_t>(n_kv) * D;',
     'uint16_t* dst_v = dst_k + static_cast<int64_t>(n_h) * D;', 'killed'),
    # The float32 kernels' bodies: the row's max across its 16 threads, the rescale, the barrier
    # before P V, the heads of the group, dropout in dS.
    ('f32_row_max_lanes', F32, 'for (int lane = 1; lane < kCols; lane *= 2) tile_max',
     'for (int lane = 1; lane < kCols / 2; lane *= 2) tile_max', 'killed'),
    ('f32_o_rescale', F32, 'for (int j = 0; j < kNC; ++j) o[i][j] *= alpha;', 'for (int j = 0; j < kNC; ++j) o[i][j] *= 1.f;',
     'killed'),
    ('f32_pv_sync', F32, '    th.sync();\n    product<kNC, kBlock>(o, p_t,', '    product<kNC, kBlock>(o, p_t,', 'killed'),
    ('f32_row_max', F32, 'row_max[at] = m[i] * kLn2;', 'row_max[at] = m[i];', 'killed'),
    ('f32_bwd_group_heads', F32B, 'for (int h = kv * group; h < (kv + 1) * group; ++h)',
     'for (int h = kv * group; h < kv * group + 1; ++h)', 'killed'),
    ('f32_bwd_dropout_ds', F32B, 'float ds = prob * (dp * keep - d);', 'float ds = prob * (dp - d);', 'killed'),
    ('f32_bwd_dkdv_sync', F32B, '      th.sync();\n      product<kNC, kBlock>(dv, p_s,', '      product<kNC, kBlock>(dv, p_s,',
     'killed'),
    ('f32_bwd_visible_ds', F32B, 'return {prob * keep, visible ? ds * p.scale : 0.f};', 'return {prob * keep, ds * p.scale};',
     'equivalent: prob is 0 where the pair is not visible, so ds is 0 there already (dp and D are finite)'),
    # The warp emulator itself (what the flash kernels run on in CI): cp.async landing early and late,
    # its waits and zero fill, the warps' order between barriers, mma.sync's and ldmatrix's fragments.
    ('emu_always_early', EMU, 'if ((commits_++ + tid_) % 2 == 0) land(groups_.back());',
     'if ((commits_++ + tid_) % 1 == 0) land(groups_.back());', 'killed'),
    ('emu_never_early', EMU, 'if ((commits_++ + tid_) % 2 == 0) land(groups_.back());',
     'if ((commits_++ + tid_) % 2 == 2) land(groups_.back());', 'killed'),
    ('emu_wait_one_short', EMU, 'while (static_cast<int>(groups_.size()) > pending) {',
     'while (static_cast<int>(groups_.size()) > pending + 1) {', 'killed'),
    ('emu_zero_fill', EMU, '        std::memset(c.dst, 0, 16);\n', '        std::memcpy(c.dst, c.src, 16);\n', 'killed'),
    ('emu_warps_in_order', FIB, '    std::shuffle(gangs_.begin(), gangs_.end(), random_);\n', '', 'killed'),
    ('emu_mma_b_column', EMU, 'const float b_hi = bf16_at(w.b[p][b_lane + 4][k / 8], k % 2);',
     'const float b_hi = bf16_at(w.b[p][b_lane + 1][k / 8], k % 2);', 'killed'),
    ('emu_ldmatrix_trans', EMU, 'lo = rows[8 * m + 2 * (lane % 4)][lane / 4];', 'lo = rows[8 * m + lane / 4][2 * (lane % 4)];',
     'killed'),
    # The sm_90 emulators' own checks (their planted-fault tests: WgmmaEmulation, TmaEmulation,
    # BulkEmulation): a wgmma's accumulators not poisoned in flight, no fence.proxy.async needed, no
    # wgmma.fence needed, a TMA destination readable before its phase, bulk additions never early.
    ('emu_wgmma_no_poison', WGE, '  wgmma_poison(op.d, half, kWgmmaPoisonD);\n', '  (void)half;\n', 'killed'),
    ('emu_wgmma_unfenced', WGE, 'else if (unfenced[at] != 0)', 'else if (unfenced[at] != 0 && false)', 'killed'),
    ('emu_wgmma_fence', EMU, 'if (!wgmma_.fenced)', 'if (false && !wgmma_.fenced)', 'killed'),
    ('emu_tma_readable', MBE, '  std::memset(mem.unfenced + dst, kTmaInFlight, bytes);\n', '', 'killed'),
    ('emu_bulk_never_early', BUE, 'const bool now = (s.commits++ + tid) % 2 == 0;', 'const bool now = (s.commits++ + tid) % 2 == 2;',
     'killed'),
    # The CUDA executor's per-thread loads and stores (the tile set): bounds, the vector paths'
    # conditions, tl::rows' division and walk across rows, bf16's halves, the tails.
    ('rows_whole_n', TA, 'r.whole[k] = r.col[k] + L::kVec <= width && e + L::kVec <= n;',
     'r.whole[k] = r.col[k] + L::kVec <= width;', 'killed'),
    ('rows_whole_row', TA, 'r.whole[k] = r.col[k] + L::kVec <= width && e + L::kVec <= n;',
     'r.whole[k] = e + L::kVec <= n;', 'killed'),
    ('rows_whole_strict', TA, 'r.whole[k] = r.col[k] + L::kVec <= width && e + L::kVec <= n;',
     'r.whole[k] = r.col[k] + L::kVec < width && e + L::kVec <= n;', 'killed'),  # the same addresses; RowsPast31Bits reads the flag
    ('rows_first', TA, 'split_row(first + e, width, r.row[k], r.col[k]);',
     'split_row(first + e + 1, width, r.row[k], r.col[k]);', 'killed'),
    ('split_32_bits', TA, 'if (f <= 0x7fffffff && width <= 0x7fffffff) {', 'if (width <= 0x7fffffff) {', 'killed'),
    ('load_tail', TA, 'v[i + j] = e + j < n ? to_acc(p[e + j]) : other;', 'v[i + j] = e + j <= n ? to_acc(p[e + j]) : other;',
     'killed'),
    ('load_vector_bound', TA, 'if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {\n        load_vec',
     'if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n + 1) {\n        load_vec', 'killed'),
    ('load_packed_bound', TA, 'if (vector_ok<bf16, L::kVec>(p + e) && e + L::kVec <= n) {\n        load_raw',
     'if (vector_ok<bf16, L::kVec>(p + e)) {\n        load_raw',
     'equivalent: the words past n are never read as values (unpack gives `other` there, a packed store '
     'stores `other` past the tile\'s n); only a read past the buffer, which no test buffer ends at'),
    ('set_half_high', TA, 'raw[k / 2] |= static_cast<uint32_t>(bits) << 16;', 'raw[k / 2] |= static_cast<uint32_t>(bits);',
     'killed'),
    ('rows_walk_gap', TA, 'if (col == at.width) q += stride - at.width, col = 0;\n          v[i + j]',
     'if (col == at.width) col = 0;\n          v[i + j]', 'killed'),
    ('rows_walk_gap_packed', TA, 'if (col == at.width) q += stride - at.width, col = 0;\n          set_half',
     'if (col == at.width) col = 0;\n          set_half', 'killed'),
    ('rows_walk_gap_store', TA, 'if (col == at.width) q += stride - at.width, col = 0;\n          if (e + j < at.n)',
     'if (col == at.width) col = 0;\n          if (e + j < at.n)', 'killed'),
    ('one_access_n', TA, 'return at.col[k] + kVec <= at.width && vector_ok<T, kVec>(q) && e + kVec <= at.n;',
     'return at.col[k] + kVec <= at.width && vector_ok<T, kVec>(q) && e + kVec <= at.n + 1;', 'killed'),
    ('store_tail', TA, 'if (e + j < n) p[e + j] = from_acc<T>(x[i + j]);', 'if (e + j <= n) p[e + j] = from_acc<T>(x[i + j]);',
     'killed'),
    ('store_vector_bound', TA, 'if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {\n        store_vec',
     'if (vector_ok<T, L::kVec>(p + e)) {\n        store_vec', 'killed'),
    ('store_packed_past_x', TA, '&& e + L::kVec <= n && e + L::kVec <= x.n) {', '&& e + L::kVec <= n) {', 'killed'),
    ('store_packed_other', TA, ': from_acc<bf16>(x.other);', ': bf16{uint16_t{0}};', 'killed'),
    ('unpack_tail', TA, 'if (e + j >= n) v[i + j] = other;', 'if (e + j > n) v[i + j] = other;', 'killed'),
    ('unpack_halves', TA, 'v[2 * k] = detail::bits_as_float(raw[k] << 16);\n      v[2 * k + 1] = detail::bits_as_float(raw[k] & 0xffff0000u);',
     'v[2 * k + 1] = detail::bits_as_float(raw[k] << 16);\n      v[2 * k] = detail::bits_as_float(raw[k] & 0xffff0000u);',
     'killed'),
    ('load_vec_halves', TA, 'out[w * kEach + 2 * k] = detail::bits_as_float(u[k] << 16);',
     'out[w * kEach + 2 * k] = detail::bits_as_float(u[k] & 0xffff0000u);',
     'equivalent: unreached while kLoadsPacked packs every bf16 run of 2 or more (load_raw moves those) and a run of '
     'one is narrower than a word; kept for a build that loads bf16 unpacked'),
    ('store_vec_pair', TA, 'detail::bf16x2_rn(in[w * kEach + 2 * k], in[w * kEach + 2 * k + 1]);',
     'detail::bf16x2_rn(in[w * kEach + 2 * k + 1], in[w * kEach + 2 * k]);', 'killed'),
    ('vector_alignment', TA, 'reinterpret_cast<uintptr_t>(p) % kBytes == 0;', 'reinterpret_cast<uintptr_t>(p) % 4 == 0;',
     'killed'),
    ('gather_tail', TA, 'v[i] = Layout<N, TH, Run>::element(lane, i) < n ? to_acc(p[idx[i]]) : other;',
     'v[i] = Layout<N, TH, Run>::element(lane, i) <= n ? to_acc(p[idx[i]]) : other;', 'killed'),
    ('layout_runs', LAY, 'return (i / kVec) * (TH * kVec) + lane * kVec + (i % kVec);',
     'return (i / kVec) * (TH * kVec) + lane * kVec + i;', 'killed'),
    # The norms (kernels/norm.h, norm.cpp): what a device runs and the host does not (the column
    # sums of the weight gradients in one launch, several groups of 32 rows a program), the
    # software-pipelined rows, the chunked wide rows, the masks of a row's tail.
    ('norm_wide_adds_first', NH, 's0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, s0 > r0);',
     's0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, true);', 'killed'),
    ('norm_wide_adds_never', NH, 's0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, s0 > r0);',
     's0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, false);', 'killed'),
    ('norm_ahead_mean', NH, '        mu = mu_next;\n', '', 'killed'),
    ('norm_ahead_rstd', NH, '        rs = rs_next;\n', '        rs = rs + A(0) * rs_next;\n', 'killed'),
    ('norm_rms_centered', NH, 'const A mean_g = center ? tl::sum(c, tl::full<B>(c, A(0)) + g) / A(cols) : A(0);',
     'const A mean_g = tl::sum(c, tl::full<B>(c, A(0)) + g) / A(cols);', 'killed'),
    ('norm_wide_residual', NH, '      chunked(c, group, s0, s0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, s0 > r0);\n'
     '    add_residual(c, r0, r1);', '      chunked(c, group, s0, s0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, s0 > r0);',
     'killed'),
    ('norm_fwd_tail_mask', NH, 'auto d = tl::where(tl::arange<B>(c) < static_cast<int>(cols), xv - mu, A(0));',
     'auto d = xv - mu;', 'killed'),
    ('norm_fwd_wide_fill', NH, 'auto d = tl::load<B>(c, xr + c0, cols - c0, mu) - mu;',
     'auto d = tl::load<B>(c, xr + c0, cols - c0) - mu;', 'killed'),
    ('column_sums_tail', NH, 'idx, (parts - p0) * kCols);', 'idx, kParts * kCols);', 'killed'),
    ('column_sums_second', NH, 'const A* part = second ? part1 : part0;', 'const A* part = part0;', 'killed'),
    ('column_sums_accumulate', NH, 'tile::to_acc(out[c0 + j]) + s);', 's);', 'killed'),
    ('column_sums_select', NH, 'tl::where(col == j, acc, A(0))', 'tl::where(col >= j, acc, A(0))', 'killed'),
    ('column_sums_stride', NH, 'const auto idx = (e / kCols) * static_cast<int>(cols) +',
     'const auto idx = (e / kCols) * kCols +', 'killed'),
    ('column_sum_first_part', NH, 'for (int64_t p = 0; p < parts; ++p) acc = acc + tl::load<B>(c, part + p * stride',
     'for (int64_t p = 1; p < parts; ++p) acc = acc + tl::load<B>(c, part + p * stride', 'killed'),
    ('norm_device_groups', NC, 'std::max<int64_t>(1, (groups + kDeviceGroups - 1) / kDeviceGroups);',
     'std::max<int64_t>(1, groups / kDeviceGroups);', 'killed'),
    ('norm_device_sums_bias', NC, 'tile::Grid{(cols + kCols - 1) / kCols, dbias != nullptr ? 2 : 1}',
     'tile::Grid{(cols + kCols - 1) / kCols, 1}', 'killed'),
    # Softmax (kernels/softmax.h): rows wider than the tile (chunked), masks, the soft-cap's derivative.
    ('softmax_empty_row_max', SM, '      if (row_max != nullptr) tl::store_scalar(c, row_max + r, lowest);\n', '', 'killed'),
    ('softmax_wide_sum_mask', SM,
     'st + keep_columns<B>(c, c0, lo, hi, tl::map(FastExp{}, logits(tl::load<B>(c, sr + c0, cols - c0)) - m), A(0));',
     'st + tl::map(FastExp{}, logits(tl::load<B>(c, sr + c0, cols - c0)) - m);', 'killed'),
    ('softmax_bwd_wide_softcap', SM,
     '        g = g * (A(1) - t * t);\n      }\n      tl::store(c, ds + off + c0,',
     '        g = g * (A(1) - t);\n      }\n      tl::store(c, ds + off + c0,', 'killed'),
    ('softmax_bwd_wide_scale', SM, 'keep_columns<B>(c, c0, lo, hi, g * scale, A(0)), n);',
     'keep_columns<B>(c, c0, lo, hi, g, A(0)), n);', 'killed'),
    # Cross-entropy (kernels/cross_entropy.h): the target's chunk, the vocabulary's tail and padding,
    # ignored rows, the device's loss scale, z-loss.
    ('ce_target_chunk_start', CE, 'if (target >= c0 && target < c0 + B)', 'if (target > c0 && target < c0 + B)',
     'killed'),
    ('ce_tail_zeroed', CE,
     '      if (c0 + B > vocab) g = tl::where(tl::arange<B>(c) < static_cast<int>(vocab - c0), g, A(0));\n', '',
     'killed'),
    ('ce_padding_chunks', CE, 'for (int64_t c0 = (vocab + B - 1) / B * B; c0 < ld; c0 += B)',
     'for (int64_t c0 = (vocab + B - 1) / B * B + B; c0 < ld; c0 += B)', 'killed'),
    ('ce_ignored_padding', CE, 'for (int64_t c0 = 0; c0 < ld; c0 += B) tl::store(c, d + c0, tl::full<B>(c, A(0)), ld - c0);',
     'for (int64_t c0 = 0; c0 < vocab; c0 += B) tl::store(c, d + c0, tl::full<B>(c, A(0)), vocab - c0);', 'killed'),
    ('ce_sum_tail_fill', CE, 'st = st + tl::map(FastExp{}, tl::load<B>(c, x + c0, vocab - c0, lowest) - m);',
     'st = st + tl::map(FastExp{}, tl::load<B>(c, x + c0, vocab - c0) - m);', 'killed'),
    ('ce_scale_at', CE, 'const A gs = grad_scale_at != nullptr ? static_cast<A>(*grad_scale_at) : grad_scale;',
     'const A gs = grad_scale;', 'killed'),
    ('ce_z_loss_grad', CE, 'const A coef = gs * (A(1) + z_coef2 * zr) / sum;', 'const A coef = gs / sum;', 'killed'),
    ('ce_ignored_loss', CE, 'tl::store_scalar(c, loss + r, target >= 0 ? zr - x_target : A(0));',
     'tl::store_scalar(c, loss + r, zr - x_target);', 'killed'),
    # RoPE (kernels/rope.h): the half layout's pairs over all heads, the interleaved partner,
    # partial rotation, the inverse's sign.
    ('rope_half_pairs_tail', RH, 'const auto at = tl::rows<B>(c, half, c0, pairs - c0);',
     'const auto at = tl::rows<B>(c, half, c0, pairs - c0 - 1);', 'killed'),
    ('rope_half_head_stride', RH, 'auto b = tl::load_rows(c, xb, d_head, at);', 'auto b = tl::load_rows(c, xb, half, at);',
     'killed'),
    ('rope_half_sign', RH, 'auto si = tl::load_rows(c, st, 0, at) * sign;', 'auto si = tl::load_rows(c, st, 0, at);',
     'killed'),
    ('rope_interleaved_partner', RH, 'tl::gather(c, row + c0, idx + 1 - odd * 2, n);', 'tl::gather(c, row + c0, idx + 1, n);',
     'killed'),
    ('rope_partial_kept', RH, '      if constexpr (kPartial) out = tl::where(e < static_cast<int>(rot), out, xv);\n', '',
     'killed'),
    # AdamW (kernels/adamw.h): what a captured step reads from the device (the clip scale, the
    # bias corrections, the rate and decay), the master weights, the step's count.
    ('adamw_state_scale', AH, 'state != nullptr ? static_cast<A>(state[kAdamGradScale]) : grad_scale;', 'grad_scale;',
     'killed'),
    ('adamw_state_bc2', AH, 'state != nullptr ? static_cast<A>(state[kAdamInvBc2]) : inv_bc2;', 'inv_bc2;', 'killed'),
    ('adamw_lr_at', AH, 'lr_at != nullptr ? static_cast<A>(*lr_at) : lr;', 'lr;', 'killed'),
    ('adamw_keep_at', AH, 'keep_at != nullptr ? static_cast<A>(*keep_at) : keep;', 'keep;', 'killed'),
    ('adamw_master_store', AH, '    if (master != nullptr) tl::store(c, master + off, pp, rest);\n', '', 'killed'),
    ('adamw_step_count', AH, 'const double t = state[kAdamStep] + 1;', 'const double t = state[kAdamStep];', 'killed'),
    # The gated FFN's activations (kernels/activation.h): GluForward's up half, GluBackward's two
    # halves and dh's row, the plain backward's dy.
    ('glu_fwd_up_half', ACT, '    auto g = tl::load<B>(c, gate, n);\n    auto u = tl::load<B>(c, gate + d_ff, n);',
     '    auto g = tl::load<B>(c, gate, n);\n    auto u = tl::load<B>(c, gate, n);', 'killed'),
    ('glu_bwd_up_half_out', ACT, 'tl::store(c, out + d_ff, d * tl::map(ActivationFn<kAct>{}, g), n);',
     'tl::store(c, out, d * tl::map(ActivationFn<kAct>{}, g), n);', 'killed'),
    ('glu_bwd_dgate_up', ACT, 'tl::store(c, out, d * u * tl::map(ActivationGrad<kAct>{}, g), n);',
     'static_cast<void>(u);\n    tl::store(c, out, d * d * tl::map(ActivationGrad<kAct>{}, g), n);', 'killed'),
    ('glu_bwd_dh_row', ACT, 'auto dp = tl::load<B>(c, dh + r * d_ff + c0, n);', 'auto dp = tl::load<B>(c, dh + c0, n);',
     'killed'),
    ('act_bwd_dy', ACT, 'tl::store(c, dx + off, tl::load<B>(c, dy + off, rest) * g, rest);',
     'tl::store(c, dx + off, g, rest);', 'killed'),
    # The flat and strided element-wise programs (kernels/elementwise.h, .cpp): sum_of's shares and
    # its device stage, the entropy's zero terms, the embedding's column chunks, the blocks' strides.
    ('sum_terms_share', EWH, 'const int64_t last = (p + 1) * chunks / parts;\n    auto acc',
     'const int64_t last = first + chunks / parts;\n    auto acc', 'killed'),
    ('sum_partials_last', EWH, 'tl::store_scalar(c, result, tl::sum(c, tl::load<B>(c, partial, parts)));',
     'tl::store_scalar(c, result, tl::sum(c, tl::load<B>(c, partial, parts - 1)));', 'killed'),
    ('entropy_zero_term', EWH, 'return v > 0 ? -v * tile::math::log(v) : 0.0;', 'return v >= 0 ? -v * tile::math::log(v) : 0.0;',
     'killed'),
    ('emb_fwd_chunk', EWH, 'tl::store(c, dst + c0, tl::load<B>(c, src + c0, dim - c0), dim - c0);',
     'tl::store(c, dst + c0, tl::load<B>(c, src, dim - c0), dim - c0);', 'killed'),
    ('emb_bwd_chunk', EWH, 'acc = acc + tl::load<B>(c, dout + static_cast<int64_t>(positions[k]) * dim + c0, rest);',
     'acc = acc + tl::load<B>(c, dout + static_cast<int64_t>(positions[k]) * dim, rest);', 'killed'),
    ('emb_bwd_overwrites', EWH, 'tl::loaded_t<B, Ctx, T> acc = tl::load<B>(c, row, rest);',
     'tl::loaded_t<B, Ctx, T> acc = tl::load<B>(c, row, rest) * acc_t<T>(0);', 'killed'),
    ('block_src_stride', EWH, 'tl::load<B>(c, src + r * src_ld + c0, n)', 'tl::load<B>(c, src + r * dst_ld + c0, n)', 'killed'),
    ('emb_fwd_scale_dropped', EWC, 'if (scale == acc_t<T>(1)) {\n      tile::launch(exec, grid, programs::EmbeddingForward',
     'if (scale != acc_t<T>(0)) {\n      tile::launch(exec, grid, programs::EmbeddingForward', 'killed'),
    ('sum_of_device_result', EWC, 'copy_bytes(&result, d + parts, sizeof result);', 'copy_bytes(&result, d, sizeof result);',
     'killed'),
    # Dropout (kernels/dropout.h, .cpp): the mask's element index, the step read from memory, the scale, p = 0.
    ('dropout_chunk_base', DRH, 'mask{dropout_seed_of(seed, step_at), off, p,', 'mask{dropout_seed_of(seed, step_at), 0, p,',
     'killed'),
    ('dropout_step_ignored', DRH, 'mask{dropout_seed_of(seed, step_at), off, p,', 'mask{seed, off, p,', 'killed'),
    ('dropout_scale', DRH, 'A(1) / (A(1) - static_cast<A>(p))', 'A(1) - static_cast<A>(p)', 'killed'),
    ('dropout_rate_zero', DRC, '    copy_bytes(y, x, static_cast<size_t>(n) * sizeof(T));  // in whatever memory they are\n', '',
     'killed'),
    # The soft-cap (kernels/softcap.h): the slope's clamp at 0, the backward's 1 / cap.
    ('softcap_slope_clamp', SCH, 'return s > A(0) ? s : A(0);', 'return s;', 'killed'),
    ('softcap_bwd_inv_cap', SCH, 'auto slope = tl::map(CapSlope{}, tl::load<B>(c, y + off, rest) * inv_cap);',
     'auto slope = tl::map(CapSlope{}, tl::load<B>(c, y + off, rest));', 'killed'),
    # The clamp (kernels/clamp.h, .cpp): NaN passes forward, the bound's own gradient, the bound as stored.
    ('clamp_nan_to_bound', CLH, 'return v < -bound ? -bound : (v > bound ? bound : v);',
     'return v >= -bound ? (v > bound ? bound : v) : -bound;', 'killed'),
    ('clamp_bwd_at_bound', CLH, 'return -bound < y && y < bound ? dy : A(0);', 'return -bound <= y && y <= bound ? dy : A(0);',
     'killed'),
    ('clamp_bound_unrounded', CLC, 'return tile::to_acc(tile::from_acc<T>(static_cast<acc_t<T>>(bound)));',
     'return static_cast<acc_t<T>>(bound);', 'killed'),
    # The GEMM's epilogue programs (kernels/gemm_epilogue.h, .cpp): the column chunks of a row,
    # aux's own stride, the bias added before a bf16 activation, the bias gradient's column chunks.
    ('epi_bias_chunk', GEH, 'tl::load<B>(ctx, row, rest) + tl::load<B>(ctx, bias + c0, rest), rest);',
     'tl::load<B>(ctx, row, rest) + tl::load<B>(ctx, bias, rest), rest);', 'killed'),
    ('epi_grid_one_chunk', GEC, 'const tile::Grid grid{m, (n + kRows - 1) / kRows};', 'const tile::Grid grid{m, 1};',
     'killed'),
    ('epi_grad_aux_stride', GEH, 'tl::load<B>(ctx, aux + r * ld_aux + c0, rest));', 'tl::load<B>(ctx, aux + r * ldc + c0, rest));',
     'killed'),
    ('epi_act_aux_unkept', GEH, 'T* keep = aux != nullptr ? aux + r * ld_aux + c0 : row;', 'T* keep = row;', 'killed'),
    ('epi_act_unrounded', GEH,
     '        tl::store(ctx, keep, pre + tl::load<B>(ctx, bias + c0, rest), rest);\n        pre = tl::load<B>(ctx, keep, rest);\n',
     '        const auto sum = pre + tl::load<B>(ctx, bias + c0, rest);\n        tl::store(ctx, keep, sum, rest);\n'
     '        tl::store(ctx, row, tl::map(ActivationFn<kAct>{}, sum), rest);\n        return;\n', 'killed'),
    ('col_total_chunk', GEH, 'tl::store(ctx, out + c0, acc, rest);', 'tl::store(ctx, out, acc, rest);', 'killed'),
    ('col_total_first_row', GEH, 'for (int64_t r = 0; r < rows; ++r) acc = acc +', 'for (int64_t r = 1; r < rows; ++r) acc = acc +',
     'killed'),
    # The probes (kernels/probes.h, .cpp): the max's shares, padding and NaN count, sum_in_order's
    # terms and order, the loss sums' and the scale's ignored rows.
    ('max_terms_share', PBH, 'const int64_t last = (p + 1) * chunks / parts;\n    auto top',
     'const int64_t last = first + chunks / parts;\n    auto top', 'killed'),
    ('max_terms_pad', PBH, 'tl::load<B>(c, x + off, n - off, tile::acc_t<T>(-INFINITY))', 'tl::load<B>(c, x + off, n - off, tile::acc_t<T>(0))',
     'killed'),
    ('max_partials_pad', PBH, 'tl::max(c, tl::load<B>(c, partial, parts, -INFINITY));', 'tl::max(c, tl::load<B>(c, partial, parts, 0.0));',
     'killed'),
    ('max_nan_count', PBH, 'tl::store_scalar(c, result, nans > 0 ? NAN', 'tl::store_scalar(c, result, nans > 1 ? NAN', 'killed'),
    ('in_order_squares', PBC, 'programs::SumTerms<T, kProbesFlat, SumOf::kSquares>{x, partial, n, parts});',
     'programs::SumTerms<T, kProbesFlat, SumOf::kValues>{x, partial, n, parts});', 'killed'),
    ('in_order_entropy', PBC, 'programs::SumTerms<T, kProbesFlat, SumOf::kEntropy>{x, partial, n, parts});',
     'programs::SumTerms<T, kProbesFlat, SumOf::kSquares>{x, partial, n, parts});', 'killed'),
    ('in_order_reversed', PBH, 'for (int64_t i = 0; i < parts; ++i) s += partial[i];',
     'for (int64_t i = parts - 1; i >= 0; --i) s += partial[i];', 'killed'),
    ('loss_sums_target_zero', PBH, 'if (targets[i] < 0) continue;\n      ++valid;\n      const auto zi',
     'if (targets[i] <= 0) continue;\n      ++valid;\n      const auto zi', 'killed'),
    ('target_scale_zero', PBH, 'valid += targets[i] >= 0 ? 1 : 0;', 'valid += targets[i] > 0 ? 1 : 0;', 'killed'),
    # The fused attention's programs (kernels/attention_fused.h, .cpp: one program per row, every
    # executor): the queries that see a key, the cap's slope, the dropout mask's index and step, the
    # group of a query head, the key rows' sums over the group, the scales.
    ('af_causal_window_end', AFH, 'hi = window > 0 && j + window < seq ? j + window : seq;',
     'hi = window > 0 && j + window < seq ? j + window - 1 : seq;', 'killed'),
    ('af_band_start', AFH, 'hi = window > 0 && j < seq - window ? 0 : seq;', 'hi = window > 0 && j + 1 < seq - window ? 0 : seq;',
     'killed'),
    ('af_cap_slope_square', AFH, 'A(1) - (l / softcap) * (l / softcap) : A(1);', 'A(1) - (l / softcap) : A(1);', 'killed'),
    ('af_mask_index', AFH, '(bh * seq + t) * seq + j, p)', '(bh * seq + j) * seq + t, p)', 'killed'),
    ('af_mask_step', AFH, 'dropout_keep(dropout_seed_of(seed, step_at), (bh', 'dropout_keep(seed, (bh', 'killed'),
    ('af_fwd_group', AFH, 'const int64_t g = h / s.group, bh = b * s.heads + h, n = s.d_head;\n    const T* k = qkv + s.at(b, 0, s.heads + g);\n'
     '    const T* v = qkv + s.at(b, 0, s.heads + s.kv_heads + g);\n    const auto q = tl::load<D>(c, qkv + s.at(b, t, h), n);\n    int64_t lo',
     'const int64_t g = h % s.kv_heads, bh = b * s.heads + h, n = s.d_head;\n    const T* k = qkv + s.at(b, 0, s.heads + g);\n'
     '    const T* v = qkv + s.at(b, 0, s.heads + s.kv_heads + g);\n    const auto q = tl::load<D>(c, qkv + s.at(b, t, h), n);\n    int64_t lo',
     'killed'),
    ('af_fwd_row_max', AFH, 'row_max + bh * s.seq + t, z > A(0) ? m : A(0));', 'row_max + bh * s.seq + t, z > A(0) ? m + tile::math::log(z) : A(0));',
     'killed'),
    ('af_q_dp_keep', AFH, 'tl::sum(c, d_o * tl::load<D>(c, v + j * s.width, n)) * keep : A(0);',
     'tl::sum(c, d_o * tl::load<D>(c, v + j * s.width, n)) : A(0);', 'killed'),
    ('af_q_cap_slope', AFH, 'dq = dq + kj * (pj * (dp - dot) * s.cap_slope(l));', 'dq = dq + kj * (pj * (dp - dot));', 'killed'),
    ('af_k_group', AFH, 'for (int64_t h = g * s.group; h < (g + 1) * s.group; ++h)', 'for (int64_t h = g * s.group; h < g * s.group + 1; ++h)',
     'killed'),
    ('af_k_dv_keep', AFH, 'dv = dv + d_o * (pt * keep);', 'dv = dv + d_o * pt;', 'killed'),
    ('af_k_lse_row', AFH, 'tile::math::exp(l - lse[bh * s.seq + t]);', 'tile::math::exp(l - lse[bh * s.seq + j]);', 'killed'),
    ('af_k_dk_scale', AFH, 'tl::store(c, dqkv + s.at(b, j, s.heads + g), dk * s.scale, n);',
     'tl::store(c, dqkv + s.at(b, j, s.heads + g), dk, n);', 'killed'),
    ('af_keep_scale', AFC, 'static_cast<A>(1.0 / (1.0 - a.dropout)),', 'static_cast<A>(1.0),', 'killed'),
    # The materializing attention's dropout rows (kernels/attention.h): the step read from memory.
    ('attn_mask_step', ATH, 'const uint64_t s = dropout_seed_of(seed, step_at);', 'const uint64_t s = seed;', 'killed'),
    # The attention probes' rows (kernels/attention.h: the entropy and the row max recomputed from
    # qkv), and the dropout rows' element index.
    ('attn_probe_pad_max', ATH, 'mt = tl::maximum(mt, tl::where(valid, logits(c, q, k + j0 * width, hi - j0), lowest));',
     'mt = tl::maximum(mt, tl::where(valid, logits(c, q, k + j0 * width, hi - j0), A(0)));', 'killed'),
    ('attn_probe_group', ATH, 'const int64_t b = bh / heads, h = bh % heads, g = h / group;',
     'const int64_t b = bh / heads, h = bh % heads, g = h % group;', 'killed'),
    ('attn_entropy_sign', ATH, 'hi > lo ? tile::math::log(z) - w / z : A(0)', 'hi > lo ? tile::math::log(z) + w / z : A(0)', 'killed'),
    ('attn_dropout_rows_col', ATH, 'const DropoutMask<A> mask{s, base + r * row_step + c0, p, scale};',
     'const DropoutMask<A> mask{s, base + r * row_step, p, scale};', 'killed'),
]


def check():
    bad = 0
    names = set()
    for name, path, old, new, expect in MUTANTS:
        n = open(os.path.join(ROOT, path)).read().count(old)
        if n != 1 or name in names or old == new or not (expect == 'killed' or expect.startswith('equivalent: ')):
            print(f'mutants: {name}: its text occurs {n} times in {path} (once wanted), or its name or expectation is wrong')
            bad += 1
        names.add(name)
    print(f'mutants: {len(MUTANTS) - bad} of {len(MUTANTS)} mutants apply')
    return 1 if bad else 0


def set_of(path):
    """The set of a mutant of `path`: tile for the executor's headers, flash for the flash kernels'
    and their emulators, rows for a row kernel family's (kernels/NAME.h or .cpp)."""
    if path.startswith('kernels/tile/'):
        return 'tile'
    if path.startswith('kernels/') and path.count('/') == 1:
        return 'rows'
    return 'flash'


# Families whose tests' names are not the file's name in CamelCase.
ROWS_FILTERS = {'adamw': '*AdamW*'}


def rows_filter(path):
    """The tests of a row kernel family: kernels/cross_entropy.h -> *CrossEntropy*."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return ROWS_FILTERS.get(stem, '*' + ''.join(w.capitalize() for w in stem.split('_')) + '*')


def run_tests(binary, test_filter, shards):
    """(failed tests, tests run, first message) of the set's tests, `shards` processes."""
    procs = [subprocess.Popen([binary, f'--gtest_filter={test_filter}', '--gtest_brief=1'],
                              env=dict(os.environ, GTEST_TOTAL_SHARDS=str(shards), GTEST_SHARD_INDEX=str(i)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(shards)]
    failed, ran, why = set(), 0, ''
    for p in procs:
        out, _ = p.communicate()
        m = re.search(r'(\d+) tests? from \d+ test suites? ran', out)
        ran += int(m.group(1)) if m else 0
        failed |= {f.rstrip(',') for f in re.findall(r'^\[  FAILED  \] (\S+)', out, re.M)}
        if p.returncode not in (0, 1):
            failed.add(f'(the process, exit {p.returncode})')
        if not why:
            why = next((line.strip() for line in out.splitlines()
                        if 'Failure' in line or 'FiberTeam' in line or 'emulated CUDA fault' in line), '')
    return len(failed), ran, why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('names', nargs='*')
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--set', choices=sorted(SETS), help='only the mutants of this set')
    ap.add_argument('--all', action='store_true', help='the equivalent mutants too')
    ap.add_argument('--kernels', action='store_true', help="tile mutants against kernels_test's emulated target")
    ap.add_argument('--list', action='store_true')
    ap.add_argument('--check', action='store_true')
    a = ap.parse_args()
    if a.check:
        return check()
    if a.list:
        for name, path, _, _, expect in MUTANTS:
            print(f'{name:24} {set_of(path):5} {os.path.basename(path):44} {expect}')
        return 0
    unknown = set(a.names) - {m[0] for m in MUTANTS}
    if unknown:
        print(f'mutants: no mutant named {", ".join(sorted(unknown))} (see --list)', file=sys.stderr)
        return 2
    if a.names:
        chosen = [m for m in MUTANTS if m[0] in a.names]
    else:
        chosen = [m for m in MUTANTS if (a.all or m[4] == 'killed') and (a.set is None or set_of(m[1]) == a.set)]
    if check():
        return 2
    dirty = subprocess.run(['git', '-C', ROOT, 'diff', '--name-only', '--', *sorted({m[1] for m in chosen})],
                           capture_output=True, text=True).stdout.split()
    if dirty:
        print(f'mutants: uncommitted changes in {", ".join(dirty)}: commit or stash them first', file=sys.stderr)
        return 2
    saved = {}

    def restore(*_):
        for path, text in saved.items():
            open(path, 'w').write(text)
        saved.clear()
        if _:
            sys.exit(130)

    signal.signal(signal.SIGINT, restore)
    signal.signal(signal.SIGTERM, restore)
    shards = max(1, min(4, os.cpu_count() or 1))
    gaps = 0
    print(f'{"mutant":24} {"expected":10} {"result":9} {"failed":>9} {"time":>5}  first message')
    for name, path, old, new, expect in chosen:
        full = os.path.join(ROOT, path)
        text = open(full).read()
        saved[full] = text
        open(full, 'w').write(text.replace(old, new))
        t0 = time.time()
        target, test_filter = KERNELS if a.kernels and set_of(path) == 'tile' else SETS[set_of(path)]
        test_filter = test_filter or rows_filter(path)
        try:
            b = subprocess.run(['cmake', '--build', a.build, '--target', target], capture_output=True, text=True)
            if b.returncode != 0:
                result, failed, ran, why = 'NOCOMPILE', 0, 0, next((l for l in b.stdout.splitlines() if 'error' in l), '')
            else:
                failed, ran, why = run_tests(os.path.join(a.build, 'bin', target), test_filter, shards)
                result = 'killed' if failed else 'SURVIVED'
        finally:
            restore()
        kind = expect.split(':')[0]
        if kind == 'killed' and result != 'killed':
            gaps += 1
        print(f'{name:24} {kind:10} {result:9} {f"{failed}/{ran}":>9} {time.time() - t0:4.0f}s  {why[:90]}', flush=True)
    targets = {KERNELS[0] if a.kernels and set_of(m[1]) == 'tile' else SETS[set_of(m[1])][0] for m in chosen}
    for target in sorted(targets):  # the targets as committed again
        subprocess.run(['cmake', '--build', a.build, '--target', target], capture_output=True)
    print(f'mutants: {gaps} mutant(s) expected killed survived' if gaps else 'mutants: as expected')
    return 1 if gaps else 0


if __name__ == '__main__':
    sys.exit(main())
