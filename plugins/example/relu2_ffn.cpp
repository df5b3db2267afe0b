// An example variant in one file: the squared-ReLU feed-forward network of Primer (So et al.
// 2021), y = relu(x W1^T)^2 W2^T. It is built out of tree against the installed harness:
//
//   cmake -S plugins/example -B build-example -DCMAKE_PREFIX_PATH=<bench install prefix>
//   cmake --build build-example
//
// and used from an experiment with `plugin_paths = ["build-example"]` and `ffn = "relu2"`.
// It shows the three things a variant provides: a component class (setup, forward, backward,
// cost), its element-wise kernel as a tile program, and the registration. docs/plugins.md walks
// through it. (The harness's kernels::activation_forward has ReLU^2 too; the programs are written
// out here because writing one is what this example teaches.)
#include <cmath>

#include "bench/bench.h"
#include "kernels/tile/exec.h"
#include "kernels/tile/program.h"

namespace relu2 {

namespace tl = bench::tile::tl;

// y = relu(x)^2, one tile of 1024 elements per program.
template <class T>
struct Relu2Forward {
  static constexpr int kBlock = 1024;
  const T* x;
  T* y;
  int64_t n;
  // For the per-kernel profile: x read and y written, a max and a square per element.
  bench::tile::Traffic traffic(const bench::tile::Grid&) const {
    return {bench::tile::traffic_bytes<T>(2 * n), 2 * static_cast<double>(n)};
  }
  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * kBlock;
    auto r = tl::maximum(tl::load<kBlock>(c, x + off, n - off), bench::tile::acc_t<T>(0));
    tl::store(c, y + off, r * r, n - off);
  }
};

// dx = dy * 2 relu(x)
template <class T>
struct Relu2Backward {
  static constexpr int kBlock = 1024;
  const T* x;
  const T* dy;
  T* dx;
  int64_t n;
  // x and dy read, dx written; a max and two multiplies per element.
  bench::tile::Traffic traffic(const bench::tile::Grid&) const {
    return {bench::tile::traffic_bytes<T>(3 * n), 3 * static_cast<double>(n)};
  }
  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * kBlock;
    auto r = tl::maximum(tl::load<kBlock>(c, x + off, n - off), bench::tile::acc_t<T>(0));
    tl::store(c, dx + off, tl::load<kBlock>(c, dy + off, n - off) * r * bench::tile::acc_t<T>(2), n - off);
  }
};

class Relu2Ffn final : public bench::Sublayer {
 public:
  explicit Relu2Ffn(const bench::Params& p) : d_ff_(p.integer("d_ff")), ratio_(p.number("ratio")) {}

  void setup(bench::SetupContext& ctx) override {
    const bench::ModelDims& d = ctx.dims();
    rows_ = ctx.rows();
    width_ = ctx.width();
    hidden_ = d_ff_ > 0 ? d_ff_ : static_cast<int64_t>(std::ceil(ratio_ * static_cast<double>(width_)));
    w1_ = ctx.add_param("w1", {hidden_, width_}, bench::Init::normal(d.init_std));
    w2_ = ctx.add_param("w2", {width_, hidden_},
                        bench::Init::normal(d.init_std / std::sqrt(2.0 * static_cast<double>(d.n_layers))));
    pre_ = ctx.buffer({rows_, hidden_});
    act_ = ctx.buffer({rows_, hidden_});
    dact_ = ctx.buffer({rows_, hidden_});
  }

  void forward(const bench::Tensor& x, bench::Tensor& y, bench::RunContext& ctx) override {
    x_ = x;
    bench::ops::linear_forward(ctx, x, w1_->value, pre_);
    bench::dispatch_float(x.dtype(), [&]<class T>() {
      const int64_t n = pre_.numel();
      bench::tile::launch(ctx.exec, {(n + 1023) / 1024}, Relu2Forward<T>{pre_.data<T>(), act_.data<T>(), n});
    });
    bench::ops::linear_forward(ctx, act_, w2_->value, y);
  }

  void backward(const bench::Tensor& dy, bench::Tensor& dx, bench::RunContext& ctx) override {
    bench::ops::linear_backward(ctx, dy, act_, w2_->value, &dact_, &w2_->grad);
    bench::dispatch_float(dy.dtype(), [&]<class T>() {
      const int64_t n = pre_.numel();
      bench::tile::launch(ctx.exec, {(n + 1023) / 1024},
                          Relu2Backward<T>{pre_.data<T>(), dact_.data<T>(), dact_.data<T>(), n});
    });
    bench::ops::linear_backward(ctx, dact_, x_, w1_->value, &dx, &w1_->grad);
  }

  bench::Cost cost() const override {
    const double r = static_cast<double>(rows_), w = static_cast<double>(width_), h = static_cast<double>(hidden_);
    return bench::Cost{4 * r * w * h + 2 * r * h, 8 * r * w * h + 3 * r * h, 0, 0};
  }
  // Its hidden width, for `bench calc`.
  bench::AccountingFacts accounting() const override { return {hidden_, 0}; }

 private:
  int64_t d_ff_;
  double ratio_;
  int64_t rows_ = 0, width_ = 0, hidden_ = 0;
  bench::Param* w1_ = nullptr;
  bench::Param* w2_ = nullptr;
  bench::Tensor x_, pre_, act_, dact_;
};

}  // namespace relu2

BENCH_PLUGIN("example_relu2", "1.0", "example out-of-tree plugin: the squared-ReLU FFN of Primer") {
  registrar.add(bench::make_info<relu2::Relu2Ffn>(
      bench::Slot::kFfn, "relu2", "squared-ReLU MLP: relu(x W1)^2 W2 (Primer)",
      {bench::ParamSpec::integer("d_ff", 0, "hidden width; 0 = ratio * d_model").at_least(0),
       bench::ParamSpec::number("ratio", 4.0, "d_ff / d_model when d_ff = 0").at_least(0)}));
}
