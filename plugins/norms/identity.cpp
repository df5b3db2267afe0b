// No normalization: y = x. With it, a norm position keeps its wiring but normalizes nothing.
#include "norms.h"

namespace bench::norms {

class Identity final : public Sublayer {
 public:
  explicit Identity(const Params&) {}
  void setup(SetupContext& ctx) override {
    n_ = ctx.rows() * ctx.width();
    esize_ = dtype_size(ctx.dtype());
  }
  void forward(const Tensor& x, Tensor& y, RunContext&) override { ops::copy(x, y); }
  void backward(const Tensor& dy, Tensor& dx, RunContext&) override { ops::copy(dy, dx); }
  Cost cost() const override {
    const double b = static_cast<double>(n_) * static_cast<double>(esize_);
    return Cost{0, 0, 2 * b, 2 * b};
  }

 private:
  int64_t n_ = 0;
  size_t esize_ = 4;
};

ComponentInfo identity_info() { return make_info<Identity>(Slot::kNorm, "none", "no normalization (identity)", {}); }

}  // namespace bench::norms
