// Double norm, the "sandwich" of Gemma 2: y = x + norm_out(f(norm_in(x))). Both norms have
// their own parameters ("in" and "out").
#include "norms.h"

namespace bench::norms {

class DoubleNorm final : public Residual {
 public:
  explicit DoubleNorm(const Params&) {}
  void setup(SetupContext& ctx) override {
    norm_in_ = ctx.build_as<Sublayer>(Slot::kNorm, "in");
    norm_out_ = ctx.build_as<Sublayer>(Slot::kNorm, "out");
    xn_ = ctx.buffer({ctx.rows(), ctx.width()});
    fo_ = ctx.buffer({ctx.rows(), ctx.width()});
    fn_ = ctx.buffer({ctx.rows(), ctx.width()});
    dfo_ = ctx.buffer({ctx.rows(), ctx.width()});
    dxn_ = ctx.buffer({ctx.rows(), ctx.width()});
    dropout_.setup(ctx);
  }
  void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) override {
    norm_in_->forward(x, xn_, ctx);
    f.forward(xn_, fo_, ctx);
    add_normed(*norm_out_, fo_, fn_, dropout_, x, y, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) override {
    norm_out_->backward(dropout_.backward(dy, ctx), dfo_, ctx);
    f.backward(dfo_, dxn_, ctx);
    add_norm_gradient(*norm_in_, dxn_, dy, dx, ctx);
  }

 private:
  std::unique_ptr<Sublayer> norm_in_, norm_out_;
  Tensor xn_, fo_, fn_, dfo_, dxn_;
  ResidualDropout dropout_;
};

ComponentInfo double_info() {
  return make_info<DoubleNorm>(Slot::kNormPosition, "double",
                               "double norm: y = x + norm(f(norm(x))), norms before and after (Gemma 2)", {});
}

}  // namespace bench::norms
