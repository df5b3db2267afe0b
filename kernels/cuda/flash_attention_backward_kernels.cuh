// defines: bench::kernels::flash — the flash attention backward (prep, main, dQ) as functions of
//          a thread, shared by the CUDA kernels of flash_attention.cu and the CPU warp emulator of
//          tests/kernels/flash_emulation_test.cpp
//
// The Thread, the fragment layouts and the shared helpers (pack, pair, a_fragment, load_tile,
// kBlockM/kBlockN/kWarps/kThreads, kPad) are those of flash_attention_kernels.cuh.
//
// Backward (FlashAttention-2's order): a first kernel computes D = rowsum(dO * O) per query and
// zeroes the float dQ accumulator; the main kernel gives each block 64 keys of one (batch, kv
// head): it keeps K and V in shared memory and dK, dV in registers (each warp 16 keys), and walks
// every query head of the group and every query tile that can see its keys, recomputing
// S^T = K Q^T and P^T = exp(S^T - lse), then dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D)
// (times the soft-cap's derivative and the scale), dK += dS^T Q; dS goes through shared memory
// as [query][key] for dQ = dS K, added to the accumulator with atomics; a last kernel rounds dQ
// to bf16 into dqkv. Nothing of size T^2 is stored, and dK, dV need no atomics: one block owns
// them, summed over the group's query heads.
#pragma once

#include <cmath>
#include <cstdint>

#include "../dropout.h"
#include "../tile/defs.h"
#include "flash_attention_kernels.cuh"

#if !defined(__CUDACC__)
// `#pragma unroll` is nvcc's; the host compiler (the CPU emulator) ignores it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

namespace bench::kernels::flash {

/// D[row] = sum_d dO[row, d] O[row, d] for rows (b, h, t) in [B, H, T] order, one warp per row;
/// also zeroes the row's dQ accumulator.
template <int D, class Thread>
BENCH_FLASH_FN void flash_backward_prep(Thread& th, const uint16_t* __restrict__ out, const uint16_t* __restrict__ dout,
                                        float* __restrict__ dvec, float* __restrict__ dq_accum, int64_t n_t, int n_h,
                                        int64_t rows) {
  const int warp = th.tid() / 32, lane = th.tid() % 32;
  const int64_t row = static_cast<int64_t>(th.block_x()) * kWarps + warp;
  if (row >= rows) return;
  const int64_t bh = row / n_t, tq = row % n_t, b = bh / n_h, h = bh % n_h;
  const int64_t off = (b * n_t + tq) * n_h * D + h * D;
  float acc = 0.f;
  for (int d = lane; d < D; d += 32)
    acc += tile::bf16_to_float(tile::bf16{out[off + d]}) * tile::bf16_to_float(tile::bf16{dout[off + d]});
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc += th.shfl_xor(acc, o);
  if (lane == 0) dvec[row] = acc;
  for (int d = lane; d < D; d += 32) dq_accum[row * D + d] = 0.f;
}

/// Shared memory of flash_backward<D>: K, V, Q, dO tiles, dS as [query][key] (padded), lse and D.
template <int D>
constexpr size_t backward_smem_bytes() {
  return (2 * kBlockN + 2 * kBlockM) * (D + kPad) * sizeof(uint16_t) + kBlockM * (kBlockN + kPad) * sizeof(uint16_t) +
         2 * kBlockM * sizeof(float);
}

template <int D, bool kDropout, class Thread>
BENCH_FLASH_FN void flash_backward(Thread& th, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                                   const float* __restrict__ lse, const float* __restrict__ dvec,
                                   float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv, int64_t n_t, int n_h,
                                   int n_kv, float scale, float softcap, int64_t window, bool causal, float dropout,
                                   uint64_t dropout_seed) {
  uint8_t* smem = th.shared();
  auto* k_s = reinterpret_cast<uint16_t(*)[D + kPad]>(smem);
  auto* v_s = k_s + kBlockN;
  auto* q_s = v_s + kBlockN;
  auto* do_s = q_s + kBlockM;
  auto* ds_s = reinterpret_cast<uint16_t(*)[kBlockN + kPad]>(do_s + kBlockM);
  auto* lse_s = reinterpret_cast<float*>(ds_s + kBlockM);
  float* d_s = lse_s + kBlockM;

  const int warp = th.tid() / 32, lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(th.block_x()) * kBlockN;
  const int bkv = th.block_y(), b = bkv / n_kv, kv = bkv % n_kv, group = n_h / n_kv;
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D, out_width = static_cast<int64_t>(n_h) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* dseq = dout + static_cast<int64_t>(b) * n_t * out_width;

  load_tile<D>(th, k_s, seq + static_cast<int64_t>(n_h + kv) * D, n0, n_t, width);
  load_tile<D>(th, v_s, seq + static_cast<int64_t>(n_h + n_kv + kv) * D, n0, n_t, width);

  // This thread's two keys (rows g and g + 8 of its warp's 16) and their dK, dV.
  const int64_t key_of[2] = {n0 + warp * 16 + g, n0 + warp * 16 + g + 8};
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  // Query tiles that see some of these keys: from the first key on (causal), up to the last key
  // plus the window.
  const int64_t m_begin = causal ? n0 : 0;
  const int64_t m_end = window > 0 && n0 + kBlockN + window - 1 < n_t ? n0 + kBlockN + window - 1 : n_t;

  for (int h = kv * group; h < (kv + 1) * group; ++h) {
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kBlockM) {
      th.sync();  // the previous tile's Q, dO and dS are no longer read
      load_tile<D>(th, q_s, seq + static_cast<int64_t>(h) * D, m0, n_t, width);
      load_tile<D>(th, do_s, dseq + static_cast<int64_t>(h) * D, m0, n_t, out_width);
      for (int i = th.tid(); i < kBlockM; i += kThreads) {
        const int64_t at = (static_cast<int64_t>(b) * n_h + h) * n_t + m0 + i;
        lse_s[i] = m0 + i < n_t ? lse[at] : 0.f;
        d_s[i] = m0 + i < n_t ? dvec[at] : 0.f;
      }
      th.sync();

      // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys and the tile's 64 queries.
      float s[kBlockM / 8][4], dp[kBlockM / 8][4];
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const int r = warp * 16 + g, c = kk * 16 + 2 * t;
        uint32_t ak[4], av[4];
        a_fragment(ak, k_s, r, c);
        a_fragment(av, v_s, r, c);
#pragma unroll
        for (int j = 0; j < kBlockM / 8; ++j) {
          const int query = j * 8 + g;
          th.mma(s[j], ak, pair(&q_s[query][c]), pair(&q_s[query][c + 8]));
          th.mma(dp[j], av, pair(&do_s[query][c]), pair(&do_s[query][c + 8]));
        }
      }

      // P^T and dS^T, in place of S^T and dP^T.
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = j * 8 + 2 * t + (e % 2);
          const int64_t key = key_of[e / 2], query = m0 + ql;
          const bool visible =
              key < n_t && query < n_t && (!causal || key <= query) && (window <= 0 || key > query - window);
          float x = s[j][e] * scale;
          if (softcap > 0.f) x = softcap * tanhf(x / softcap);
          const float p = visible ? th.exp(x - lse_s[ql]) : 0.f;
          // Dropout: dV takes the kept probabilities scaled by 1 / (1 - p), and dP = dO . v the same
          // mask; D = rowsum(dO O) already holds it (O was computed with it).
          float keep = 1.f;
          if constexpr (kDropout) {
            const int64_t at = ((static_cast<int64_t>(b) * n_h + h) * n_t + query) * n_t + key;
            keep = dropout_keep(dropout_seed, at, dropout) ? 1.f / (1.f - dropout) : 0.f;
          }
          float ds = p * (dp[j][e] * keep - d_s[ql]);
          if (softcap > 0.f) ds *= 1.f - (x / softcap) * (x / softcap);
          s[j][e] = p * keep;
          dp[j][e] = visible ? ds * scale : 0.f;
        }

        // dV += P^T dO and dK += dS^T Q: the accumulators of queries 16 ks .. 16 ks + 15 are A fragments.
#pragma unroll
      for (int ks = 0; ks < kBlockM / 16; ++ks) {
        uint32_t ap[4];
        a_fragment(ap, s[2 * ks], s[2 * ks + 1]);
        uint32_t ad[4];
        a_fragment(ad, dp[2 * ks], dp[2 * ks + 1]);
        const int q = ks * 16 + 2 * t;
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          const int d = i * 8 + g;
          th.mma(dv[i], ap, pack(do_s[q][d], do_s[q + 1][d]), pack(do_s[q + 8][d], do_s[q + 9][d]));
          th.mma(dk[i], ad, pack(q_s[q][d], q_s[q + 1][d]), pack(q_s[q + 8][d], q_s[q + 9][d]));
        }
      }

      // dS to shared memory as [query][key], then dQ = dS K for this warp's 16 queries.
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ds_s[j * 8 + 2 * t + (e % 2)][warp * 16 + g + (e / 2) * 8] = tile::float_to_bf16(dp[j][e]).bits;
      th.sync();
      float dq[D / 8][4];
#pragma unroll
      for (int i = 0; i < D / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const int r = warp * 16 + g, c = kk * 16 + 2 * t;
        uint32_t a[4];
        a_fragment(a, ds_s, r, c);
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          const int d = i * 8 + g;
          th.mma(dq[i], a, pack(k_s[c][d], k_s[c + 1][d]), pack(k_s[c + 8][d], k_s[c + 9][d]));
        }
      }
#pragma unroll
      for (int row = 0; row < 2; ++row) {
        const int64_t query = m0 + warp * 16 + g + 8 * row;
        if (query >= n_t) continue;
        float* dst = dq_accum + ((static_cast<int64_t>(b) * n_h + h) * n_t + query) * D;
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          th.atomic_add(dst + i * 8 + 2 * t, dq[i][2 * row]);
          th.atomic_add(dst + i * 8 + 2 * t + 1, dq[i][2 * row + 1]);
        }
      }
    }
  }

  // dK and dV of this block's keys, summed over the group's query heads.
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int64_t key = key_of[row];
    if (key >= n_t) continue;
    uint16_t* dst_k = dqkv + (static_cast<int64_t>(b) * n_t + key) * width + static_cast<int64_t>(n_h + kv) * D;
    uint16_t* dst_v = dst_k + static_cast<int64_t>(n_kv) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + 2 * t;
      store_pair(dst_k + d, pack_floats(dk[i][2 * row], dk[i][2 * row + 1]));
      store_pair(dst_v + d, pack_floats(dv[i][2 * row], dv[i][2 * row + 1]));
    }
  }
}

/// dQ from the float accumulator [B, H, T, D] to bf16 in dqkv's Q heads, two elements per thread.
template <int D, class Thread>
BENCH_FLASH_FN void flash_backward_dq(Thread& th, const float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv,
                                      int64_t n_t, int n_h, int n_kv, int64_t pairs) {
  const int64_t i = static_cast<int64_t>(th.block_x()) * th.block_dim() + th.tid();
  if (i >= pairs) return;
  const int64_t row = i / (D / 2), d = (i % (D / 2)) * 2;
  const int64_t bh = row / n_t, tq = row % n_t, b = bh / n_h, h = bh % n_h;
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D;
  store_pair(dqkv + (b * n_t + tq) * width + h * D + d, pack_floats(dq_accum[row * D + d], dq_accum[row * D + d + 1]));
}

}  // namespace bench::kernels::flash

#if !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif
