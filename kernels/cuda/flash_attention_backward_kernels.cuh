// defines: bench::kernels::flash — the flash attention backward (prep, main, dQ) as functions of
//          a thread, shared by the CUDA kernels of flash_attention.cu and the CPU warp emulator of
//          tests/kernels/flash_emulation_test.cpp
//
// The Thread, the fragment layouts and the shared helpers (pack, store_pair, kPad, kWarps for the
// prep kernel) are those of flash_attention_kernels.cuh; the backward's Thread also has
// atomic_add2(p, a, b) (red.global.add.v2.f32: p[0] += a, p[1] += b, p 8-byte aligned).
//
// Backward (FlashAttention-2's order): a first kernel computes D = rowsum(dO * O) per query and
// zeroes the float dQ accumulator; the main kernel gives each block of 8 warps 128 keys of one
// (batch, kv head) (FlashAttention-2's hdim-128 tiling): it keeps K and V in shared memory and
// dK, dV in registers (each warp 16 keys), and walks every query head of the group and every
// 64-query tile that can see its keys, Q and dO of the next tile copied (cp.async) into a second
// stage while this one is computed. Per tile it recomputes S^T = K Q^T and P^T = exp2(S^T scale
// log2 e - lse log2 e), then dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D) (times the
// soft-cap's derivative and the scale), dK += dS^T Q; dS^T goes through shared memory as
// [key][query] for dQ = dS K (each warp 16 queries x half of D), added to the accumulator with
// vector atomics; a last kernel rounds dQ to bf16 into dqkv. Every operand read from shared
// memory is an ldmatrix (.trans where the stored rows are the k dimension); two barriers a tile.
// Nothing of size T^2 is stored, and dK, dV need no atomics: one block owns them, summed over
// the group's query heads. Registers (sm_90, -Xptxas -v): 255, with 92 bytes of spills at
// D = 128 (132 with dropout; loop invariants, stored before the loop and reloaded once a tile)
// and 12 at D = 64; shared memory backward_smem_bytes: 158,208 bytes (D = 128) or 92,672
// (D = 64), one block an SM.
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

constexpr int kBwdBlockN = 128;  // keys per block of flash_backward
constexpr int kBwdBlockM = 64;   // queries per tile it walks
constexpr int kBwdWarps = 8;     // 16 keys each for S^T, dP^T, dK, dV; 16 queries x D / 2 each for dQ
constexpr int kBwdThreads = kBwdWarps * 32;
static_assert(kBwdBlockN == 16 * kBwdWarps, "one warp per 16 keys");
static_assert(kBwdWarps == 2 * (kBwdBlockM / 16), "dQ: 4 slabs of 16 queries x 2 halves of D");
static_assert(2 * kBwdBlockM <= kBwdThreads, "one thread per lse and per D of a tile");

/// The grid of a backward main kernel (flash_backward, flash_backward_wgmma) over `pairs`
/// (batch, kv head) pairs: {x, y}; returns the `heaviest_first` the kernel must be given. By
/// head (the default): x the 128-key block, y the pair, so a head's blocks start together (causal,
/// key block j walks 2 (T/128 - j) query tiles a query head: the first ones the most). Heaviest
/// first (`heaviest_first` asked, causal): x the pair, y the key block, so that blocks start in
/// the order of their linear index (x fastest) with every head's block 0, then every head's block
/// 1, ... (forward_grid's order for the backward). Not causal, every block walks the same tiles:
/// the order by head is kept whatever is asked.
inline bool backward_grid(int64_t n_t, int64_t pairs, bool causal, bool heaviest_first, int64_t& x, int64_t& y) {
  const int64_t blocks = (n_t + kBwdBlockN - 1) / kBwdBlockN;
  const bool transposed = causal && heaviest_first;
  x = transposed ? pairs : blocks;
  y = transposed ? blocks : pairs;
  return transposed;
}

/// The 128-key block and the (batch, kv head) pair of this thread's block in backward_grid's
/// order (`heaviest_first` as backward_grid returned it).
template <class Thread>
BENCH_FLASH_FN void backward_block(const Thread& th, bool heaviest_first, int& key_block, int& bkv) {
  key_block = heaviest_first ? th.block_y() : th.block_x();
  bkv = heaviest_first ? th.block_x() : th.block_y();
}

/// Issues cp.async copies (16 bytes each, kBwdThreads threads) of rows [row0, row0 + kRows) of
/// one head (D elements at `base`, rows `width` apart) into shared memory, zeros past `rows`;
/// the caller commits and waits. row0 < rows.
template <int D, int kRows, class Thread>
BENCH_FLASH_FN void bwd_load_async(Thread& th, uint16_t (*dst)[D + kPad], const uint16_t* base, int64_t row0,
                                   int64_t rows, int64_t width) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kBwdThreads == 0, "every thread copies as many chunks");
  const int valid = rows - row0 < kRows ? static_cast<int>(rows - row0) : kRows;
  const uint16_t* src = base + row0 * width;
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kBwdThreads; ++i) {
    const int c = th.tid() + i * kBwdThreads, r = c / kChunks, k = (c % kChunks) * 8;
    // Rows past the end copy nothing (zero fill) from the first row, which is in bounds.
    th.cp_async_16(&dst[r][k], src + (r < valid ? static_cast<int64_t>(r) * width + k : 0), r < valid);
  }
}

/// Shared memory of flash_backward<D>: K and V (kBwdBlockN rows), two stages of Q and dO
/// (kBwdBlockM rows each), dS^T as [key][query], and one tile's lse (base 2) and D.
template <int D>
constexpr size_t backward_smem_bytes() {
  return ((2 * kBwdBlockN + 4 * kBwdBlockM) * (D + kPad) + kBwdBlockN * (kBwdBlockM + kPad)) * sizeof(uint16_t) +
         2 * kBwdBlockM * sizeof(float);
}

/// Keys [k0, k0 + 16) (one warp's) against the queries [m0, m0 + kBwdBlockM) of a tile: `active`
/// when some pair may be visible (otherwise P and dS are zero there and the warp skips the tile),
/// `interior` when every pair is (no mask). The same function decides the skips of S^T, dK, dV
/// and of dQ, so that a skipped slab of dS^T is never read.
struct SlabMask {
  bool active, interior;
};

BENCH_FLASH_FN SlabMask slab_mask(int64_t k0, int64_t m0, int64_t n_t, int64_t window, bool causal) {
  const int64_t q_last = (m0 + kBwdBlockM < n_t ? m0 + kBwdBlockM : n_t) - 1, k_last = k0 + 15;
  SlabMask s;
  s.active = k0 < n_t && (!causal || k0 <= q_last) && (window <= 0 || k_last + window > m0);
  s.interior = k_last < n_t && m0 + kBwdBlockM <= n_t && (!causal || k_last <= m0) &&
               (window <= 0 || k0 + window > m0 + kBwdBlockM - 1);
  return s;
}

/// The 32-bit limits of the mask of keys [k0, k0 + 16) against queries [m0, m0 + kBwdBlockM): key
/// k0 + kl and query m0 + ql exist iff kl < k_end and ql < q_end; their difference is diff + kl -
/// ql (|k0 - m0| < T); the window's limit, 0 when there is none or it is longer than the sequence
/// (then it masks nothing).
struct SlabLimits {
  int k_end, q_end, diff, window;
};

BENCH_FLASH_FN SlabLimits slab_limits(int64_t k0, int64_t m0, int64_t n_t, int64_t window) {
  SlabLimits r;
  r.k_end = n_t - k0 < 16 ? static_cast<int>(n_t - k0) : 16;
  r.q_end = n_t - m0 < kBwdBlockM ? static_cast<int>(n_t - m0) : kBwdBlockM;
  r.diff = static_cast<int>(k0 - m0);
  r.window = window > 0 && window < n_t ? static_cast<int>(window) : 0;
  return r;
}

/// The head and first query of the query tile after (h, m0) in flash_backward's walk: the next
/// 64 queries of the head, or the next head from m_begin.
BENCH_FLASH_FN int h1_of(int h, int64_t m0, int64_t m_end) { return m0 + kBwdBlockM < m_end ? h : h + 1; }
BENCH_FLASH_FN int64_t m1_of(int64_t m0, int64_t m_begin, int64_t m_end) {
  return m0 + kBwdBlockM < m_end ? m0 + kBwdBlockM : m_begin;
}

/// The tile's lse (times log2 e) for threads 0..63 and D for threads 64..127, of query m0 + tid % 64
/// of head row `bh_row` (zero past the sequence): what the thread stores into lse_s, d_s.
template <class Thread>
BENCH_FLASH_FN float row_stat(const Thread& th, const float* __restrict__ lse, const float* __restrict__ dvec,
                              int64_t bh_row, int64_t m0, int64_t n_t) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int i = th.tid() % kBwdBlockM;
  if (th.tid() >= 2 * kBwdBlockM || m0 + i >= n_t) return 0.f;
  return th.tid() < kBwdBlockM ? lse[bh_row + m0 + i] * kLog2e : dvec[bh_row + m0 + i];
}

/// What the element-wise step of flash_backward needs besides the accumulators.
struct ElementArgs {
  const float* lse_s;  // the tile's lse log2 e (64 floats), then its D (64)
  float scale, scale2, cap_in, cap_out, dropout;
  SlabLimits rel;
  bool causal;
  uint64_t seed;
  int64_t drop0, n_t;  // dropout's index of (query m0, key k0): ((b H + h) T + m0) T + k0
};

/// The element step's part that needs S^T alone, for one element (query ql of the tile): with a
/// soft-cap (kSoftcap) c = tanh(s cap_in), cap_in = scale / cap; else p = exp2(s scale2 -
/// lse_s[ql]), scale2 = scale log2 e and lse_s holding lse log2 e (logits in base 2), unmasked (a
/// masked one may be +inf). ElementArgs's fields, passed alone: the rest of it is not needed yet.
template <bool kSoftcap, class Thread>
BENCH_FLASH_FN float element_first(Thread& th, float s, const float* lse_s, float scale2, float cap_in, int ql) {
  if constexpr (kSoftcap)
    return tanhf(s * cap_in);
  else
    return th.exp2(s * scale2 - lse_s[ql]);
}

/// dS's factor besides P and dP - D, from element_first's result `s` alone: the scale, times the
/// soft-cap's derivative 1 - c^2 with one (c = s).
template <bool kSoftcap>
BENCH_FLASH_FN float element_dscale(float s, const ElementArgs& a) {
  if constexpr (kSoftcap)
    return (1.f - s * s) * a.scale;
  else
    return a.scale;
}

/// Whether the pair of query ql and key kl of the slab is visible (causal, window, past the
/// sequence's end): what the element step checks where the slab is not interior.
BENCH_FLASH_FN bool element_visible(const ElementArgs& a, int ql, int kl) {
  const int diff = a.rel.diff + kl - ql;  // key - query
  return kl < a.rel.k_end && ql < a.rel.q_end && (!a.causal || diff <= 0) &&
         (a.rel.window == 0 || diff > -a.rel.window);
}

/// The rest for one element (query ql of the slab): P^T and dS^T in place of element_first's
/// result `s` and dP^T. With a soft-cap, x = cap c and its derivative scale (1 - c^2) are exact.
/// kMasked: the slab is not interior, so the pair is checked (`visible()`). Dropout: dV takes the
/// kept probabilities scaled by 1 / (1 - p) (`keep()`: 0 or that, 1 without dropout), and
/// dP = dO . v the same mask; D = rowsum(dO O) already holds it (O was computed with it). The two
/// are evaluated where element_second's own code evaluated them: both CUDA files' cubins are
/// byte-identical with this helper and without.
template <bool kMasked, bool kSoftcap, class Thread, class Visible, class Keep>
BENCH_FLASH_FN void element_second_by(Thread& th, float& s, float& dp, const ElementArgs& a, int ql,
                                      const Visible& visible, const Keep& keep_of) {
  const float x2 = kSoftcap ? a.cap_out * s : s, dscale = element_dscale<kSoftcap>(s, a);
  float p = kSoftcap ? th.exp2(x2 - a.lse_s[ql]) : x2;
  if constexpr (kMasked) p = visible() ? p : 0.f;  // before any product: exp2 of a masked logit may be +inf
  const float keep = keep_of();
  s = p * keep;
  dp = p * (dp * keep - a.lse_s[kBwdBlockM + ql]) * dscale;  // lse_s is followed by D
}

/// element_second_by for key kl of the slab: the pair checked by element_visible, dropout's keep
/// hashed here.
template <bool kMasked, bool kSoftcap, bool kDropout, class Thread>
BENCH_FLASH_FN void element_second(Thread& th, float& s, float& dp, const ElementArgs& a, int ql, int kl) {
  element_second_by<kMasked, kSoftcap>(
      th, s, dp, a, ql, [&] { return element_visible(a, ql, kl); },
      [&] {
        if constexpr (kDropout) {
          const int64_t at = a.drop0 + static_cast<int64_t>(ql) * a.n_t + kl;
          return dropout_keep(a.seed, at, a.dropout) ? 1.f / (1.f - a.dropout) : 0.f;
        } else {
          return 1.f;
        }
      });
}

/// element_second with dropout's `keep` (0 or 1 / (1 - p)) and the pair's visibility given (the
/// warp-specialized wgmma backward's, which computes both before the element step: p_and_ds_kept).
template <bool kSoftcap, class Thread>
BENCH_FLASH_FN void element_second_keep(Thread& th, float& s, float& dp, const ElementArgs& a, int ql, float keep,
                                        bool visible) {
  element_second_by<true, kSoftcap>(
      th, s, dp, a, ql, [&] { return visible; }, [&] { return keep; });
}

/// P^T of one element from element_first's result `s`, before dropout: element_second's first
/// output without dropout (its dS is not used, and compiled away). The wgmma backward computes
/// P^T with it before dP^T has completed.
template <bool kMasked, bool kSoftcap, class Thread>
BENCH_FLASH_FN float element_p(Thread& th, float s, const ElementArgs& a, int ql, int kl) {
  float dp = 0.f;
  element_second<kMasked, kSoftcap, false>(th, s, dp, a, ql, kl);
  return s;
}

/// P^T and dS^T in place of S^T and dP^T for one warp's 16 keys x 64 queries: element_first and
/// element_second, element by element (the wgmma backward runs the first on all of S^T while
/// dP^T's products are in flight). Register j, e holds (key g + 8 (e / 2), query 8 j + 2 t + e % 2).
template <bool kMasked, bool kSoftcap, bool kDropout, class Thread>
BENCH_FLASH_FN void p_and_ds(Thread& th, float (&s)[kBwdBlockM / 8][4], float (&dp)[kBwdBlockM / 8][4],
                             const ElementArgs& a, int g, int t) {
#pragma unroll
  for (int j = 0; j < kBwdBlockM / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ql = j * 8 + 2 * t + (e % 2), kl = g + 8 * (e / 2);
      s[j][e] = element_first<kSoftcap>(th, s[j][e], a.lse_s, a.scale2, a.cap_in, ql);
      element_second<kMasked, kSoftcap, kDropout>(th, s[j][e], dp[j][e], a, ql, kl);
    }
}

/// Dropout's keep of register j, e of p_and_ds's layout (key g + 8 (e / 2), query 8 j + 2 t + e % 2
/// of the slab of keys from k0 and queries from m0, lane 4 g + t) into bit 4 j + e of `kept`:
/// dropout_keep(seed, drop0 + query T + key, p), drop0 the index of the slab's (query 0, key 0),
/// hashed as the forward does (seed + kG (i + 1) one base plus constants); and where the slab is not
/// interior, `shown` the mask's visibility (element_visible's) of the same elements. The wgmma
/// backward's warp-specialized kernel calls it after issuing S^T's and dP^T's products, once a tile
/// (p_and_ds_kept reads the bits).
BENCH_FLASH_FN void element_bits(uint32_t lane, uint64_t seed, int64_t drop0, int64_t k0, int64_t m0, int64_t n_t,
                                 int64_t window, bool causal, float p, uint32_t& kept, uint32_t& shown) {
  constexpr uint64_t kG = 0x9e3779b97f4a7c15ull;
  const int g = static_cast<int>(lane / 4u), t = static_cast<int>(lane % 4u);
  const uint64_t arg0 = seed + kG * static_cast<uint64_t>(drop0 + 2 * t * n_t + g + 1);
  const uint64_t row = kG * static_cast<uint64_t>(n_t);
#pragma unroll
  for (int j = 0; j < kBwdBlockM / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint64_t arg = arg0 + row * static_cast<uint64_t>(8 * j + e % 2) + kG * static_cast<uint64_t>(8 * (e / 2));
      kept |= static_cast<uint32_t>(static_cast<float>(mix64(arg) >> 40) * (1.0f / 16777216.0f) >= p) << (4 * j + e);
    }
  if (!slab_mask(k0, m0, n_t, window, causal).interior) {
    ElementArgs va{};
    va.rel = slab_limits(k0, m0, n_t, window);
    va.causal = causal;
    shown = 0;
#pragma unroll
    for (int j = 0; j < kBwdBlockM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        shown |= static_cast<uint32_t>(element_visible(va, 8 * j + 2 * t + e % 2, g + 8 * (e / 2))) << (4 * j + e);
  }
}

/// The same with dropout's keep of register j, e given as bit 4 j + e of `kept` (dropout_keep's,
/// hashed before), and where the slab is not interior (kMasked) its visibility as the same bit of
/// `shown` (element_visible's, computed before); keep_scale is 1 / (1 - p).
template <bool kMasked, bool kSoftcap, int kJ0 = 0, int kJ1 = kBwdBlockM / 8, class Thread>
BENCH_FLASH_FN void p_and_ds_kept(Thread& th, float (&s)[kBwdBlockM / 8][4], float (&dp)[kBwdBlockM / 8][4],
                                  const ElementArgs& a, int t, uint32_t kept, uint32_t shown, float keep_scale) {
#pragma unroll
  for (int j = kJ0; j < kJ1; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ql = j * 8 + 2 * t + (e % 2), bit = 4 * j + e;
      s[j][e] = element_first<kSoftcap>(th, s[j][e], a.lse_s, a.scale2, a.cap_in, ql);
      const float keep = (kept >> bit) & 1u ? keep_scale : 0.f;
      element_second_keep<kSoftcap>(th, s[j][e], dp[j][e], a, ql, keep, !kMasked || ((shown >> bit) & 1u) != 0);
    }
}

/// Main backward: 128 keys of one (batch, kv head) a block of 8 warps (16 keys each). K and V come
/// in once (cp.async); the query tiles (64 queries of each head of the group) stream through two
/// stages of Q and dO, the next tile's copy overlapping this one's products. Every mma operand
/// from shared memory is one ldmatrix per two 16 x 8 B fragments (or one A): K, V as A of
/// S^T = K Q^T and dP^T = V dO^T; Q, dO as their B; dO, Q (.trans) as B of dV += P^T dO and
/// dK += dS^T Q; dS^T (.trans) as A and K (.trans) as B of dQ = dS K. Rows of D + kPad (and of
/// 64 + kPad for dS^T) keep them conflict-free. P = exp2(S^T scale log2 e - lse log2 e) with the
/// soft-cap (exact) folded into the same base-2 logit; a warp whose 16 keys the tile cannot see
/// skips it, and dQ skips their slab.
template <int D, bool kDropout, class Thread>
BENCH_FLASH_FN void flash_backward(Thread& th, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                                   const float* __restrict__ lse, const float* __restrict__ dvec,
                                   float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv, int64_t n_t, int n_h,
                                   int n_kv, float scale, float softcap, int64_t window, bool causal, float dropout,
                                   uint64_t dropout_seed, bool heaviest_first) {
  using Row = uint16_t[D + kPad];
  // Shared memory: K, V, then stage s's Q at qdo_s + 2 kBwdBlockM s and its dO kBwdBlockM rows
  // further (computed, not indexed from an array, which would put the pointers in local memory).
  auto* k_s = reinterpret_cast<Row*>(th.shared());
  Row* v_s = k_s + kBwdBlockN;
  Row* qdo_s = v_s + kBwdBlockN;
  auto* ds_s = reinterpret_cast<uint16_t(*)[kBwdBlockM + kPad]>(qdo_s + 4 * kBwdBlockM);
  auto* lse_s = reinterpret_cast<float*>(ds_s + kBwdBlockN);
  constexpr float kLog2e = 1.4426950408889634f;

  const int warp = th.tid() / 32, lane = th.tid() % 32, g = lane / 4, t = lane % 4;
  int key_block = 0, bkv = 0;  // see backward_grid
  backward_block(th, heaviest_first, key_block, bkv);
  const int64_t n0 = static_cast<int64_t>(key_block) * kBwdBlockN;
  const int b = bkv / n_kv, kv = bkv % n_kv, group = n_h / n_kv;
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D, out_width = static_cast<int64_t>(n_h) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;
  const uint16_t* dseq = dout + static_cast<int64_t>(b) * n_t * out_width;

  // Query tiles that see some of these keys: from the first key on (causal), up to the last key
  // plus the window, for each head of the group in turn.
  const int64_t m_begin = causal ? n0 : 0;
  const int64_t m_end = window > 0 && n0 + kBwdBlockN + window - 1 < n_t ? n0 + kBwdBlockN + window - 1 : n_t;

  // K, V and the first tile's Q and dO in one group.
  const int h_first = kv * group;
  bwd_load_async<D, kBwdBlockN>(th, k_s, seq + static_cast<int64_t>(n_h + kv) * D, n0, n_t, width);
  bwd_load_async<D, kBwdBlockN>(th, v_s, seq + static_cast<int64_t>(n_h + n_kv + kv) * D, n0, n_t, width);
  bwd_load_async<D, kBwdBlockM>(th, qdo_s, seq + static_cast<int64_t>(h_first) * D, m_begin, n_t, width);
  bwd_load_async<D, kBwdBlockM>(th, qdo_s + kBwdBlockM, dseq + static_cast<int64_t>(h_first) * D, m_begin, n_t,
                                out_width);
  th.cp_async_commit();
  float stat = row_stat(th, lse, dvec, (static_cast<int64_t>(b) * n_h + h_first) * n_t, m_begin, n_t);

  // This warp's 16 keys (rows g and g + 8 of them are this thread's) and their dK, dV.
  const int64_t k0 = n0 + warp * 16;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  // ldmatrix x4: lane L addresses row L % 8 of matrix L / 8. A fragments of K, V (keys as rows):
  // matrices (keys +0, d +0), (keys +8, d +0), (keys +0, d +8), (keys +8, d +8).
  const int a_row = warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
  // B fragments with n along the stored rows (Q, dO of S^T, dP^T: queries as n; and, .trans, dS^T
  // as dQ's A): matrices (rows +0, cols +0), (rows +0, cols +8), (rows +8, cols +0), (rows +8,
  // cols +8): b0, b1 of n block j, then of block j + 1.
  const int n_row = (lane % 8) + 8 * (lane / 16), n_col = 8 * ((lane / 8) % 2);
  // B fragments with k along the stored rows (.trans: dO, Q of dV, dK; K of dQ): matrices (rows
  // +0, cols +0), (rows +8, cols +0), (rows +0, cols +8), (rows +8, cols +8): b0, b1 of n block i,
  // then of block i + 1.
  const int k_row = (lane % 8) + 8 * ((lane / 8) % 2), k_col = 8 * (lane / 16);
  // dQ: this warp's 16 queries and half of D.
  const int dq_row = 16 * (warp % (kBwdBlockM / 16)), dq_col = (warp / (kBwdBlockM / 16)) * (D / 2);
  const float scale2 = scale * kLog2e, cap_in = softcap > 0.f ? scale / softcap : 0.f, cap_out = softcap * kLog2e;

  // This tile: head h, queries from m0; the next one: h1, m1 (h1 past the group: none).
  int h = h_first, stage = 0;
  int64_t m0 = m_begin;
  for (; h < h_first + group; h = h1_of(h, m0, m_end), m0 = m1_of(m0, m_begin, m_end), stage ^= 1) {
    const int h1 = h1_of(h, m0, m_end);
    const int64_t m1 = m1_of(m0, m_begin, m_end);
    // No barrier here: the other stage (Q, dO of the tile before) and lse_s, d_s were last read
    // before that tile's barrier ahead of dQ, which this thread has passed; dS^T is written only
    // after the next barrier, which every warp reaches after its dQ of the tile before.
    if (h1 < h_first + group) {
      Row* next = qdo_s + 2 * kBwdBlockM * (stage ^ 1);
      bwd_load_async<D, kBwdBlockM>(th, next, seq + static_cast<int64_t>(h1) * D, m1, n_t, width);
      bwd_load_async<D, kBwdBlockM>(th, next + kBwdBlockM, dseq + static_cast<int64_t>(h1) * D, m1, n_t, out_width);
      th.cp_async_commit();
      th.cp_async_wait(1);  // this tile's group has landed; the next one may still be in flight
      if (th.tid() < 2 * kBwdBlockM) lse_s[th.tid()] = stat;
      stat = row_stat(th, lse, dvec, (static_cast<int64_t>(b) * n_h + h1) * n_t, m1, n_t);
    } else {
      th.cp_async_wait(0);
      if (th.tid() < 2 * kBwdBlockM) lse_s[th.tid()] = stat;
    }
    th.sync();  // this tile's Q, dO, lse and D are in shared memory for every warp
    const Row* q_t = qdo_s + 2 * kBwdBlockM * stage;
    const Row* do_t = q_t + kBwdBlockM;

    const SlabMask mine = slab_mask(k0, m0, n_t, window, causal);
    if (mine.active) {
      // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys and the tile's 64 queries.
      float s[kBwdBlockM / 8][4], dp[kBwdBlockM / 8][4];
#pragma unroll
      for (int j = 0; j < kBwdBlockM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ak[4], av[4];
        th.ldmatrix_x4(ak, &k_s[a_row][kk * 16 + a_col]);
        th.ldmatrix_x4(av, &v_s[a_row][kk * 16 + a_col]);
#pragma unroll
        for (int j = 0; j < kBwdBlockM / 8; j += 2) {
          uint32_t qb[4], ob[4];
          th.ldmatrix_x4(qb, &q_t[j * 8 + n_row][kk * 16 + n_col]);
          th.mma(s[j], ak, qb[0], qb[1]);
          th.mma(s[j + 1], ak, qb[2], qb[3]);
          th.ldmatrix_x4(ob, &do_t[j * 8 + n_row][kk * 16 + n_col]);
          th.mma(dp[j], av, ob[0], ob[1]);
          th.mma(dp[j + 1], av, ob[2], ob[3]);
        }
      }

      // P^T and dS^T in place of S^T and dP^T: one of four straight copies of the element loop
      // (soft-cap or not, mask or not), chosen per warp, not a branch per element.
      const ElementArgs ea{lse_s,
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
      if (softcap > 0.f) {
        if (mine.interior)
          p_and_ds<false, true, kDropout>(th, s, dp, ea, g, t);
        else
          p_and_ds<true, true, kDropout>(th, s, dp, ea, g, t);
      } else {
        if (mine.interior)
          p_and_ds<false, false, kDropout>(th, s, dp, ea, g, t);
        else
          p_and_ds<true, false, kDropout>(th, s, dp, ea, g, t);
      }

      // dV += P^T dO and dK += dS^T Q: the accumulators of queries 16 ks .. 16 ks + 15 are A
      // fragments; dS^T's are also pairs of queries of one key, stored as they are.
#pragma unroll
      for (int ks = 0; ks < kBwdBlockM / 16; ++ks) {
        uint32_t ap[4], ad[4];
        a_fragment_rn(ap, s[2 * ks], s[2 * ks + 1]);
        a_fragment_rn(ad, dp[2 * ks], dp[2 * ks + 1]);
        store_pair(&ds_s[warp * 16 + g][ks * 16 + 2 * t], ad[0]);
        store_pair(&ds_s[warp * 16 + g + 8][ks * 16 + 2 * t], ad[1]);
        store_pair(&ds_s[warp * 16 + g][ks * 16 + 8 + 2 * t], ad[2]);
        store_pair(&ds_s[warp * 16 + g + 8][ks * 16 + 8 + 2 * t], ad[3]);
#pragma unroll
        for (int i = 0; i < D / 8; i += 2) {
          uint32_t ob[4], qb[4];
          th.ldmatrix_x4_trans(ob, &do_t[ks * 16 + k_row][i * 8 + k_col]);
          th.mma(dv[i], ap, ob[0], ob[1]);
          th.mma(dv[i + 1], ap, ob[2], ob[3]);
          th.ldmatrix_x4_trans(qb, &q_t[ks * 16 + k_row][i * 8 + k_col]);
          th.mma(dk[i], ad, qb[0], qb[1]);
          th.mma(dk[i + 1], ad, qb[2], qb[3]);
        }
      }
    }
    th.sync();  // dS^T is complete

    // dQ = dS K for this warp's 16 queries and half of D, over the slabs of keys that were active.
    float dq[D / 16][4];
#pragma unroll
    for (int i = 0; i < D / 16; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kBwdBlockN / 16; ++kk) {
      if (!slab_mask(n0 + kk * 16, m0, n_t, window, causal).active) continue;
      uint32_t a[4];
      th.ldmatrix_x4_trans(a, &ds_s[kk * 16 + n_row][dq_row + n_col]);
#pragma unroll
      for (int i = 0; i < D / 16; i += 2) {
        uint32_t kb[4];
        th.ldmatrix_x4_trans(kb, &k_s[kk * 16 + k_row][dq_col + i * 8 + k_col]);
        th.mma(dq[i], a, kb[0], kb[1]);
        th.mma(dq[i + 1], a, kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      const int64_t query = m0 + dq_row + g + 8 * row;
      if (query >= n_t) continue;
      float* dst = dq_accum + ((static_cast<int64_t>(b) * n_h + h) * n_t + query) * D + dq_col;
#pragma unroll
      for (int i = 0; i < D / 16; ++i) {
        th.atomic_add2(dst + i * 8 + 2 * t, dq[i][2 * row], dq[i][2 * row + 1]);
      }
    }
  }

  // dK and dV of this warp's keys, summed over the group's query heads.
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int64_t key = k0 + g + 8 * row;
    if (key >= n_t) continue;
    uint16_t* dst_k = dqkv + (static_cast<int64_t>(b) * n_t + key) * width + static_cast<int64_t>(n_h + kv) * D;
    uint16_t* dst_v = dst_k + static_cast<int64_t>(n_kv) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + 2 * t;
      store_pair(dst_k + d, pack_rn(dk[i][2 * row], dk[i][2 * row + 1]));
      store_pair(dst_v + d, pack_rn(dv[i][2 * row], dv[i][2 * row + 1]));
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
