// The gated FFNs' shared implementation: one fused input GEMM, the gated unit as a tile program
// (kernels::glu_forward / glu_backward) and the down projection.
#include "ffn.h"

namespace bench::ffn {

void GatedFfn::setup(SetupContext& ctx) {
  setup_weights(ctx, 2);
  gu_ = ctx.buffer({rows_, 2 * hidden_});
  dgu_ = ctx.buffer({rows_, 2 * hidden_});
  h_ = ctx.buffer({rows_, hidden_});
  dh_ = ctx.buffer({rows_, hidden_});
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
