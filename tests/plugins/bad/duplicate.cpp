// Registers a norm under a name the built-in norms plugin already uses.
#include "bench/bench.h"

namespace {
class Twin final : public bench::Sublayer {
 public:
  explicit Twin(const bench::Params&) {}
  void forward(const bench::Tensor& x, bench::Tensor& y, bench::RunContext&) override { bench::ops::copy(x, y); }
  void backward(const bench::Tensor& dy, bench::Tensor& dx, bench::RunContext&) override { bench::ops::copy(dy, dx); }
};
}  // namespace

BENCH_PLUGIN("duplicate", "0.1", "test plugin: a second 'rmsnorm'") {
  registrar.add(bench::make_info<Twin>(bench::Slot::kNorm, "rmsnorm", "an impostor", {}));
}
