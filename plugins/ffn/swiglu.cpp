// SwiGLU feed-forward (Shazeer 2020, Llama): y = (silu(x Wg^T) * (x Wu^T)) Wd^T, with the gate
// and up projections fused into one [2 d_ff, d_model] matrix (one GEMM). d_ff defaults to
// 8/3 d_model rounded up to a multiple of `multiple_of`, which keeps the parameter count of a
// 4x plain MLP (Llama 2 7B: 4096 -> 11008 with multiple_of = 256).
#include <cmath>

#include "bench/bench.h"
#include "kernels/activation.h"

namespace bench::ffn {

/// d_ff from an explicit value or ratio * d_model rounded up to a multiple.
int64_t hidden_width(int64_t d_ff, double ratio, int64_t multiple_of, int64_t d_model) {
  if (d_ff > 0) return d_ff;
  const auto raw = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(d_model) - 1e-9));
  return (raw + multiple_of - 1) / multiple_of * multiple_of;
}

class SwiGlu final : public Sublayer {
 public:
  explicit SwiGlu(const Params& p)
      : d_ff_(p.integer("d_ff")),
        ratio_(p.number("ratio")),
        multiple_of_(p.integer("multiple_of")),
        out_scale_(p.boolean("scaled_output_init")) {}

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    rows_ = ctx.rows();
    width_ = ctx.width();
    hidden_ = hidden_width(d_ff_, ratio_, multiple_of_, width_);
    w_in_ = ctx.add_param("w_in", {2 * hidden_, width_}, Init::normal(d.init_std));
    const double out_std = out_scale_ ? d.init_std / std::sqrt(2.0 * static_cast<double>(d.n_layers)) : d.init_std;
    w_out_ = ctx.add_param("w_out", {width_, hidden_}, Init::normal(out_std));
    gu_ = ctx.buffer({rows_, 2 * hidden_});
    dgu_ = ctx.buffer({rows_, 2 * hidden_});
    h_ = ctx.buffer({rows_, hidden_});
    dh_ = ctx.buffer({rows_, hidden_});
    esize_ = dtype_size(ctx.dtype());
  }

  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    x_ = x;
    ops::linear_forward(ctx, x, w_in_->value, gu_);
    dispatch_float(x.dtype(), [&]<class T>() {
      kernels::glu_forward<T>(ctx.exec, kernels::Activation::kSilu, gu_.data<T>(), h_.data<T>(), rows_, hidden_);
    });
    ops::linear_forward(ctx, h_, w_out_->value, y);
  }

  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    ops::linear_backward(ctx, dy, h_, w_out_->value, &dh_, &w_out_->grad);
    dispatch_float(dy.dtype(), [&]<class T>() {
      kernels::glu_backward<T>(ctx.exec, kernels::Activation::kSilu, gu_.data<T>(), dh_.data<T>(), dgu_.data<T>(),
                               rows_, hidden_);
    });
    ops::linear_backward(ctx, dgu_, x_, w_in_->value, &dx, &w_in_->grad);
  }

  Cost cost() const override {
    const double r = static_cast<double>(rows_), w = static_cast<double>(width_), h = static_cast<double>(hidden_);
    const double gemm = 2 * r * w * 2 * h + 2 * r * h * w;
    const double e = static_cast<double>(esize_);
    Cost c;
    c.flops_forward = gemm + 6 * r * h;  // silu (~4) and the product
    c.flops_backward = 2 * gemm + 10 * r * h;
    c.bytes_forward = (r * w * 2 + r * h * 5 + 3 * h * w) * e;
    c.bytes_backward = 2 * c.bytes_forward;
    return c;
  }

 private:
  int64_t d_ff_;
  double ratio_;
  int64_t multiple_of_;
  bool out_scale_;
  int64_t rows_ = 0, width_ = 0, hidden_ = 0;
  size_t esize_ = 4;
  Param* w_in_ = nullptr;
  Param* w_out_ = nullptr;
  Tensor x_, gu_, dgu_, h_, dh_;
};

ComponentInfo swiglu_info() {
  return make_info<SwiGlu>(
      Slot::kFfn, "swiglu", "SwiGLU FFN: (silu(x Wg) * x Wu) Wd with gate and up fused in one GEMM",
      {ParamSpec::integer("d_ff", 0, "hidden width; 0 = ratio * d_model rounded up to multiple_of").at_least(0),
       ParamSpec::number("ratio", 8.0 / 3.0, "d_ff / d_model when d_ff = 0").at_least(0),
       ParamSpec::integer("multiple_of", 32, "round d_ff up to a multiple of this (Llama uses 256)").at_least(1),
       ParamSpec::boolean("scaled_output_init", true, "init the down projection with std / sqrt(2 n_layers)")});
}

}  // namespace bench::ffn

BENCH_PLUGIN("ffn", "1.0", "feed-forward networks: SwiGLU") { registrar.add(bench::ffn::swiglu_info()); }
