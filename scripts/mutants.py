#!/usr/bin/env python3
"""Mutants of the GPU code that the CPU runs: proof that its tests can fail.

Each mutant is one small edit of a header (a limit one off, a barrier or fence left out, an index
that drops a term, a row walk's step): the kind of slip that the CPU's emulation must catch before
a GPU ever runs the code. For each one this script puts the edit in, rebuilds the test of its set,
runs it, counts the failures and puts the file back as it was. A mutant marked `killed` must fail
some test; one that passes is a gap in the tests, and the script exits 1. Two sets:

  flash  the flash attention kernels (kernels/cuda/flash_attention_*.cuh), against the emulation
         tests of kernels_test (FlashEmulation*, Flash32*, the wgmma / TMA / bulk / barrier
         emulators' own); about a minute a mutant on two cores (nvcc rebuilds the kernel's CUDA
         unit beside the test's)
  tile   the CUDA executor's per-thread loads and stores (kernels/tile/thread_access.h, which the
         emulated-block executor runs for every lane) and its layout, against tile_test; about 20 s
         a mutant (the header-only test alone is rebuilt; the kernels' emulated-target tests see
         the same code, but rebuilding the kernel library for them, --kernels, takes 5 to 6
         minutes a mutant)

Some edits change no result by design, and are listed as `equivalent` with the reason (the limits
are multiples of the tiles, a row past the sequence's end is zeros, a skip only saves time): kept
so that the reasoning stays written down and their text checked (`--check`); --all runs them too.

  scripts/mutants.py [--build DIR] [--set flash|tile] [--all] [NAME...]   run the killed mutants
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
                               '*BulkEmulation*:*SyncEmulation*')),
    'tile': ('tile_test', '*'),
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
    """The set of a mutant of `path`: tile for the executor's headers, flash for the kernels'."""
    return 'tile' if path.startswith('kernels/tile/') else 'flash'


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
