// defines: the shared-memory layout and launch figures of flash_backward_wgmma
//          (flash_attention_wgmma_backward_kernels.cuh): kWgmmaDqStageRow, kWgmmaBwdStages,
//          kWgmmaBwdStatStages, wgmma_backward_threads, wgmma_backward_smem_bytes (and the
//          static_asserts that hold their figures), kWsBwdBarrier, wgmma_backward_tma_max_regs;
//          what the launcher (flash_attention_wgmma.cu) and the emulator tests size a block by
//
// docs/flash-backward.md, "Flash attention backward on wgmma" and the sections after it, give the
// figures' reasons.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash_attention_backward_kernels.cuh"
#include "flash_attention_wgmma_kernels.cuh"
#include "tma_map.h"
#include "wgmma_layout.cuh"

namespace bench::kernels::flash {

static_assert(kBwdThreads == kWgThreads && kBwdBlockN == kWgGroups * kWgRows,
              "the mma.sync backward's block: two warpgroups of 64 keys");
static_assert(kBwdBlockM == 64, "a query tile is one wgmma n64 (S^T) and four k16 steps (dV, dK)");

/// A row of the bulk dQ path's staging buffer, in floats: a warpgroup's half of D for one query,
/// padded by 32 bytes so that a warp's 64-bit stores of its 8 rows (g) fall in distinct banks (2
/// wavefronts an instruction, the least for 256 bytes) while each row stays contiguous and 16-byte
/// aligned for cp.reduce.async.bulk.
template <int D>
inline constexpr int kWgmmaDqStageRow = D / 2 + 8;

/// Stages of Q and dO in flash_backward_wgmma<..., kWs>: two (the tile being multiplied, the next
/// one being loaded), three for the warp-specialized variant (the producer may then load two tiles
/// ahead of the consumers; docs/flash-backward.md, "Warp-specialized backward").
template <bool kWs>
inline constexpr int kWgmmaBwdStages = kWs ? 3 : 2;

/// Copies of a tile's lse and D in flash_backward_wgmma<..., kWs>'s shared memory: one, written by
/// the consumers at the top of each tile, or with kWs one a stage of Q and dO, written by the
/// producer's stats warp with the stage (the consumers then hold no stat across a tile).
template <bool kWs>
inline constexpr int kWgmmaBwdStatStages = kWs ? kWgmmaBwdStages<kWs> : 1;

/// Threads of flash_backward_wgmma<..., kWs>: two consumer warpgroups, and with kWs the producer's.
template <bool kWs>
constexpr int wgmma_backward_threads() {
  return kWs ? kWsThreads : kWgThreads;
}

/// Shared memory of flash_backward_wgmma<D>: K and V (kBwdBlockN rows), the stages of Q and dO
/// (kWgmmaBwdStages, kBwdBlockM rows each), dS^T (kBwdBlockN x kBwdBlockM), the tile's lse
/// (base 2) and D, then with kBulkDq the bulk dQ path's staging: per warpgroup kBwdBlockM rows of
/// kWgmmaDqStageRow<D> floats; with kTma then the stages' "full" mbarriers and with kWs their
/// "empty" ones (8 bytes each), with kWs and kBulkDq the dQ writer's "dq full" and "dq empty"
/// (8 bytes each), and 1024 bytes of slack to align K (and so the Q and dO stages
/// after it, multiples of 1024 bytes further) to the 128-byte swizzle's atoms wherever the block's
/// shared memory starts.
template <int D, bool kBulkDq = false, bool kTma = false, bool kWs = false>
constexpr size_t wgmma_backward_smem_bytes() {
  constexpr int kStages = kWgmmaBwdStages<kWs>;
  return static_cast<size_t>((2 * kBwdBlockN + 2 * kStages * kBwdBlockM) * D + kBwdBlockM * kBwdBlockN) *
             sizeof(uint16_t) +
         2 * kBwdBlockM * sizeof(float) * kWgmmaBwdStatStages<kWs> +
         (kBulkDq ? static_cast<size_t>(kWgGroups) * kBwdBlockM * kWgmmaDqStageRow<D> * sizeof(float) : 0) +
         (kTma ? (kWs ? 2 : 1) * kStages * 8 + wgmma::kSw128Atom : 0) + (kWs && kBulkDq ? 2 * 8 : 0);
}
static_assert(wgmma_backward_smem_bytes<128, true, true>() <= kWgMaxSmem, "the 227 KB a block may opt in to on sm_90");
// The warp-specialized variant's three stages at d 128 with bulk dQ: 131,072 bytes of K, V and Q /
// dO stages (+ 32,768 for the third), 16,384 of dS^T, 1,536 of lse and D (a copy a stage), 36,864
// of staging, 48 of mbarriers (and 16 of the dQ writer's two), 1,024 of slack: 219,712 <=
// 232,448. A second staging buffer (36,864 more, 256,576) would not fit.
static_assert(wgmma_backward_smem_bytes<128, true, true, true>() == 219712 &&
                  wgmma_backward_smem_bytes<128, true, true, true>() <= kWgMaxSmem,
              "the figure above, within the 227 KB a block may opt in to");
// Named barrier of the warp-specialized backward's consumers (bar.sync over their 256 threads, the
// producer never among them): where the variant in step has its __syncthreads.
constexpr int kWsBwdBarrier = 1;
static_assert(kBwdBlockN * 64 * sizeof(uint16_t) % wgmma::kSw128Atom == 0 &&
                  kBwdBlockM * 64 * sizeof(uint16_t) % wgmma::kSw128Atom == 0 && kBwdBlockM == tma::kFlashBoxRows,
              "kTma: K, V and every Q or dO tile whole swizzle atoms, a tile's column block one box of rows");
static_assert(wgmma_backward_smem_bytes<128>() % 16 == 0 && wgmma_backward_smem_bytes<64>() % 16 == 0 &&
                  kWgmmaDqStageRow<64> * sizeof(float) % 16 == 0 && kWgmmaDqStageRow<128> * sizeof(float) % 16 == 0,
              "the staging buffer and its rows 16-byte aligned (cp.reduce.async.bulk's source)");

/// The register cap of flash_backward_wgmma<D, kDropout, ..., kTma = true>'s kernel (a
/// __maxnreg__, in place of __launch_bounds__(kWgThreads, 1), whose 255 it would be otherwise):
/// 240 at d 128 without dropout, the consumers' budget under warp specialization (setmaxnreg.inc
/// 240), which ptxas meets there without a spill and 5 loop instructions more (253 / 248
/// registers uncapped; 236 / 234 still fit, 234 / 232 spill); 255 for the rest (d 64 needs no
/// cap, dropout at d 128 spills already). docs/flash-backward.md, "240 registers for the TMA
/// backward".
template <int D, bool kDropout>
constexpr int wgmma_backward_tma_max_regs() {
  return D == 128 && !kDropout ? 240 : 255;
}

}  // namespace bench::kernels::flash
