// Sinusoidal absolute position encoding (Vaswani et al. 2017): a fixed table added to the token
// embeddings, PE[t, 2i] = sin(t / base^(2i/d)), PE[t, 2i+1] = cos(t / base^(2i/d)), d = d_model.
// Nothing is learned, so the table can be built for any length: the model runs at lengths it was
// not trained at (whether it generalizes there is what experiments/position.toml measures).
#include <cmath>
#include <vector>

#include "absolute.h"
#include "position.h"

namespace bench::position {

class Sinusoidal final : public Position {
 public:
  explicit Sinusoidal(const Params& p) : base_(p.number("base")), scale_(p.number("scale")) {}

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    seq_ = d.seq_len;
    width_ = d.d_model;
    tokens_ = d.tokens();
    esize_ = dtype_size(ctx.dtype());
    table_ = ctx.buffer({seq_, width_});
    // In double, rounded once to the compute type.
    dispatch_float(ctx.dtype(), [&]<class T>() {
      // A plan's table has no storage to fill.
      if (ctx.planning()) return;
      std::vector<T> host(static_cast<size_t>(seq_ * width_));  // copied to the model's memory below
      T* p = host.data();
      for (int64_t t = 0; t < seq_; ++t)
        for (int64_t j = 0; j < width_; ++j) {
          const double i2 = static_cast<double>(j - j % 2);  // 2i of the pair (2i, 2i+1)
          const double angle = static_cast<double>(t) / std::pow(base_, i2 / static_cast<double>(width_));
          p[t * width_ + j] = scalar_as<T>(scale_ * (j % 2 == 0 ? std::sin(angle) : std::cos(angle)));
        }
      ops::copy(Tensor(p, ctx.dtype(), {seq_, width_}), table_);
    });
  }

  void embed_forward(Tensor& h, RunContext& ctx) override {
    dispatch_float(h.dtype(), [&]<class T>() {
      position_table_add<T>(ctx.exec, h.data<T>(), table_.data<T>(), h.size(0), seq_, width_);
    });
  }
  // A fixed table: no parameter gradient, and dh passes to the token embedding unchanged.
  void embed_backward(const Tensor&, RunContext&) override {}

  Cost cost() const override {
    const double n = static_cast<double>(tokens_ * width_);
    const double table = static_cast<double>(seq_ * width_);
    return Cost{n, 0, (2 * n + table) * static_cast<double>(esize_), 0};
  }

 private:
  double base_, scale_;
  int64_t seq_ = 0, width_ = 0, tokens_ = 0;
  size_t esize_ = 4;
  Tensor table_;
};

ComponentInfo sinusoidal_info() {
  return make_info<Sinusoidal>(
      Slot::kPosition, "sinusoidal", "fixed sin/cos table added to the embeddings (Vaswani et al. 2017)",
      {ParamSpec::number("base", 10000.0, "PE[t, 2i] = sin(t / base^(2i/d_model)), PE[t, 2i+1] = cos(...)").at_least(1),
       ParamSpec::number("scale", 1.0,
                         "multiplier of the table (the paper adds it at 1 to embeddings scaled by "
                         "sqrt(d_model))")
           .at_least(0)});
}

}  // namespace bench::position
