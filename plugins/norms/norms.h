// defines: the norms family — norm types (slot "norm") and norm positions (slot "norm_position")
#pragma once

#include "bench/bench.h"
#include "bench/residual_norm.h"

namespace bench::norms {

ComponentInfo layernorm_info();
ComponentInfo rmsnorm_info();
ComponentInfo identity_info();
ComponentInfo pre_info();
ComponentInfo post_info();
ComponentInfo double_info();
ComponentInfo output_info();

/// Shared by LayerNorm and RMSNorm: y = normalize(x) * weight + bias over the last dimension, or
/// normalize(x) * (1 + weight) + bias with unit_offset (Gemma). On a device (tile::runs_as_device)
/// it folds the norm positions' residual adds into its launches (ResidualNorm,
/// kernels::norm_forward_residual and norm_backward_residual); the CPU keeps them apart, as
/// before, though the folded kernels compute the same bits there.
class AffineNorm : public Sublayer, public ResidualNorm {
 public:
  AffineNorm(const Params& p, bool center);
  void setup(SetupContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override;
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override;
  bool folds_residual(const RunContext& ctx) const override;
  void forward_of_sum(const Tensor& a, const Tensor& b, Tensor& s, Tensor& y, RunContext& ctx) override;
  void forward_plus(const Tensor& x, const Tensor& res, Tensor& y, RunContext& ctx) override;
  void backward_plus(const Tensor& dy, const Tensor& dres, Tensor& dx, RunContext& ctx) override;
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
  /// The forward launch: y = [res +] norm(x [+ x2, written to sum]) (nulls: not folded).
  void run_forward(const Tensor& x, const Tensor* x2, Tensor* sum, const Tensor* res, Tensor& y, RunContext& ctx);
  /// The backward launches: dx = [dres +] the gradient at dy.
  void run_backward(const Tensor& dy, const Tensor* dres, Tensor& dx, RunContext& ctx);

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
  /// Whether forward and backward drop anything at ctx's step (training with a rate above 0).
  bool active(const RunContext& ctx) const { return p_ > 0 && ctx.training; }
  /// The gradient reaching the sublayer: `dy` itself when nothing was dropped, else its masked copy.
  const Tensor& backward(const Tensor& dy, const RunContext& ctx);

 private:
  double p_ = 0;
  int64_t site_ = 0;
  Tensor grad_;
};

/// y = x + dropout(norm(fo)), the output side of the double and output norm positions: in the
/// norm's own launch where it folds the add (folding_norm; nothing dropped, y not x), else norm
/// into `fn`, dropout, add.
void add_normed(Sublayer& norm, const Tensor& fo, Tensor& fn, const ResidualDropout& dropout, const Tensor& x,
                Tensor& y, RunContext& ctx);

/// dx = dy + the gradient of `norm` at dxn, the input side of the pre and double norm positions:
/// in one launch where the norm folds the add.
void add_norm_gradient(Sublayer& norm, const Tensor& dxn, const Tensor& dy, Tensor& dx, RunContext& ctx);

/// Common parameters of LayerNorm and RMSNorm.
std::vector<ParamSpec> affine_norm_params(double default_eps, bool default_bias);

}  // namespace bench::norms
