// Declares its own norm the default of the norm slot, which the built-in norms plugin already does.
#include "bench/bench.h"

namespace {
class Plain final : public bench::Sublayer {
 public:
  explicit Plain(const bench::Params&) {}
  void forward(const bench::Tensor& x, bench::Tensor& y, bench::RunContext&) override { bench::ops::copy(x, y); }
  void backward(const bench::Tensor& dy, bench::Tensor& dx, bench::RunContext&) override { bench::ops::copy(dy, dx); }
};
}  // namespace

BENCH_PLUGIN("second_default", "0.1", "test plugin: a second default norm") {
  registrar.add(bench::make_info<Plain>(bench::Slot::kNorm, "plain_norm", "the identity", {}));
  registrar.set_default(bench::Slot::kNorm, "plain_norm");
}
