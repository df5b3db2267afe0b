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
// landed), exp(x), exp2(x), atomic_add(p, v) and shared() (the block's dynamic shared memory). On the GPU they are the
// intrinsics; on the CPU every CUDA thread of a block is a thread of its own and the warp-wide
// operations exchange fragments through memory, so the indexing of this file runs in CI.
//
// Forward: one thread block of 4 warps takes 64
// queries of one (batch, head); each warp owns 16 of them and keeps their Q fragments in
// registers. Tiles of 64 keys stream through two shared-memory stages of K and V (cp.async: the
// next tile is copied while this one is multiplied); each warp computes its 16 x 64 scores with
// mma.sync (K's fragments by ldmatrix), masks (only tiles on the diagonal or the window's edge),
// soft-caps and folds them into a running max and sum (online softmax, in base 2), and
// accumulates P V with mma.sync again (V's fragments by ldmatrix.trans), the probabilities going
// from the score accumulators straight into A fragments.
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

constexpr int kBlockM = 64;  // queries per block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;
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

/// Two adjacent bf16 of shared memory as one register.
BENCH_FLASH_FN uint32_t pair(const uint16_t* p) {
#if defined(__CUDACC__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

/// Stores two bf16 (packed in one register) at p.
BENCH_FLASH_FN void store_pair(uint16_t* p, uint32_t v) {
#if defined(__CUDACC__)
  *reinterpret_cast<uint32_t*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

/// The A fragment of rows r, r + 8 and columns c, c + 8 (c = 16 k + 2t) of a row-major bf16 tile.
template <int W>
BENCH_FLASH_FN void a_fragment(uint32_t (&a)[4], const uint16_t (*tile)[W], int r, int c) {
  a[0] = pair(&tile[r][c]);
  a[1] = pair(&tile[r + 8][c]);
  a[2] = pair(&tile[r][c + 8]);
  a[3] = pair(&tile[r + 8][c + 8]);
}

/// The A fragment made of two float accumulators of 16 x 8 (columns 16 k .. 16 k + 7 and the 8
/// after), rounded to bf16: how P and dS go from one product into the next.
BENCH_FLASH_FN void a_fragment(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_floats(lo[0], lo[1]);
  a[1] = pack_floats(lo[2], lo[3]);
  a[2] = pack_floats(hi[0], hi[1]);
  a[3] = pack_floats(hi[2], hi[3]);
}

/// Copies rows [row0, row0 + 64) of one head (d elements at `col` of rows `width` apart) into
/// shared memory, zeros past the sequence's end. 16-byte accesses: head offsets are multiples of
/// 8 elements (d is 64 or 128) and rows are 16-byte aligned when the base pointer is.
template <int D, class Thread>
BENCH_FLASH_FN void load_tile(Thread& th, uint16_t (*dst)[D + kPad], const uint16_t* base, int64_t row0, int64_t rows,
                              int64_t width) {
  constexpr int kChunks = D / 8;  // 8 bf16 = 16 bytes
  for (int c = th.tid(); c < kBlockM * kChunks; c += kThreads) {
    const int r = c / kChunks, k = (c % kChunks) * 8;
#if defined(__CUDACC__)
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows) v = *reinterpret_cast<const uint4*>(base + (row0 + r) * width + k);
    *reinterpret_cast<uint4*>(&dst[r][k]) = v;
#else
    if (row0 + r < rows)
      std::memcpy(&dst[r][k], base + (row0 + r) * width + k, 16);
    else
      std::memset(&dst[r][k], 0, 16);
#endif
  }
}

static_assert(kBlockM == kBlockN, "load_tile and load_tile_async copy 64-row tiles of queries and keys alike");

/// Issues asynchronous 16-byte copies (cp.async) of rows [row0, row0 + 64) of one head into
/// shared memory, zeros past the sequence's end; the caller commits and waits for them.
template <int D, class Thread>
BENCH_FLASH_FN void load_tile_async(Thread& th, uint16_t (*dst)[D + kPad], const uint16_t* base, int64_t row0,
                                    int64_t rows, int64_t width) {
  constexpr int kChunks = D / 8;
  const int valid = rows - row0 < kBlockN ? static_cast<int>(rows - row0) : kBlockN;
  const uint16_t* src = base + row0 * width;
  for (int c = th.tid(); c < kBlockN * kChunks; c += kThreads) {
    const int r = c / kChunks, k = (c % kChunks) * 8;
    // Rows past the end copy nothing (zero fill) from the tile's first row, which is in bounds.
    th.cp_async_16(&dst[r][k], src + (r < valid ? static_cast<int64_t>(r) * width + k : 0), r < valid);
  }
}

/// Shared memory of flash_forward<D>: Q, and two stages of K and V (double buffering).
template <int D>
constexpr size_t forward_smem_bytes() {
  return static_cast<size_t>(kBlockM + 4 * kBlockN) * (D + kPad) * sizeof(uint16_t);
}

/// The forward's 32-bit masking limits of one key tile against one query block: key kl of the
/// tile (0..63) is visible to query ql of the block (0..63) iff kl < end, and with causal masking
/// kl - ql <= causal, and with a window kl - ql > window. `interior` when every key of the tile is
/// visible to every query of the block, so that the tile needs no mask at all.
struct TileMask {
  int end, causal, window;
  bool interior;
};

BENCH_FLASH_FN TileMask tile_mask(int64_t m0, int64_t n0, int64_t n_t, int64_t window, bool causal) {
  TileMask k;
  k.end = n_t - n0 < kBlockN ? static_cast<int>(n_t - n0) : kBlockN;
  k.causal = static_cast<int>(m0 - n0);  // |m0 - n0| < T
  // A window longer than the sequence masks nothing: clamp so that the difference fits an int.
  const int64_t w = m0 - n0 - window;
  k.window = window <= 0 || w < -2 * kBlockN ? -2 * kBlockN : static_cast<int>(w);
  // Interior: all 64 keys exist, the last key is at most the first query (causal), and the first
  // key is inside the last query's window.
  k.interior =
      k.end == kBlockN && (!causal || kBlockN - 1 <= k.causal) && (window <= 0 || 0 - (kBlockM - 1) > k.window);
  return k;
}

/// Forward. Q stays in registers (A fragments, loaded once with ldmatrix); K and V come in with
/// cp.async into two stages, so that the next tile's copy overlaps this tile's products; their B
/// fragments are read with ldmatrix (.trans for V, whose rows are keys). Scores are kept in base
/// 2: the softmax scale and log2(e) are one factor, and exp2 needs no further multiply. Interior
/// tiles (every key visible to every query of the block) skip the mask; the mask itself is 32-bit.
template <int D, bool kDropout, class Thread>
BENCH_FLASH_FN void flash_forward(Thread& th, const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out,
                                  float* __restrict__ row_max, float* __restrict__ lse, int64_t n_t, int n_h, int n_kv,
                                  float scale, float softcap, int64_t window, bool causal, float dropout,
                                  uint64_t dropout_seed) {
  using Row = uint16_t[D + kPad];
  // Shared memory: Q, then stage 0's K and V, then stage 1's (a stage's K at k_s + 2 kBlockN stage,
  // computed rather than indexed from an array, which would put the pointers in local memory).
  auto* q_s = reinterpret_cast<Row*>(th.shared());
  Row* k_s = q_s + kBlockM;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

  const int warp = th.tid() / 32, lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  const int64_t m0 = static_cast<int64_t>(th.block_x()) * kBlockM;
  const int bh = th.block_y(), b = bh / n_h, h = bh % n_h, kv = h / (n_h / n_kv);
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* k_base = seq + static_cast<int64_t>(n_h + kv) * D;
  const uint16_t* v_base = seq + static_cast<int64_t>(n_h + n_kv + kv) * D;

  // Key tiles this block needs: up to its last query (causal), from its first query's window.
  const int64_t block_end = m0 + kBlockM < n_t ? m0 + kBlockM : n_t;
  const int64_t n_end = causal ? block_end : n_t;
  const int64_t first_key = window > 0 && m0 + 1 - window > 0 ? m0 + 1 - window : 0;
  const int64_t n_begin = first_key / kBlockN * kBlockN;

  // Q and the first K, V tile in one group.
  load_tile_async<D>(th, q_s, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
  load_tile_async<D>(th, k_s, k_base, n_begin, n_t, width);
  load_tile_async<D>(th, k_s + kBlockN, v_base, n_begin, n_t, width);
  th.cp_async_commit();

  // This thread's two query rows (g and g + 8 of its warp's 16), their running max (base 2) and sum.
  const int ql[2] = {warp * 16 + g, warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  uint32_t qa[D / 16][4];
  // ldmatrix x4: lane L addresses row L % 8 of matrix L / 8; the matrices of an A fragment are
  // (rows +0, cols +0), (rows +8, cols +0), (rows +0, cols +8), (rows +8, cols +8).
  const int a_row = warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
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
      load_tile_async<D>(th, next, k_base, n0 + kBlockN, n_t, width);
      load_tile_async<D>(th, next + kBlockN, v_base, n0 + kBlockN, n_t, width);
      th.cp_async_commit();
      th.cp_async_wait(1);  // this tile's group has landed; the next one may still be in flight
    } else {
      th.cp_async_wait(0);
    }
    th.sync();
    if (n0 == n_begin) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) th.ldmatrix_x4(qa[kk], &q_s[a_row][kk * 16 + a_col]);
    }
    const Row* ks = k_s + 2 * kBlockN * stage;
    const Row* vs = ks + kBlockN;

    // S = Q K^T for this warp's 16 queries and the tile's 64 keys: 8 accumulators of 16 x 8.
    float s[kBlockN / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int j = 0; j < kBlockN / 8; j += 2) {
        uint32_t kb[4];
        th.ldmatrix_x4(kb, &ks[j * 8 + k_row][kk * 16 + k_col]);
        th.mma(s[j], qa[kk], kb[0], kb[1]);
        th.mma(s[j + 1], qa[kk], kb[2], kb[3]);
      }

    // Base-2 logits (scale, soft-cap), the mask where the tile is not interior, the row maxima.
    const TileMask mask = tile_mask(m0, n0, n_t, window, causal);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e / 2;
        float x = softcap > 0.f ? cap_out * tanhf(s[j][e] * cap_in) : s[j][e] * scale2;
        if (!mask.interior) {
          const int kl = j * 8 + 2 * t + (e % 2), d = kl - ql[row];
          const bool visible = kl < mask.end && (!causal || d <= mask.causal) && (window <= 0 || d > mask.window);
          x = visible ? x : -INFINITY;
        }
        s[j][e] = x;
        tile_max[row] = fmaxf(tile_max[row], x);
      }
    float alpha[2];
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      // The four threads of a quad hold one row between them.
      tile_max[row] = fmaxf(tile_max[row], th.shfl_xor(tile_max[row], 1));
      tile_max[row] = fmaxf(tile_max[row], th.shfl_xor(tile_max[row], 2));
      const float m_new = fmaxf(m[row], tile_max[row]);
      // A row with nothing visible yet keeps max -inf: exponentiate against 0 so that no NaN appears.
      alpha[row] = m_new == -INFINITY ? 1.f : th.exp2(m[row] - m_new);
      m[row] = m_new;
    }
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e / 2;
        const float base = m[row] == -INFINITY ? 0.f : m[row];
        s[j][e] = th.exp2(s[j][e] - base);  // exp2(-inf) = 0 for masked keys
      }
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) sum += s[j][2 * row] + s[j][2 * row + 1];
      l[row] = l[row] * alpha[row] + sum;  // this thread's share; the quad's shares are added at the end
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    // Dropout (kernels/attention.h): the normalizer keeps every probability, P V only the kept
    // ones, scaled by 1 / (1 - p); the mask of probability (b, h, query, key) is recomputed.
    if constexpr (kDropout) {
      const float keep_scale = 1.f / (1.f - dropout);
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = n0 + j * 8 + 2 * t + (e % 2), query = m0 + ql[e / 2];
          const int64_t at = ((static_cast<int64_t>(b) * n_h + h) * n_t + query) * n_t + key;
          s[j][e] *= dropout_keep(dropout_seed, at, dropout) ? keep_scale : 0.f;
        }
    }

    // O += P V: P's accumulators of keys 16 kb .. 16 kb + 15 are exactly an A fragment.
#pragma unroll
    for (int kb = 0; kb < kBlockN / 16; ++kb) {
      uint32_t a[4];
      a_fragment(a, s[2 * kb], s[2 * kb + 1]);
#pragma unroll
      for (int i = 0; i < D / 8; i += 2) {
        uint32_t vb[4];
        th.ldmatrix_x4_trans(vb, &vs[kb * 16 + v_row][i * 8 + v_col]);
        th.mma(o[i], a, vb[0], vb[1]);
        th.mma(o[i + 1], a, vb[2], vb[3]);
      }
    }
  }

  // Normalize and write this thread's rows; the max and log-sum-exp back in natural units.
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    l[row] += th.shfl_xor(l[row], 1);
    l[row] += th.shfl_xor(l[row], 2);
    const int64_t query = m0 + ql[row];
    if (query >= n_t) continue;
    const float inv = l[row] > 0.f ? 1.f / l[row] : 0.f;
    uint16_t* dst = out + (static_cast<int64_t>(b) * n_t + query) * n_h * D + static_cast<int64_t>(h) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + 2 * t;
      store_pair(dst + d, pack_floats(o[i][2 * row] * inv, o[i][2 * row + 1] * inv));
    }
    if (t == 0) {
      const int64_t at = (static_cast<int64_t>(b) * n_h + h) * n_t + query;
      if (row_max != nullptr) row_max[at] = m[row] * kLn2;
      if (lse != nullptr) lse[at] = l[row] > 0.f ? (m[row] + log2f(l[row])) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace bench::kernels::flash

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
