// The gated FFNs' shared implementation: one fused input GEMM, the gated unit as a tile program
// (kernels::glu_forward / glu_backward) and the down projection.
#include <algorithm>
#include <cmath>

#include "ffn.h"

namespace bench::ffn {

GatedFfn::GatedFfn(const Params& p, kernels::Activation act)
    : act_(act),
      d_ff_(p.integer("d_ff")),
      ratio_(p.number("ratio")),
      multiple_of_(p.integer("multiple_of")),
      out_scale_(p.boolean("scaled_output_init")),
      bias_(p.boolean("bias")) {}

void GatedFfn::setup(SetupContext& ctx) {
  const ModelDims& d = ctx.dims();
  rows_ = ctx.rows();
  width_ = ctx.width();
  hidden_ = hidden_width(d_ff_, ratio_, multiple_of_, width_);
  w_in_ = ctx.add_param("w_in", {2 * hidden_, width_}, Init::normal(d.init_std));
  const double out_std = out_scale_ ? d.init_std / std::sqrt(2.0 * static_cast<double>(d.n_layers)) : d.init_std;
  w_out_ = ctx.add_param("w_out", {width_, hidden_}, Init::normal(out_std));
  if (bias_) {
    b_in_ = ctx.add_param("b_in", {2 * hidden_}, Init::zeros(), ParamGroup::kBias);
    b_out_ = ctx.add_param("b_out", {width_}, Init::zeros(), ParamGroup::kBias);
    bias_scratch_ = ctx.buffer({std::max(2 * hidden_, width_)});
  }
  gu_ = ctx.buffer({rows_, 2 * hidden_});
  dgu_ = ctx.buffer({rows_, 2 * hidden_});
  h_ = ctx.buffer({rows_, hidden_});
  dh_ = ctx.buffer({rows_, hidden_});
  esize_ = dtype_size(ctx.dtype());
}

void GatedFfn::forward(const Tensor& x, Tensor& y, RunContext& ctx) {
  x_ = x;
  if (b_in_ != nullptr)
    ops::linear_forward(ctx, x, w_in_->value, b_in_->value, gu_);
  else
    ops::linear_forward(ctx, x, w_in_->value, gu_);
  dispatch_float(x.dtype(), [&]<class T>() {
    kernels::glu_forward<T>(ctx.exec, act_, gu_.data<T>(), h_.data<T>(), rows_, hidden_);
  });
  if (b_out_ != nullptr)
    ops::linear_forward(ctx, h_, w_out_->value, b_out_->value, y);
  else
    ops::linear_forward(ctx, h_, w_out_->value, y);
}

void GatedFfn::backward(const Tensor& dy, Tensor& dx, RunContext& ctx) {
  if (b_out_ != nullptr)
    ops::linear_backward(ctx, dy, h_, w_out_->value, &dh_, w_out_->grad, b_out_->grad, bias_scratch_);
  else
    ops::linear_backward(ctx, dy, h_, w_out_->value, &dh_, &w_out_->grad);
  dispatch_float(dy.dtype(), [&]<class T>() {
    kernels::glu_backward<T>(ctx.exec, act_, gu_.data<T>(), dh_.data<T>(), dgu_.data<T>(), rows_, hidden_);
  });
  if (b_in_ != nullptr)
    ops::linear_backward(ctx, dgu_, x_, w_in_->value, &dx, w_in_->grad, b_in_->grad, bias_scratch_);
  else
    ops::linear_backward(ctx, dgu_, x_, w_in_->value, &dx, &w_in_->grad);
}

Cost GatedFfn::cost() const {
  // act(gate) * up; backward: act'(gate) and act(gate) again, and three products.
  const double a = activation_flops(act_);
  return ffn_cost(rows_, width_, hidden_, 2, a + 1, 2 * a + 3, esize_, bias_);
}

}  // namespace bench::ffn
