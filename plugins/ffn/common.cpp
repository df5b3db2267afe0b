// The ffn family's shared pieces: the d_ff rule, the sizing parameters, activation names and
// the declared cost of an FFN.
#include <algorithm>
#include <array>
#include <cmath>

#include "ffn.h"

namespace bench::ffn {

namespace {

struct NamedActivation {
  const char* name;
  kernels::Activation act;
  double flops;  // per element of act(x): compare, multiply, exp/erf/tanh counted as a few
};

constexpr std::array<NamedActivation, 6> kActivations{{
    {"relu", kernels::Activation::kRelu, 1},
    {"gelu", kernels::Activation::kGelu, 6},
    {"gelu_tanh", kernels::Activation::kGeluTanh, 9},
    {"silu", kernels::Activation::kSilu, 4},
    {"relu2", kernels::Activation::kRelu2, 2},
    {"quick_gelu", kernels::Activation::kQuickGelu, 5},
}};

}  // namespace

int64_t hidden_width(int64_t d_ff, double ratio, int64_t multiple_of, int64_t d_model) {
  if (d_ff > 0) return d_ff;
  // The tolerance keeps an exact product (8/3 * 96 = 256.0000000001 in floating point) exact.
  const auto raw = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(d_model) - 1e-9));
  return std::max<int64_t>(1, (raw + multiple_of - 1) / multiple_of * multiple_of);
}

std::vector<ParamSpec> size_params(double default_ratio) {
  return {
      ParamSpec::integer("d_ff", 0, "hidden width; 0 = ratio * d_model rounded up to multiple_of").at_least(0),
      ParamSpec::number("ratio", default_ratio, "d_ff / d_model when d_ff = 0").at_least(0),
      ParamSpec::integer("multiple_of", 32, "round d_ff up to a multiple of this (Llama uses 256)").at_least(1),
      ParamSpec::boolean("scaled_output_init", true, "init the down projection with std / sqrt(2 n_layers)"),
      ParamSpec::boolean("bias", false,
                         "biases on every FFN matrix, initialized to 0 (GPT-2, GPT-NeoX); default none (Llama)"),
  };
}

kernels::Activation activation_named(std::string_view name) {
  for (const auto& a : kActivations)
    if (name == a.name) return a.act;
  throw Error("unknown activation '" + std::string(name) + "'");
}

std::vector<std::string> activation_names() {
  std::vector<std::string> out;
  for (const auto& a : kActivations) out.emplace_back(a.name);
  return out;
}

double activation_flops(kernels::Activation act) {
  for (const auto& a : kActivations)
    if (a.act == act) return a.flops;
  return 1;
}

Ffn::Ffn(const Params& p, kernels::Activation act)
    : act_(act),
      d_ff_(p.integer("d_ff")),
      ratio_(p.number("ratio")),
      multiple_of_(p.integer("multiple_of")),
      out_scale_(p.boolean("scaled_output_init")),
      bias_(p.boolean("bias")) {}

void Ffn::setup_weights(SetupContext& ctx, int64_t in_halves) {
  const ModelDims& d = ctx.dims();
  rows_ = ctx.rows();
  width_ = ctx.width();
  hidden_ = hidden_width(d_ff_, ratio_, multiple_of_, width_);
  w_in_ = ctx.add_param("w_in", {in_halves * hidden_, width_}, Init::normal(d.init_std));
  const double out_std = out_scale_ ? d.init_std / std::sqrt(2.0 * static_cast<double>(d.n_layers)) : d.init_std;
  w_out_ = ctx.add_param("w_out", {width_, hidden_}, Init::normal(out_std));
  if (bias_) {
    b_in_ = ctx.add_param("b_in", {in_halves * hidden_}, Init::zeros(), ParamGroup::kBias);
    b_out_ = ctx.add_param("b_out", {width_}, Init::zeros(), ParamGroup::kBias);
    bias_scratch_ = ctx.buffer({std::max(in_halves * hidden_, width_)});
  }
  esize_ = dtype_size(ctx.dtype());
}

Cost ffn_cost(int64_t rows, int64_t width, int64_t hidden, int in_halves, double pointwise_fwd, double pointwise_bwd,
              size_t esize, bool bias) {
  const double r = static_cast<double>(rows), w = static_cast<double>(width), h = static_cast<double>(hidden);
  const double g = in_halves;
  const double e = static_cast<double>(esize);
  const double gemm = 2 * r * w * h * (g + 1);  // x W_in^T (g h outputs) and h W_out^T
  Cost c;
  c.flops_forward = gemm + pointwise_fwd * r * h;
  c.flops_backward = 2 * gemm + pointwise_bwd * r * h;
  // Forward: read x, write y; the input projection writes g r h, the non-linearity reads it and
  // writes r h, the down projection reads r h; the weights are read once.
  c.bytes_forward = (2 * r * w + (2 * g + 2) * r * h + (g + 1) * h * w) * e;
  // Backward: dy, x read and dx written; the pre-activations and the hidden gradient read and
  // written per stage; each weight read once and its gradient read and written.
  c.bytes_backward = (3 * r * w + (4 * g + 3) * r * h + 3 * (g + 1) * h * w) * e;
  if (bias) {
    // One add per output of both projections forward, their column sums backward; the biases
    // read forward, their gradients read and written (through the scratch) backward.
    const double outputs = g * h + w;
    c.flops_forward += r * outputs;
    c.flops_backward += r * outputs;
    c.bytes_forward += outputs * e;
    c.bytes_backward += 3 * outputs * e;
  }
  return c;
}

}  // namespace bench::ffn
