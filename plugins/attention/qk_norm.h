// defines: bench::attention::QkNorm — per-head or full-width normalization of the queries and
//          keys inside a fused qkv buffer (QK-norm: ViT-22B, Gemma 3, Qwen3 per head; OLMo 2 full)
#pragma once

#include <cstdint>

#include "bench/bench.h"

namespace bench::attention {

/// Normalizes every query head and every key head of the fused qkv rows over its d_head
/// features, in place: q_h <- norm(q_h) * gain_q (+ bias_q), k_g <- norm(k_g) * gain_k (+ bias_k),
/// with RMSNorm or LayerNorm and gains (and biases) of size d_head shared by the heads; or, with
/// `full`, each row's whole q (n_heads d_head features) and whole k (n_kv_heads d_head) as one
/// vector each, with gains (and biases) of those widths (OLMo 2).
/// The q and k columns are strided inside the qkv rows; they are copied to contiguous
/// [rows, heads d_head] buffers (read as [rows * heads, d_head] per head), normalized by
/// kernels::norm_forward / norm_backward, and copied back.
class QkNorm {
 public:
  enum class Kind : uint8_t { kNone, kRms, kLayer };
  /// "none", "rmsnorm", "layernorm".
  static Kind parse(const std::string& name);

  QkNorm(Kind kind, double eps, bool bias, bool full) : kind_(kind), eps_(eps), bias_(bias), full_(full) {}
  bool enabled() const { return kind_ != Kind::kNone; }

  /// Declares q_norm.weight and k_norm.weight (ParamGroup::kGain, ones; [d_head], or
  /// [heads d_head] and [kv_heads d_head] when full), with `bias` also q_norm.bias and k_norm.bias
  /// (ParamGroup::kBias, zeros), and allocates the buffers.
  void setup(SetupContext& ctx, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d_head);
  /// Normalize the q and k heads of qkv [rows, (H + 2 Hkv) d_head] in place; keeps their inputs.
  void forward(Tensor& qkv, const RunContext& ctx);
  /// dqkv holds the gradient with respect to the normalized q and k; replaces it, in place, by
  /// the gradient with respect to their inputs and adds into the gains' (biases') gradients.
  void backward(Tensor& dqkv, const RunContext& ctx);
  /// Work of one forward / backward (both norms and the copies).
  Cost cost(size_t esize) const;

 private:
  Kind kind_;
  double eps_;
  bool bias_;
  bool full_;  // one norm over the whole q and the whole k of a row, not one per head
  /// Rows and width of the q (k) norm: [rows * heads, d_head] per head, [rows, heads d_head] full.
  int64_t norm_rows(int64_t heads) const { return full_ ? rows_ : rows_ * heads; }
  int64_t norm_cols(int64_t heads) const { return full_ ? heads * d_head_ : d_head_; }
  int64_t rows_ = 0, heads_ = 0, kv_heads_ = 0, d_head_ = 0;
  Param* q_gain_ = nullptr;
  Param* k_gain_ = nullptr;
  Param* q_bias_ = nullptr;
  Param* k_bias_ = nullptr;
  Tensor in_;             // the un-normalized q heads [rows * H, dh], then k heads [rows * Hkv, dh]
  Tensor tmp_a_, tmp_b_;  // the same layout: normalized output / incoming gradient, input gradient
  Tensor mean_, rstd_, workspace_;
};

}  // namespace bench::attention
