// defines: bench::kernels::flash32 — the float32 flash attention backward (prep, dK/dV, dQ) as
//          functions of a thread, shared by the CUDA kernels of flash_attention_f32.cu and the CPU
//          warp emulator of tests/kernels/flash_f32_emulation_test.cpp
//
// The Thread, the tiles' layout, the loads and the products are the forward's
// (flash_attention_f32_kernels.cuh, whose file comment describes them).
//
// Backward, three launches and no atomics (every element of dqkv has one writer and a fixed order
// of summation: the same bits on every run):
//   prep, one warp per query row: D = rowsum(dO * O) (with dropout O already holds the mask).
//   dK/dV, grid (ceil(T / 64), B Hkv): a block owns 64 keys of one kv head; K^T and V^T stay in
//     shared memory [d][68]; for each query head of the group in order, each query tile that can
//     see the keys in order: Q and dO row-major [64][d + 1], S^T = K Q^T and dP^T = V dO^T
//     (8 keys x 4 queries per thread), P^T = exp(S^T - lse), dS^T = P^T (dP^T M - D) (soft-cap's
//     derivative, scale), P^T M and dS^T to shared memory as [query][68], dV += (P M) ^T dO and
//     dK += dS^T Q (8 keys x d/16 per thread, in registers). Shared memory: 2 d 68 + 2 * 64 (d + 1)
//     + 2 * 64 * 68 + 128 floats = 103,424 bytes for d = 64 (two blocks an SM), 171,008 for
//     d = 128 (one).
//   dQ, grid (ceil(T / 64), B H): a block owns 64 queries of one head; Q^T and dO^T stay in shared
//     memory; per key tile S, dP (8 queries x 4 keys per thread), dS as the dK/dV kernel does,
//     dS^T to shared memory [key][68], dQ += dS K. Shared memory: 2 d 68 + 2 * 64 (d + 1) + 64 * 68
//     + 128 floats = 86,016 bytes for d = 64, 153,600 for d = 128.
// The dK/dV and dQ kernels recompute S and P (twice the forward's QK^T), the price of having no
// atomics; neither reads the other's results. Registers (ptxas, sm_90): 239 to 255 for both at
// d = 64 (two blocks an SM: registers and shared memory alike), 255 with a few spilled bytes at
// d = 128 (one block an SM).
#pragma once

#include <cmath>
#include <cstdint>

#include "../dropout.h"
#include "flash_attention_f32_kernels.cuh"

#if !defined(__CUDACC__)
// `#pragma unroll` is nvcc's; the host compiler (the CPU emulator) ignores it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash32 {

/// dvec[row] = sum_d dO[row, d] O[row, d] for rows (b, h, t) in [B, H, T] order, one warp a row
/// (a fixed order of summation: lanes, then the shuffle tree).
template <int D, class Thread>
BENCH_FLASH32_FN void backward_prep(Thread& th, const float* __restrict__ out, const float* __restrict__ dout,
                                    float* __restrict__ dvec, int64_t n_t, int n_h, int64_t rows) {
  const int warp = th.tid() / 32, lane = th.tid() % 32;
  const int64_t row = static_cast<int64_t>(th.block_x()) * kWarps + warp;
  if (row >= rows) return;
  const int64_t bh = row / n_t, tq = row % n_t, b = bh / n_h, h = bh % n_h;
  const int64_t off = (b * n_t + tq) * n_h * D + h * D;
  float acc = 0.f;
  for (int d = lane; d < D; d += 32) acc += out[off + d] * dout[off + d];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc += th.shfl_xor(acc, o);
  if (lane == 0) dvec[row] = acc;
}

/// One (query, key) element as both backward kernels recompute it from s = q.k, dp = dO.v, the
/// query's lse (base 2) and D: P M (the mask's 1 / (1 - p) or 0) and dS times the scale, both 0
/// where the key is hidden. `row` = (b H + h) T + query, the dropout mask's row.
struct Grad {
  float p_kept, ds;
};
template <bool kDropout, class Thread>
BENCH_FLASH32_FN Grad element_grad(Thread& th, const Params& p, int64_t row, int64_t key, bool visible, float s,
                                   float dp, float lse2, float d, float keep_scale) {
  float x = s * p.scale;
  if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
  const float prob = visible ? th.exp2(x * kLog2e - lse2) : 0.f;
  float keep = 1.f;
  if constexpr (kDropout) keep = dropout_keep(p.seed, row * p.n_t + key, p.dropout) ? keep_scale : 0.f;
  float ds = prob * (dp * keep - d);
  if (p.softcap > 0.f) ds *= 1.f - (x / p.softcap) * (x / p.softcap);
  return {prob * keep, visible ? ds * p.scale : 0.f};
}

/// dK, dV (see the file comment): block (key tile, b Hkv + kv).
template <int D, bool kDropout, class Thread>
BENCH_FLASH32_FN void backward_dkdv(Thread& th, const Params& p, const float* __restrict__ qkv,
                                    const float* __restrict__ dout, const float* __restrict__ lse,
                                    const float* __restrict__ dvec, float* __restrict__ dqkv) {
  constexpr int kNC = D / kCols;
  float* k_t = reinterpret_cast<float*>(th.shared());  // [D][kLdT]
  float* v_t = k_t + D * kLdT;                         // [D][kLdT]
  float* q_s = v_t + D * kLdT;                         // [64][D + 1]
  float* do_s = q_s + kBlock * kLdRows<D>;             // [64][D + 1]
  float* p_s = do_s + kBlock * kLdRows<D>;             // [64 queries][kLdT]
  float* ds_s = p_s + kBlock * kLdT;                   // [64 queries][kLdT]
  float* lse_s = ds_s + kBlock * kLdT;                 // [64], base 2
  float* d_s = lse_s + kBlock;                         // [64]

  const int tx = th.tid() % kCols, ty = th.tid() / kCols, r0 = ty * kRows;
  const int64_t n0 = static_cast<int64_t>(th.block_x()) * kBlock, n_t = p.n_t;
  const int bkv = th.block_y(), b = bkv / p.n_kv, kv = bkv % p.n_kv, group = p.n_h / p.n_kv;
  const int64_t width = static_cast<int64_t>(p.n_h + 2 * p.n_kv) * D, out_width = static_cast<int64_t>(p.n_h) * D;
  const float* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const float* dseq = dout + static_cast<int64_t>(b) * n_t * out_width;
  const Mask mask{n_t, p.window, p.causal};
  int64_t m_begin = 0, m_end = 0;
  mask.queries_of(n0, m_begin, m_end);

  load_transposed<D>(th, k_t, seq + static_cast<int64_t>(p.n_h + kv) * D, n0, n_t, width);
  load_transposed<D>(th, v_t, seq + static_cast<int64_t>(p.n_h + p.n_kv + kv) * D, n0, n_t, width);

  float dk[kRows][kNC], dv[kRows][kNC];
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int j = 0; j < kNC; ++j) dk[i][j] = dv[i][j] = 0.f;
  const float keep_scale = 1.f / (1.f - p.dropout);

  for (int h = kv * group; h < (kv + 1) * group; ++h)
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kBlock) {
      th.sync();  // the previous tile's Q, dO, P and dS are no longer read
      load_rows<D>(th, q_s, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
      load_rows<D>(th, do_s, dseq + static_cast<int64_t>(h) * D, m0, n_t, out_width);
      for (int i = th.tid(); i < kBlock; i += kThreads) {
        const int64_t at = (static_cast<int64_t>(b) * p.n_h + h) * n_t + m0 + i;
        lse_s[i] = m0 + i < n_t ? lse[at] * kLog2e : 0.f;
        d_s[i] = m0 + i < n_t ? dvec[at] : 0.f;
      }
      th.sync();

      // S^T = K Q^T and dP^T = V dO^T: 8 keys x 4 queries per thread.
      float s[kRows][4], dp[kRows][4];
#pragma unroll
      for (int i = 0; i < kRows; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] = dp[i][j] = 0.f;
      product<4, D>(s, k_t, r0, q_s + tx * kLdRows<D>, 1, kCols * kLdRows<D>);
      product<4, D>(dp, v_t, r0, do_s + tx * kLdRows<D>, 1, kCols * kLdRows<D>);

#pragma unroll
      for (int i = 0; i < kRows; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int ql = tx + kCols * j;
          const int64_t key = n0 + r0 + i, query = m0 + ql;
          const Grad g = element_grad<kDropout>(th, p, (static_cast<int64_t>(b) * p.n_h + h) * n_t + query, key,
                                                query < n_t && key < n_t && mask.visible(query, key), s[i][j], dp[i][j],
                                                lse_s[ql], d_s[ql], keep_scale);
          s[i][j] = g.p_kept;
          dp[i][j] = g.ds;
        }
        // (P M)^T and dS^T to shared memory as [query][key], then dV += (P M)^T dO, dK += dS^T Q.
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float* prow = p_s + (tx + kCols * j) * kLdT + r0;
        float* drow = ds_s + (tx + kCols * j) * kLdT + r0;
        store4(prow, s[0][j], s[1][j], s[2][j], s[3][j]);
        store4(prow + 4, s[4][j], s[5][j], s[6][j], s[7][j]);
        store4(drow, dp[0][j], dp[1][j], dp[2][j], dp[3][j]);
        store4(drow + 4, dp[4][j], dp[5][j], dp[6][j], dp[7][j]);
      }
      th.sync();
      product<kNC, kBlock>(dv, p_s, r0, do_s + tx, kLdRows<D>, kCols);
      product<kNC, kBlock>(dk, ds_s, r0, q_s + tx, kLdRows<D>, kCols);
    }

    // dK and dV of this block's keys, summed over the group's query heads.
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int64_t key = n0 + r0 + i;
    if (key >= n_t) continue;
    float* dst_k = dqkv + (static_cast<int64_t>(b) * n_t + key) * width + static_cast<int64_t>(p.n_h + kv) * D + tx;
    float* dst_v = dst_k + static_cast<int64_t>(p.n_kv) * D;
#pragma unroll
    for (int j = 0; j < kNC; ++j) {
      dst_k[kCols * j] = dk[i][j];
      dst_v[kCols * j] = dv[i][j];
    }
  }
}

/// Shared memory of backward_dkdv<D>.
template <int D>
constexpr size_t backward_dkdv_smem_bytes() {
  return static_cast<size_t>(2 * D * kLdT + 2 * kBlock * kLdRows<D> + 2 * kBlock * kLdT + 2 * kBlock) * sizeof(float);
}

/// dQ (see the file comment): block (query tile, b H + h).
template <int D, bool kDropout, class Thread>
BENCH_FLASH32_FN void backward_dq(Thread& th, const Params& p, const float* __restrict__ qkv,
                                  const float* __restrict__ dout, const float* __restrict__ lse,
                                  const float* __restrict__ dvec, float* __restrict__ dqkv) {
  constexpr int kNC = D / kCols;
  float* q_t = reinterpret_cast<float*>(th.shared());  // [D][kLdT]
  float* do_t = q_t + D * kLdT;                        // [D][kLdT]
  float* k_s = do_t + D * kLdT;                        // [64][D + 1]
  float* v_s = k_s + kBlock * kLdRows<D>;              // [64][D + 1]
  float* ds_t = v_s + kBlock * kLdRows<D>;             // [64 keys][kLdT]
  float* lse_s = ds_t + kBlock * kLdT;                 // [64], base 2
  float* d_s = lse_s + kBlock;                         // [64]

  const int tx = th.tid() % kCols, ty = th.tid() / kCols, r0 = ty * kRows;
  const int64_t m0 = static_cast<int64_t>(th.block_x()) * kBlock, n_t = p.n_t;
  const int bh = th.block_y(), b = bh / p.n_h, h = bh % p.n_h, kv = h / (p.n_h / p.n_kv);
  const int64_t width = static_cast<int64_t>(p.n_h + 2 * p.n_kv) * D, out_width = static_cast<int64_t>(p.n_h) * D;
  const float* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const float* k_base = seq + static_cast<int64_t>(p.n_h + kv) * D;
  const float* v_base = seq + static_cast<int64_t>(p.n_h + p.n_kv + kv) * D;
  const Mask mask{n_t, p.window, p.causal};
  int64_t n_begin = 0, n_end = 0;
  mask.keys_of(m0, n_begin, n_end);

  load_transposed<D>(th, q_t, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
  load_transposed<D>(th, do_t, dout + static_cast<int64_t>(b) * n_t * out_width + static_cast<int64_t>(h) * D, m0, n_t,
                     out_width);
  for (int i = th.tid(); i < kBlock; i += kThreads) {
    const int64_t at = (static_cast<int64_t>(b) * p.n_h + h) * n_t + m0 + i;
    lse_s[i] = m0 + i < n_t ? lse[at] * kLog2e : 0.f;
    d_s[i] = m0 + i < n_t ? dvec[at] : 0.f;
  }

  float dq[kRows][kNC];
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int j = 0; j < kNC; ++j) dq[i][j] = 0.f;
  const float keep_scale = 1.f / (1.f - p.dropout);

  for (int64_t n0 = n_begin; n0 < n_end; n0 += kBlock) {
    th.sync();  // the previous tile's K, V and dS are no longer read
    load_rows<D>(th, k_s, k_base, n0, n_t, width);
    load_rows<D>(th, v_s, v_base, n0, n_t, width);
    th.sync();

    // S = Q K^T and dP = dO V^T: 8 queries x 4 keys per thread.
    float s[kRows][4], dp[kRows][4];
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = dp[i][j] = 0.f;
    product<4, D>(s, q_t, r0, k_s + tx * kLdRows<D>, 1, kCols * kLdRows<D>);
    product<4, D>(dp, do_t, r0, v_s + tx * kLdRows<D>, 1, kCols * kLdRows<D>);

#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t query = m0 + r0 + i, key = n0 + tx + kCols * j;
        s[i][j] = element_grad<kDropout>(th, p, (static_cast<int64_t>(b) * p.n_h + h) * n_t + query, key,
                                         query < n_t && key < n_t && mask.visible(query, key), s[i][j], dp[i][j],
                                         lse_s[r0 + i], d_s[r0 + i], keep_scale)
                      .ds;
      }
      // dS^T to shared memory ([key][query]), then dQ += dS K.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float* row = ds_t + (tx + kCols * j) * kLdT + r0;
      store4(row, s[0][j], s[1][j], s[2][j], s[3][j]);
      store4(row + 4, s[4][j], s[5][j], s[6][j], s[7][j]);
    }
    th.sync();
    product<kNC, kBlock>(dq, ds_t, r0, k_s + tx, kLdRows<D>, kCols);
  }

#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int64_t query = m0 + r0 + i;
    if (query >= n_t) continue;
    float* dst = dqkv + (static_cast<int64_t>(b) * n_t + query) * width + static_cast<int64_t>(h) * D + tx;
#pragma unroll
    for (int j = 0; j < kNC; ++j) dst[kCols * j] = dq[i][j];
  }
}

/// Shared memory of backward_dq<D>.
template <int D>
constexpr size_t backward_dq_smem_bytes() {
  return static_cast<size_t>(2 * D * kLdT + 2 * kBlock * kLdRows<D> + kBlock * kLdT + 2 * kBlock) * sizeof(float);
}

}  // namespace bench::kernels::flash32

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
