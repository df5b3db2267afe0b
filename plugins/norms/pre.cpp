// Pre-norm (GPT-2, Llama): y = x + f(norm(x)). The residual stream is never normalized, so a
// final norm is needed before the head.
#include "norms.h"

namespace bench::norms {

class PreNorm final : public Residual {
 public:
  explicit PreNorm(const Params&) {}
  void setup(SetupContext& ctx) override {
    norm_ = ctx.build_as<Sublayer>(Slot::kNorm, "");
    xn_ = ctx.buffer({ctx.rows(), ctx.width()});
    fo_ = ctx.buffer({ctx.rows(), ctx.width()});
    dxn_ = ctx.buffer({ctx.rows(), ctx.width()});
    dropout_.setup(ctx);
  }
  void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) override {
    norm_->forward(x, xn_, ctx);
    f.forward(xn_, fo_, ctx);
    dropout_.forward(fo_, ctx);
    ops::add(ctx, x, fo_, y);
  }
  void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) override {
    f.backward(dropout_.backward(dy, ctx), dxn_, ctx);
    add_norm_gradient(*norm_, dxn_, dy, dx, ctx);
  }

 private:
  std::unique_ptr<Sublayer> norm_;
  Tensor xn_, fo_, dxn_;
  ResidualDropout dropout_;
};

ComponentInfo pre_info() {
  return make_info<PreNorm>(Slot::kNormPosition, "pre", "pre-norm: y = x + f(norm(x)) (GPT-2, Llama)", {});
}

}  // namespace bench::norms
