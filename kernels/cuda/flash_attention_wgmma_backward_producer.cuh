// defines: the producer warpgroup's roles in flash_backward_wgmma<..., kWs = true>
//          (flash_attention_wgmma_backward_kernels.cuh) beside its TMA thread:
//          wgmma_backward_stats_warp (each tile's lse and D into its stage) and
//          wgmma_backward_dq_writer (the bulk dQ path's reductions of the staged dQ)
//
// Both run at the producer's setmaxnreg.dec 24 and walk the block's query tiles as the consumers
// and the TMA thread do (h1_of / m1_of over the group's heads from h_first, queries from m_begin
// to m_end). docs/flash-backward.md, "The dQ writer" and "Dropout at d 128 in 240 registers".
#pragma once

#include <cstdint>

#include "flash_attention_backward_kernels.cuh"
#include "flash_attention_wgmma_backward_layout.cuh"
#include "flash_attention_wgmma_kernels.cuh"

namespace bench::kernels::flash {

/// The stats warp (the producer's third): per tile, into its stage once the consumers have emptied
/// it (the TMA thread's walk and waits), the tile's lse (times log2 e) and D, zeros past the
/// sequence's end (row_stat's values), lane l rows l and l + 32 of each; then each lane arrives on
/// the stage's full mbarrier. The consumers hold no stat across the tile and store none. `full` and
/// `empty` are the stages' mbarriers (8 bytes apart), lse_s the stages' copies (2 kBwdBlockM floats
/// each: lse, then D).
template <int kStages, class Thread>
BENCH_FLASH_FN void wgmma_backward_stats_warp(Thread& th, float* lse_s, const float* lse, const float* dvec,
                                              uint32_t full, uint32_t empty, int b, int n_h, int64_t n_t, int h_first,
                                              int group, int64_t m_begin, int64_t m_end) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int l = th.tid() % 32;
  int s = 0, phase = 0, hp = h_first;
  int64_t mp = m_begin;
#pragma unroll 1
  for (; hp < h_first + group; hp = h1_of(hp, mp, m_end), mp = m1_of(mp, m_begin, m_end)) {
    th.mbar_wait(empty + 8 * s, phase ^ 1);
    const int64_t row = (static_cast<int64_t>(b) * n_h + hp) * n_t + mp;
    float* to = lse_s + 2 * kBwdBlockM * s;
#pragma unroll
    for (int r = 0; r < kBwdBlockM; r += 32) {
      const bool in = mp + l + r < n_t;
      to[l + r] = in ? lse[row + l + r] * kLog2e : 0.f;
      to[kBwdBlockM + l + r] = in ? dvec[row + l + r] : 0.f;
    }
    th.mbar_arrive(full + 8 * s);
    if (++s == kStages) s = 0, phase ^= 1;
  }
}

/// The dQ writer, lane 0 of the producer's second warp: per tile, once the consumers have staged
/// its dQ (dq full), it adds the staging's rows (warpgroup w's half of D for query q at row w
/// kBwdBlockM + q; rows past the sequence's end skipped) to dq_accum by cp.reduce.async.bulk, one a
/// row and one bulk group a tile, and once they have read the staging (wait_group.read 0) arrives
/// on dq empty. One thread in a rolled loop rather than a lane a row: a bulk operation's operands
/// are uniform registers, so a warp's lanes issue one by one anyway, and 4 rows a lane hoisted
/// spilled 56 bytes of the 24 registers. Every reduction complete (wait_group 0) before it ends.
/// dq_s is the staging (kWgGroups kBwdBlockM rows of kWgmmaDqStageRow<D> floats), `dq_full` and
/// `dq_empty` its mbarriers.
template <int D, class Thread>
BENCH_FLASH_FN void wgmma_backward_dq_writer(Thread& th, float* dq_accum, const float* dq_s, uint32_t dq_full,
                                             uint32_t dq_empty, int b, int n_h, int64_t n_t, int h_first, int group,
                                             int64_t m_begin, int64_t m_end) {
  constexpr int kStageRow = kWgmmaDqStageRow<D>;
  int phase = 0, hw = h_first;
  int64_t mw = m_begin;
#pragma unroll 1
  for (; hw < h_first + group; hw = h1_of(hw, mw, m_end), mw = m1_of(mw, m_begin, m_end)) {
    th.mbar_wait(dq_full, phase);
    phase ^= 1;
    const int rows = n_t - mw < kBwdBlockM ? static_cast<int>(n_t - mw) : kBwdBlockM;
    float* dst = dq_accum + ((static_cast<int64_t>(b) * n_h + hw) * n_t + mw) * D;
    uint32_t src = th.smem_addr(dq_s);
#pragma unroll 1
    for (int q = 0; q < rows; ++q, dst += D, src += kStageRow * sizeof(float)) {
#pragma unroll
      for (int w = 0; w < kWgGroups; ++w)
        th.bulk_reduce_add(dst + w * (D / 2), src + w * kBwdBlockM * kStageRow * sizeof(float),
                           static_cast<uint32_t>(D / 2 * sizeof(float)));
    }
    th.bulk_commit();
    th.template bulk_wait_read<0>();
    th.mbar_arrive(dq_empty);
  }
  th.template bulk_wait<0>();
}

}  // namespace bench::kernels::flash
