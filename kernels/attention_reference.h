// defines: AttentionArgs, attention_prob_index and the float64 references
//          attention_forward_reference, attention_lse_reference, attention_backward_reference,
//          attention_entropy_reference (with their row, attention_reference_row): what every
//          attention kernel (kernels/attention.h, attention_tiled.h, attention_fused.h,
//          attention_flash_f32.h, the CUDA flash kernels, cuDNN) is checked against.
//
// Per batch b and query head h (kv head g = h / (H / Hkv)), with Q, K, V the [T, dh] slices of
// the fused qkv rows:
//   S = scale * Q K^T,  P = masked softmax(S) (softcap and window as in kernels/softmax.h),
//   O = (P * M / (1 - p)) V  with the dropout mask M (all ones when p = 0, i.e. O = P V).
// Backward: dV = (P * M / (1 - p))^T dO, dP = (dO V^T) * M / (1 - p), dS = softmax_backward(P, dP),
//   dQ = scale dS K, dK = scale dS^T Q, dK and dV summed over the query heads of a kv head.
// The mask is recomputed, never stored: M[b, h, i, j] = dropout_keep(seed, ((b H + h) T + i) T + j, p)
// (kernels/dropout.h), a function of the global index in [B, H, T, T].

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dropout.h"

namespace bench::kernels {

/// Shape and variant of a causal multi-head attention with grouped K/V heads.
struct AttentionArgs {
  int64_t batch;              ///< sequences B
  int64_t seq;                ///< tokens per sequence T
  int64_t n_heads;            ///< query heads H
  int64_t n_kv_heads;         ///< K/V heads Hkv, dividing H (H: MHA, 1: MQA, otherwise GQA)
  int64_t d_head;             ///< elements per head dh
  double scale;               ///< multiplies Q K^T (usually 1 / sqrt(d_head))
  double softcap = 0;         ///< > 0: logits capped to softcap * tanh(s / softcap)
  int64_t window = 0;         ///< > 0: each query sees only the last `window` keys it may see
  bool causal = true;         ///< queries see keys up to their own position only
  double dropout = 0;         ///< dropout rate on the probabilities, in [0, 1) (0 outside training)
  uint64_t dropout_seed = 0;  ///< seed of the dropout mask (kernels::dropout_seed(case seed, step, site))
  /// Null, or the step in device memory (a captured step): the kernels then draw the mask from
  /// dropout_seed_of(dropout_seed, dropout_step_at), dropout_seed being the site's
  /// dropout_site_seed (kernels/dropout.h).
  const int64_t* dropout_step_at = nullptr;
  /// Keep the probabilities in `probs` (then sized attention_probs_size): on CUDA in bf16 this
  /// turns the flash kernels off for the call (attention_uses_flash). The backward must see the
  /// forward's value.
  bool materialize = false;
  /// CUDA's bf16 flash backward only (kernels/cuda/flash_backward_launch.cuh): causal, launch the
  /// main kernel's blocks heaviest first across all heads (every head's first key block, then
  /// every head's second, ...) instead of head by head. The same gradients up to the order of
  /// dQ's atomic additions; a measurement's choice (cuda_check's "... heaviest first" rows).
  bool flash_backward_heaviest_first = false;
  /// The wgmma flash backward (core "flash_wgmma") only: dQ summed into its float accumulator by
  /// bulk asynchronous reductions of whole rows staged in shared memory (cp.reduce.async.bulk,
  /// FlashAttention-3's approach) instead of per-thread red.global.add. The same gradients up to
  /// the order of dQ's additions; a measurement's choice (cuda_check's "... bulk dq" row).
  bool flash_backward_bulk_dq = false;
  /// The wgmma flash backward only: Q and dO loaded by TMA (cp.async.bulk.tensor under an
  /// mbarrier, one thread issuing a tile's boxes, the tiles 128-byte swizzled) instead of cp.async
  /// by every thread. The same gradients, bit for bit (the same products in the same order); a
  /// measurement's choice (cuda_check's "... tma" rows).
  bool flash_backward_tma = false;
  /// The wgmma flash backward only: warp-specialized (implies flash_backward_tma): a producer
  /// warpgroup loads Q and dO by TMA into a ring of three stages (full / empty mbarriers), the two
  /// consumer warpgroups compute at 240 registers (setmaxnreg). The same gradients, bit for bit;
  /// not with dropout at d_head 128 (refused: flash_attention_wgmma_backward_refusal); a
  /// measurement's choice (cuda_check's "... ws" rows).
  bool flash_backward_ws = false;
  /// The wgmma flash forward's warp-specialized variants only (cp.async and TMA): keys a tile, 64
  /// or 128, or 0 for the launcher's choice (128: flash::wgmma_forward_key_tile). The same outputs
  /// up to the order of the online softmax's float operations; a measurement's choice (cuda_check's
  /// "... keys 64" rows).
  int flash_forward_key_tile = 0;
};

/// Index of probability (b, h, i, j) in [B, H, T, T]: the element index of the dropout mask.
inline int64_t attention_prob_index(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  return ((b * a.n_heads + h) * a.seq + i) * a.seq + j;
}

/// One query row (b, h, t) of the float64 references: the visible keys [lo, hi), their logits
/// (scale, then cap) in l[j] and their undropped probabilities in p[j]; returns the row's max
/// logit.
inline double attention_reference_row(const AttentionArgs& a, const std::vector<double>& qkv, int64_t b, int64_t h,
                                      int64_t t, std::vector<double>& l, std::vector<double>& p, int64_t& lo,
                                      int64_t& hi) {
  const int64_t n_t = a.seq, n_h = a.n_heads, n_kv = a.n_kv_heads, dh = a.d_head;
  const int64_t width = (n_h + 2 * n_kv) * dh, g = h / (n_h / n_kv);
  l.resize(static_cast<size_t>(n_t));
  p.resize(static_cast<size_t>(n_t));
  hi = a.causal ? t + 1 : n_t;
  lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0;
  const double* q = &qkv[(b * n_t + t) * width + h * dh];
  double m = -HUGE_VAL;
  for (int64_t j = lo; j < hi; ++j) {
    const double* k = &qkv[(b * n_t + j) * width + (n_h + g) * dh];
    double s = 0;
    for (int64_t d = 0; d < dh; ++d) s += q[d] * k[d];
    s *= a.scale;
    l[j] = a.softcap > 0 ? a.softcap * std::tanh(s / a.softcap) : s;
    m = std::max(m, l[j]);
  }
  double z = 0;
  for (int64_t j = lo; j < hi; ++j) z += std::exp(l[j] - m);
  for (int64_t j = lo; j < hi; ++j) p[j] = std::exp(l[j] - m) / z;
  return m;
}

/// float64 reference of attention_forward, per head and per query, straight from the formula:
/// out is [B*T, H*dh]; row_max (may be null) is [B, H, T].
inline void attention_forward_reference(const AttentionArgs& a, const std::vector<double>& qkv,
                                        std::vector<double>& out, std::vector<double>* row_max) {
  const int64_t n_t = a.seq, n_h = a.n_heads, n_kv = a.n_kv_heads, dh = a.d_head;
  const int64_t width = (n_h + 2 * n_kv) * dh;
  out.assign(static_cast<size_t>(a.batch * n_t * n_h * dh), 0.0);
  if (row_max != nullptr) row_max->assign(static_cast<size_t>(a.batch * n_h * n_t), 0.0);
  std::vector<double> l, p;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < n_h; ++h) {
      const int64_t g = h / (n_h / n_kv);
      for (int64_t t = 0; t < n_t; ++t) {
        int64_t lo = 0, hi = 0;
        const double m = attention_reference_row(a, qkv, b, h, t, l, p, lo, hi);
        double* o = &out[(b * n_t + t) * n_h * dh + h * dh];
        for (int64_t j = lo; j < hi; ++j) {
          double pj = p[j];
          if (a.dropout > 0)
            pj *= dropout_keep(a.dropout_seed, attention_prob_index(a, b, h, t, j), static_cast<float>(a.dropout))
                      ? 1 / (1 - a.dropout)
                      : 0.0;
          const double* v = &qkv[(b * n_t + j) * width + (n_h + n_kv + g) * dh];
          for (int64_t d = 0; d < dh; ++d) o[d] += pj * v[d];
        }
        if (row_max != nullptr) (*row_max)[(b * n_h + h) * n_t + t] = m;
      }
    }
}

/// float64 reference of the log-sum-exp m + ln sum_j e^(l_j - m) of every query row's logits,
/// [B, H, T]: what the tiled, fused and cuDNN paths keep for their backward instead of the
/// probabilities.
inline std::vector<double> attention_lse_reference(const AttentionArgs& a, const std::vector<double>& qkv) {
  std::vector<double> lse(static_cast<size_t>(a.batch * a.n_heads * a.seq)), l, p;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.n_heads; ++h)
      for (int64_t t = 0; t < a.seq; ++t) {
        int64_t lo = 0, hi = 0;
        const double m = attention_reference_row(a, qkv, b, h, t, l, p, lo, hi);
        double z = 0;
        for (int64_t j = lo; j < hi; ++j) z += std::exp(l[static_cast<size_t>(j)] - m);
        lse[static_cast<size_t>((b * a.n_heads + h) * a.seq + t)] = m + std::log(z);
      }
  return lse;
}

/// float64 reference of attention_backward, per head and per query, straight from the formulas
/// above (probabilities recomputed): dqkv [B*T, (H + 2 Hkv) dh] receives dQ, and dK, dV summed over
/// the query heads of each kv head; nothing else is needed from the forward.
inline void attention_backward_reference(const AttentionArgs& a, const std::vector<double>& qkv,
                                         const std::vector<double>& dout, std::vector<double>& dqkv) {
  const int64_t n_t = a.seq, n_h = a.n_heads, n_kv = a.n_kv_heads, dh = a.d_head;
  const int64_t width = (n_h + 2 * n_kv) * dh;
  dqkv.assign(qkv.size(), 0.0);
  std::vector<double> capped, p, dp(static_cast<size_t>(n_t));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < n_h; ++h) {
      const int64_t g = h / (n_h / n_kv);
      const auto row = [&](int64_t t, int64_t head) { return (b * n_t + t) * width + head * dh; };
      for (int64_t t = 0; t < n_t; ++t) {
        int64_t lo = 0, hi = 0;
        (void)attention_reference_row(a, qkv, b, h, t, capped, p, lo, hi);
        const double* q = &qkv[row(t, h)];
        const double* d_o = &dout[(b * n_t + t) * n_h * dh + h * dh];
        // dP of the undropped probabilities: dO . v_j times the mask's keep / (1 - p).
        double dot_pdp = 0;
        for (int64_t j = lo; j < hi; ++j) {
          double keep = 1;
          if (a.dropout > 0)
            keep = dropout_keep(a.dropout_seed, attention_prob_index(a, b, h, t, j), static_cast<float>(a.dropout))
                       ? 1 / (1 - a.dropout)
                       : 0.0;
          const double* v = &qkv[row(j, n_h + n_kv + g)];
          double* dv = &dqkv[row(j, n_h + n_kv + g)];
          double dpj = 0;
          for (int64_t d = 0; d < dh; ++d) {
            dpj += d_o[d] * v[d];
            dv[d] += p[j] * keep * d_o[d];
          }
          dp[j] = dpj * keep;
          dot_pdp += p[j] * dp[j];
        }
        double* dq = &dqkv[row(t, h)];
        for (int64_t j = lo; j < hi; ++j) {
          double ds = p[j] * (dp[j] - dot_pdp);
          if (a.softcap > 0) ds *= 1 - (capped[j] / a.softcap) * (capped[j] / a.softcap);
          ds *= a.scale;
          const double* k = &qkv[row(j, n_h + g)];
          double* dk = &dqkv[row(j, n_h + g)];
          for (int64_t d = 0; d < dh; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
    }
}

/// float64 reference of attention_entropy: per query row (b, h, t) of [B, H, T], the entropy
/// -sum_j p_j ln p_j of its (undropped) attention probabilities, in nats.
inline void attention_entropy_reference(const AttentionArgs& a, const std::vector<double>& qkv,
                                        std::vector<double>& entropy) {
  entropy.assign(static_cast<size_t>(a.batch * a.n_heads * a.seq), 0.0);
  std::vector<double> l, p;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.n_heads; ++h)
      for (int64_t t = 0; t < a.seq; ++t) {
        int64_t lo = 0, hi = 0;
        (void)attention_reference_row(a, qkv, b, h, t, l, p, lo, hi);
        double e = 0;
        for (int64_t j = lo; j < hi; ++j)
          if (p[j] > 0) e -= p[j] * std::log(p[j]);
        entropy[static_cast<size_t>((b * a.n_heads + h) * a.seq + t)] = e;
      }
}

}  // namespace bench::kernels
