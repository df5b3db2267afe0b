// Plain MLP (Vaswani et al. 2017; GPT-2 and BERT with GeLU; Primer with ReLU^2):
//   y = act(x W_in^T (+ b_in)) W_out^T (+ b_out),  W_in [d_ff, d_model], W_out [d_model, d_ff],
// d_ff = 4 d_model by default, rounded up to `multiple_of`. Biases with `bias = true` (GPT-2,
// GPT-NeoX), none by default (the lecture's section 3.3: modern models drop them).
#include <utility>
#include <vector>

#include "ffn.h"
#include "kernels/gemm_epilogue.h"

namespace bench::ffn {

class Mlp final : public Ffn {
 public:
  explicit Mlp(const Params& p) : Ffn(p, activation_named(p.string("activation"))) {}

  void setup(SetupContext& ctx) override {
    setup_weights(ctx, 1);
    pre_ = ctx.buffer({rows_, hidden_});
    act_out_ = ctx.buffer({rows_, hidden_});
    dact_ = ctx.buffer({rows_, hidden_});
  }

  // The input projection and the activation are one gemm_epilogue (kernels/gemm_epilogue.h): one
  // cuBLASLt call with GELU_AUX (GELU_AUX_BIAS with b_in) for gelu_tanh on CUDA, the product then
  // the (bias and) activation elsewhere, bit for bit the unfused sequence. Likewise the backward's
  // dact GEMM with act' (DGELU); the biases' gradients come from the weight-gradient GEMMs'
  // BGRADB epilogue (ops::linear_backward).
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    x_ = x;
    dispatch_float(x.dtype(), [&]<class T>() {
      kernels::Epilogue<T> e;
      e.kind = kernels::EpilogueKind::kActivation;
      e.act = act_;
      e.aux = pre_.data<T>();
      e.ld_aux = hidden_;
      e.bias = b_in_ != nullptr ? b_in_->value.data<T>() : nullptr;
      kernels::gemm_epilogue<T>(ctx.exec, false, true, rows_, hidden_, width_, 1, x.data<T>(), width_,
                                w_in_->value.data<T>(), width_, 0, act_out_.data<T>(), hidden_, e);
    });
    if (b_out_ != nullptr)
      ops::linear_forward(ctx, act_out_, w_out_->value, b_out_->value, y);
    else
      ops::linear_forward(ctx, act_out_, w_out_->value, y);
  }

  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    dispatch_float(dy.dtype(), [&]<class T>() {  // dact = (dy W_out) * act'(pre)
      kernels::Epilogue<T> e;
      e.kind = kernels::EpilogueKind::kActivationGrad;
      e.act = act_;
      e.aux = pre_.data<T>();
      e.ld_aux = hidden_;
      kernels::gemm_epilogue<T>(ctx.exec, false, false, rows_, hidden_, width_, 1, dy.data<T>(), width_,
                                w_out_->value.data<T>(), hidden_, 0, dact_.data<T>(), hidden_, e);
    });
    if (bias_) {
      ops::linear_backward(ctx, dy, act_out_, w_out_->value, nullptr, w_out_->grad, b_out_->grad, bias_scratch_);
      ops::linear_backward(ctx, dact_, x_, w_in_->value, &dx, w_in_->grad, b_in_->grad, bias_scratch_);
    } else {
      ops::linear_backward(ctx, dy, act_out_, w_out_->value, nullptr, &w_out_->grad);
      ops::linear_backward(ctx, dact_, x_, w_in_->value, &dx, &w_in_->grad);
    }
  }

  Cost cost() const override {
    const double a = activation_flops(act_);
    return ffn_cost(rows_, width_, hidden_, 1, a, a + 1, esize_, bias_);
  }

 private:
  Tensor pre_, act_out_, dact_;
};

ComponentInfo mlp_info() {
  std::vector<ParamSpec> params{ParamSpec::choice("activation", "gelu", activation_names(),
                                                  "non-linearity: relu, gelu (erf), gelu_tanh, silu, relu2 (Primer)")};
  for (ParamSpec& s : size_params(4.0)) params.push_back(std::move(s));
  return make_info<Mlp>(Slot::kFfn, "mlp", "plain MLP: act(x W_in) W_out, d_ff = 4 d_model (Transformer, GPT-2, BERT)",
                        std::move(params));
}

}  // namespace bench::ffn
