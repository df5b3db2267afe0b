// Post-norm (the original Transformer, BERT): y = norm(x + f(x)). The block output is already
// normalized, so by default no final norm is added.
#include "norms.h"

namespace bench::norms {

class PostNorm final : public Residual {
 public:
  explicit PostNorm(const Params&) {}
  void setup(SetupContext& ctx) override {
    norm_ = ctx.build_as<Sublayer>(Slot::kNorm, "");
    fo_ = ctx.buffer({ctx.rows(), ctx.width()});
    s_ = ctx.buffer({ctx.rows(), ctx.width()});
    ds_ = ctx.buffer({ctx.rows(), ctx.width()});
    dropout_.setup(ctx);
  }
  void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) override {
    f.forward(x, fo_, ctx);
    dropout_.forward(fo_, ctx);
    if (ResidualNorm* n = folding_norm(norm_.get(), ctx)) {  // s = x + f(x) in the norm's launch
      n->forward_of_sum(x, fo_, s_, y, ctx);
      return;
    }
    ops::add(ctx, x, fo_, s_);
    norm_->forward(s_, y, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) override {
    norm_->backward(dy, ds_, ctx);
    f.backward(dropout_.backward(ds_, ctx), dx, ctx);
    ops::add(ctx, dx, ds_, dx);
  }
  bool wants_final_norm() const override { return false; }

 private:
  std::unique_ptr<Sublayer> norm_;
  Tensor fo_, s_, ds_;
  ResidualDropout dropout_;
};

ComponentInfo post_info() {
  return make_info<PostNorm>(Slot::kNormPosition, "post", "post-norm: y = norm(x + f(x)) (original Transformer)", {});
}

}  // namespace bench::norms
