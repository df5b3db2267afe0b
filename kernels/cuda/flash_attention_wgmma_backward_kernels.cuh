// defines: bench::kernels::flash::flash_backward_wgmma — the main kernel of the flash attention
//          backward on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): the mma.sync backward of
//          flash_attention_backward_kernels.cuh (its prep and dQ kernels, walk, masks, element
//          step p_and_ds, workspace) with its products on wgmma, the layouts and copies of the wgmma
//          forward (flash_attention_wgmma_kernels.cuh, wgmma_layout.cuh); compiled by
//          flash_attention_wgmma.cu, run on the CPU by the warp emulator
//          (tests/kernels/flash_emulation_test.cpp, FlashEmulation.BackwardWgmma*)
//
// Beyond the wgmma forward's Thread it asks store_shared_b32(address, v) (st.shared.b32 at a
// shared-window address, smem_addr's: it reaches wgmma, which reads through the async proxy, only
// after fence_proxy_async, like a cp.async write), and for the bulk dQ path store_shared_v2_f32,
// warp_sync (__syncwarp), bulk_reduce_add (cp.reduce.async.bulk.global.shared::cta.bulk_group
// .add.f32), bulk_commit, bulk_wait<N> and bulk_wait_read<N> (cp.async.bulk.wait_group{.read}),
// and for the TMA path (kTma) the forward's mbar_init, mbar_wait, mbar_arrive_expect_tx and
// tma_load_4d; for the warp-specialized variant (kWs) also warpgroup, mbar_arrive, named_sync and
// setmaxnreg_inc/dec, and with dropout at d 128 warp_uniform (the warp index, warp-uniform). Its
// layout and launch figures: flash_attention_wgmma_backward_layout.cuh; the producer's stats warp
// and dQ writer: flash_attention_wgmma_backward_producer.cuh.
//
// Shape: the mma.sync backward's block (kBwdThreads = 256 threads, 128 keys of one (batch, kv
// head), the same grid and walk over the query heads of the group and their 64-query tiles), now
// two warpgroups of 64 keys each (wgmma's m64): warp w of the block still owns keys 16 w .. 16 w +
// 15, so the element step is the mma.sync backward's on the same fragments. K and V (128
// rows) and two stages of Q and dO (64 rows) sit in shared memory in the core-matrix layout
// (wgmma_rows_async), dS^T ([key][query]) in the same layout. Per tile and warpgroup:
//   1. S^T = K Q^T, then dP^T = V dO^T: 2 D / 16 wgmma m64n64k16, K / V as K-major A, Q / dO as
//      K-major B (their rows are the n dimension), a commit group each.
//   2. P^T in registers (the mma.sync backward's element step: masks, soft-cap, dropout, negative
//      scale) and rounded into A fragments (the accumulators of queries 16 ks .. 16 ks + 15 are
//      one m64k16 A). P^T needs S^T alone: wait_group 1 (S^T), element_first and element_p (the
//      exponentials, the mask; the soft-cap's tanh and exponential), dS's factor p dscale
//      (element_dscale) and dropout's keep (a bit a element) while dP^T's products run. With
//      dropout at d 128 p_and_ds after wait_group 0.
//   3. dV += P^T dO: 4 wgmma m64nDk16, A from registers, dO as N-major B (the transpose bit: its
//      rows are the k dimension), its own commit group, left in flight. Then (but with dropout
//      at d 128) wait_group 1 (dP^T; dV stays in flight) and dS = p dscale (dP - D), one copy
//      for every variant (no mask, no exponential): the tensor cores run dV while dS^T is
//      computed. dS^T into A fragments and to shared memory ([key][query],
//      32-bit stores) for dQ, and dK += dS^T Q (4 more, Q N-major), left in flight.
//   4. fence.proxy.async and a barrier (every warp's dS), then dQ = dS K for the tile's 64 queries
//      and this warpgroup's half of D: 8 wgmma m64n(D/2)k16, dS as an M-major A from shared memory
//      and K as an N-major B; wait_group 0 (dV, dK and dQ), and dQ added to the float accumulator
//      with red.global.add.v2.f32 as the mma.sync backward does, or (kBulkDq) staged in shared
//      memory as rows of D / 2 floats, fenced for the async proxy, and added a row a lane by
//      cp.reduce.async.bulk (one bulk group a tile; the staging written again only after
//      wait_group.read 0 and the next tile's dQ barrier; wait_group 0 before the kernel ends).
// Registers (D 128, per thread): dV and dK are 64 + 64 accumulators for the whole walk; S^T and
// dP^T 32 + 32 until packed into the P^T and dS^T fragments (16 + 16, held until dV and dK
// complete); dQ 32. At most 208 of them live at once (without dropout: dV, dK, P^T as floats and
// as fragments, dP^T in flight), the rest of the 255 for addresses, the element step and the loop
// (kTma at D 128 without dropout: of 240, wgmma_backward_tma_max_regs).
// Only dQ splits N: its M is the tile's 64 queries, which both warpgroups share, so each takes
// half of D (N = D / 2: 32 registers, not 64). D 64 halves every accumulator.
// No tile is skipped for a warpgroup whose keys the tile cannot see (a wgmma under a branch that
// depends on the thread index makes ptxas serialize every wgmma: C7520, see the forward); its P^T
// and dS^T are masked to zero. kTma: Q and dO by TMA (an option, "TMA loads of Q and dO" in the
// doc). kWs (with kTma; an option, "Warp-specialized backward" in the doc): 384 threads, a third
// warpgroup, the producer, at setmaxnreg.dec 24, one of its threads issuing the walk's Q and dO
// tiles into a ring of three stages (full mbarriers with expect_tx; it waits on a stage's empty
// mbarrier, which every consumer thread arrives on once its last wgmma reading the stage has
// completed); the two consumer warpgroups (threads 0-255, the tile exactly as above) at
// setmaxnreg.inc 240, their two barriers a tile named barriers over their 256 threads; with
// kBulkDq a dQ writer (thread 288, at the producer's 24 registers) issues the bulk reductions of
// the staged dQ ("dq full" / "dq empty" mbarriers), the consumers only stage it; a stats warp
// (threads 320-351) writes each tile's lse and D into its stage, so the consumers hold no stat.
// With dropout at d 128 (kKeptInFlight) the consumers hash the keep bits once a tile after issuing
// S^T and dP^T, keep the mask as bits, and run the element step in two halves, to fit 240 registers
// ("Dropout at d 128 in 240 registers" in the doc). Not done: the two warpgroups out of lockstep,
// dQ's bulk reduction as one op a tile (a tensor map). Compiled for sm_90a, checked by the CPU
// emulator; not run on a GPU (docs/flash-backward.md, "Flash attention backward on wgmma").
#pragma once

#include <cmath>
#include <cstdint>

#include "flash_attention_backward_kernels.cuh"
#include "flash_attention_wgmma_backward_layout.cuh"
#include "flash_attention_wgmma_backward_producer.cuh"
#include "flash_attention_wgmma_kernels.cuh"
#include "tma_map.h"
#include "wgmma_layout.cuh"

#if !defined(__CUDACC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash {

/// flash_backward's contract (flash_attention_backward_kernels.cuh: dK, dV written to dqkv, dQ
/// added to dq_accum; after flash_backward_prep, before flash_backward_dq) on wgmma: every variant
/// (causal or not, window, soft-cap, GQA/MQA, dropout, negative scale), d_head 64 or 128, for a
/// block of kWgThreads threads with wgmma_backward_smem_bytes<D, kBulkDq>() of shared memory. dQ
/// reaches dq_accum by per-thread red.global.add.v2.f32, or with kBulkDq by cp.reduce.async.bulk
/// of whole rows from a staging buffer (dq_accum then 16-byte aligned). A template argument, not
/// a run-time one: both paths in one kernel spilled 56 bytes at d 128 with dropout (32 before).
/// kTma: Q and dO come by TMA through `q_map` (tma::flash_tensor_map(qkv, ...)) and `do_map`
/// (tma::flash_tensor_map(dout, ..., n_kv 0, ...): heads n_h), on the GPU CUtensorMap kernel
/// parameters, in the emulator their arguments: one thread issues a tile's boxes under its stage's
/// mbarrier, the tiles 128-byte swizzled (wgmma::k_major_sw128 / mn_major_sw128), the rows past
/// the sequence's end zeros by the map's bounds; K and V still by cp.async, once a block.
template <int D, bool kDropout, bool kBulkDq, bool kTma, bool kWs = false, class Thread>
BENCH_FLASH_FN void flash_backward_wgmma(Thread& th, const uint16_t* __restrict__ qkv,
                                         const uint16_t* __restrict__ dout, const float* __restrict__ lse,
                                         const float* __restrict__ dvec, float* __restrict__ dq_accum,
                                         uint16_t* __restrict__ dqkv, int64_t n_t, int n_h, int n_kv, float scale,
                                         float softcap, int64_t window, bool causal, float dropout,
                                         uint64_t dropout_seed, bool heaviest_first, const void* q_map = nullptr,
                                         const void* do_map = nullptr) {
  static_assert(D == 64 || D == 128, "d_head 64 or 128");
  static_assert(kTma || !kWs, "the warp-specialized variant's producer loads by TMA");
  constexpr int kStages = kWgmmaBwdStages<kWs>;
  // Shared memory: K, V, then stage s's Q at qdo_s + 2 kBwdBlockM D s and its dO kBwdBlockM D
  // further, then dS^T, then lse and D (then the bulk dQ path's staging); kTma from the first
  // 1024-byte boundary, and the stages' mbarriers after the rest.
  uint16_t* k_s = reinterpret_cast<uint16_t*>(th.shared());
  if constexpr (kTma)
    k_s = sw128_align(th, k_s);
  else
    (void)q_map, (void)do_map;
  uint16_t* v_s = k_s + kBwdBlockN * D;
  uint16_t* qdo_s = v_s + kBwdBlockN * D;
  uint16_t* ds_s = qdo_s + 2 * kStages * kBwdBlockM * D;
  // lse and D: one tile's, or kWs one a stage (the producer's stats warp writes them).
  auto* lse_s = reinterpret_cast<float*>(ds_s + kBwdBlockM * kBwdBlockN);
  float* dq_s = lse_s + 2 * kBwdBlockM * kWgmmaBwdStatStages<kWs>;  // the bulk dQ path's staging
  constexpr int kStageRow = kWgmmaDqStageRow<D>;
  constexpr float kLog2e = 1.4426950408889634f;

  // kWs: a warp-uniform warpgroup index (ptxas then knows the branch on it warpgroup-uniform).
  constexpr bool kKeptInFlight = kWs && kDropout && D == 128;
  const int warp = kKeptInFlight ? th.warp_uniform() : th.tid() / 32, wg = kWs ? th.warpgroup() : th.tid() / 128,
            lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  int key_block = 0, bkv = 0;  // see backward_grid
  backward_block(th, heaviest_first, key_block, bkv);
  const int64_t n0 = static_cast<int64_t>(key_block) * kBwdBlockN;
  const int b = bkv / n_kv, kv = bkv % n_kv, group = n_h / n_kv;
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D, out_width = static_cast<int64_t>(n_h) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* dseq = dout + static_cast<int64_t>(b) * n_t * out_width;
  const int64_t m_begin = causal ? n0 : 0;
  const int64_t m_end = window > 0 && n0 + kBwdBlockN + window - 1 < n_t ? n0 + kBwdBlockN + window - 1 : n_t;

  // kTma: stage s's "full" mbarrier (one arrival a phase, the issuing thread's expect_tx; the
  // phase completes once the tile's Q and dO boxes have landed) and tile (h, m) into stage s: per
  // column block c of 64, a box of 64 rows of Q and one of dO, coordinates (column, head, row,
  // batch) innermost first (tma::flash_tensor_map), at c 64 128 bytes into the tile
  // (sw128_offset<kBwdBlockM>'s layout). Boxes past the sequence's end are zeros there and count
  // whole.
  // kWs: stage s's "empty" mbarrier (every consumer thread arrives once its last wgmma that read
  // the stage's Q and dO has completed; the producer waits on it before loading the stage again).
  // kWs with kBulkDq: the dQ writer's (thread kWgThreads + 32, in the producer warpgroup)
  // "dq full" mbarrier (every consumer thread arrives once its tile's dQ is staged and fenced for
  // the async proxy) and "dq empty" one (the writer arrives once its bulk reductions of the tile
  // have read the staging; the consumers wait on it before staging again).
  // Their phases go by the walk's tiles, one a tile.
  [[maybe_unused]] const uint32_t full = th.smem_addr(dq_s + (kBulkDq ? kWgGroups * kBwdBlockM * kStageRow : 0)),
                                  empty = full + 8 * kStages, dq_full = empty + 8 * kStages, dq_empty = dq_full + 8;
  constexpr bool kDqWriter = kWs && kBulkDq;
  [[maybe_unused]] const auto load_tile = [&](int s, int hh, int64_t m) {
    constexpr uint32_t kBox = kBwdBlockM * 128;
    const uint32_t q_at = th.smem_addr(qdo_s + 2 * kBwdBlockM * D * s), bar = full + 8 * s;
    th.mbar_arrive_expect_tx(bar, 2 * kBox * (D / 64));
#pragma unroll
    for (int c = 0; c < D / 64; ++c) {
      th.tma_load_4d(q_at + c * kBox, q_map, 64 * c, hh, static_cast<int>(m), b, bar);
      th.tma_load_4d(q_at + (D / 64 + c) * kBox, do_map, 64 * c, hh, static_cast<int>(m), b, bar);
    }
  };
  // K, V and the first tile's Q and dO in one group (kTma: the tile by TMA, K and V awaited here).
  const int h_first = kv * group;
  if constexpr (kTma) {
    if (th.tid() == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        th.mbar_init(full + 8 * s, kWs ? 1 + 32 : 1);  // kWs: the TMA thread's and the stats warp's
        if constexpr (kWs) th.mbar_init(empty + 8 * s, kWgThreads);
      }
      if constexpr (kDqWriter) {
        th.mbar_init(dq_full, kWgThreads);
        th.mbar_init(dq_empty, 1);
      }
    }
    th.sync();  // the inits, visible to every thread (kWs: the kernel's last __syncthreads)
    if constexpr (kWs) {
      if (wg == kWgGroups) {
        // The producer: the walk's tiles in order, tile i into stage i % kStages once the
        // consumers have emptied it (tile i - kStages's last wgmma completed). Its phase bit flips
        // at each turn of the ring; a fresh mbarrier counts its phase of parity 1 as completed, so
        // the first turn does not wait. One thread issues; the others end here.
        th.template setmaxnreg_dec<kWsProducerRegs>();
        if (th.tid() == kWgThreads) {
          int s = 0, phase = 0, hp = h_first;
          int64_t mp = m_begin;
#pragma unroll 1
          for (; hp < h_first + group; hp = h1_of(hp, mp, m_end), mp = m1_of(mp, m_begin, m_end)) {
            th.mbar_wait(empty + 8 * s, phase ^ 1);
            load_tile(s, hp, mp);
            if (++s == kStages) s = 0, phase ^= 1;
          }
        } else if (th.tid() / 32 == kWgThreads / 32 + 2) {
          wgmma_backward_stats_warp<kStages>(th, lse_s, lse, dvec, full, empty, b, n_h, n_t, h_first, group, m_begin,
                                             m_end);
        } else if (kDqWriter && th.tid() == kWgThreads + 32) {
          wgmma_backward_dq_writer<D>(th, dq_accum, dq_s, dq_full, dq_empty, b, n_h, n_t, h_first, group, m_begin,
                                      m_end);
        }
        return;
      }
      th.template setmaxnreg_inc<kWsConsumerRegs>();
    } else {
      if (th.tid() == 0) load_tile(0, h_first, m_begin);
    }
  }
  wgmma_rows_async<D, kBwdBlockN>(th, k_s, v_s, n_kv * D, seq + static_cast<int64_t>(n_h + kv) * D, n0, n_t, width);
  if constexpr (!kTma) {
    wgmma_rows_async<D, kBwdBlockM>(th, qdo_s, nullptr, 0, seq + static_cast<int64_t>(h_first) * D, m_begin, n_t,
                                    width);
    wgmma_rows_async<D, kBwdBlockM>(th, qdo_s + kBwdBlockM * D, nullptr, 0, dseq + static_cast<int64_t>(h_first) * D,
                                    m_begin, n_t, out_width);
  }
  th.cp_async_commit();
  if constexpr (kTma) {
    th.cp_async_wait(0);
    th.fence_proxy_async();  // this thread's landed K and V, visible to wgmma (the loop's barrier for every thread's)
  }
  // The tile's lse and D, stored at its top (kWs: the stats warp's).
  [[maybe_unused]] float stat = 0.f;
  if constexpr (!kWs) stat = row_stat(th, lse, dvec, (static_cast<int64_t>(b) * n_h + h_first) * n_t, m_begin, n_t);
  // The barrier of every thread that computes: __syncthreads, or (kWs) a named barrier of the two
  // consumer warpgroups, which the producer never reaches.
  const auto consumers_sync = [&] {
    if constexpr (kWs)
      th.named_sync(kWsBwdBarrier, kWgThreads);
    else
      th.sync();
  };

  // This warp's 16 keys (rows g and g + 8 of them are this thread's), its warpgroup's 64 (wgmma's
  // M: rows 64 wg of K and V, core group 8 wg) and their dK, dV: register 4 i + e holds (key
  // g + 8 (e / 2), column 8 i + 2 t + e % 2).
  const int64_t k0 = n0 + warp * 16;
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  uint32_t k_addr = th.smem_addr(k_s + wg * kWgRows * D), v_addr = th.smem_addr(v_s + wg * kWgRows * D);
  // dQ's B: K's columns [wg D / 2, (wg + 1) D / 2), the core matrices D / 16 wg on along N.
  uint32_t kq_addr = th.smem_addr(k_s) + static_cast<uint32_t>(wg * (D / 16) * 128);
  uint32_t ds_addr = th.smem_addr(ds_s);
  // dS^T element (key 16 warp + g, query 2 t), this thread's first pair: its others are
  // compile-time offsets from it (core_offset is additive while neither row % 8 nor column % 8
  // carries).
  const uint32_t ds_mine = ds_addr + 2u * static_cast<uint32_t>(wgmma::core_offset<kBwdBlockM>(16 * warp + g, 2 * t));
  const float scale2 = scale * kLog2e, cap_in = softcap > 0.f ? scale / softcap : 0.f, cap_out = softcap * kLog2e;
  [[maybe_unused]] const float keep_scale = 1.f / (1.f - dropout);  // dropout's (p_and_ds_kept)

  // This tile: head h, queries from m0; the next one: h1, m1 (h1 past the group: none). kTma:
  // bit s of `parity` the parity of stage s's next phase.
  int h = h_first, stage = 0;
  [[maybe_unused]] uint32_t parity = 0;
  int64_t m0 = m_begin;
  for (; h < h_first + group; h = h1_of(h, m0, m_end), m0 = m1_of(m0, m_begin, m_end),
                              stage = kStages == 2 ? stage ^ 1 : (stage + 1 == kStages ? 0 : stage + 1)) {
    const int h1 = h1_of(h, m0, m_end);
    const int64_t m1 = m1_of(m0, m_begin, m_end);
    if constexpr (kTma) {
      th.mbar_wait(full + 8 * stage, static_cast<int>(parity >> stage & 1u));  // this tile's Q and dO
      parity ^= 1u << stage;
    } else {
      th.cp_async_wait(0);  // this tile's Q and dO (the only group in flight)
    }
    if (!kWs && th.tid() < 2 * kBwdBlockM) lse_s[th.tid()] = stat;
    // This tile's lse and D: kWs the stage's (the full mbarrier's phase covers them).
    const float* lse_t = kWs ? lse_s + 2 * kBwdBlockM * stage : lse_s;
    if constexpr (!kTma) th.fence_proxy_async();  // this thread's landed copies, visible to wgmma (TMA's need none)
    // Every warpgroup's products of the tile before completed (each waits for its own before its
    // atomics), so the other stage, which they read, may be written (kWs: the empty mbarriers say
    // so to the producer); dS^T and lse_s read, so they may be written; and this tile is here.
    consumers_sync();
    if (h1 < h_first + group) {
      if constexpr (kTma) {
        if (!kWs && th.tid() == 0) load_tile(stage ^ 1, h1, m1);  // kWs: the producer's
      } else {
        uint16_t* next = qdo_s + 2 * kBwdBlockM * D * (stage ^ 1);
        wgmma_rows_async<D, kBwdBlockM>(th, next, nullptr, 0, seq + static_cast<int64_t>(h1) * D, m1, n_t, width);
        wgmma_rows_async<D, kBwdBlockM>(th, next + kBwdBlockM * D, nullptr, 0, dseq + static_cast<int64_t>(h1) * D, m1,
                                        n_t, out_width);
        th.cp_async_commit();
      }
      if constexpr (!kWs) stat = row_stat(th, lse, dvec, (static_cast<int64_t>(b) * n_h + h1) * n_t, m1, n_t);
    }
    // The descriptors of K, V, dS are recomputed from these each tile (a few adds), not hoisted
    // out of the loop as one register per k16 step (which spilled).
    th.wgmma_hold(k_addr);
    th.wgmma_hold(v_addr);
    th.wgmma_hold(kq_addr);
    th.wgmma_hold(ds_addr);
    const uint32_t q_addr = th.smem_addr(qdo_s + 2 * kBwdBlockM * D * stage);
    const uint32_t do_addr = q_addr + static_cast<uint32_t>(kBwdBlockM * D * sizeof(uint16_t));
    // Q's and dO's k16 step kk as the K-major B of S^T and dP^T (their rows the n dimension), and
    // as the N-major B of dV and dK (their rows the k dimension): the core-matrix layout, or kTma
    // the 128-byte swizzle.
    const auto b_k_major = [](uint32_t at, int kk) {
      if constexpr (kTma)
        return wgmma::k_major_sw128<kBwdBlockM>(at, kk);
      else
        return wgmma::k_major<D>(at, kk);
    };
    const auto b_mn_major = [](uint32_t at, int kk) {
      if constexpr (kTma)
        return wgmma::mn_major_sw128<kBwdBlockM>(at, kk);
      else
        return wgmma::mn_major<D>(at, kk);
    };

    // 1. S^T = K Q^T, then dP^T = V dO^T (64 keys x 64 queries each), a commit group each.
    float s[kBwdBlockM / 2], dp[kBwdBlockM / 2];
    th.wgmma_hold(dv);
    th.wgmma_hold(dk);
    th.wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      th.template wgmma_ss<kBwdBlockM, 0>(s, wgmma::k_major<D>(k_addr, kk), b_k_major(q_addr, kk), kk > 0);
    th.wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      th.template wgmma_ss<kBwdBlockM, 0>(dp, wgmma::k_major<D>(v_addr, kk), b_k_major(do_addr, kk), kk > 0);
    th.wgmma_commit();

    // kKeptInFlight: dropout's keep and (where the slab is not interior) the mask's visibility of
    // element (j, e), bit 4 j + e of `kept` and `shown`, computed here after S^T's and dP^T's issue
    // (ptxas puts the mask's bits under the products, the hash after the wait), from a held lane.
    uint32_t kept = 0, shown = ~0u;
    if constexpr (kKeptInFlight) {
      uint32_t lane_now = static_cast<uint32_t>(lane);
      th.wgmma_hold(lane_now);
      element_bits(lane_now, dropout_seed, ((static_cast<int64_t>(b) * n_h + h) * n_t + m0) * n_t + k0, k0, m0, n_t,
                   window, causal, dropout, kept, shown);
      th.wgmma_hold(kept);
      th.wgmma_hold(shown);
    }

    // 2. The element step on the mma.sync backward's [n8 block][4] view of the accumulators, one of
    // four straight copies (soft-cap or not, mask or not) chosen per warp. P^T needs S^T alone:
    // element_first (the exponentials, or the soft-cap's tanh), element_p (the mask; the soft-cap's
    // exponential), dS's factor p dscale and dropout's keep run while dP^T's products are in
    // flight, and dV's products (3.) are issued before dP^T is waited for (kEarlyDv). Not with
    // dropout at d 128: there the hash beside dP^T in flight spills 176 bytes (32 this way), so
    // p_and_ds runs after both (kWs: p_and_ds_kept, the hash and the mask done before the wait).
    constexpr bool kEarlyDv = !kDropout || D == 64;
    auto& s8 = reinterpret_cast<float(&)[kBwdBlockM / 8][4]>(s);
    auto& dp8 = reinterpret_cast<float(&)[kBwdBlockM / 8][4]>(dp);
    const SlabMask mine = slab_mask(k0, m0, n_t, window, causal);
    const auto by_variant = [&](const auto& step) {
      if (softcap > 0.f) {
        if (mine.interior)
          step.template operator()<false, true>();
        else
          step.template operator()<true, true>();
      } else {
        if (mine.interior)
          step.template operator()<false, false>();
        else
          step.template operator()<true, false>();
      }
    };
    const ElementArgs ea{lse_t,
                         scale,
                         scale2,
                         cap_in,
                         cap_out,
                         dropout,
                         slab_limits(k0, m0, n_t, window),
                         causal,
                         dropout_seed,
                         ((static_cast<int64_t>(b) * n_h + h) * n_t + m0) * n_t + k0,
                         n_t};
    // A fragments of queries 16 ks .. 16 ks + 15: register e of pa[ks] (P^T) and da[ks] (dS^T)
    // holds (key g + 8 (e % 2), queries 16 ks + 8 (e / 2) + 2 t and the next).
    uint32_t pa[kBwdBlockM / 16][4], da[kBwdBlockM / 16][4];
    if constexpr (kEarlyDv) {
      th.template wgmma_wait<1>();  // S^T
      th.wgmma_hold(s);
      // P^T into pa, and s becomes dS's factor that needs S^T alone, p dscale (P^T masked, before
      // dropout; dscale the scale, with a soft-cap times 1 - c^2): so dS^T needs no mask and no
      // exponential after dP^T's wait, and P^T is computed once.
      by_variant([&]<bool kMasked, bool kSoftcap>() {
#pragma unroll
        for (int ks = 0; ks < kBwdBlockM / 16; ++ks) {
          float p[2][4];
#pragma unroll
          for (int jj = 0; jj < 2; ++jj)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = 2 * ks + jj, ql = 8 * j + 2 * t + e % 2, kl = g + 8 * (e / 2);
              const float first = element_first<kSoftcap>(th, s8[j][e], lse_t, scale2, cap_in, ql);
              p[jj][e] = element_p<kMasked, kSoftcap>(th, first, ea, ql, kl);
              s8[j][e] = p[jj][e] * element_dscale<kSoftcap>(first, ea);
              if constexpr (kDropout) {  // element_second's keep, as a bit
                const bool keep = dropout_keep(ea.seed, ea.drop0 + static_cast<int64_t>(ql) * n_t + kl, dropout);
                kept |= static_cast<uint32_t>(keep) << (4 * j + e);
                p[jj][e] *= keep ? 1.f / (1.f - dropout) : 0.f;
              }
            }
          a_fragment_rn(pa[ks], p[0], p[1]);
        }
      });
    } else {
      th.template wgmma_wait<0>();
      th.wgmma_hold(s);
      th.wgmma_hold(dp);
      if constexpr (kKeptInFlight) {
        // t from a held copy of the thread's index here (not held across the tile).
        uint32_t tid_el = static_cast<uint32_t>(th.tid());
        th.wgmma_hold(tid_el);
        const int t_el = static_cast<int>(tid_el % 4u);
        // In two halves of the queries, each its own dispatch: ptxas then schedules each half's
        // keep factors and lse / D loads ahead within it, not the whole tile's (26 of them live
        // at once, 8 bytes of spills with bulk dQ as one dispatch).
        by_variant([&]<bool kMasked, bool kSoftcap>() {
          p_and_ds_kept<kMasked, kSoftcap, 0, kBwdBlockM / 16>(th, s8, dp8, ea, t_el, kept, shown, keep_scale);
        });
        by_variant([&]<bool kMasked, bool kSoftcap>() {
          p_and_ds_kept<kMasked, kSoftcap, kBwdBlockM / 16, kBwdBlockM / 8>(th, s8, dp8, ea, t_el, kept, shown,
                                                                            keep_scale);
        });
      } else
        by_variant(
            [&]<bool kMasked, bool kSoftcap>() { p_and_ds<kMasked, kSoftcap, kDropout>(th, s8, dp8, ea, g, t); });
#pragma unroll
      for (int ks = 0; ks < kBwdBlockM / 16; ++ks) a_fragment_rn(pa[ks], s8[2 * ks], s8[2 * ks + 1]);
    }

    // 3a. dV += P^T dO, left in flight (its own commit group).
    th.wgmma_hold(pa);
    th.wgmma_hold(dv);
    th.wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBwdBlockM / 16; ++ks) th.template wgmma_rs<D, 1>(dv, pa[ks], b_mn_major(do_addr, ks), true);
    th.wgmma_commit();

    if constexpr (kEarlyDv) {
      th.template wgmma_wait<1>();  // dP^T (S^T's group before it); dV's stays in flight
      th.wgmma_hold(s);
      th.wgmma_hold(dp);
      // dS = p dscale (dP keep - D), every variant alike (s holds p dscale, zero where masked).
#pragma unroll
      for (int j = 0; j < kBwdBlockM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if constexpr (kDropout) dp8[j][e] *= (kept >> (4 * j + e)) & 1u ? 1.f / (1.f - dropout) : 0.f;
          dp8[j][e] = s8[j][e] * (dp8[j][e] - lse_t[kBwdBlockM + 8 * j + 2 * t + e % 2]);  // lse, then D
        }
    }
    // dS^T into da, and to shared memory as it is, [key][query] (core_offset<kBwdBlockM>): a
    // register's two queries are adjacent there, one 32-bit store, and a warp's store covers one
    // core matrix's 128 bytes.
#pragma unroll
    for (int ks = 0; ks < kBwdBlockM / 16; ++ks) {
      a_fragment_rn(da[ks], dp8[2 * ks], dp8[2 * ks + 1]);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        th.store_shared_b32(ds_mine + 2u * wgmma::core_offset<kBwdBlockM>(8 * (e % 2), 16 * ks + 8 * (e / 2)),
                            da[ks][e]);
    }

    // 3b. dK += dS^T Q, left in flight.
    th.wgmma_hold(da);
    th.wgmma_hold(dk);
    th.wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBwdBlockM / 16; ++ks) th.template wgmma_rs<D, 1>(dk, da[ks], b_mn_major(q_addr, ks), true);
    th.wgmma_commit();

    // 4. dQ = dS K for this warpgroup's half of D, once every warp's dS^T is in shared memory.
    // The bulk dQ path: the staging's reads of the tile before complete before this barrier, past
    // which it is written again (a no-op for the threads that issued none). Here rather than at
    // the top barrier: a tile after the issue, not just after it.
    if constexpr (kBulkDq && !kDqWriter) th.template bulk_wait_read<0>();
    th.fence_proxy_async();  // this thread's dS stores, visible to wgmma
    consumers_sync();
    float dq[D / 4];
    th.wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBwdBlockN / 16; ++kk)
      th.template wgmma_ss<D / 2, 1, 1>(dq, wgmma::mn_major<kBwdBlockM>(ds_addr, kk), wgmma::mn_major<D>(kq_addr, kk),
                                        kk > 0);
    th.wgmma_commit();
    th.template wgmma_wait<0>();
    th.wgmma_hold(dq);
    th.wgmma_hold(dv);
    th.wgmma_hold(dk);
    // kWs: this thread's last wgmma reading the stage's Q and dO (dK, dV) has completed.
    if constexpr (kWs) th.mbar_arrive(empty + 8 * stage);
    // The fragments stay live until their wgmma completed (else ptxas may reuse their registers
    // in flight: C7513, see the forward).
    th.wgmma_hold(pa);
    th.wgmma_hold(da);
    // dq register 4 j + e: (query 16 (warp % 4) + g + 8 (e / 2), column wg D / 2 + 8 j + 2 t + e % 2).
    if constexpr (kBulkDq) {
      // This thread's staged dQ (row 16 (warp % 4) + g of its warpgroup's 64, column 2 t of its
      // half of D), and the row a lane of t < 2 reduces (g + 8 t of its warp's 16): computed each
      // tile from a held copy of the thread's index (tid_here), so that ptxas does not hoist them
      // out of the loop and hold them across it. At d 128 with dropout that spilled 56 bytes, 36
      // so; with the reduction's t and wg below from tid_here as well, 64.
      uint32_t tid_here = static_cast<uint32_t>(th.tid());
      th.wgmma_hold(tid_here);
      const int me = static_cast<int>(tid_here), w_here = me / 32 % 4, g_here = me % 32 / 4, t_here = me % 4,
                wg_here = me / 128;
      // Unused with kDqWriter (the writer's rows); here so that the other kernels' SASS stays as it was.
      [[maybe_unused]] const int dq_row = 16 * w_here + g_here + 8 * t_here;
      const uint32_t dq_mine =
          th.smem_addr(dq_s + (wg_here * kBwdBlockM + 16 * w_here + g_here) * kStageRow + 2 * t_here);
      // Staged as rows (64-bit stores), fenced for the async proxy (the bulk reduction reads
      // through it), the warp's lanes met; then one lane a row (t < 2) adds the row's D / 2 floats
      // to dq_accum with one cp.reduce.async.bulk; rows past the sequence's end are skipped.
      // kDqWriter: staged once the writer has read the tile before (dq empty; bit kStages of
      // `parity` its next phase's parity, the first turn free), then the writer told (dq full).
      if constexpr (kDqWriter) {
        th.mbar_wait(dq_empty, static_cast<int>((parity >> kStages & 1u) ^ 1u));
        parity ^= 1u << kStages;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int j = 0; j < D / 16; ++j)
          th.store_shared_v2_f32(dq_mine + static_cast<uint32_t>((8 * r * kStageRow + 8 * j) * sizeof(float)),
                                 dq[4 * j + 2 * r], dq[4 * j + 2 * r + 1]);
      th.fence_proxy_async();
      if constexpr (kDqWriter) {
        th.mbar_arrive(dq_full);
      } else {
        th.warp_sync();
        if (t < 2 && m0 + dq_row < n_t)
          th.bulk_reduce_add(dq_accum + ((static_cast<int64_t>(b) * n_h + h) * n_t + m0 + dq_row) * D + wg * (D / 2),
                             dq_mine + static_cast<uint32_t>((8 * t * kStageRow - 2 * t) * sizeof(float)),
                             static_cast<uint32_t>(D / 2 * sizeof(float)));
        th.bulk_commit();
      }
    } else if constexpr (kKeptInFlight) {
      // The same from a held copy of the thread's index, unsigned: the row's and column's 64-bit
      // offsets are not hoisted out of the loop (which spilled them), the tile's base uniform.
      uint32_t tid_at = static_cast<uint32_t>(th.tid());
      th.wgmma_hold(tid_at);
      const uint32_t row = tid_at / 32u % 4u * 16u + tid_at % 32u / 4u, col = tid_at % 4u * 2u;
      float* base = dq_accum + ((static_cast<int64_t>(b) * n_h + h) * n_t + m0) * D + wg * (D / 2);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (m0 + row + 8u * r >= n_t) continue;
        float* dst = base + ((row + 8u * r) * D + col);
#pragma unroll
        for (int j = 0; j < D / 16; ++j) th.atomic_add2(dst + 8 * j, dq[4 * j + 2 * r], dq[4 * j + 2 * r + 1]);
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t query = m0 + 16 * (warp % 4) + g + 8 * r;
        if (query >= n_t) continue;
        float* dst = dq_accum + ((static_cast<int64_t>(b) * n_h + h) * n_t + query) * D + wg * (D / 2) + 2 * t;
#pragma unroll
        for (int j = 0; j < D / 16; ++j) th.atomic_add2(dst + 8 * j, dq[4 * j + 2 * r], dq[4 * j + 2 * r + 1]);
      }
    }
  }
  // The bulk dQ path: every reduction complete (its staging's reads, and its additions) before
  // the block's shared memory goes away.
  if constexpr (kBulkDq && !kDqWriter) {
    th.template bulk_wait<0>();
  }

  // dK and dV of this warp's keys, summed over the group's query heads. kKeptInFlight: g and t
  // from a held copy of the thread's index, unsigned (not held across the walk, which spilled).
  uint32_t tid_end = static_cast<uint32_t>(th.tid());
  if constexpr (kKeptInFlight) th.wgmma_hold(tid_end);
  const int g_end = kKeptInFlight ? static_cast<int>(tid_end % 32u / 4u) : g,
            t_end = kKeptInFlight ? static_cast<int>(tid_end % 4u) : t;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t key = k0 + g_end + 8 * r;
    if (key >= n_t) continue;
    uint16_t* dst_k = dqkv + (static_cast<int64_t>(b) * n_t + key) * width + static_cast<int64_t>(n_h + kv) * D;
    uint16_t* dst_v = dst_k + static_cast<int64_t>(n_kv) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + 2 * t_end;
      store_pair(dst_k + d, pack_rn(dk[4 * i + 2 * r], dk[4 * i + 2 * r + 1]));
      store_pair(dst_v + d, pack_rn(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]));
    }
  }
}

}  // namespace bench::kernels::flash

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
