// defines: the norms family — norm types (slot "norm") and norm positions (slot "norm_position")
#pragma once

#include "bench/bench.h"

namespace bench::norms {

ComponentInfo layernorm_info();
ComponentInfo rmsnorm_info();
ComponentInfo identity_info();
ComponentInfo pre_info();
ComponentInfo post_info();
ComponentInfo double_info();
ComponentInfo output_info();

/// Shared by LayerNorm and RMSNorm: y = normalize(x) * weight + bias over the last dimension, or
/// normalize(x) * (1 + weight) + bias with unit_offset (Gemma).
class AffineNorm : public Sublayer {
 public:
  AffineNorm(const Params& p, bool center);
  void setup(SetupContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override;
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override;
  Cost cost() const override;

 private:
  bool center_;
  double eps_;
  bool use_weight_;
  bool use_bias_;
  bool unit_offset_;
  int64_t rows_ = 0;
  int64_t width_ = 0;
  size_t esize_ = 4;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  Tensor x_;  // input of the last forward
  Tensor mean_, rstd_, workspace_;
};

/// Dropout on a sublayer's output before the residual add (rate ModelDims::dropout_residual),
/// shared by the norm positions. The mask is recomputed from (seed, step, site) in backward.
class ResidualDropout {
 public:
  void setup(SetupContext& ctx);
  /// Drop elements of `t` in place (training only).
  void forward(Tensor& t, const RunContext& ctx) const;
  /// The gradient reaching the sublayer: `dy` itself when nothing was dropped, else its masked copy.
  const Tensor& backward(const Tensor& dy, const RunContext& ctx);

 private:
  double p_ = 0;
  int64_t site_ = 0;
  Tensor grad_;
};

/// Common parameters of LayerNorm and RMSNorm.
std::vector<ParamSpec> affine_norm_params(double default_eps, bool default_bias);

}  // namespace bench::norms
