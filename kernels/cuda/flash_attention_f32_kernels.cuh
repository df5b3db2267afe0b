// defines: bench::kernels::flash32 — the float32 flash attention forward and what the backward
//          (flash_attention_f32_backward_kernels.cuh) shares with it, as functions of a thread, shared by the CUDA
//          kernels of flash_attention_f32.cu and the CPU warp emulator of tests/kernels/flash_f32_emulation_test.cpp
//
// A `Thread` supplies tid(), block_x(), block_y(), sync() (__syncthreads),
// shfl_xor(v, mask), exp2(x) and shared() (the block's dynamic shared memory), as in
// flash_attention_kernels.cuh (the bf16 kernels), of which this is the float32 sibling: SIMT
// FFMA in true float32 (no TF32, no bf16 rounding), so that a float32 model's attention rounds
// like the CPU's float32 paths, only in another order.
//
// Every product is a 64 x 64 (or 64 x d_head) tile of a block of 128 threads arranged 8 x 16:
// thread (ty, tx) = (tid / 16, tid % 16) owns the 8 rows ty*8 .. ty*8+7 and the columns tx,
// tx + 16, tx + 32, ... of the result in registers (a register micro-tile of 8 x 4, or 8 x d/16).
// The contraction runs over k; per k the thread reads its 8 row values as two float4 from a
// k-major ("transposed") tile [k][68] and its 4 (or d/16) column values as scalars from a
// row-major tile of stride d + 1, then does 32 FFMA. Bank conflicts: the float4 of a warp come
// from two rows of 32 bytes (2 distinct ty), broadcast to the 16 lanes of each; the scalars'
// 16 addresses are 16 consecutive floats (B[k][tx + 16 j]) or 16 rows d + 1 floats apart, an
// odd stride (B[tx + 16 j][k]): 16 different banks either way. So 6 shared-memory wavefronts
// feed 32 FFMA of a warp: an SM issues 4 warp-FFMA a clock (four SMSPs) and serves one wavefront
// a clock, so 4 warps' 128 FFMA (32 clocks) need 24 clocks of shared memory: the products are
// bound by the FFMA rate, not by shared memory (the softmax, masks and tile loads between them
// are the overhead).
//
// Forward, grid (ceil(T / 64), B H): a block takes 64 queries of one (batch, head); Q^T stays in
// shared memory [d][68]; tiles of 64 keys of K and V come in as row-major [64][d + 1]. Per tile:
// S = Q K^T (8 x 4 per thread), base-2 logits (scale, soft-cap), the mask (only on tiles that are
// not interior), the running max over a row's 16 threads (shfl_xor 1, 2, 4, 8 within a half
// warp), online softmax, dropout of the probabilities, P^T to shared memory [key][68], and
// O += P V (8 x d/16 per thread). Writes out, lse and row_max [B, H, T] (natural units).
// Shared memory: (d + 64) 68 + 128 (d + 1) floats = 68,096 bytes for d = 64, 118,272 for
// d = 128. Registers (ptxas, sm_90): 128 for d = 64 (164 with dropout), about 245 for d = 128: an
// SM holds three blocks (12 warps, shared memory the limit) for d = 64, one for d = 128.
//
// d_head 64 or 128 (a multiple of 16 for the column split, and registers: the dK/dV kernel keeps
// 2 x 8 x d/16 accumulators); rows of qkv and out must be 16-byte aligned (float4 loads).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "../attention.h"
#include "../dropout.h"

#if defined(__CUDACC__)
#define BENCH_FLASH32_FN __device__ __forceinline__
#else
#define BENCH_FLASH32_FN inline
// `#pragma unroll` is nvcc's; the host compiler (the CPU emulator) ignores it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash32 {

constexpr int kBlock = 64;  // queries or keys per tile
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 8;          // rows of a thread's micro-tile: ty * 8 .. ty * 8 + 7
constexpr int kCols = 16;         // threads along the columns: columns tx, tx + 16, ...
constexpr int kLdT = kBlock + 4;  // stride of a k-major tile [k][64]: rows stay 16-byte aligned
/// Stride of a row-major tile [64][d]: odd, so that a column read by 16 lanes hits 16 banks.
template <int D>
constexpr int kLdRows = D + 1;
static_assert(kThreads == (kBlock / kRows) * kCols, "8 x 16 threads cover a 64 x 64 tile");

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

#if !defined(__CUDACC__)
/// On the CPU (the emulator) a float4 access off a 16-byte boundary stops the test at once: on
/// the GPU it is a misaligned-address fault, so the emulator checks what the hardware requires.
inline void require_aligned(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) __builtin_trap();
}
#endif

/// Four consecutive floats at p (16-byte aligned) into v.
BENCH_FLASH32_FN void load4(float (&v)[4], const float* p) {
#if defined(__CUDACC__)
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x;
  v[1] = x.y;
  v[2] = x.z;
  v[3] = x.w;
#else
  require_aligned(p);
  std::memcpy(v, p, sizeof v);
#endif
}

/// Four floats to p (16-byte aligned).
BENCH_FLASH32_FN void store4(float* p, float a, float b, float c, float d) {
#if defined(__CUDACC__)
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
#else
  require_aligned(p);
  const float v[4] = {a, b, c, d};
  std::memcpy(p, v, sizeof v);
#endif
}

/// Rows [row0, row0 + 64) of one head (d elements, rows `width` apart) into a row-major tile of
/// stride d + 1, zeros past the sequence's end. The global reads are float4, lanes along d.
template <int D, class Thread>
BENCH_FLASH32_FN void load_rows(Thread& th, float* dst, const float* base, int64_t row0, int64_t rows, int64_t width) {
  constexpr int kChunks = D / 4;
  for (int c = th.tid(); c < kBlock * kChunks; c += kThreads) {
    const int r = c / kChunks, k = (c % kChunks) * 4;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (row0 + r < rows) load4(v, base + (row0 + r) * width + k);
    float* to = dst + r * kLdRows<D> + k;
    to[0] = v[0];
    to[1] = v[1];
    to[2] = v[2];
    to[3] = v[3];
  }
}

/// The same rows transposed into a k-major tile [d][68]: lanes along the rows, so that the 32
/// lanes of a warp write 32 consecutive floats of one row of the tile (no bank conflict); each
/// lane reads a float4 of its own row (the next float4 of the sector comes from L1).
template <int D, class Thread>
BENCH_FLASH32_FN void load_transposed(Thread& th, float* dst, const float* base, int64_t row0, int64_t rows,
                                      int64_t width) {
  for (int c = th.tid(); c < kBlock * (D / 4); c += kThreads) {
    const int r = c % kBlock, k = (c / kBlock) * 4;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (row0 + r < rows) load4(v, base + (row0 + r) * width + k);
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[(k + e) * kLdT + r] = v[e];
  }
}

/// acc[i][j] += sum_{k < K} at[k][r0 + i] * b[k * bk + j * bj]: the micro-tile product, `at` a
/// k-major tile (stride kLdT), b the thread's first column of a row-major tile (bk, bj: the
/// strides of k and of the thread's next column).
template <int NC, int K>
BENCH_FLASH32_FN void product(float (&acc)[kRows][NC], const float* at, int r0, const float* b, int bk, int bj) {
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float a[kRows], lo[4], hi[4];
    load4(lo, at + k * kLdT + r0);
    load4(hi, at + k * kLdT + r0 + 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[i] = lo[i];
      a[i + 4] = hi[i];
    }
    float bv[NC];
#pragma unroll
    for (int j = 0; j < NC; ++j) bv[j] = b[k * bk + j * bj];
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < NC; ++j) acc[i][j] += a[i] * bv[j];
  }
}

/// The keys [lo, hi) query t sees (kernels/softmax.h's softmax_row_range): up to itself when
/// causal, the last `window` of those when window > 0.
struct Mask {
  int64_t n_t, window;
  bool causal;
  BENCH_FLASH32_FN bool visible(int64_t query, int64_t key) const {
    const int64_t hi = causal && query + 1 < n_t ? query + 1 : n_t;
    const int64_t lo = window > 0 && hi - window > 0 ? hi - window : 0;
    return key >= lo && key < hi;
  }
  /// The key tiles [begin, end) the queries [m0, m0 + 64) need (begin a multiple of 64).
  BENCH_FLASH32_FN void keys_of(int64_t m0, int64_t& begin, int64_t& end) const {
    const int64_t last = m0 + kBlock < n_t ? m0 + kBlock : n_t;
    end = causal ? last : n_t;
    const int64_t hi0 = causal ? m0 + 1 : n_t;  // the first query's hi: the smallest lo is its
    begin = window > 0 && hi0 - window > 0 ? (hi0 - window) / kBlock * kBlock : 0;
  }
  /// The queries [begin, end) that see some of the keys [n0, n0 + 64).
  BENCH_FLASH32_FN void queries_of(int64_t n0, int64_t& begin, int64_t& end) const {
    const int64_t last_key = n0 + kBlock - 1 < n_t - 1 ? n0 + kBlock - 1 : n_t - 1;
    if (causal) {
      begin = n0 / kBlock * kBlock;
      end = window > 0 && last_key + window < n_t ? last_key + window : n_t;
    } else {
      begin = 0;
      end = window > 0 && last_key < n_t - window ? 0 : n_t;  // a fixed band of the last keys
    }
  }
  /// Whether every key of [n0, n0 + 64) is visible to every query of [m0, m0 + 64).
  BENCH_FLASH32_FN bool interior(int64_t m0, int64_t n0) const {
    if (n0 + kBlock > n_t || m0 + kBlock > n_t) return false;
    if (causal && n0 + kBlock - 1 > m0) return false;
    if (window <= 0) return true;
    return causal ? m0 + kBlock - window <= n0 : n_t - window <= n0;
  }
};

/// What the kernels share: the shape, the variant, the scalars.
struct Params {
  int64_t n_t;
  int n_h, n_kv;
  float scale, softcap;
  int64_t window;
  bool causal;
  float dropout;
  uint64_t seed;
};

/// The kernels' scalars from a launch's arguments (the CUDA launchers' and the emulator's).
inline Params params_of(const AttentionArgs& a) {
  return {a.seq,
          static_cast<int>(a.n_heads),
          static_cast<int>(a.n_kv_heads),
          static_cast<float>(a.scale),
          static_cast<float>(a.softcap),
          a.window,
          a.causal,
          static_cast<float>(a.dropout),
          a.dropout_seed};
}

/// Forward (see the file comment). out [B*T, H*d], row_max and lse [B, H, T] (either may be null).
template <int D, bool kDropout, class Thread>
BENCH_FLASH32_FN void forward(Thread& th, const Params& p, const float* __restrict__ qkv, float* __restrict__ out,
                              float* __restrict__ row_max, float* __restrict__ lse) {
  constexpr int kNC = D / kCols;
  float* q_t = reinterpret_cast<float*>(th.shared());  // [D][kLdT]
  float* k_s = q_t + D * kLdT;                         // [64][D + 1]
  float* v_s = k_s + kBlock * kLdRows<D>;              // [64][D + 1]
  float* p_t = v_s + kBlock * kLdRows<D>;              // [64 keys][kLdT]

  const int tx = th.tid() % kCols, ty = th.tid() / kCols, r0 = ty * kRows;
  const int64_t m0 = static_cast<int64_t>(th.block_x()) * kBlock, n_t = p.n_t;
  const int bh = th.block_y(), b = bh / p.n_h, h = bh % p.n_h, kv = h / (p.n_h / p.n_kv);
  const int64_t width = static_cast<int64_t>(p.n_h + 2 * p.n_kv) * D;
  const float* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const float* k_base = seq + static_cast<int64_t>(p.n_h + kv) * D;
  const float* v_base = seq + static_cast<int64_t>(p.n_h + p.n_kv + kv) * D;
  const Mask mask{n_t, p.window, p.causal};
  int64_t n_begin = 0, n_end = 0;
  mask.keys_of(m0, n_begin, n_end);

  load_transposed<D>(th, q_t, seq + static_cast<int64_t>(h) * D, m0, n_t, width);

  float m[kRows], l[kRows], o[kRows][kNC];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < kNC; ++j) o[i][j] = 0.f;
  }
  const float scale2 = p.scale * kLog2e, cap_in = p.softcap > 0.f ? p.scale / p.softcap : 0.f,
              cap_out = p.softcap * kLog2e, keep_scale = 1.f / (1.f - p.dropout);

  for (int64_t n0 = n_begin; n0 < n_end; n0 += kBlock) {
    th.sync();  // every thread is done with the previous tile's K, V and P
    load_rows<D>(th, k_s, k_base, n0, n_t, width);
    load_rows<D>(th, v_s, v_base, n0, n_t, width);
    th.sync();

    float s[kRows][4];
#pragma unroll
    for (int i = 0; i < kRows; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    product<4, D>(s, q_t, r0, k_s + tx * kLdRows<D>, 1, kCols * kLdRows<D>);

    // Base-2 logits, the mask, the running max of each row over its 16 threads.
    const bool interior = mask.interior(m0, n0);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x = p.softcap > 0.f ? cap_out * tanhf(s[i][j] * cap_in) : s[i][j] * scale2;
        if (!interior && !mask.visible(m0 + r0 + i, n0 + tx + kCols * j)) x = -INFINITY;
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
#pragma unroll
      for (int lane = 1; lane < kCols; lane *= 2) tile_max = fmaxf(tile_max, th.shfl_xor(tile_max, lane));
      const float m_new = fmaxf(m[i], tile_max);
      // A row with nothing visible yet keeps max -inf: exponentiate against 0, so that no NaN appears.
      const float alpha = m_new == -INFINITY ? 1.f : th.exp2(m[i] - m_new);
      const float base = m_new == -INFINITY ? 0.f : m_new;
      m[i] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = th.exp2(s[i][j] - base);  // exp2(-inf) = 0 for masked keys
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + sum;  // this thread's share; the row's 16 shares are added at the end
#pragma unroll
      for (int j = 0; j < kNC; ++j) o[i][j] *= alpha;
      // Dropout (kernels/attention.h): the normalizer keeps every probability, P V only the kept
      // ones, scaled by 1 / (1 - p); the mask of probability (b, h, query, key) is recomputed.
      if constexpr (kDropout) {
        const int64_t row = ((static_cast<int64_t>(b) * p.n_h + h) * n_t + m0 + r0 + i) * n_t;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          s[i][j] *= dropout_keep(p.seed, row + n0 + tx + kCols * j, p.dropout) ? keep_scale : 0.f;
      }
    }
    // P^T to shared memory ([key][query]), then O += P V.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float* row = p_t + (tx + kCols * j) * kLdT + r0;
      store4(row, s[0][j], s[1][j], s[2][j], s[3][j]);
      store4(row + 4, s[4][j], s[5][j], s[6][j], s[7][j]);
    }
    th.sync();
    product<kNC, kBlock>(o, p_t, r0, v_s + tx, kLdRows<D>, kCols);
  }

  // Normalize and write this thread's rows; the max and log-sum-exp back in natural units.
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int lane = 1; lane < kCols; lane *= 2) l[i] += th.shfl_xor(l[i], lane);
    const int64_t query = m0 + r0 + i;
    if (query >= n_t) continue;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
    float* dst = out + (static_cast<int64_t>(b) * n_t + query) * p.n_h * D + static_cast<int64_t>(h) * D + tx;
#pragma unroll
    for (int j = 0; j < kNC; ++j) dst[kCols * j] = o[i][j] * inv;
    if (tx == 0) {
      const int64_t at = (static_cast<int64_t>(b) * p.n_h + h) * n_t + query;
      if (row_max != nullptr) row_max[at] = m[i] * kLn2;
      if (lse != nullptr) lse[at] = l[i] > 0.f ? (m[i] + log2f(l[i])) * kLn2 : -INFINITY;
    }
  }
}

/// Shared memory of forward<D>.
template <int D>
constexpr size_t forward_smem_bytes() {
  return static_cast<size_t>((D + kBlock) * kLdT + 2 * kBlock * kLdRows<D>) * sizeof(float);
}

}  // namespace bench::kernels::flash32

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
