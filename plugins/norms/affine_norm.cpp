#include "bench/random.h"
#include "kernels/dropout.h"
#include "kernels/norm.h"
#include "norms.h"

namespace bench::norms {

std::vector<ParamSpec> affine_norm_params(double default_eps, bool default_bias) {
  return {
      ParamSpec::number("eps", default_eps, "added to the variance (mean square) before the square root").at_least(0),
      ParamSpec::boolean("weight", true, "learnable per-feature gain (initialized to 1)"),
      ParamSpec::boolean("bias", default_bias, "learnable per-feature bias (initialized to 0)"),
      ParamSpec::boolean("unit_offset", false,
                         "the gain is 1 + weight, the weight stored as the offset from one and initialized to 0 "
                         "(Gemma's RMSNorm)"),
  };
}

void ResidualDropout::setup(SetupContext& ctx) {
  p_ = ctx.dims().dropout_residual;
  site_ = static_cast<int64_t>(hash_seed(0, ctx.scope()) >> 1);
  if (p_ > 0) grad_ = ctx.buffer({ctx.rows(), ctx.width()});
}

void ResidualDropout::forward(Tensor& t, const RunContext& ctx) const {
  if (p_ <= 0 || !ctx.training) return;
  const uint64_t seed = kernels::dropout_launch_seed(ctx.seed, ctx.step, site_, ctx.step_at);
  dispatch_float(t.dtype(), [&]<class T>() {
    kernels::dropout_apply<T>(ctx.exec, t.data<T>(), t.data<T>(), t.numel(), p_, seed, ctx.step_at);
  });
}

const Tensor& ResidualDropout::backward(const Tensor& dy, const RunContext& ctx) {
  if (p_ <= 0 || !ctx.training) return dy;
  const uint64_t seed = kernels::dropout_launch_seed(ctx.seed, ctx.step, site_, ctx.step_at);
  dispatch_float(dy.dtype(), [&]<class T>() {
    kernels::dropout_apply<T>(ctx.exec, dy.data<T>(), grad_.data<T>(), dy.numel(), p_, seed, ctx.step_at);
  });
  return grad_;
}

void add_normed(Sublayer& norm, const Tensor& fo, Tensor& fn, const ResidualDropout& dropout, const Tensor& x,
                Tensor& y, RunContext& ctx) {
  if (ResidualNorm* n = folding_norm(&norm, ctx); n != nullptr && !dropout.active(ctx) && x.raw() != y.raw()) {
    n->forward_plus(fo, x, y, ctx);  // y = x + norm(fo) in the norm's launch
    return;
  }
  norm.forward(fo, fn, ctx);
  dropout.forward(fn, ctx);
  ops::add(ctx, x, fn, y);
}

void add_norm_gradient(Sublayer& norm, const Tensor& dxn, const Tensor& dy, Tensor& dx, RunContext& ctx) {
  if (ResidualNorm* n = folding_norm(&norm, ctx)) {  // dx = dy + the norm's gradient in one launch
    n->backward_plus(dxn, dy, dx, ctx);
    return;
  }
  norm.backward(dxn, dx, ctx);
  ops::add(ctx, dx, dy, dx);
}

AffineNorm::AffineNorm(const Params& p, bool center)
    : center_(center),
      eps_(p.number("eps")),
      use_weight_(p.boolean("weight")),
      use_bias_(p.boolean("bias")),
      unit_offset_(p.boolean("unit_offset")) {
  if (unit_offset_ && !use_weight_)
    throw ConfigError(p.where("unit_offset"), "unit_offset = true offsets the gain: it needs weight = true");
}

void AffineNorm::setup(SetupContext& ctx) {
  rows_ = ctx.rows();
  width_ = ctx.width();
  esize_ = dtype_size(ctx.dtype());
  if (use_weight_)
    weight_ = ctx.add_param("weight", {width_}, unit_offset_ ? Init::zeros() : Init::ones(), ParamGroup::kGain);
  if (use_bias_) bias_ = ctx.add_param("bias", {width_}, Init::zeros(), ParamGroup::kBias);
  const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  mean_ = ctx.buffer({rows_}, acc);
  rstd_ = ctx.buffer({rows_}, acc);
  workspace_ = ctx.buffer({kernels::norm_backward_workspace(rows_, width_)}, acc);
}

void AffineNorm::forward(const Tensor& x, Tensor& y, RunContext& ctx) {
  run_forward(x, nullptr, nullptr, nullptr, y, ctx);
}

void AffineNorm::backward(const Tensor& dy, Tensor& dx, RunContext& ctx) { run_backward(dy, nullptr, dx, ctx); }

bool AffineNorm::folds_residual(const RunContext& ctx) const { return tile::runs_as_device(ctx.exec); }

void AffineNorm::forward_of_sum(const Tensor& a, const Tensor& b, Tensor& s, Tensor& y, RunContext& ctx) {
  run_forward(a, &b, &s, nullptr, y, ctx);
}

void AffineNorm::forward_plus(const Tensor& x, const Tensor& res, Tensor& y, RunContext& ctx) {
  run_forward(x, nullptr, nullptr, &res, y, ctx);
}

void AffineNorm::backward_plus(const Tensor& dy, const Tensor& dres, Tensor& dx, RunContext& ctx) {
  run_backward(dy, &dres, dx, ctx);
}

void AffineNorm::run_forward(const Tensor& x, const Tensor* x2, Tensor* sum, const Tensor* res, Tensor& y,
                             RunContext& ctx) {
  x_ = sum != nullptr ? *sum : x;  // the normalized input, which backward reads
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    kernels::norm_forward_residual<T>(
        ctx.exec, center_, x.data<T>(), x2 != nullptr ? x2->data<T>() : nullptr,
        sum != nullptr ? sum->data<T>() : nullptr, res != nullptr ? res->data<T>() : nullptr,
        weight_ ? weight_->value.data<T>() : nullptr, bias_ ? bias_->value.data<T>() : nullptr, y.data<T>(),
        center_ ? static_cast<A*>(mean_.raw()) : nullptr, static_cast<A*>(rstd_.raw()), rows_, width_, eps_,
        unit_offset_);
  });
}

void AffineNorm::run_backward(const Tensor& dy, const Tensor* dres, Tensor& dx, RunContext& ctx) {
  dispatch_float(dy.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    kernels::norm_backward_residual<T>(
        ctx.exec, center_, dy.data<T>(), dres != nullptr ? dres->data<T>() : nullptr, x_.data<T>(),
        weight_ ? weight_->value.data<T>() : nullptr, static_cast<const A*>(mean_.raw()),
        static_cast<const A*>(rstd_.raw()), dx.data<T>(), weight_ ? weight_->grad.data<T>() : nullptr,
        bias_ ? bias_->grad.data<T>() : nullptr, rows_, width_, static_cast<A*>(workspace_.raw()), unit_offset_);
  });
}

Cost AffineNorm::cost() const {
  const double n = static_cast<double>(rows_ * width_);
  const double e = static_cast<double>(esize_);
  Cost c;
  c.flops_forward = n * (center_ ? 7.0 : 5.0);  // (center,) square, sum, scale, gain, bias
  c.flops_backward = n * (center_ ? 12.0 : 10.0);
  c.bytes_forward = 2 * n * e;   // read x, write y
  c.bytes_backward = 3 * n * e;  // read dy and x, write dx
  return c;
}

}  // namespace bench::norms
