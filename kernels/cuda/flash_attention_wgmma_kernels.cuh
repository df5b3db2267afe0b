// defines: bench::kernels::flash::flash_forward_wgmma — the flash attention forward on Hopper's
//          warpgroup MMA (wgmma.mma_async, sm_90a), a function of a `Thread` like the mma.sync
//          forward of flash_attention_kernels.cuh, whose helpers it shares (tile_mask,
//          forward_grid, pack_rn, the dropout hash), compiled by flash_attention_wgmma.cu and run
//          on the CPU by the warp emulator (tests/kernels/flash_emulation_test.cpp)
//
// Beyond flash_attention_kernels.cuh's Thread, a wgmma Thread supplies (PTX ISA 9.7.15; for kWs
// also warpgroup(), mbar_init/mbar_arrive/mbar_wait/cp_async_mbar_arrive, named_sync/named_arrive
// and setmaxnreg_inc/dec<N>, flash_attention_wgmma.cu describes them):
// smem_addr(p) (cvta.to.shared), fence_proxy_async() (fence.proxy.async.shared::cta: this thread's
// cp.async writes become visible to wgmma, which reads shared memory through the async proxy),
// wgmma_fence(), wgmma_commit(), wgmma_wait<n>() (wgmma.fence / commit_group / wait_group),
// wgmma_hold(registers) (keeps the compiler from moving other uses of registers that a wgmma in
// flight reads or writes across this point: an empty asm on the GPU, nothing on the CPU), and
// wgmma_ss<N, kTransB>(d, desc_a, desc_b, accumulate) and wgmma_rs<N, kTransB>(d, a, desc_b,
// accumulate) (wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 with A from shared memory or
// registers; B from shared memory, N-major when kTransB).
//
// Shape: a block of two warpgroups (256 threads) takes 128 queries of one (batch, head), 64 a
// warpgroup (wgmma's m64), in forward_grid's order. Q and three stages of K and V tiles of kN keys
// (64, or 128 for the warp-specialized variant as launched: kWsBlockN)
// sit in shared memory in the core-matrix layout of wgmma_layout.cuh (interleaved, no swizzle:
// every 16-byte chunk a thread copies lands next to its neighbour's, and each 8 x 16-byte core
// matrix the tensor core reads is 128 contiguous bytes), brought in by cp.async by all threads,
// the next tile's copy overlapping this tile's products. Per tile j and warpgroup:
//   1. S_j = Q K_j^T by D / 16 wgmma m64nNk16, N = kN (Q and K both K-major from shared memory),
//      one commit group; then O += P_{j-1} V_{j-1} by kN / 16 wgmma m64nDk16 (P from registers, V an
//      N-major B: the transpose bit, no transposed copy), a second group.
//   2. wait_group 1 (S_j complete, P V still running), and the online softmax of S_j in registers
//      (each warp owns 16 rows of the 64 in the m16n8 C layout the mma.sync forward's softmax
//      uses: the same masking, soft-cap, negative-scale and dropout arithmetic), P_j rounded to
//      bf16 into wgmma's A fragments (the m16n8k16 A layout: the accumulators of keys
//      16 kb .. 16 kb + 15 are exactly one), while the tensor cores run P_{j-1} V_{j-1}
//      (FlashAttention-3's intra-warpgroup pipelining). Dropout's keep bits are hashed before
//      step 1 (S not live yet: at key tiles of 128 there is no room for the hashes beside it).
//   3. wait_group 0, O rescaled by the new maxima, P_j kept for the next tile.
// Three stages because tile j-1's V is read until step 3 of tile j, while tile j + 1 is copied.
// Two variants share this code (kWs): the two warpgroups in step, all 256 threads copying and a
// __syncthreads a tile; or warp-specialized (FlashAttention-3's structure): a third warpgroup, the
// producer, keeps 24 registers (setmaxnreg.dec) and fills Q and the ring by cp.async, each stage
// under a "full" mbarrier (cp.async.mbarrier.arrive.noinc) and an "empty" one (the consumers
// arrive once the P V that read its V has completed); the consumers (setmaxnreg.inc 240) wait on
// full (try_wait.parity), make the producer's copies visible to wgmma by fence.proxy.async, and
// take turns to issue S and P V by named barriers, so that one's softmax runs while the other's
// products do. kTma (with kWs only, FlashAttention-3's copy path): the producer's copies are TMA
// tensor loads (cp.async.bulk.tensor, a box of 64 columns x 64 rows each, issued by one thread
// under mbarrier.arrive.expect_tx), the tiles in the 128-byte swizzle of wgmma_layout.cuh
// (sw128_offset; descriptors k_major_sw128 / mn_major_sw128), the rows past the sequence's end
// zeros by the tensor map's bounds (tma_map.h); the consumers need no fence.proxy.async, TMA
// writes through the async proxy. Its Thread also supplies mbar_arrive_expect_tx(bar, bytes) and
// tma_load_4d(dst, map, c0, c1, c2, c3, bar). Compiled for sm_90a,
// checked by the CPU emulator; not run on a GPU (docs/flash-forward.md, "Flash attention
// forward on wgmma").
#pragma once

#include <cmath>
#include <cstdint>

#include "flash_attention_kernels.cuh"
#include "tma_map.h"
#include "wgmma_layout.cuh"

#if !defined(__CUDACC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash {

constexpr int kWgRows = 64;                      // query rows per warpgroup (wgmma's m64)
constexpr int kWgGroups = kFwdBlockM / kWgRows;  // warpgroups per block: 2
constexpr int kWgThreads = kWgGroups * 128;      // threads per block: 256
// K/V stages: the tile being multiplied, the one whose P V is still in flight, the next one.
constexpr int kWgStages = 3;
// Key tiles: kN = kBlockN (64: S one wgmma m64n64k16 a k16 step, P four A fragments) or 128
// (m64n128k16, P eight), a template argument of flash_forward_wgmma. The warp-specialized forward
// is launched at kWsBlockN = 128 (FlashAttention-3's tile at d 128): S's wgmma read 6 KB of shared
// memory per 64 clocks instead of 4 KB per 32 (the SM's 128 B/clk), and the per-tile overheads
// (mbarrier round trips, named barriers, the softmax's row reductions) are paid once per 128 keys
// (docs/flash-forward.md, "Key tiles of 128"); the forward in step keeps 64.
constexpr int kWsBlockN = 128;

/// The key tile flash_attention_wgmma_forward launches for `requested` (AttentionArgs::
/// flash_forward_key_tile: 0 the default, 64 or 128) and the variant (`ws`: warp-specialized,
/// cp.async or TMA); 0 where no such kernel is built. The warp-specialized variants take 64 or
/// 128, by default kWsBlockN, dropout or not; the variant in step takes 64 only. The emulator's
/// tests run the kernels through it.
constexpr int wgmma_forward_key_tile(int requested, bool ws) {
  const int kn = requested != 0 ? requested : ws ? kWsBlockN : kBlockN;
  if (kn == kBlockN) return kn;
  return kn == kWsBlockN && ws ? kn : 0;
}
// Shared memory an SM gives one block (sm_90: 227 KB).
constexpr size_t kWgMaxSmem = 227 * 1024;

// The warp-specialized variant (kWs): a third warpgroup, the producer, fills the K/V ring by
// cp.async and gives registers to the two consumer warpgroups (setmaxnreg: 128 x 24 + 256 x 240 =
// 384 x 168, what __launch_bounds__(384, 1) gives a thread at launch).
constexpr int kWsThreads = kWgThreads + 128;
constexpr int kWsProducerRegs = 24, kWsConsumerRegs = 240;
static_assert(128 * kWsProducerRegs + kWgThreads * kWsConsumerRegs <= 65536 / kWsThreads / 8 * 8 * kWsThreads,
              "setmaxnreg: the consumers take no more than the producer gives");
// Named barrier kWsTurn + w (bar.sync by warpgroup w, bar.arrive by the other: 256 threads) is
// consumer warpgroup w's turn to issue its wgmma.
constexpr int kWsTurn = 1;

/// The TMA variant's tiles: Q's 128 rows, then each stage's K and V (kN rows each), every tile
/// D / 64 column blocks of its rows x 128 bytes in the 128-byte swizzle, 1024-byte aligned
/// (wgmma::kSw128Atom) from a base that the kernel aligns (the slack below).
template <int D>
constexpr size_t wgmma_tma_tile_bytes(int rows) {
  return static_cast<size_t>(rows) * D * sizeof(uint16_t);
}
static_assert(wgmma_tma_tile_bytes<64>(kBlockN) % wgmma::kSw128Atom == 0, "1024-byte aligned tiles");

/// Threads of flash_forward_wgmma<D, kDropout, kWs>.
template <bool kWs>
constexpr int wgmma_forward_threads() {
  return kWs ? kWsThreads : kWgThreads;
}

/// Shared memory of flash_forward_wgmma<D, ..., kWs, kTma>: Q (128 rows) and kWgStages stages of
/// K and V (kN rows each), no padding (the core-matrix layout needs none); with kWs, then the
/// mbarriers: Q's, each stage's "full" and each stage's "empty" (8 bytes each); with kTma, 1024
/// bytes more, to align the tiles to the 128-byte swizzle's atoms wherever the block's shared
/// memory starts.
template <int D, bool kWs = false, bool kTma = false, int kN = kBlockN>
constexpr size_t wgmma_forward_smem_bytes() {
  return static_cast<size_t>(kFwdBlockM + 2 * kWgStages * kN) * D * sizeof(uint16_t) +
         (kWs ? 8 * (1 + 2 * kWgStages) : 0) + (kTma ? wgmma::kSw128Atom : 0);
}

// The largest launched: d 128, key tiles of 128, TMA: 32 KB of Q + 3 stages x 64 KB of K and V
// + 56 bytes of mbarriers + 1024 of alignment slack = 230,456 bytes <= 232,448.
static_assert(wgmma_forward_smem_bytes<128, true, true, kWsBlockN>() <= kWgMaxSmem, "fits an SM's shared memory");
static_assert(wgmma_forward_smem_bytes<128, true, true, kWsBlockN>() == 230456, "the figure above");

/// `p`, a pointer into shared memory, moved up to the next 128-byte swizzle atom
/// (wgmma::kSw128Atom): where the TMA variants' swizzled tiles start (forward and backward),
/// wherever the block's shared memory starts (their shared-memory sizes add the slack; `p` is
/// 16-byte aligned). An offset added to `p`, a visible multiple of 16 bytes: the compiler then
/// still knows the result shared and 16-byte aligned (a select between two pointers made the
/// backward's reads of its lse and D rows generic loads, LD.E; an offset of any even size, 32-bit
/// LDS where they are LDS.64).
template <class Thread>
BENCH_FLASH_FN uint16_t* sw128_align(Thread& th, uint16_t* p) {
  const uint32_t pad = (wgmma::kSw128Atom - th.smem_addr(p) % wgmma::kSw128Atom) % wgmma::kSw128Atom;
  return p + (pad & ~15u) / sizeof(uint16_t);
}

/// Issues cp.async copies of rows [row0, row0 + kRows) of one head (D elements from `base`, rows
/// `width` apart) into `dst` in wgmma_layout.cuh's core-matrix layout, and when `second` is set
/// the head `off` elements further into `second`; rows at or past `rows` become zeros (copying
/// nothing, from row 0). Chunk u of 16 bytes (row 8 (u / D) + u % 8, columns 8 ((u / 8) % (D / 8)))
/// lands at element 8 u: the 32 chunks of a warp fill 512 contiguous bytes of shared memory (no
/// bank conflict beyond the 4 wavefronts that 512 bytes take) and read 8 rows of 64 bytes, whole
/// 32-byte sectors. The copy is shared by kThreads threads, this one the `me`-th. kRolled: a loop
/// the compiler keeps rolled (the producer warpgroup's, in 24 registers: unrolled, the addresses
/// of all its copies live at once). The caller commits and waits (or arrives on an mbarrier).
template <int D, int kRows, int kThreads, bool kRolled = false, class Thread>
BENCH_FLASH_FN void wgmma_rows_async(Thread& th, int me, uint16_t* dst, uint16_t* second, int off, const uint16_t* base,
                                     int64_t row0, int64_t rows, int64_t width) {
  constexpr int kChunks = kRows * D / 8;
  static_assert(kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll(kRolled ? 1 : kChunks / kThreads)
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int u = me + kThreads * i;
    const int row = 8 * (u / D) + u % 8, col = 8 * ((u / 8) % (D / 8));
    const bool ok = row0 + row < rows;
    const uint16_t* src = ok ? base + (row0 + row) * width + col : base;
    th.cp_async_16(dst + 8 * u, src, ok);
    if (second != nullptr) th.cp_async_16(second + 8 * u, src + off, ok);
  }
}

/// The same copy shared by all kWgThreads threads of a block, this one th.tid() (the backward's).
template <int D, int kRows, class Thread>
BENCH_FLASH_FN void wgmma_rows_async(Thread& th, uint16_t* dst, uint16_t* second, int off, const uint16_t* base,
                                     int64_t row0, int64_t rows, int64_t width) {
  wgmma_rows_async<D, kRows, kWgThreads>(th, th.tid(), dst, second, off, base, row0, rows, width);
}

/// Forward on wgmma: the contract of flash_forward (flash_attention_kernels.cuh), every variant
/// (causal or not, window, soft-cap, GQA/MQA, dropout, row_max and lse), d_head 64 or 128, for a
/// block of wgmma_forward_threads<kWs>() threads with wgmma_forward_smem_bytes<D, kWs>() of shared
/// memory. kWs: warp-specialized (FlashAttention-3's structure), the producer warpgroup copying
/// K/V into the ring under full/empty mbarriers and the two consumer warpgroups taking turns at
/// the tensor cores by named barriers; else every thread copies and a __syncthreads a tile keeps
/// the warpgroups in step. kTma (with kWs): the producer's copies by TMA through `tma_map`
/// (the tensor map of tma::flash_tensor_map(qkv, ...): on the GPU a CUtensorMap kernel parameter,
/// in the emulator its arguments), the tiles 128-byte swizzled. The per-tile math is the same code.
template <int D, bool kDropout, bool kWs, bool kTma = false, int kN = kBlockN, class Thread>
BENCH_FLASH_FN void flash_forward_wgmma(Thread& th, const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out,
                                        float* __restrict__ row_max, float* __restrict__ lse, int64_t n_t, int n_h,
                                        int n_kv, float scale, float softcap, int64_t window, bool causal,
                                        float dropout, uint64_t dropout_seed, const void* tma_map = nullptr) {
  static_assert(D == 64 || D == 128, "d_head 64 or 128");
  static_assert(kWs || !kTma, "TMA loads are the warp-specialized producer's");
  static_assert(kN == 64 || kN == 128, "key tiles of 64 or 128");
  // Shared memory: Q (128 rows), then stage 0's K and V, then stage 1's (kN rows each); with kTma
  // from the first 1024-byte boundary.
  uint16_t* q_s = reinterpret_cast<uint16_t*>(th.shared());
  if constexpr (!kTma) (void)tma_map;
  if constexpr (kTma) q_s = sw128_align(th, q_s);
  uint16_t* k_s = q_s + kFwdBlockM * D;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

  // kWs: a warp-uniform warpgroup index (ptxas then knows the branches on it warpgroup-uniform).
  const int wg = kWs ? th.warpgroup() : th.tid() / 128;
  const int warp = (th.tid() % 128) / 32, lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  const int64_t n_blocks = (n_t + kFwdBlockM - 1) / kFwdBlockM;
  const int64_t m0 = (causal ? n_blocks - 1 - th.block_y() : th.block_x()) * kFwdBlockM;
  const int64_t q0 = m0 + wg * kWgRows;  // this warpgroup's first query
  const int bh = causal ? th.block_x() : th.block_y(), b = bh / n_h, h = bh % n_h, kv = h / (n_h / n_kv);
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* k_base = seq + static_cast<int64_t>(n_h + kv) * D;
  const int v_off = n_kv * D;

  const int64_t block_end = m0 + kFwdBlockM < n_t ? m0 + kFwdBlockM : n_t;
  const int64_t n_end = causal ? block_end : n_t;
  const int64_t first_key = window > 0 && m0 + 1 - window > 0 ? m0 + 1 - window : 0;
  const int64_t n_begin = first_key / kN * kN;

  // kWs: the mbarriers after the ring. Q's (the producer's 128 threads arrive once their copies
  // of Q have landed); a stage's "full" (the same, for its K and V); a stage's "empty" (every
  // consumer thread arrives once its P V that read the stage's V has completed, its S long before).
  const uint32_t q_full = th.smem_addr(k_s + 2 * kWgStages * kN * D), full = q_full + 8, empty = full + 8 * kWgStages;
  if constexpr (kWs) {
    if (th.tid() == 0) {
      // kTma: one arrival a phase (the producer's elected thread, with its expect_tx); cp.async:
      // each of the producer's 128 threads once its copies have landed.
      th.mbar_init(q_full, kTma ? 1 : 128);
      for (int i = 0; i < kWgStages; ++i) {
        th.mbar_init(full + 8 * i, kTma ? 1 : 128);
        th.mbar_init(empty + 8 * i, kWgThreads);
      }
    }
    th.sync();  // the inits, visible to every thread; the last __syncthreads of the kernel
    if (wg == kWgGroups) {
      // The producer: Q, then tile i into stage i % kWgStages once the consumers have emptied it
      // (tile i - kWgStages's P V completed). Its phase bit flips at each turn of the ring, and a
      // fresh mbarrier counts its phase of parity 1 as completed, so the first turn does not wait.
      th.template setmaxnreg_dec<kWsProducerRegs>();
      const int me = th.tid() - kWgThreads;
      if constexpr (kTma) {
        // One thread issues every box: Q's (its 128 rows, D / 64 column blocks, two boxes of 64
        // rows each), then per tile K's and V's (D / 64 boxes each), each phase's bytes announced
        // by expect_tx first. Boxes that reach past the sequence's end are zeros there, and count
        // whole. Coordinates (column, head, row, batch), innermost first (tma::flash_tensor_map).
        if (me == 0) {
          constexpr int kBoxRows = static_cast<int>(tma::kFlashBoxRows);
          constexpr uint32_t kBox = kBoxRows * 64 * sizeof(uint16_t);
          const uint32_t q_at = th.smem_addr(q_s);
          th.mbar_arrive_expect_tx(q_full, kBox * (kFwdBlockM / kBoxRows) * (D / 64));
#pragma unroll 1
          for (int c = 0; c < D / 64; ++c)
#pragma unroll 1
            for (int r = 0; r < kFwdBlockM / kBoxRows; ++r)
              th.tma_load_4d(q_at + (c * kFwdBlockM + r * kBoxRows) * 128, tma_map, 64 * c, h,
                             static_cast<int>(m0) + r * kBoxRows, b, q_full);
          int stage = 0, phase = 0;
#pragma unroll 1
          for (int64_t n0 = n_begin; n0 < n_end; n0 += kN) {
            th.mbar_wait(empty + 8 * stage, phase ^ 1);
            const uint32_t k_at = th.smem_addr(k_s + 2 * kN * D * stage), v_at = k_at + kN * D * 2;
            th.mbar_arrive_expect_tx(full + 8 * stage, kBox * 2 * (kN / kBoxRows) * (D / 64));
            // Column block c of a tile of kN rows at c kN 128 bytes, its box r of 64 rows r 64 128
            // bytes in (sw128_offset<kN>'s layout: the XOR is of address bits 4-9, within a box).
#pragma unroll 1
            for (int c = 0; c < D / 64; ++c)
#pragma unroll 1
              for (int r = 0; r < kN / kBoxRows; ++r) {
                const uint32_t at = (c * kN + r * kBoxRows) * 128;
                const int row = static_cast<int>(n0) + r * kBoxRows;
                th.tma_load_4d(k_at + at, tma_map, 64 * c, n_h + kv, row, b, full + 8 * stage);
                th.tma_load_4d(v_at + at, tma_map, 64 * c, n_h + n_kv + kv, row, b, full + 8 * stage);
              }
            if (++stage == kWgStages) stage = 0, phase ^= 1;
          }
        }
        return;
      }
      wgmma_rows_async<D, kFwdBlockM, 128, true>(th, me, q_s, nullptr, 0, seq + static_cast<int64_t>(h) * D, m0, n_t,
                                                 width);
      th.cp_async_mbar_arrive(q_full);
      int stage = 0, phase = 0;
      for (int64_t n0 = n_begin; n0 < n_end; n0 += kN) {
        th.mbar_wait(empty + 8 * stage, phase ^ 1);
        uint16_t* ks = k_s + 2 * kN * D * stage;
        wgmma_rows_async<D, kN, 128, true>(th, me, ks, ks + kN * D, v_off, k_base, n0, n_t, width);
        th.cp_async_mbar_arrive(full + 8 * stage);
        if (++stage == kWgStages) stage = 0, phase ^= 1;
      }
      th.cp_async_wait(0);  // no copy outlives its thread
      return;
    }
    th.template setmaxnreg_inc<kWsConsumerRegs>();
    th.mbar_wait(q_full, 0);
    // The producer's landed cp.async copies of Q, visible to wgmma (TMA's writes need no fence:
    // they are the async proxy's).
    if constexpr (!kTma) th.fence_proxy_async();
    // Warpgroup 0 issues first: warpgroup 1 lets it (and arrives once fewer at the end, below).
    if (wg == 1) th.named_arrive(kWsTurn, kWgThreads);
  } else {
    wgmma_rows_async<D, kFwdBlockM>(th, q_s, nullptr, 0, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
    wgmma_rows_async<D, kN>(th, k_s, k_s + kN * D, v_off, k_base, n_begin, n_t, width);
    th.cp_async_commit();
  }

  // This thread's two rows of its warp's 16: g and g + 8 (row index r). D's register 4 j + e holds
  // (row g + 8 (e / 2), column 8 j + 2 t + e % 2) of its 64 x N.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  // Row 64 wg: core group 8 wg; kTma, 64 wg rows of 128 bytes into column block 0.
  const uint32_t q_addr = th.smem_addr(q_s + wg * kWgRows * (kTma ? 64 : D));
  const float scale2 = scale * kLog2e, cap_in = softcap > 0.f ? scale / softcap : 0.f, cap_out = softcap * kLog2e;
  const int row0 = 16 * warp + g;  // this thread's first row within its warpgroup's 64

  // P of the previous tile as A fragments, waiting for its P V (issued with this tile's S), and
  // that tile's V. Before the first tile P is 0 (and V stage 0's, loaded by then): the P V issued
  // with the first S adds nothing, and every wgmma is issued on every path.
  uint32_t pa[kN / 16][4] = {};
  uint32_t pv_addr = th.smem_addr(k_s + kN * D);
  // O += P V for the previous tile: kN / 16 wgmma m64nDk16, V as an N-major B; one commit group.
  const auto issue_pv = [&] {
#pragma unroll
    for (int kb = 0; kb < kN / 16; ++kb)
      th.template wgmma_rs<D, 1>(o, pa[kb],
                                 kTma ? wgmma::mn_major_sw128<kN>(pv_addr, kb) : wgmma::mn_major<D>(pv_addr, kb), true);
    th.wgmma_commit();
  };

  int stage = 0;                   // tile i sits in stage i % kWgStages
  [[maybe_unused]] int phase = 0;  // kWs: the parity of that stage's full phase
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kN) {
    // Dropout's keep bits: flash_forward's hash arguments, i = ((b H + h) T + query) T + key, for
    // this thread's rows (row0 + 8 r of the warpgroup's) and keys; bit i % 32 of keep[i / 32] for
    // s[i]. Hashed here, before the waits, where S is not live yet (at key tiles of 128 the
    // registers of S, O and both P leave none for the hashes beside them), and held here
    // (wgmma_hold: the compiler would sink them to their use); overlapping the other warpgroup's
    // turn at the tensor cores. The hash base is recomputed each tile from an opaque copy of the
    // lane (the same empty asm): hoisted out of the loop, its 64 bits took two registers from the
    // whole loop. (docs/flash-forward.md, "Dropout at 128 keys".)
    [[maybe_unused]] uint32_t keep[kN / 64] = {};
    if constexpr (kDropout) {
      constexpr uint64_t kG = 0x9e3779b97f4a7c15ull;
      uint32_t lane_now = static_cast<uint32_t>(lane);
      th.wgmma_hold(lane_now);
      const int row_now = 16 * warp + static_cast<int>(lane_now) / 4, t_now = static_cast<int>(lane_now) % 4;
      const uint64_t arg0 =
          dropout_seed +
          kG * static_cast<uint64_t>((static_cast<int64_t>(bh) * n_t + q0 + row_now) * n_t + n0 + 2 * t_now + 1);
      const uint64_t row8 = kG * static_cast<uint64_t>(8 * n_t);
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) {
        const uint64_t arg =
            arg0 + row8 * static_cast<uint64_t>((i % 4) / 2) + kG * static_cast<uint64_t>(8 * (i / 4) + i % 2);
        keep[i / 32] |= static_cast<uint32_t>(static_cast<float>(mix64(arg) >> 40) * (1.0f / 16777216.0f) >= dropout)
                        << (i % 32);
      }
#pragma unroll
      for (int w = 0; w < kN / 64; ++w) th.wgmma_hold(keep[w]);
    }
    if constexpr (kWs) {
      th.mbar_wait(full + 8 * stage, phase);
      // The producer's landed cp.async copies, seen through the mbarrier, visible to wgmma (not
      // needed for TMA's).
      if constexpr (!kTma) th.fence_proxy_async();
      th.named_sync(kWsTurn + wg, kWgThreads);  // the other warpgroup has issued its wgmma
    } else {
      // Every warpgroup's P V of two tiles back completed (each waits for its own within the tile
      // after it), so its stage, the next tile's, may be written.
      th.sync();
      if (n0 + kN < n_end) {
        uint16_t* next = k_s + 2 * kN * D * (stage + 1 == kWgStages ? 0 : stage + 1);
        wgmma_rows_async<D, kN>(th, next, next + kN * D, v_off, k_base, n0 + kN, n_t, width);
        th.cp_async_commit();
        th.cp_async_wait(1);
      } else {
        th.cp_async_wait(0);
      }
      th.fence_proxy_async();  // this thread's landed copies, visible to wgmma (the async proxy)
      th.sync();
    }
    // No tile is skipped, not even one that none of the warpgroup's rows sees (the mask makes its
    // P 0): a wgmma under a branch that depends on the thread index is one ptxas cannot prove
    // warpgroup-uniform, and it then serializes every wgmma of the kernel (C7520). The cost is the
    // causal diagonal's second tile for warpgroup 0, about 3 % of the products at T 4096.
    const TileMask mask = tile_mask<kWgRows, kN>(q0, n0, n_t, window, causal);
    const uint16_t* ks = k_s + 2 * kN * D * stage;
    const uint32_t k_addr = th.smem_addr(ks);

    // S = Q K^T (D / 16 wgmma chained on one accumulator, the first one overwriting it), then the
    // previous tile's P V: the softmax below overlaps P V on the tensor cores (FlashAttention-3's
    // intra-warpgroup pipelining). wait_group 1 completes S, the older group, and leaves P V.
    float s[kN / 2];
    th.wgmma_hold(o);
    th.wgmma_hold(pa);
    th.wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      if constexpr (kTma)
        th.template wgmma_ss<kN, 0>(s, wgmma::k_major_sw128<kFwdBlockM>(q_addr, kk),
                                    wgmma::k_major_sw128<kN>(k_addr, kk), kk > 0);
      else
        th.template wgmma_ss<kN, 0>(s, wgmma::k_major<D>(q_addr, kk), wgmma::k_major<D>(k_addr, kk), kk > 0);
    }
    th.wgmma_commit();
    issue_pv();
    // Ping-pong: the other warpgroup may issue now, its S and P V queued behind these on the
    // tensor cores while this one's softmax runs.
    if constexpr (kWs) th.named_arrive(kWsTurn + 1 - wg, kWgThreads);
    th.template wgmma_wait<1>();
    th.wgmma_hold(s);

    // The mma.sync forward's softmax (flash_forward), on one m16 tile of kN / 8 n8 blocks a warp; O's
    // rescale waits for the pending P V.
    float fac = scale2;
    if (softcap > 0.f || scale2 < 0.f) {
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) s[i] = softcap > 0.f ? cap_out * tanhf(s[i] * cap_in) : s[i] * scale2;
      fac = 1.f;
    }
    if (!mask.interior) {
      // s[i] is key kl = c + 2 t against row row0 + 8 r (c = 8 (i / 4) + i % 2, r = (i % 4) / 2),
      // d = kl - row = dc + 2 t - row0 (dc = c - 8 r): the bounds shifted by 2 t - row0 once a
      // tile, so that each element compares its compile-time c and dc. (Per-element column indices
      // are loop-invariant, and hoisted out of the key loop they took registers for the whole loop.)
      const int shift = row0 - 2 * t, end = mask.end - 2 * t, causal_at = causal ? mask.causal + shift : kN,
                window_at = mask.window + shift;
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) {
        const int c = 8 * (i / 4) + i % 2, dc = c - 8 * ((i % 4) / 2);
        const bool visible = c < end && dc <= causal_at && dc > window_at;
        s[i] = visible ? s[i] : -INFINITY;
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) tile_max = fmaxf(tile_max, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 1));
      tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 2));
      const float m_new = fmaxf(m[r], tile_max * fac);
      alpha[r] = m_new == -INFINITY ? 1.f : th.exp2(m[r] - m_new);
      m[r] = m_new;
      const float base = m_new == -INFINITY ? 0.f : m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        s[4 * j + 2 * r] = th.exp2(fmaf(s[4 * j + 2 * r], fac, -base));
        s[4 * j + 2 * r + 1] = th.exp2(fmaf(s[4 * j + 2 * r + 1], fac, -base));
        sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
      }
      l[r] = l[r] * alpha[r] + sum;
    }

    if constexpr (kDropout) {
      const float keep_scale = 1.f / (1.f - dropout);
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) s[i] *= (keep[i / 32] >> (i % 32)) & 1 ? keep_scale : 0.f;
    }

    // This tile's P as A fragments (keys 16 kb .. 16 kb + 15 are the accumulators of n8 blocks
    // 2 kb and 2 kb + 1), kept apart from the pending P until its P V has completed.
    uint32_t pn[kN / 16][4];
#pragma unroll
    for (int kb = 0; kb < kN / 16; ++kb) {
      pn[kb][0] = pack_rn(s[8 * kb], s[8 * kb + 1]);
      pn[kb][1] = pack_rn(s[8 * kb + 2], s[8 * kb + 3]);
      pn[kb][2] = pack_rn(s[8 * kb + 4], s[8 * kb + 5]);
      pn[kb][3] = pack_rn(s[8 * kb + 6], s[8 * kb + 7]);
    }
    th.template wgmma_wait<0>();
    th.wgmma_hold(o);
    // P V's A fragments stay live until it has completed: else the register allocator may give
    // their registers to pn while P V still reads them, and ptxas then serializes every wgmma of
    // the kernel (C7513, "non wgmma instructions defining input registers of a wgmma").
    th.wgmma_hold(pa);
    // kWs: the previous tile's P V has completed, the last read of its stage: the producer may
    // refill it.
    if constexpr (kWs) {
      if (n0 != n_begin) th.mbar_arrive(empty + 8 * (stage == 0 ? kWgStages - 1 : stage - 1));
    }
    if (alpha[0] != 1.f || alpha[1] != 1.f) {
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i % 4) / 2];
    }
#pragma unroll
    for (int kb = 0; kb < kN / 16; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) pa[kb][e] = pn[kb][e];
    pv_addr = th.smem_addr(ks + kN * D);
    if (++stage == kWgStages) stage = 0, phase ^= 1;
  }
  // The last tile's P V. The key loop above ran at least once (a block of queries below T sees at
  // least its first key), so its V was waited for and fenced like every tile's. kWs: in turn too;
  // warpgroup 1 does not hand the turn back (warpgroup 0 will not wait for it), so that every
  // arrival at the two named barriers meets its sync.
  if constexpr (kWs) th.named_sync(kWsTurn + wg, kWgThreads);
  th.wgmma_hold(o);
  th.wgmma_hold(pa);
  th.wgmma_fence();
  issue_pv();
  if constexpr (kWs) {
    if (wg == 0) th.named_arrive(kWsTurn + 1, kWgThreads);
  }
  th.template wgmma_wait<0>();
  th.wgmma_hold(o);

  // Normalize and write this thread's two rows; the max and log-sum-exp in natural units.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += th.shfl_xor(l[r], 1);
    l[r] += th.shfl_xor(l[r], 2);
    const int64_t query = q0 + row0 + 8 * r;
    if (query >= n_t) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    uint16_t* dst = out + (static_cast<int64_t>(b) * n_t + query) * n_h * D + static_cast<int64_t>(h) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      store_pair(dst + 8 * i + 2 * t, pack_rn(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv));
    if (t == 0) {
      const int64_t at = (static_cast<int64_t>(b) * n_h + h) * n_t + query;
      if (row_max != nullptr) row_max[at] = m[r] * kLn2;
      if (lse != nullptr) lse[at] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace bench::kernels::flash

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
