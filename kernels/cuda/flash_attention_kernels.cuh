// defines: bench::kernels::flash — the flash attention forward and the helpers it shares with the
//          backward (flash_attention_backward_kernels.cuh) as functions of a thread, shared by the
//          CUDA kernels of flash_attention.cu and the CPU warp emulator of
//          tests/kernels/flash_emulation_test.cpp
//
// A `Thread` supplies what a kernel asks of the hardware: tid(), block_x(), block_y(),
// block_dim(), sync() (__syncthreads), shfl_xor(v, mask), mma(d, a, b0, b1)
// (mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: d += A B for this lane's fragments),
// ldmatrix_x4(r, row) and ldmatrix_x4_trans(r, row) (ldmatrix.sync.aligned.m8n8.x4[.trans].b16:
// lane L gives the address of row L % 8 of matrix L / 8 and receives its fragment of each),
// cp_async_16(dst, src, valid) (cp.async.cg of 16 bytes, zeros when !valid), cp_async_commit()
// and cp_async_wait(n) (cp.async.commit_group / wait_group n: all but the n newest groups have
// landed), exp2(x), atomic_add2(p, a, b) (two adjacent floats: red.global.add.v2.f32) and
// shared() (the block's dynamic shared memory). On the GPU they are the intrinsics; on the CPU
// every CUDA thread of a block is a fiber of its own and the warp-wide operations exchange
// fragments through memory, so the indexing of this file runs in CI.
//
// Forward (FlashAttention-2's hdim-128 shape): one thread block of 4 warps takes 128 queries of
// one (batch, head); each warp owns 32 of them, two m16 tiles, so that every K or V fragment read
// from shared memory feeds two mma.sync (issue 31: with 16 rows a warp, one ldmatrix x4 of 512
// bytes fed two mma, and the loop was bound by shared memory). Q's fragments stay in registers
// at d_head 64 and are read by ldmatrix at each k16 step at 128 (O alone is 128 registers there).
// Tiles of 64 keys stream through two shared-memory stages of K and V (cp.async: the next tile is
// copied while this one is multiplied); each warp computes its 32 x 64 scores with mma.sync (K's
// fragments by ldmatrix), skips a tile that none of its rows sees, masks only tiles on the
// diagonal or the window's edge, soft-caps and folds the scores into a running max and sum
// (online softmax in base 2, the scale folded into the exponent's FFMA), and accumulates P V with
// mma.sync again (V's fragments by ldmatrix.trans), the probabilities going from the score
// accumulators straight into A fragments (cvt.rn.bf16x2 on the GPU). Causal, the heaviest query
// blocks start first, across all heads (forward_grid). This shape is compiled for sm_90 and
// checked by the CPU emulator, not yet run on a GPU (docs/flash-forward.md, "Flash attention
// forward").
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4: A (16x16, row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..),
// a2 = (g, 2t+8..), a3 = (g+8, 2t+8..); B (16x8, k x n) b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g);
// C (16x8) c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1). Two bf16 per 32-bit register, the lower
// index in the lower half.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "../dropout.h"
#include "../tile/defs.h"

#if defined(__CUDACC__)
#define BENCH_FLASH_FN __device__ __forceinline__
#else
#define BENCH_FLASH_FN inline
// `#pragma unroll` is nvcc's; the host compiler (the CPU emulator) ignores it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash {

constexpr int kBlockN = 64;  // keys per tile of the forward
constexpr int kWarps = 4;    // the backward's prep kernel: a warp a row
constexpr int kThreads = kWarps * 32;
/// Shared-memory rows of D elements are D + kPad long: with rows 16 bytes longer than a multiple
/// of 128, the 8 rows a fragment load touches (lanes g = 0..7, or 2t for t = 0..3) start in
/// different banks, where an unpadded tile puts them all in one (an 8-way conflict).
constexpr int kPad = 8;

BENCH_FLASH_FN uint32_t pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

BENCH_FLASH_FN uint32_t pack_floats(float lo, float hi) {
  return pack(tile::float_to_bf16(lo).bits, tile::float_to_bf16(hi).bits);
}

/// Stores two bf16 (packed in one register) at p.
BENCH_FLASH_FN void store_pair(uint16_t* p, uint32_t v) {
#if defined(__CUDACC__)
  *reinterpret_cast<uint32_t*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------

// The forward's own shape (issue 31): 128 queries a block of 4 warps, so that each warp owns 32
// query rows (two m16 tiles) and every K or V fragment read from shared memory feeds two mma
// instead of one (FlashAttention-2's hdim-128 forward is 128 x 64 with 4 warps). The backward has
// its own shape (kBwd*, flash_attention_backward_kernels.cuh); kWarps and kThreads size its prep.
constexpr int kFwdBlockM = 128;                       // queries per forward block
constexpr int kFwdWarps = 4;                          // warps per forward block
constexpr int kFwdThreads = kFwdWarps * 32;           // threads per forward block
constexpr int kFwdWarpRows = kFwdBlockM / kFwdWarps;  // query rows per warp: 32
constexpr int kFwdTiles = kFwdWarpRows / 16;          // m16 tiles per warp: 2
static_assert(kFwdWarpRows % 16 == 0 && kBlockN % 16 == 0, "whole m16 tiles per warp, whole k16 steps per key tile");

/// Two floats rounded to bf16 (to nearest, ties to even) and packed as pack_floats does: on the
/// GPU one cvt.rn.bf16x2.f32, where pack_floats's software rounding costs about ten integer
/// instructions a pair (the forward packs 32 pairs of probabilities a tile). Only a NaN's payload
/// could differ, and neither probabilities nor outputs are NaN for finite inputs.
BENCH_FLASH_FN uint32_t pack_rn(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return pack_floats(lo, hi);
#endif
}

/// The A fragment made of two float accumulators of 16 x 8 (columns 16 k .. 16 k + 7 and the 8
/// after), rounded by pack_rn: how the forward's P goes into P V and the backward's P^T and dS^T
/// into dV and dK.
BENCH_FLASH_FN void a_fragment_rn(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_rn(lo[0], lo[1]);
  a[1] = pack_rn(lo[2], lo[3]);
  a[2] = pack_rn(hi[0], hi[1]);
  a[3] = pack_rn(hi[2], hi[3]);
}

/// Whether flash_forward<D> keeps Q's A fragments in registers through the key loop: at d_head 64
/// they are 32 registers; at 128 they would be 64 beside O's 128 accumulators and S's 64, past
/// the 255 a thread may have, so there Q's fragments are read from shared memory (ldmatrix) at
/// every k16 step, as FlashAttention-2 does.
template <int D>
constexpr bool kFwdQInRegisters = D <= 64;

/// Shared memory of flash_forward<D>: Q (128 rows), and two stages of K and V (double buffering).
template <int D>
constexpr size_t forward_smem_bytes() {
  return static_cast<size_t>(kFwdBlockM + 4 * kBlockN) * (D + kPad) * sizeof(uint16_t);
}

/// Issues asynchronous 16-byte copies (cp.async) of rows [row0, row0 + kRows) of one head into
/// shared memory (and, when `second` is set, of the head `off` elements further into `second`),
/// zeros for rows at or past `rows` (which copy nothing, from the head's row 0, always in bounds);
/// the caller commits and waits. kFwdThreads / kRows threads share a row (2 for a 64-row K or V
/// tile, 1 for Q's 128 rows), thread p of a row copying its chunks p, p + 2, ...: a thread's
/// addresses are its row's plus immediates (one 64-bit address a tile, where a thread that copied
/// one chunk of every 8th row needed one a copy), the two threads of a row read whole 32-byte
/// sectors, and the 16 rows a warp writes start in 8 different bank groups (rows are 16 bytes
/// past a multiple of 128 apart; kPad), 4 threads each: no conflict beyond the 4 wavefronts that
/// 512 bytes take.
template <int D, int kRows, class Thread>
BENCH_FLASH_FN void forward_rows_async(Thread& th, uint16_t (*dst)[D + kPad], uint16_t (*second)[D + kPad], int off,
                                       const uint16_t* base, int64_t row0, int64_t rows, int64_t width) {
  constexpr int kChunks = D / 8;  // 8 bf16 = 16 bytes
  constexpr int kParts = kFwdThreads / kRows;
  static_assert(kFwdThreads % kRows == 0 && kChunks % kParts == 0, "whole rows, whole chunks per thread");
  const int r = th.tid() / kParts, p = th.tid() % kParts;
  const bool ok = row0 + r < rows;
  const uint16_t* src = ok ? base + (row0 + r) * width + 8 * p : base;
#pragma unroll
  for (int j = 0; j < kChunks / kParts; ++j) {
    const int k = 8 * (p + kParts * j);
    th.cp_async_16(&dst[r][k], src + 8 * kParts * j, ok);
    if (second != nullptr) th.cp_async_16(&second[r][k], src + off + 8 * kParts * j, ok);
  }
}

/// The forward's 32-bit masking limits of one key tile against the kRows query rows of one warp
/// (32; the wgmma forward's warpgroups take 64, flash_attention_wgmma_kernels.cuh): key kl of the
/// tile (0..kCols - 1: 64, or the warp-specialized wgmma forward's 128) is visible to row qr of the
/// warp (0..kRows - 1) iff kl < end, and with
/// causal masking kl - qr <= causal, and with a window kl - qr > window. `interior` when every key
/// is visible to every row (no mask needed), `empty` when none is (the warp skips the tile: its
/// max, sum and output would not change).
struct TileMask {
  int end, causal, window;
  bool interior, empty;
};

template <int kRows = kFwdWarpRows, int kCols = kBlockN>
BENCH_FLASH_FN TileMask tile_mask(int64_t q0, int64_t n0, int64_t n_t, int64_t window, bool causal) {
  static_assert(kRows <= 4 * kCols, "the clamps below keep every row's comparison");
  TileMask k;
  k.end = n_t - n0 < kCols ? static_cast<int>(n_t - n0) : kCols;
  // |q0 - n0| < T + kFwdBlockM; clamp so that a difference of 64-bit positions fits an int.
  const int64_t c = q0 - n0;
  k.causal = c > 4 * kCols ? 4 * kCols : c < -4 * kCols ? -4 * kCols : static_cast<int>(c);
  // A window longer than the sequence masks nothing.
  const int64_t w = q0 - n0 - window;
  k.window = window <= 0 || w < -4 * kCols ? -4 * kCols : w > 4 * kCols ? 4 * kCols : static_cast<int>(w);
  // Interior: all kCols keys exist, the last key is at most the first row (causal), and the first
  // key is inside the last row's window. Empty: the first key is past the last row (causal), or
  // the last key is outside the first row's window, or the rows are past the sequence.
  k.interior = k.end == kCols && (!causal || kCols - 1 <= k.causal) && (window <= 0 || 0 - (kRows - 1) > k.window);
  k.empty = q0 >= n_t || (causal && 0 - (kRows - 1) > k.causal) || (window > 0 && kCols - 1 <= k.window);
  return k;
}

/// The grid of flash_forward over `heads` (batch, head) pairs: {x, y}. Causal, a query block's
/// work grows with its index (block i of 128 queries sees 2 i + 2 tiles of 64 keys), and blocks
/// start in the order of their linear index (x fastest): so x is the (batch, head) pair and y the
/// query block from the last one down, and every head's heaviest block starts before any head's
/// lighter ones (longest first: at B 4, H 16, T 4096 on 132 SMs x 2 blocks, a greedy schedule
/// keeps 99 % of the slots busy, against 86 % in the order of the query blocks, head by head, and
/// 87 % head by head from the last block down). Not causal, every block does the same work: x is
/// the query block and y the pair, so that the blocks of one head run together and share its K
/// and V in L2.
inline void forward_grid(int64_t n_t, int64_t heads, bool causal, int64_t& x, int64_t& y) {
  const int64_t blocks = (n_t + kFwdBlockM - 1) / kFwdBlockM;
  x = causal ? heads : blocks;
  y = causal ? blocks : heads;
}

/// Forward. K and V come in with cp.async into two stages, so that the next tile's copy overlaps
/// this tile's products; their B fragments are read with ldmatrix (.trans for V, whose rows are
/// keys), each feeding both of the warp's m16 tiles. Q's fragments stay in registers (d_head 64)
/// or are read by ldmatrix at each k16 step (128; kFwdQInRegisters). Scores are kept in base 2:
/// the softmax scale and log2(e) are one factor, and exp2 needs no further multiply. Causal
/// blocks run heaviest first across all heads (forward_grid). Per warp, tiles where every key is visible skip
/// the mask, tiles where none is are skipped; the mask itself is 32-bit.
template <int D, bool kDropout, class Thread>
BENCH_FLASH_FN void flash_forward(Thread& th, const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out,
                                  float* __restrict__ row_max, float* __restrict__ lse, int64_t n_t, int n_h, int n_kv,
                                  float scale, float softcap, int64_t window, bool causal, float dropout,
                                  uint64_t dropout_seed) {
  using Row = uint16_t[D + kPad];
  constexpr bool kQRegs = kFwdQInRegisters<D>;
  // Shared memory: Q, then stage 0's K and V, then stage 1's (a stage's K at k_s + 2 kBlockN stage,
  // computed rather than indexed from an array, which would put the pointers in local memory).
  auto* q_s = reinterpret_cast<Row*>(th.shared());
  Row* k_s = q_s + kFwdBlockM;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

  const int warp = th.tid() / 32, lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  // The block's (batch, head) and query block: see forward_grid.
  const int64_t n_blocks = (n_t + kFwdBlockM - 1) / kFwdBlockM;
  const int64_t m0 = (causal ? n_blocks - 1 - th.block_y() : th.block_x()) * kFwdBlockM;
  const int64_t q0 = m0 + warp * kFwdWarpRows;  // this warp's first query
  const int bh = causal ? th.block_x() : th.block_y(), b = bh / n_h, h = bh % n_h, kv = h / (n_h / n_kv);
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* k_base = seq + static_cast<int64_t>(n_h + kv) * D;
  const int v_off = n_kv * D;  // V's head after K's

  // Key tiles this block needs: up to its last query (causal), from its first query's window.
  const int64_t block_end = m0 + kFwdBlockM < n_t ? m0 + kFwdBlockM : n_t;
  const int64_t n_end = causal ? block_end : n_t;
  const int64_t first_key = window > 0 && m0 + 1 - window > 0 ? m0 + 1 - window : 0;
  const int64_t n_begin = first_key / kBlockN * kBlockN;

  // Q and the first K, V tile in one group.
  forward_rows_async<D, kFwdBlockM>(th, q_s, nullptr, 0, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
  forward_rows_async<D, kBlockN>(th, k_s, k_s + kBlockN, v_off, k_base, n_begin, n_t, width);
  th.cp_async_commit();

  // This thread's four query rows in its warp: g and g + 8 of each m16 tile (row index mt, r).
  float m[kFwdTiles][2], l[kFwdTiles][2];
  float o[kFwdTiles][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < kFwdTiles; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  }
  uint32_t qa[kQRegs ? kFwdTiles : 1][kQRegs ? D / 16 : 1][4];
  // ldmatrix x4: lane L addresses row L % 8 of matrix L / 8; the matrices of an A fragment are
  // (rows +0, cols +0), (rows +8, cols +0), (rows +0, cols +8), (rows +8, cols +8).
  const int a_row = warp * kFwdWarpRows + (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
  // For B fragments of K (keys as n): matrices (keys +0, cols +0), (keys +0, cols +8), (keys +8,
  // cols +0), (keys +8, cols +8): b0, b1 of key block j, then of block j + 1.
  const int k_row = (lane % 8) + 8 * (lane / 16), k_col = 8 * ((lane / 8) % 2);
  // For B fragments of V (keys as k, transposed): matrices (keys +0, d +0), (keys +8, d +0),
  // (keys +0, d +8), (keys +8, d +8): b0, b1 of d block i, then of block i + 1.
  const int v_row = (lane % 8) + 8 * ((lane / 8) % 2), v_col = 8 * (lane / 16);
  const float scale2 = scale * kLog2e, cap_in = softcap > 0.f ? scale / softcap : 0.f, cap_out = softcap * kLog2e;

  int stage = 0;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kBlockN, stage ^= 1) {
    th.sync();  // every warp is done with the other stage (the tile before this one)
    if (n0 + kBlockN < n_end) {
      Row* next = k_s + 2 * kBlockN * (stage ^ 1);
      forward_rows_async<D, kBlockN>(th, next, next + kBlockN, v_off, k_base, n0 + kBlockN, n_t, width);
      th.cp_async_commit();
      th.cp_async_wait(1);  // this tile's group has landed; the next one may still be in flight
    } else {
      th.cp_async_wait(0);
    }
    th.sync();
    if constexpr (kQRegs) {
      if (n0 == n_begin) {
#pragma unroll
        for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) th.ldmatrix_x4(qa[mt][kk], &q_s[a_row + 16 * mt][kk * 16 + a_col]);
      }
    }
    // Warp-uniform: a warp whose 32 rows see none of this tile's keys leaves it to the others.
    const TileMask mask = tile_mask(q0, n0, n_t, window, causal);
    if (mask.empty) continue;
    const Row* ks = k_s + 2 * kBlockN * stage;
    const Row* vs = ks + kBlockN;

    // S = Q K^T for this warp's 32 queries and the tile's 64 keys: 2 x 8 accumulators of 16 x 8.
    float s[kFwdTiles][kBlockN / 8][4];
#pragma unroll
    for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qf[kFwdTiles][4];
#pragma unroll
      for (int mt = 0; mt < kFwdTiles; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int r = 0; r < 4; ++r) qf[mt][r] = qa[mt][kk][r];
        } else {
          th.ldmatrix_x4(qf[mt], &q_s[a_row + 16 * mt][kk * 16 + a_col]);
        }
      }
#pragma unroll
      for (int j = 0; j < kBlockN / 8; j += 2) {
        uint32_t kb[4];
        th.ldmatrix_x4(kb, &ks[j * 8 + k_row][kk * 16 + k_col]);
#pragma unroll
        for (int mt = 0; mt < kFwdTiles; ++mt) {
          th.mma(s[mt][j], qf[mt], kb[0], kb[1]);
          th.mma(s[mt][j + 1], qf[mt], kb[2], kb[3]);
        }
      }
    }

    // Base-2 logits: s * fac, with the factor folded into the exponent's FFMA (FlashAttention-2's
    // order): the maxima are taken on the raw scores, which is right for a positive factor. The
    // soft-cap (and a negative scale, where the maximum would turn into the minimum) apply it
    // first and leave a factor of 1. One warp-uniform branch each for them and for the mask.
    float fac = scale2;
    if (softcap > 0.f || scale2 < 0.f) {
#pragma unroll
      for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            s[mt][j][e] = softcap > 0.f ? cap_out * tanhf(s[mt][j][e] * cap_in) : s[mt][j][e] * scale2;
      fac = 1.f;
    }
    if (!mask.interior) {
#pragma unroll
      for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int kl = j * 8 + 2 * t + (e % 2), d = kl - (16 * mt + g + 8 * (e / 2));
            const bool visible = kl < mask.end && (!causal || d <= mask.causal) && (window <= 0 || d > mask.window);
            s[mt][j][e] = visible ? s[mt][j][e] : -INFINITY;
          }
    }
#pragma unroll
    for (int mt = 0; mt < kFwdTiles; ++mt) {
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) tile_max = fmaxf(tile_max, fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
        // The four threads of a quad hold one row between them.
        tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 1));
        tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, 2));
        const float m_new = fmaxf(m[mt][r], tile_max * fac);  // base 2; -inf * fac stays -inf
        // A row with nothing visible yet keeps max -inf: exponentiate against 0 so that no NaN appears.
        alpha[r] = m_new == -INFINITY ? 1.f : th.exp2(m[mt][r] - m_new);
        m[mt][r] = m_new;
        const float base = m_new == -INFINITY ? 0.f : m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          // exp2(-inf) = 0 for masked keys.
          s[mt][j][2 * r] = th.exp2(fmaf(s[mt][j][2 * r], fac, -base));
          s[mt][j][2 * r + 1] = th.exp2(fmaf(s[mt][j][2 * r + 1], fac, -base));
          sum += s[mt][j][2 * r] + s[mt][j][2 * r + 1];
        }
        l[mt][r] = l[mt][r] * alpha[r] + sum;  // this thread's share; the quad's shares are added at the end
      }
      // O's rescale only where a row's max moved (a branch, not a predicate: the whole warp skips
      // it when none of its 16 rows' maxima moved, as happens more and more often along a row).
      if (alpha[0] != 1.f || alpha[1] != 1.f) {
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          o[mt][i][0] *= alpha[0];
          o[mt][i][1] *= alpha[0];
          o[mt][i][2] *= alpha[1];
          o[mt][i][3] *= alpha[1];
        }
      }
    }

    // Dropout (kernels/attention.h): the normalizer keeps every probability, P V only the kept
    // ones, scaled by 1 / (1 - p); the mask of probability (b, h, query, key) is recomputed, 16
    // keys at a time just before they go into P V, so that the hashing interleaves with the mma.
    // dropout_keep(seed, i, p) hashes seed + kG (i + 1), i = ((b H + h) T + query) T + key: along
    // a row i grows by one a key, and by 8 T every 8 rows, so every argument of this tile is one
    // product plus constants (the sums wrap as dropout_keep's do).
    constexpr uint64_t kG = 0x9e3779b97f4a7c15ull;
    uint64_t arg0 = 0, row8 = 0;
    if constexpr (kDropout) {
      arg0 =
          dropout_seed + kG * static_cast<uint64_t>((static_cast<int64_t>(bh) * n_t + q0 + g) * n_t + n0 + 2 * t + 1);
      row8 = kG * static_cast<uint64_t>(8 * n_t);
    }

    // O += P V: P's accumulators of keys 16 kb .. 16 kb + 15 are exactly an A fragment; each V
    // fragment feeds both m16 tiles.
#pragma unroll
    for (int kb = 0; kb < kBlockN / 16; ++kb) {
      if constexpr (kDropout) {
        const float keep_scale = 1.f / (1.f - dropout);
#pragma unroll
        for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
          for (int j = 2 * kb; j < 2 * kb + 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const uint64_t arg =
                  arg0 + row8 * static_cast<uint64_t>(2 * mt + e / 2) + kG * static_cast<uint64_t>(j * 8 + e % 2);
              const bool keep = static_cast<float>(mix64(arg) >> 40) * (1.0f / 16777216.0f) >= dropout;
              s[mt][j][e] *= keep ? keep_scale : 0.f;
            }
      }
      uint32_t a[kFwdTiles][4];
#pragma unroll
      for (int mt = 0; mt < kFwdTiles; ++mt) a_fragment_rn(a[mt], s[mt][2 * kb], s[mt][2 * kb + 1]);
#pragma unroll
      for (int i = 0; i < D / 8; i += 2) {
        uint32_t vb[4];
        th.ldmatrix_x4_trans(vb, &vs[kb * 16 + v_row][i * 8 + v_col]);
#pragma unroll
        for (int mt = 0; mt < kFwdTiles; ++mt) {
          th.mma(o[mt][i], a[mt], vb[0], vb[1]);
          th.mma(o[mt][i + 1], a[mt], vb[2], vb[3]);
        }
      }
    }
  }

  // Normalize and write this thread's rows; the max and log-sum-exp back in natural units.
#pragma unroll
  for (int mt = 0; mt < kFwdTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += th.shfl_xor(l[mt][r], 1);
      l[mt][r] += th.shfl_xor(l[mt][r], 2);
      const int64_t query = q0 + 16 * mt + g + 8 * r;
      if (query >= n_t) continue;
      const float inv = l[mt][r] > 0.f ? 1.f / l[mt][r] : 0.f;
      uint16_t* dst = out + (static_cast<int64_t>(b) * n_t + query) * n_h * D + static_cast<int64_t>(h) * D;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        const int d = i * 8 + 2 * t;
        store_pair(dst + d, pack_rn(o[mt][i][2 * r] * inv, o[mt][i][2 * r + 1] * inv));
      }
      if (t == 0) {
        const int64_t at = (static_cast<int64_t>(b) * n_h + h) * n_t + query;
        if (row_max != nullptr) row_max[at] = m[mt][r] * kLn2;
        if (lse != nullptr) lse[at] = l[mt][r] > 0.f ? (m[mt][r] + log2f(l[mt][r])) * kLn2 : -INFINITY;
      }
    }
}

}  // namespace bench::kernels::flash

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
