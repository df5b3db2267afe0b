// Output-side norm (OLMo 2): y = x + norm(f(x)). The sublayer sees the raw residual stream and
// only its output is normalized, so the residual stream itself is never normalized.
#include "norms.h"

namespace bench::norms {

class OutputNorm final : public Residual {
 public:
  explicit OutputNorm(const Params&) {}
  void setup(SetupContext& ctx) override {
    norm_ = ctx.build_as<Sublayer>(Slot::kNorm, "");
    fo_ = ctx.buffer({ctx.rows(), ctx.width()});
    fn_ = ctx.buffer({ctx.rows(), ctx.width()});
    dfo_ = ctx.buffer({ctx.rows(), ctx.width()});
    dropout_.setup(ctx);
  }
  void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) override {
    f.forward(x, fo_, ctx);
    add_normed(*norm_, fo_, fn_, dropout_, x, y, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) override {
    norm_->backward(dropout_.backward(dy, ctx), dfo_, ctx);
    f.backward(dfo_, dx, ctx);
    ops::add(ctx, dx, dy, dx);
  }

 private:
  std::unique_ptr<Sublayer> norm_;
  Tensor fo_, fn_, dfo_;
  ResidualDropout dropout_;
};

ComponentInfo output_info() {
  return make_info<OutputNorm>(Slot::kNormPosition, "output",
                               "output-side norm: y = x + norm(f(x)), residual stream untouched (OLMo 2)", {});
}

}  // namespace bench::norms
