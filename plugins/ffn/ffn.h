// defines: the ffn family — the plain MLP (mlp) and the gated units (swiglu, geglu, reglu) over
//          one base class, GatedFfn, both on Ffn (sizing and weights); hidden_width (the d_ff
//          rule) and ffn_cost (declared work)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.h"
#include "kernels/activation.h"

namespace bench::ffn {

ComponentInfo mlp_info();
ComponentInfo swiglu_info();
ComponentInfo geglu_info();
ComponentInfo reglu_info();

/// d_ff: `d_ff` when > 0, else ceil(ratio * d_model) rounded up to a multiple of `multiple_of`
/// (Llama 2 7B: ratio 8/3, multiple_of 256, d_model 4096 -> 11008).
int64_t hidden_width(int64_t d_ff, double ratio, int64_t multiple_of, int64_t d_model);

/// The sizing parameters every FFN declares: d_ff, ratio (default `default_ratio`), multiple_of
/// and scaled_output_init; and bias (biases on every FFN matrix, default off).
std::vector<ParamSpec> size_params(double default_ratio);

/// Activation by its parameter name: relu, gelu, gelu_tanh, silu, relu2.
kernels::Activation activation_named(std::string_view name);
/// The names activation_named accepts, in the order of kernels::Activation.
std::vector<std::string> activation_names();

/// Declared work of an FFN on `rows` tokens of `width` features with hidden width `hidden`:
/// the input projection has `in_halves` * hidden outputs (1 plain, 2 gated), the down
/// projection hidden inputs; `pointwise_fwd` / `pointwise_bwd` are FLOPs per hidden element of
/// the non-linearity. Matrix products at 2 FLOPs per multiply-add, backward twice forward. With
/// `bias`, an add per output of each projection forward and a column-sum term backward.
Cost ffn_cost(int64_t rows, int64_t width, int64_t hidden, int in_halves, double pointwise_fwd, double pointwise_bwd,
              size_t esize, bool bias = false);

/// FLOPs per element of act(x), and of dy * act'(x) (the derivative costs about as much as the
/// function, plus the product).
double activation_flops(kernels::Activation act);

/// What every FFN of the family has: the activation, the sizing parameters of size_params, and
/// the input and down projections. setup_weights() declares "w_in" [in_halves * d_ff, d_model]
/// and "w_out" [d_model, d_ff] (std / sqrt(2 n_layers) with scaled_output_init) and, with
/// `bias`, "b_in" [in_halves * d_ff] and "b_out" [d_model] and the scratch of their gradients.
class Ffn : public Sublayer {
 public:
  AccountingFacts accounting() const override { return {hidden_, 0}; }

 protected:
  Ffn(const Params& p, kernels::Activation act);
  /// The weights above and rows_, width_, hidden_ and esize_, before the subclass's buffers.
  void setup_weights(SetupContext& ctx, int64_t in_halves);

  kernels::Activation act_;
  int64_t d_ff_;
  double ratio_;
  int64_t multiple_of_;
  bool out_scale_;
  bool bias_;
  int64_t rows_ = 0, width_ = 0, hidden_ = 0;
  size_t esize_ = 4;
  Param* w_in_ = nullptr;
  Param* w_out_ = nullptr;
  Param* b_in_ = nullptr;
  Param* b_out_ = nullptr;
  Tensor x_, bias_scratch_;
};

/// Gated FFN (Shazeer 2020): y = (act(x Wg^T) * (x Wu^T)) Wd^T. Gate and up projections are
/// one [2 d_ff, d_model] matrix "w_in" (rows [gate | up]), so the input side is one GEMM; the
/// down projection is "w_out" [d_model, d_ff]. With `bias`, "b_in" [2 d_ff] ([gate | up]) and
/// "b_out" [d_model]. Subclasses only choose the activation.
class GatedFfn : public Ffn {
 public:
  GatedFfn(const Params& p, kernels::Activation act) : Ffn(p, act) {}
  void setup(SetupContext& ctx) override;
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override;
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override;
  Cost cost() const override;

 private:
  Tensor gu_, dgu_, h_, dh_;
};

}  // namespace bench::ffn
